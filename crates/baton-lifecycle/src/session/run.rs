//! The session loop: tick until the session completes, pauses, waits for a person or is
//! stopped. Routing is code: a step we still hold (after a kill, a stop or a question) is
//! continued first; otherwise the first pending step decides the tick — an execution step runs
//! as a store-backed task run ([`super::tick`]), a quality or goal gate is judged by the model
//! ([`super::gate`]; without `-y` its verdict waits for a person), `post-debug-escalate` pauses
//! for a person, the scope gate settles by code from the macro analysis ([`super::scope`]),
//! the milestone gate advances to the next milestone or ends the session
//! ([`super::milestone`]; both may ask a person first) and the remaining structural gates
//! settle by code. Two ticks in a row that
//! find nothing to do stop with E010 (seed 003's empty-loop breaker); a session whose steps are
//! all confirmed or skipped is completed.

use super::apply::{form_of, pause_at_escalation};
use super::budget;
use super::gate::{self, GateEnd};
use super::milestone::Planner;
use super::step_run::{self, ModelSource, Models};
use super::tick::{StepEnd, StepSettings, StepTick, answer_step, run_step};
use super::{milestone, scope};
use baton_engine::EngineEvent;
use baton_engine::machine::{DEFAULT_MAX_TURNS, WaitReason};
use baton_engine::spend::Cap;
use baton_llm::Usage;
use baton_ralph::Context;
use baton_ralph::Handle;
use baton_ralph::discovery::Pick;
use baton_ralph::error::{RalphError, Result};
use baton_ralph::gate::finished;
use baton_ralph::store::{self, Change};
use baton_ralph::verbs::decide::{self, DecideArgs};
use baton_store::{Project, Store};
use baton_tools::ToolsConfig;
use serde_json::json;
use std::path::Path;
use tokio_util::sync::CancellationToken;

/// Empty ticks in a row that stop the loop (E010).
const EMPTY_TICK_LIMIT: usize = 2;

/// How a session runs. Build it with [`RunSettings::new`] and change what differs.
pub struct RunSettings<'a> {
    /// Who claims the steps (ralph's claim owner). Use the same owner to continue a session
    /// after a kill: a step claimed by another owner is not continued.
    pub owner: &'a str,
    /// The store the step runs are kept in (`baton runs` lists them as `task` runs).
    pub store: &'a Store,
    /// A live model, or a directory of traces recorded with `record` (offline replay).
    pub model: ModelSource<'a>,
    /// A directory (existing) where every step run and gate call records its trace.
    pub record: Option<&'a Path>,
    /// The tool policy of the step runs (`[tools.*]`, `[mcp]` of `baton.toml`).
    pub tools: ToolsConfig,
    /// Model calls per step run invocation.
    pub max_turns: usize,
    pub cancel: CancellationToken,
    /// What the step runs do (model calls, tools, text), for progress on a terminal.
    pub on_event: Option<&'a (dyn Fn(EngineEvent) + Send + Sync)>,
    /// Called after every tick (progress, tests).
    pub after_tick: Option<&'a mut (dyn FnMut(&Tick) + Send)>,
    /// Hard budgets on the whole session: `tokens`/`usd` (see `budget`).
    pub budget: baton_engine::spend::BudgetConfig,
    /// A coding-agent CLI that runs the execution steps (`None`: baton's own loop); the gates
    /// stay with `model`.
    pub executor: Option<&'a super::executor::StepExecutor>,
}

impl<'a> RunSettings<'a> {
    /// File tools only, the default turn limit, no recording, nothing shown.
    pub fn new(owner: &'a str, store: &'a Store, model: ModelSource<'a>) -> RunSettings<'a> {
        RunSettings {
            owner,
            store,
            model,
            record: None,
            tools: ToolsConfig::default(),
            max_turns: DEFAULT_MAX_TURNS,
            cancel: CancellationToken::new(),
            on_event: None,
            after_tick: None,
            budget: Default::default(),
            executor: None,
        }
    }

    fn price(&self) -> Option<baton_llm::Price> {
        match self.model {
            ModelSource::Live(m) => m.price(),
            ModelSource::Replay(_) => None,
        }
    }

    /// The session's caps for the step run about to be driven: the step we hold's run is
    /// counted by the engine itself, everything else of the session here.
    fn step_caps(&self, h: &Handle, project: &Project) -> Vec<Cap> {
        let Ok(s) = h.load() else {
            return Vec::new();
        };
        let driven = s
            .active_index()
            .and_then(|a| step_run::read_link(&s, a, self.owner))
            .map(|l| l.run_id);
        budget::caps(&s, project, &self.budget, driven.as_deref(), self.price())
    }

    fn step<'s>(&'s self, project: &'s Project, caps: Vec<Cap>) -> StepSettings<'s> {
        StepSettings {
            owner: self.owner,
            project,
            model: self.model,
            record: self.record,
            tools: self.tools.clone(),
            max_turns: self.max_turns,
            cancel: self.cancel.clone(),
            on_event: self.on_event,
            caps,
            price: self.price(),
            executor: self.executor,
            store_home: self.store.home().to_path_buf(),
        }
    }
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
    /// What this invocation asked of the model (step runs and gates).
    pub spent: Spent,
}

/// Model calls and tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spent {
    pub model_calls: usize,
    pub usage: Usage,
    /// Baton's own count of the calls made outside step runs (the start's decomposition),
    /// which the session's ledger records with their usage.
    pub counted: baton_engine::spend::Counted,
}

impl Spent {
    fn add(&mut self, model_calls: usize, usage: Usage) {
        self.model_calls += model_calls;
        self.usage.add(usage);
    }
}

/// Marks a session whose steps are all done as completed (the verbs only do it when a gate's
/// `proceed` finishes it; a chain that ends with an execution step needs this check).
fn complete_if_finished(ctx: &Context, h: &Handle) -> Result<bool> {
    let (done, _) = store::transact(ctx, h, None, |s| {
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
    h: &Handle,
    settings: &mut RunSettings<'_>,
    spent: &mut Spent,
) -> Result<std::result::Result<Tick, SessionEnd>> {
    let s = h.load()?;
    match s.status() {
        "completed" => return Ok(Err(SessionEnd::Completed)),
        "running" => {}
        _ => return Ok(Err(SessionEnd::Paused)),
    }
    let held = s
        .active_index()
        .is_some_and(|a| step_run::current_claim(&s, a, settings.owner).is_some());
    if held {
        return step(ctx, h, settings, spent).await;
    }
    let pending = s
        .all_steps()
        .find(|st| st.status() == "pending")
        .map(|st| (st.index(), st.decision().map(str::to_owned)));
    let Some((index, decision)) = pending else {
        if complete_if_finished(ctx, h)? {
            return Ok(Ok(Tick::Completed));
        }
        return Ok(Ok(Tick::Empty));
    };
    if let Some(gate) = decision {
        if form_of(&gate).is_some() {
            let retry = s.step(index).map_or(0, |st| st.retry_count());
            let models = Models::open(
                settings.model,
                settings.record,
                &step_run::gate_trace(index, retry),
            )?;
            let model = models.model(settings.model).ok_or_else(|| {
                RalphError::usage("SESSION_TRACE_MISSING", "no model and no recorded trace")
            })?;
            // Saved before the verdict is applied: a kill never leaves a decision whose
            // answer the trace lacks.
            let save = || {
                let _ = models.save();
            };
            let model = baton_engine::runner::recorded(model, models.recorder.clone(), Some(&save));
            // The session's budget is checked before the gate's call, which is recorded in
            // the session's ledger.
            let project = project_of(ctx, settings.store)?;
            let caps = budget::caps(&s, &project, &settings.budget, None, settings.price());
            let gate_cancel = settings.cancel.child_token();
            let gated = budget::Gated::new(&*model, caps, gate_cancel.clone());
            let evaluated = gate::evaluate(ctx, h, &gated, &gate_cancel).await;
            models.save()?;
            let t = evaluated?;
            spent.add(t.model_calls, t.usage);
            if let Some(stop) = gated.stopped() {
                return Ok(Err(SessionEnd::Interrupted {
                    code: stop.code,
                    message: stop.message,
                }));
            }
            if t.model_calls > 0 && !matches!(t.end, GateEnd::Interrupted) {
                budget::record_gate(&s, Some(t.usage), &gated, settings.price());
            }
            match t.end {
                GateEnd::Interrupted => {
                    return Ok(Err(SessionEnd::Interrupted {
                        code: baton_engine::driver::ABORTED,
                        message: "the session was stopped".into(),
                    }));
                }
                // Paused for a person to confirm the verdict (no `-y`).
                GateEnd::Review => return Ok(Ok(Tick::Paused { index })),
                GateEnd::Settled(_) => return Ok(Ok(Tick::Gate { index, gate })),
            }
        }
        if gate == "post-debug-escalate" {
            pause_at_escalation(ctx, h, index)?;
            return Ok(Ok(Tick::Paused { index }));
        }
        if gate == scope::GATE {
            return Ok(Ok(match scope::settle(ctx, h, index)? {
                scope::Settled::Asked => Tick::Paused { index },
                scope::Settled::Decided(_) => Tick::Gate { index, gate },
            }));
        }
        if gate == milestone::GATE {
            return Ok(Ok(match milestone::settle(ctx, h, index)? {
                milestone::Settled::Asked => Tick::Paused { index },
                milestone::Settled::Decided(_) => Tick::Gate { index, gate },
            }));
        }
        // The other structural gates are settled by code.
        let args = DecideArgs {
            index: index.to_string(),
            verdict: "proceed".into(),
            confidence: "100".into(),
            reason: Some(format!("{gate}: settled by code")),
            ..DecideArgs::default()
        };
        decide::run(ctx, h, &args, &Planner)?;
        return Ok(Ok(Tick::Gate { index, gate }));
    }
    step(ctx, h, settings, spent).await
}

/// An execution tick: the step we hold, else the next one.
async fn step(
    ctx: &Context,
    h: &Handle,
    settings: &RunSettings<'_>,
    spent: &mut Spent,
) -> Result<std::result::Result<Tick, SessionEnd>> {
    let project = project_of(ctx, settings.store)?;
    let caps = settings.step_caps(h, &project);
    let t = run_step(ctx, h, settings.step(&project, caps)).await?;
    spent.add(t.report.model_calls, t.report.usage);
    Ok(step_tick(t))
}

fn project_of(ctx: &Context, store: &Store) -> Result<Project> {
    store
        .project(&ctx.project)
        .map_err(|e| RalphError::failed(e.code(), e.to_string()))
}

/// A step's tick, or how the loop ends when the step did not end.
fn step_tick(t: StepTick) -> std::result::Result<Tick, SessionEnd> {
    match t.end {
        StepEnd::Waiting { question, reason } => Err(SessionEnd::Waiting {
            index: t.index,
            question,
            reason,
        }),
        StepEnd::Interrupted { code, message } => Err(SessionEnd::Interrupted { code, message }),
        end => Ok(Tick::Step {
            index: t.index,
            end,
        }),
    }
}

/// Answers the question the step we hold waits on (`baton session answer`), then goes on
/// ticking as [`run`] does. The step's run continues with `text` as the person's answer.
pub async fn answer(
    ctx: &Context,
    session: Option<&str>,
    text: &str,
    settings: RunSettings<'_>,
) -> Result<SessionReport> {
    let project = project_of(ctx, settings.store)?;
    // The session is found once; everything after re-reads its status.json.
    let (h, _) = Handle::open(ctx, session, Pick::Active)?;
    let notify = super::notify::config(ctx)?;
    let home = settings.store.home().to_path_buf();
    let report = answer_found(ctx, &h, text, settings, &project).await?;
    super::notify::send(notify, &home, ctx, h.id(), &report.end).await;
    Ok(report)
}

/// [`answer`] on the session `h` found.
async fn answer_found(
    ctx: &Context,
    h: &Handle,
    text: &str,
    mut settings: RunSettings<'_>,
    project: &Project,
) -> Result<SessionReport> {
    let caps = settings.step_caps(h, project);
    let t = answer_step(ctx, h, text, settings.step(project, caps)).await?;
    let mut spent = Spent::default();
    spent.add(t.report.model_calls, t.report.usage);
    let t = match step_tick(t) {
        Ok(t) => t,
        Err(end) => {
            return Ok(SessionReport {
                end,
                ticks: 1,
                spent,
            });
        }
    };
    if let Some(f) = settings.after_tick.as_mut() {
        f(&t);
    }
    let mut report = run_found(ctx, h, settings).await?;
    report.ticks += 1;
    report.spent.add(spent.model_calls, spent.usage);
    Ok(report)
}

/// Ticks until the session ends or waits.
pub async fn run(
    ctx: &Context,
    session: Option<&str>,
    settings: RunSettings<'_>,
) -> Result<SessionReport> {
    if settings.cancel.is_cancelled() {
        return Ok(stopped(0, Spent::default()));
    }
    // The session is found once; every tick re-reads its status.json.
    let (h, _) = Handle::open(ctx, session, Pick::Any)?;
    let notify = super::notify::config(ctx)?;
    let home = settings.store.home().to_path_buf();
    let report = run_found(ctx, &h, settings).await?;
    super::notify::send(notify, &home, ctx, h.id(), &report.end).await;
    Ok(report)
}

/// What the loop reports when it was stopped.
fn stopped(ticks: usize, spent: Spent) -> SessionReport {
    SessionReport {
        end: SessionEnd::Interrupted {
            code: baton_engine::driver::ABORTED,
            message: "the session was stopped".into(),
        },
        ticks,
        spent,
    }
}

/// [`run`] on the session `h` found.
async fn run_found(
    ctx: &Context,
    h: &Handle,
    mut settings: RunSettings<'_>,
) -> Result<SessionReport> {
    let mut ticks = 0;
    let mut empty = 0;
    let mut spent = Spent::default();
    loop {
        if settings.cancel.is_cancelled() {
            return Ok(stopped(ticks, spent));
        }
        let t = match tick(ctx, h, &mut settings, &mut spent).await? {
            Ok(t) => t,
            Err(end) => return Ok(SessionReport { end, ticks, spent }),
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
