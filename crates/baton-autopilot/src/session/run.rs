//! The session loop: tick until the session completes, pauses, waits for a person or is
//! stopped. Routing is code: the first pending step decides the tick — an execution step runs
//! as a task run ([`super::tick`]), a quality or goal gate is judged by the model
//! ([`super::gate`]), `post-debug-escalate` pauses for a person, and the remaining structural
//! gates settle by code. Two ticks in a row that find nothing to do stop with E010 (seed 003's
//! empty-loop breaker); a session whose steps are all confirmed or skipped is completed.

use super::apply::{form_of, pause_at_escalation};
use super::gate::{self, GateEnd};
use super::tick::{StepEnd, StepSettings, run_step};
use crate::ralph::Context;
use crate::ralph::discovery::{self, Pick};
use crate::ralph::error::{RalphError, Result};
use crate::ralph::store::{self, Change};
use crate::ralph::verbs::decide::{self, DecideArgs, finished};
use baton_engine::machine::WaitReason;
use baton_engine::task_driver::TaskTools;
use baton_llm::{ChatModel, ToolDef};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Empty ticks in a row that stop the loop (E010).
const EMPTY_TICK_LIMIT: usize = 2;

pub struct RunSettings<'a> {
    pub owner: &'a str,
    pub model: &'a dyn ChatModel,
    pub tools: &'a mut dyn TaskTools,
    pub tool_defs: Vec<ToolDef>,
    pub max_turns: usize,
    pub cancel: CancellationToken,
    /// Called after every tick (progress, tests).
    pub after_tick: Option<&'a mut (dyn FnMut(&Tick) + Send)>,
}

/// What one tick did.
#[derive(Debug, Clone, PartialEq)]
pub enum Tick {
    Step { index: usize, end: StepEnd },
    Gate { index: usize, gate: String },
    Paused { index: usize },
    Completed,
    Empty,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SessionEnd {
    Completed,
    Paused,
    Waiting {
        index: usize,
        question: String,
        reason: WaitReason,
    },
    Interrupted {
        code: &'static str,
        message: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct SessionReport {
    pub end: SessionEnd,
    pub ticks: usize,
}

/// Marks a session whose steps are all done as completed (the verbs only do it when a gate's
/// `proceed` finishes it; a chain that ends with an execution step needs this check).
fn complete_if_finished(ctx: &Context, session: Option<&str>) -> Result<bool> {
    let (done, _) = store::transact(ctx, session, None, |s| {
        if s.status() == "running" && s.active_index().is_none() && finished(s) {
            s.set("status", json!("completed"));
            return Ok(Change::write(true));
        }
        Ok(Change::keep(false))
    })?;
    Ok(done)
}

/// One tick, or (`Err` inside) how the loop ends.
async fn tick(
    ctx: &Context,
    session: Option<&str>,
    settings: &mut RunSettings<'_>,
) -> Result<std::result::Result<Tick, SessionEnd>> {
    let s = discovery::find(ctx, session, Pick::Any)?.into_session()?;
    match s.status() {
        "completed" => return Ok(Err(SessionEnd::Completed)),
        "running" => {}
        _ => return Ok(Err(SessionEnd::Paused)),
    }
    let pending = s
        .all_steps()
        .find(|st| st.status() == "pending")
        .map(|st| (st.index(), st.decision().map(str::to_owned)));
    let Some((index, decision)) = pending else {
        if complete_if_finished(ctx, session)? {
            return Ok(Ok(Tick::Completed));
        }
        return Ok(Ok(Tick::Empty));
    };
    if let Some(gate) = decision {
        if form_of(&gate).is_some() {
            let t = gate::evaluate(ctx, session, settings.model, &settings.cancel).await?;
            if t.end == GateEnd::Interrupted {
                return Ok(Err(SessionEnd::Interrupted {
                    code: baton_engine::driver::ABORTED,
                    message: "the session was stopped".into(),
                }));
            }
            return Ok(Ok(Tick::Gate { index, gate }));
        }
        if gate == "post-debug-escalate" {
            pause_at_escalation(ctx, session, index)?;
            return Ok(Ok(Tick::Paused { index }));
        }
        // Structural gates settled by code (a milestone without a successor completes).
        let args = DecideArgs {
            index: index.to_string(),
            verdict: "proceed".into(),
            confidence: "100".into(),
            reason: Some(format!("{gate}: settled by code")),
            ..DecideArgs::default()
        };
        decide::run(ctx, session, &args)?;
        return Ok(Ok(Tick::Gate { index, gate }));
    }
    let t = run_step(
        ctx,
        session,
        StepSettings {
            owner: settings.owner,
            model: settings.model,
            tools: &mut *settings.tools,
            tool_defs: settings.tool_defs.clone(),
            max_turns: settings.max_turns,
            cancel: settings.cancel.clone(),
        },
    )
    .await?;
    match t.end {
        StepEnd::Waiting { question, reason } => Ok(Err(SessionEnd::Waiting {
            index: t.index,
            question,
            reason,
        })),
        StepEnd::Interrupted { code, message } => {
            Ok(Err(SessionEnd::Interrupted { code, message }))
        }
        end => Ok(Ok(Tick::Step {
            index: t.index,
            end,
        })),
    }
}

/// Ticks until the session ends or waits.
pub async fn run(
    ctx: &Context,
    session: Option<&str>,
    mut settings: RunSettings<'_>,
) -> Result<SessionReport> {
    let mut ticks = 0;
    let mut empty = 0;
    loop {
        if settings.cancel.is_cancelled() {
            return Ok(SessionReport {
                end: SessionEnd::Interrupted {
                    code: baton_engine::driver::ABORTED,
                    message: "the session was stopped".into(),
                },
                ticks,
            });
        }
        let t = match tick(ctx, session, &mut settings).await? {
            Ok(t) => t,
            Err(end) => return Ok(SessionReport { end, ticks }),
        };
        ticks += 1;
        if let Some(f) = settings.after_tick.as_mut() {
            f(&t);
        }
        if t == Tick::Empty {
            empty += 1;
            if empty >= EMPTY_TICK_LIMIT {
                return Err(RalphError::usage(
                    "E010",
                    "two ticks in a row found nothing to run and the session is not finished; \
                     check it with `baton ralph check`",
                ));
            }
        } else {
            empty = 0;
        }
    }
}
