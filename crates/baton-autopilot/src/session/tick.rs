//! One execution tick: claim the next step through ralph's `next` (the prompt exactly as
//! `baton ralph next` prints it), run it as a task run that ends with `session.complete`, and
//! record the verdict through ralph's `complete`.
//!
//! What ends a step: an accepted `session.complete` (its verdict); a run that used its turns
//! without one (NEEDS_RETRY the first time, BLOCKED after a retry). A run that waits for a
//! person, was stopped, or lost its model keeps the step claimed: nothing was decided.

use super::apply::finish_step;
use super::completion::{self, Completion};
use crate::ralph::Context;
use crate::ralph::error::{RalphError, Result};
use crate::ralph::verbs::next;
use baton_engine::machine::WaitReason;
use baton_engine::task::{MAX_TURNS_EXCEEDED, TaskMachine, TaskSpec};
use baton_engine::task_driver::{TaskEnd, TaskReport, TaskTools, drive_task};
use baton_llm::{ChatModel, Message, ToolDef};
use tokio_util::sync::CancellationToken;

/// Said once before the step's prompt: the prompt names ralph's completion commands, which a
/// task run replaces with the tool.
const STEP_RULES: &str = "You are doing one step of a lifecycle session. Do the step with your \
tools. When it is finished, or cannot be, call session.complete exactly once instead of \
running any `ralph complete`/`ralph retry` command: DONE with the files that show the work as \
evidence, DONE_WITH_CONCERNS with concerns, NEEDS_RETRY, or BLOCKED with a reason.";

/// How the model and tools run a step.
pub struct StepSettings<'a> {
    pub owner: &'a str,
    pub model: &'a dyn ChatModel,
    pub tools: &'a mut dyn TaskTools,
    /// The host's tools as offered to the model.
    pub tool_defs: Vec<ToolDef>,
    pub max_turns: usize,
    pub cancel: CancellationToken,
}

#[derive(Debug, Clone, PartialEq)]
pub enum StepEnd {
    /// The verdict recorded in status.json.
    Recorded(Completion),
    /// The step stays claimed: the run waits for a person.
    Waiting {
        question: String,
        reason: WaitReason,
    },
    /// The step stays claimed: the run was stopped or its model failed (resume it).
    Interrupted { code: &'static str, message: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct StepTick {
    pub index: usize,
    pub end: StepEnd,
    pub report: TaskReport,
}

/// Runs the next execution step of the session.
pub async fn run_step(
    ctx: &Context,
    session: Option<&str>,
    settings: StepSettings<'_>,
) -> Result<StepTick> {
    let claimed = next::run(ctx, session, Some(settings.owner), None)?;
    let index = claimed.json["index"]
        .as_u64()
        .map(|i| i as usize)
        .ok_or_else(|| RalphError::usage("NEXT_OUTPUT_INVALID", "next named no step index"))?;
    let prompt = claimed.json["prompt"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let spec = TaskSpec {
        system: vec![Message::system(STEP_RULES)],
        prompt,
        tools: settings.tool_defs,
        finish: completion::tool_def(),
        validate: completion::validator(),
    };
    let mut machine = TaskMachine::new(spec, settings.max_turns);
    let report = drive_task(
        &mut machine,
        settings.model,
        settings.tools,
        &mut |_| None,
        &settings.cancel,
    )
    .await;
    let owner = Some(settings.owner);
    let end = match &report.end {
        TaskEnd::Finished { verdict } => {
            let called =
                Completion::from_json(verdict).map_err(|e| RalphError::usage(e.code, e.message))?;
            let (c, _) = finish_step(ctx, session, index, owner, Some(called))?;
            StepEnd::Recorded(c)
        }
        TaskEnd::Failed { code, .. } if *code == MAX_TURNS_EXCEEDED => {
            let (c, _) = finish_step(ctx, session, index, owner, None)?;
            StepEnd::Recorded(c)
        }
        TaskEnd::Failed { code, message } => StepEnd::Interrupted {
            code,
            message: message.clone(),
        },
        TaskEnd::Waiting { question, reason } => StepEnd::Waiting {
            question: question.clone(),
            reason: *reason,
        },
    };
    Ok(StepTick { index, end, report })
}
