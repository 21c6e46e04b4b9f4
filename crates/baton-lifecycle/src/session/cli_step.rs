//! A step's task run driven by a coding-agent CLI ([`super::executor`]) instead of baton's
//! tool loop. The run is created, linked and continued as any step run; the CLI works in the
//! project inside baton's sandbox, its only network baton's gateway, which holds the operator's
//! key, checks each model request against the session's budgets before it is sent (a refused
//! one ends the step's invocation with BUDGET_EXCEEDED) and records the exchanges so the step
//! replays offline (`step-<index>.<attempt>.exchanges.jsonl` beside the step's trace name).
//! What the CLI did lands in the run's audit log (`baton runs log`). A question it asks is the
//! step's question; the answer continues the CLI's own session. The verdict is the files'
//! ([`super::written`]), never the CLI's word.

use super::apply::finish_step;
use super::executor::{StepExecutor, exchanges_name};
use super::step::{StepEnd, StepSettings, StepTick};
use super::step_run::ModelSource;
use super::written;
use baton_engine::EngineEvent;
use baton_engine::external::ExternalTask;
use baton_engine::machine::WaitReason;
use baton_engine::spend::BUDGET_EXCEEDED;
use baton_engine::task_driver::{TaskEnd, TaskReport};
use baton_engine::task_run::{ClaimedTask, TaskContinuation};
use baton_executor::Event;
use baton_executor::run::{Job, Mode, SandboxPaths};
use baton_executor::task::{self, CliEnd, GO_ON, KeyMissing, RunMeter, default_model, note};
use baton_llm::Usage;
use baton_ralph::Context;
use baton_ralph::Handle;
use baton_ralph::error::{RalphError, Result};
use baton_store::{ModelRecord, Phase, RunUsage};
use baton_tools::terminal::ProjectGuard;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

/// The folder of a step run's CLI (home, transcript, exchanges) in its run directory.
const EXECUTOR_DIR: &str = "executor";
/// Written once when the run's CLI first starts: files newer than it are the step's.
const STARTED: &str = "started";

/// Said before the step's prompt, instead of baton's tool rules.
const CLI_RULES: &str = "You are doing one step of a lifecycle session, unattended, in the \
project's folder (your working directory). Do the step with your own tools. Ask the person \
only when the work cannot go on without an answer. baton judges the step from the files you \
write (they are its evidence), not from what you say: when the step is finished, stop with a \
one-line summary.\n\n";

/// The start of the completion commands ralph's prompt ends with (a CLI stops instead).
const TRAILER: &str = "<!-- On finish, run exactly one of:";

/// The step's prompt as a CLI reads it: no ralph completion commands (it stops with a
/// summary), paths in the project relative to its working directory.
pub fn for_cli(prompt: &str, project: &Path) -> String {
    let body = match prompt.find(TRAILER) {
        Some(at) => {
            let rest = &prompt[at..];
            let end = rest.find("-->").map_or(rest.len(), |e| e + 3);
            format!("{}{}", &prompt[..at], &rest[end..])
        }
        None => prompt.to_string(),
    };
    let root = format!("{}/", project.display());
    let body = without_blocked_commands(&body.replace(&root, "./")).replace(
        "End the step with exactly one of the commands printed at the end of the prompt.",
        "End the step by stopping with a one-line summary.",
    );
    format!("{CLI_RULES}{}", body.trim_end())
}

/// The anchor's `` `… complete <N> … --status BLOCKED --reason "why: ..."` `` commands (a CLI
/// has no ralph) as what a CLI does instead: ask the person, saying why.
fn without_blocked_commands(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('`') {
        let Some(len) = rest[open + 1..].find('`') else {
            break;
        };
        let span = &rest[open + 1..open + 1 + len];
        out.push_str(&rest[..open]);
        if span.contains(" complete ") && span.contains("--status BLOCKED") {
            let why = span
                .split_once("--reason \"")
                .and_then(|(_, r)| r.split_once(':'))
                .map_or("blocked", |(w, _)| w);
            out.push_str(&format!("a question to the person (\"{why}: ...\")"));
        } else {
            out.push_str(&rest[open..open + len + 2]);
        }
        rest = &rest[open + len + 2..];
    }
    out.push_str(rest);
    out
}

/// The prompt the run was created with (its first message).
fn first_prompt(task: &ClaimedTask) -> Result<String> {
    let log = task
        .project()
        .run_paths(&task.run().run_id)
        .conversation_log;
    let restored = baton_engine::conversation::restore(&log)
        .map_err(|e| RalphError::failed("EXECUTOR_PROMPT_MISSING", e.to_string()))?;
    restored
        .history
        .iter()
        .find_map(|m| m.content.clone())
        .ok_or_else(|| {
            RalphError::failed(
                "EXECUTOR_PROMPT_MISSING",
                format!("run {} has no prompt in its log", task.run().run_id),
            )
        })
}

/// Where the answers come from: the live API with the operator's key, or the step's recorded
/// exchanges.
fn mode(cli: &StepExecutor, source: ModelSource<'_>, name: &str) -> Result<Mode> {
    if let ModelSource::Replay(dir) = source {
        let record = dir.join(name);
        if !record.is_file() {
            return Err(RalphError::usage(
                "SESSION_TRACE_MISSING",
                format!(
                    "no recorded exchanges {name} in {}: record the session with --record first",
                    dir.display()
                ),
            ));
        }
        return Ok(Mode::Replay { record });
    }
    let kind = cli.kind;
    let var = cli.config.api_key_env_or_default(kind).unwrap_or_default();
    let upstream = cli.config.upstream_or_default(kind).unwrap_or_default();
    task::live_mode(kind, upstream, &var)
        .map_err(|e| RalphError::usage(KeyMissing::CODE, format!("{e} (hint: {})", e.hint())))
}

/// When the run's CLI first started (written on the first call).
fn started(dir: &Path) -> Result<SystemTime> {
    let marker = dir.join(STARTED);
    if !marker.is_file() {
        std::fs::create_dir_all(dir).map_err(RalphError::io("create", dir))?;
        std::fs::write(&marker, b"").map_err(RalphError::io("write", &marker))?;
    }
    std::fs::metadata(&marker)
        .and_then(|m| m.modified())
        .map_err(RalphError::io("read", &marker))
}

/// What this invocation added to the run's usage.
fn added(before: Option<&RunUsage>, after: Option<&RunUsage>) -> (usize, Usage) {
    let zero = RunUsage::default();
    let (b, a) = (before.unwrap_or(&zero), after.unwrap_or(&zero));
    let usage = Usage {
        prompt_tokens: a.prompt_tokens.saturating_sub(b.prompt_tokens),
        cached_prompt_tokens: a
            .cached_prompt_tokens
            .saturating_sub(b.cached_prompt_tokens),
        cache_write_tokens: a.cache_write_tokens.saturating_sub(b.cache_write_tokens),
        completion_tokens: a.completion_tokens.saturating_sub(b.completion_tokens),
        reasoning_tokens: a.reasoning_tokens.saturating_sub(b.reasoning_tokens),
        total_tokens: a.total_tokens.saturating_sub(b.total_tokens),
        cost_usd: None,
    };
    let calls = a.model_calls.saturating_sub(b.model_calls);
    (usize::try_from(calls).unwrap_or(usize::MAX), usage)
}

/// Drives the claimed run of step `index` with the CLI, and ends the step as the files say
/// (or keeps it claimed: a question, a stop, a budget, a failure of the CLI).
#[allow(clippy::too_many_arguments)] // the step's place in the session, as `tick::drive` has it
pub async fn drive(
    ctx: &Context,
    h: &Handle,
    index: usize,
    attempt: u32,
    retried: bool,
    task: ClaimedTask,
    settings: &StepSettings<'_>,
    cli: &StepExecutor,
) -> Result<StepTick> {
    let kind = cli.kind;
    let run_id = task.run().run_id.clone();
    let store_home = settings.store_home.clone();
    let dir = task.project().run_paths(&run_id).dir.join(EXECUTOR_DIR);
    let since = started(&dir)?;
    let judge = |claim: Option<&str>| {
        let found = written::since(&ctx.project, since, std::slice::from_ref(&store_home));
        written::completion(found, claim, retried)
    };
    if task.run().phase == Phase::Completed {
        // The CLI finished before a kill, the step's end not yet applied: the files decide.
        drop(task);
        let c = judge(None);
        let (c, _) = finish_step(ctx, h, index, Some(settings.owner), Some(c))?;
        return Ok(tick(
            index,
            run_id,
            StepEnd::Recorded(c),
            ended(),
            0,
            Usage::default(),
        ));
    }
    let adapter = kind.adapter().ok_or_else(|| {
        RalphError::usage(
            "SESSION_CONFIG_INVALID",
            format!("{kind} is not a coding-agent CLI"),
        )
    })?;
    let program = baton_executor::find::locate(kind, cli.config.command.as_deref())
        .map_err(|e| RalphError::usage(e.code(), format!("{e} (hint: {})", e.hint())))?;
    let name = exchanges_name(index, attempt);
    let mode = mode(cli, settings.model, &name)?;
    let model = cli
        .config
        .model
        .clone()
        .unwrap_or_else(|| default_model(kind).to_string());
    let first = for_cli(&first_prompt(&task)?, &ctx.project);
    let before = task.run().usage;
    let record = ModelRecord {
        name: format!("{kind}:{model}"),
        base_url: None,
        api: None,
        replay: matches!(mode, Mode::Replay { .. }),
        trace: None,
    };
    let external = Arc::new(
        ExternalTask::begin(task, record, settings.caps.clone(), settings.price)
            .map_err(|e| RalphError::failed(e.code(), e.to_string()))?,
    );
    let session = task::recorded_session(&dir);
    let (prompt, resume) = match (external.continuation(), session) {
        (TaskContinuation::Answer(a), Some(s)) => (a.clone(), Some(s)),
        (TaskContinuation::Answer(a), None) => (
            format!("{first}\n\nThe person answered your question: {a}"),
            None,
        ),
        (TaskContinuation::Resume, Some(s)) => (GO_ON.to_string(), Some(s)),
        _ => (first.clone(), None),
    };
    let meter: Arc<dyn baton_gateway::Meter> = Arc::new(RunMeter(external.clone()));
    // The configuration, the sessions' own files, BMAD's and `.git` stay read-only to the CLI,
    // as to baton's own commands; what it creates among them is removed after.
    let kept = ProjectGuard::take(
        &ctx.project,
        settings.tools.system.allow_git_writes,
        &settings.tools.system.protected,
    );
    let mut sandbox = SandboxPaths::operator(
        &program,
        &store_home,
        !settings.tools.system.terminal.require_sandbox,
    );
    sandbox.read_only = kept.read_only();
    let job = Job {
        adapter,
        program: &program,
        workdir: &ctx.project,
        run_dir: &dir,
        model: &model,
        prompt: &prompt,
        resume: resume.as_deref(),
        extra_args: &cli.config.args,
        mode,
        meter: Some(meter),
        max_output_tokens: None,
        sandbox,
    };
    let audit = external.clone();
    let on_event = settings.on_event;
    let mut each = move |e: &Event| {
        note(&audit, e);
        if let (Some(f), Event::ToolCall { name, .. }) = (on_event, e) {
            f(EngineEvent::ToolCall {
                name: format!("{kind}: {name}"),
                ok: true,
                error: None,
                target: None,
            });
        }
    };
    let cancel = settings.cancel.clone();
    let ended_as = task::drive(&external, kind, job, &mut each, cancel.cancelled()).await;
    drop(each);
    for removed in kept.restore() {
        external.note("executor.removed", serde_json::json!({"message": removed}));
    }
    keep_exchanges(&dir, settings.record, &name);
    let after = external
        .project()
        .get_run(&run_id)
        .ok()
        .and_then(|r| r.usage);
    drop(external);
    let (calls, usage) = added(before.as_ref(), after.as_ref());
    let ended_as = ended_as.map_err(|e| RalphError::failed(e.code(), e.to_string()))?;
    let (end, report_end) = match ended_as {
        CliEnd::Finished { claim } => {
            let (c, _) = finish_step(
                ctx,
                h,
                index,
                Some(settings.owner),
                Some(judge(claim.as_deref())),
            )?;
            let verdict = c.to_json();
            (StepEnd::Recorded(c), TaskEnd::Finished { verdict })
        }
        CliEnd::Question(question) => (
            StepEnd::Waiting {
                question: question.clone(),
                reason: WaitReason::Question,
            },
            TaskEnd::Waiting {
                question,
                reason: WaitReason::Question,
            },
        ),
        CliEnd::Budget(refusal) => interrupted(BUDGET_EXCEEDED, refusal.message),
        CliEnd::Interrupted => interrupted(baton_engine::driver::ABORTED, "stopped".into()),
        CliEnd::Failed { code, message } => {
            interrupted("EXECUTOR_FAILED", format!("{message} ({code})"))
        }
    };
    Ok(tick(index, run_id, end, report_end, calls, usage))
}

fn interrupted(code: &'static str, message: String) -> (StepEnd, TaskEnd) {
    (
        StepEnd::Interrupted {
            code,
            message: message.clone(),
        },
        TaskEnd::Failed { code, message },
    )
}

/// The end of a run whose end was already written.
fn ended() -> TaskEnd {
    TaskEnd::Finished {
        verdict: serde_json::json!({"judgedBy": "files"}),
    }
}

fn tick(
    index: usize,
    run_id: String,
    end: StepEnd,
    report_end: TaskEnd,
    model_calls: usize,
    usage: Usage,
) -> StepTick {
    StepTick {
        index,
        run_id,
        end,
        report: TaskReport {
            end: report_end,
            usage,
            model_calls,
            tool_calls: 0,
        },
    }
}

/// Copies the step's exchanges into the `--record` folder (the run's own copy stays in its
/// directory).
fn keep_exchanges(dir: &Path, record: Option<&Path>, name: &str) {
    if let Some(to) = record {
        let from = dir.join("exchanges.jsonl");
        if from.is_file() {
            let _ = std::fs::copy(&from, to.join(name));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_loses_ralphs_completion_commands_and_the_project_root() {
        let prompt = "Write /p/x/.workflow/scratch/plan.md.\n\n<!-- baton ralph: step [1/2] skill=maestro-plan -->\n<!-- On finish, run exactly one of:\n       baton ralph complete 1 --status DONE [--evidence <path>]\n       baton ralph retry 1 -->\n";
        let cli = for_cli(prompt, Path::new("/p/x"));
        assert!(cli.starts_with(CLI_RULES), "{cli}");
        assert!(cli.contains("Write ./.workflow/scratch/plan.md."), "{cli}");
        assert!(cli.contains("step [1/2]"), "{cli}");
        assert!(!cli.contains("ralph complete"), "{cli}");
        assert!(!cli.contains("session.complete"), "{cli}");
        assert!(cli.contains("stop with a one-line summary"), "{cli}");
        let anchor = "stop and report via\n     `baton ralph complete <N> --session s-1 --status BLOCKED --reason \"out_of_scope: ...\"` instead of proceeding; keep `code`.";
        let cli = for_cli(anchor, Path::new("/p"));
        assert!(!cli.contains("ralph complete"), "{cli}");
        assert!(
            cli.contains(
                "report via\n     a question to the person (\"out_of_scope: ...\") instead"
            ),
            "{cli}"
        );
        assert!(cli.contains("`code`"), "{cli}");
    }

    #[test]
    fn usage_added_is_the_difference() {
        let before = RunUsage {
            total_tokens: 10,
            model_calls: 1,
            ..RunUsage::default()
        };
        let after = RunUsage {
            total_tokens: 25,
            model_calls: 3,
            ..RunUsage::default()
        };
        let (calls, usage) = added(Some(&before), Some(&after));
        assert_eq!((calls, usage.total_tokens), (2, 15));
        assert_eq!(added(None, None).0, 0);
    }
}
