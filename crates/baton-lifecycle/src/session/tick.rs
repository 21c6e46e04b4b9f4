//! One execution tick: claim the next step through ralph's `next` (the prompt exactly as
//! `baton ralph next` prints it), run it as a store-backed task run that ends with
//! `session.complete`, and record the verdict through ralph's `complete`.
//!
//! What ends a step: an accepted `session.complete` (its verdict); a run that used its turns
//! without one (NEEDS_RETRY the first time, BLOCKED after a retry). A run that waits for a
//! person, was stopped, or lost its model keeps the step claimed: nothing was decided.
//!
//! A step still claimed by us (the process was killed or stopped, or a person is awaited)
//! continues its linked run ([`super::step_run`]) instead of starting another: a run whose
//! verdict is already logged has it applied without calling the model, a waiting run stays
//! waiting until [`answer_step`], and a claim that never got a run is released and taken again.

use super::apply::finish_step;
use super::completion::{self, Completion};
use super::step_run::{self, Link, Models};
use baton_engine::conversation;
use baton_engine::machine::WaitReason;
use baton_engine::runner::{RunnerError, Settings};
use baton_engine::task::MAX_TURNS_EXCEEDED;
use baton_engine::task_driver::{TaskEnd, TaskReport};
use baton_engine::task_run::{self, ClaimedTask, TaskContinuation, TaskDef};
use baton_llm::{Message, Usage};
use baton_ralph::Context;
use baton_ralph::discovery::Pick;
use baton_ralph::error::{RalphError, Result};
use baton_ralph::session::Session;
use baton_ralph::verbs::{control, next};
use baton_ralph::{Handle, Target};
use baton_store::{NewTaskRun, Phase, Project, RunKind, RunMetadata};
use serde_json::Value;

/// Said once before the step's prompt: the prompt names ralph's completion commands, which a
/// task run replaces with the tool.
const STEP_RULES: &str = "You are doing one step of a lifecycle session. Do the step with your \
tools. When it is finished, or cannot be, call session.complete exactly once instead of \
running any `ralph complete`/`ralph retry` command: DONE with the files that show the work as \
evidence, DONE_WITH_CONCERNS with concerns, NEEDS_RETRY, or BLOCKED with a reason.";

pub use super::step::{StepEnd, StepSettings, StepTick};

fn engine_error(e: RunnerError) -> RalphError {
    RalphError::failed(e.code(), e.to_string())
}

fn def() -> TaskDef {
    TaskDef {
        system: vec![Message::system(STEP_RULES)],
        finish: completion::tool_def(),
        validate: completion::validator(),
    }
}

fn nothing_done(end: TaskEnd) -> TaskReport {
    TaskReport {
        end,
        usage: Usage::default(),
        model_calls: 0,
        tool_calls: 0,
    }
}

/// The step claimed by `owner` and still running, if any.
fn ours(s: &Session, owner: &str) -> Option<usize> {
    let a = s.active_index()?;
    let running = s.step(a).is_some_and(|st| st.status() == "running");
    (running && step_run::current_claim(s, a, owner).is_some()).then_some(a)
}

/// The step run's task (`<session>/step-<index>-<skill>`) and agent (the skill).
fn task_name(s: &Session, index: usize) -> (String, String) {
    let skill = s.step(index).map(|st| st.skill()).unwrap_or_default();
    let agent = if skill.is_empty() { "lifecycle" } else { skill };
    (format!("{}/step-{index}-{agent}", s.id), agent.to_string())
}

/// A run created for step `index` that never ran and has no link (the process was killed
/// between its creation and its link): idle, with only the prompt in its log. It is linked to
/// the current claim and used, instead of leaving it behind and creating another.
fn adopt_orphan(s: &Session, index: usize, owner: &str, project: &Project) -> Result<Option<Link>> {
    let Some((owner, claimed_at)) = step_run::current_claim(s, index, owner) else {
        return Ok(None);
    };
    let (task_ref, _) = task_name(s, index);
    // The run directories, not the index: a kill between a run's directory and its index
    // entry leaves a run only its directory knows.
    let probe = project.run_paths("probe").dir;
    let Some(runs_dir) = probe.parent() else {
        return Ok(None);
    };
    let entries = match std::fs::read_dir(runs_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(RalphError::io("list", runs_dir)(e)),
    };
    // The newest such run (ids sort by creation time): the one made for the latest claim.
    let never_ran = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|id| !id.starts_with('.'))
        .filter_map(|id| project.get_run(&id).ok().filter(|r| r.run_id == id))
        .filter(|r| {
            r.kind == RunKind::Task
                && r.workflow_ref == task_ref
                && r.phase == Phase::Idle
                && conversation::restore(&project.run_paths(&r.run_id).conversation_log)
                    .is_ok_and(|c| c.history.len() == 1 && c.complete_turns == 0)
        })
        .max_by(|a, b| a.run_id.cmp(&b.run_id));
    let Some(run) = never_ran else {
        return Ok(None);
    };
    let link = Link {
        run_id: run.run_id.clone(),
        owner,
        claimed_at,
    };
    step_run::write_link(s, index, &link)?;
    Ok(Some(link))
}

/// 1 for a step's first run, 2 for the run after its NEEDS_RETRY.
fn attempt(s: &Session, index: usize) -> u32 {
    let retried = s
        .step(index)
        .and_then(|st| st.get("retried"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if retried { 2 } else { 1 }
}

fn wait_reason(waiting: Option<&Value>) -> WaitReason {
    match waiting
        .and_then(|w| w.get("reason"))
        .and_then(Value::as_str)
    {
        Some("ui_ask_user") => WaitReason::Widget,
        Some("ENGINE_LOOP_DETECTED") => WaitReason::LoopDetected,
        _ => WaitReason::Question,
    }
}

/// Runs the next execution step of the session, or continues the one we hold.
pub async fn run_step<'a>(
    ctx: &Context,
    session: impl Into<Target<'a>>,
    settings: StepSettings<'_>,
) -> Result<StepTick> {
    let (h, s) = session.into().open(ctx, Pick::Active)?;
    if let Some(index) = ours(&s, settings.owner) {
        match step_run::read_link(&s, index, settings.owner) {
            Some(link) => {
                return continue_step(ctx, &h, &s, index, link, None, settings).await;
            }
            None => match adopt_orphan(&s, index, settings.owner, settings.project)? {
                // Killed between the run's creation and its link: the run never ran.
                Some(link) => {
                    return continue_step(ctx, &h, &s, index, link, None, settings).await;
                }
                // Killed before the run existed: nothing ran; claim the step again.
                None => {
                    control::release(ctx, &h, true, None)?;
                }
            },
        }
    }
    // The step's args are filled in the claim's own write.
    let claimed = next::run_prepared(
        ctx,
        &h,
        Some(settings.owner),
        None,
        super::args::resolve_first_pending,
    )?;
    let index = claimed.json["index"]
        .as_u64()
        .map(|i| i as usize)
        .ok_or_else(|| RalphError::usage("NEXT_OUTPUT_INVALID", "next named no step index"))?;
    let prompt = claimed.json["prompt"].as_str().unwrap_or_default();
    let s = h.load()?;
    let (owner, claimed_at) = step_run::current_claim(&s, index, settings.owner)
        .ok_or_else(|| RalphError::usage("CLAIM_LOST", "the step just claimed is not ours"))?;
    let (task_ref, agent) = task_name(&s, index);
    let task = task_run::create_task(
        settings.project,
        NewTaskRun {
            task_ref: &task_ref,
            agent_id: &agent,
        },
        prompt,
    )
    .map_err(engine_error)?;
    let link = Link {
        run_id: task.run().run_id.clone(),
        owner,
        claimed_at,
    };
    // Before the first model call: a kill from here on continues this run.
    step_run::write_link(&s, index, &link)?;
    drive(ctx, &h, &s, index, task, &settings).await
}

/// Answers the question step run of the step we hold waits on, and ends the step as its run
/// ends.
pub async fn answer_step<'a>(
    ctx: &Context,
    session: impl Into<Target<'a>>,
    text: &str,
    settings: StepSettings<'_>,
) -> Result<StepTick> {
    let (h, s) = session.into().open(ctx, Pick::Active)?;
    let Some((index, link)) = ours(&s, settings.owner)
        .and_then(|i| step_run::read_link(&s, i, settings.owner).map(|l| (i, l)))
    else {
        return Err(RalphError::usage(
            "SESSION_NOT_WAITING",
            "no step of this session waits for an answer",
        ));
    };
    continue_step(ctx, &h, &s, index, link, Some(text), settings).await
}

/// Continues the linked run of step `index`: applies an end it already reached, reports a
/// question it still waits on, or drives it on (with `answer`, when one is given).
async fn continue_step(
    ctx: &Context,
    h: &Handle,
    s: &Session,
    index: usize,
    link: Link,
    answer: Option<&str>,
    settings: StepSettings<'_>,
) -> Result<StepTick> {
    let run = settings
        .project
        .get_run(&link.run_id)
        .map_err(|e| RalphError::failed(e.code(), e.to_string()))?;
    if let Some(end) = logged_end(&run, answer.is_some()) {
        return apply(ctx, h, index, link.run_id, nothing_done(end), &settings);
    }
    let continuation = match answer {
        Some(text) => TaskContinuation::Answer(text.to_string()),
        None => TaskContinuation::Resume,
    };
    let task =
        task_run::claim_task(settings.project, &link.run_id, continuation).map_err(engine_error)?;
    drive(ctx, h, s, index, task, &settings).await
}

/// An end the run already reached that needs no model: out of turns before the kill (what
/// that becomes is decided without a model), or a question nobody has answered yet.
fn logged_end(run: &RunMetadata, answering: bool) -> Option<TaskEnd> {
    let waiting = run.waiting_for.as_ref();
    let error_code = waiting
        .and_then(|w| w.pointer("/error/code"))
        .and_then(Value::as_str);
    if run.phase == Phase::Failed && error_code == Some(MAX_TURNS_EXCEEDED) {
        return Some(TaskEnd::Failed {
            code: MAX_TURNS_EXCEEDED,
            message: "the run used its model calls".into(),
        });
    }
    if run.phase == Phase::WaitingUser && !answering {
        let question = waiting
            .and_then(|w| w.get("question"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        return Some(TaskEnd::Waiting {
            question,
            reason: wait_reason(waiting),
        });
    }
    None
}

/// Drives the claimed run, saves its trace, and ends the step as the run ended.
async fn drive(
    ctx: &Context,
    h: &Handle,
    s: &Session,
    index: usize,
    task: ClaimedTask,
    settings: &StepSettings<'_>,
) -> Result<StepTick> {
    if let Some(cli) = settings.executor {
        let retried = attempt(s, index) == 2;
        return super::cli_step::drive(
            ctx,
            h,
            index,
            attempt(s, index),
            retried,
            task,
            settings,
            cli,
        )
        .await;
    }
    let run_id = task.run().run_id.clone();
    let trace = step_run::step_trace(index, attempt(s, index));
    let models = Models::open(settings.model, settings.record, &trace)?;
    let model = models.model(settings.model).ok_or_else(|| {
        RalphError::usage("SESSION_TRACE_MISSING", "no model and no recorded trace")
    })?;
    let mut engine = Settings::new(model);
    engine.replay = models.replay.as_ref();
    engine.record = models.recorder.clone();
    engine.tools = settings.tools.clone();
    engine.max_turns = settings.max_turns;
    engine.cancel = settings.cancel.clone();
    engine.on_event = settings.on_event;
    engine.caps = settings.caps.clone();
    // Saved after every model call too: a kill never leaves a log the trace lacks.
    let save = || {
        let _ = models.save();
    };
    engine.checkpoint = Some(&save);
    let driven = task_run::drive_task(task, def(), engine).await;
    // The trace is kept whatever happened: it is what a replay needs.
    models.save()?;
    let finished = driven.map_err(engine_error)?;
    apply(ctx, h, index, run_id, finished.report, settings)
}

/// What the end of a step's run does to the session.
fn apply(
    ctx: &Context,
    h: &Handle,
    index: usize,
    run_id: String,
    report: TaskReport,
    settings: &StepSettings<'_>,
) -> Result<StepTick> {
    let owner = Some(settings.owner);
    let end = match &report.end {
        TaskEnd::Finished { verdict } => {
            let called =
                Completion::from_json(verdict).map_err(|e| RalphError::usage(e.code, e.message))?;
            let (c, _) = finish_step(ctx, h, index, owner, Some(called))?;
            StepEnd::Recorded(c)
        }
        TaskEnd::Failed { code, .. } if *code == MAX_TURNS_EXCEEDED => {
            let (c, _) = finish_step(ctx, h, index, owner, None)?;
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
    Ok(StepTick {
        index,
        run_id,
        end,
        report,
    })
}
