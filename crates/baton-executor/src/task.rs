//! A baton task run driven by a CLI (what an epic phase and a session step share): the run's
//! budget asked by the gateway before each model request and each request recorded as a model
//! call of the run ([`RunMeter`]); what the CLI did as audit lines ([`note`]); its session
//! found again for a resume or an answer ([`recorded_session`]); the run's end written as the
//! CLI's outcome says ([`drive`]). The verdict is not here: the caller judges the files.

use crate::run::{Job, Mode, Outcome};
use crate::{Event, ExecutorKind};
use baton_engine::external::ExternalTask;
use baton_engine::spend::{BUDGET_EXCEEDED, Counted, Estimate};
use baton_engine::task_driver::TaskEnd;
use baton_engine::task_run::TaskFinished;
use baton_gateway::{Admission, Refusal, Settled};
use serde_json::{Value, json};
use std::future::Future;
use std::path::Path;
use std::sync::Arc;

/// Longest text of one event kept in an audit line.
const MAX_NOTE: usize = 2_000;
/// What a resumed CLI is told when it continues its own session after a kill.
pub const GO_ON: &str = "You were interrupted. Continue the task where you stopped, and finish it.";

/// The model a CLI asks for when `[executors.<name>] model` is not set.
pub fn default_model(kind: ExecutorKind) -> &'static str {
    match kind {
        ExecutorKind::ClaudeCode => "claude-sonnet-4-5",
        ExecutorKind::Codex => "gpt-5-codex",
        ExecutorKind::Opencode | ExecutorKind::Baton => "gpt-5",
    }
}

/// The run's budget as the gateway asks it, and its record of the calls made.
pub struct RunMeter(pub Arc<ExternalTask>);

impl baton_gateway::Meter for RunMeter {
    fn admit(&self, a: &Admission) -> Result<(), Refusal> {
        self.0
            .admit(a.prompt_tokens, a.max_output_tokens)
            .map(|_| ())
            .map_err(|stop| Refusal {
                code: stop.code.to_string(),
                message: stop.message,
                details: stop.details,
            })
    }

    fn settle(&self, s: &Settled) {
        // An answer the API refused is not billed; it is still in the record.
        if !(200..300).contains(&s.status) {
            self.0.note(
                "executor.refused",
                json!({"status": s.status, "path": s.path, "durationMs": s.millis}),
            );
            return;
        }
        let estimate = Estimate {
            prompt_tokens: s.counted_prompt,
            max_tokens: 0,
            usd: None,
        };
        self.0.settle(
            &estimate,
            s.reported,
            Counted {
                prompt_tokens: s.counted_prompt,
                completion_tokens: s.counted_completion,
            },
            json!({"path": s.path, "model": s.model, "durationMs": s.millis}),
        );
    }
}

/// `text` cut to [`MAX_NOTE`] bytes on a character boundary.
pub fn clip(text: &str) -> String {
    let mut end = text.len().min(MAX_NOTE);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// One event of the CLI as an audit line of the run (`baton runs log` shows them).
pub fn note(task: &ExternalTask, e: &Event) {
    let (kind, fields) = match e {
        Event::Session { id } => ("executor.session", json!({"session": id})),
        Event::Message { text } => ("executor.message", json!({"message": clip(text)})),
        Event::ToolCall { id, name, input } => {
            // Codex's apply_patch names its files in `changes`.
            let path = ["file_path", "filePath", "path"]
                .iter()
                .find_map(|k| input.get(*k).and_then(Value::as_str))
                .or_else(|| input.pointer("/changes/0/path").and_then(Value::as_str));
            let command = ["command", "cmd"]
                .iter()
                .find_map(|k| input.get(*k).and_then(Value::as_str));
            (
                "executor.tool",
                json!({"toolName": name, "callId": id,
                       "input": {"path": path, "command": command.map(clip)}}),
            )
        }
        Event::ToolResult {
            id,
            output,
            is_error,
        } => (
            "executor.result",
            json!({"callId": id, "output": {"ok": !is_error}, "message": clip(output)}),
        ),
        Event::Question { text } => ("executor.question", json!({"message": clip(text)})),
        Event::Result { text, is_error } => (
            "executor.end",
            json!({"output": {"ok": !is_error}, "message": clip(text)}),
        ),
    };
    task.note(kind, fields);
}

/// The CLI's session recorded in the transcript of the run folder `dir`, if any.
pub fn recorded_session(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("transcript.jsonl")).ok()?;
    text.lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Event>(l).ok())
        .find_map(|e| match e {
            Event::Session { id } => Some(id),
            _ => None,
        })
}

/// The operator's key for `kind` from `var`, and the upstream: the live mode, or why not.
pub fn live_mode(kind: ExecutorKind, upstream: String, var: &str) -> Result<Mode, KeyMissing> {
    let api_key = std::env::var(var).unwrap_or_default();
    if api_key.trim().is_empty() {
        return Err(KeyMissing {
            kind,
            var: var.to_string(),
        });
    }
    Ok(Mode::Live { upstream, api_key })
}

/// The operator's key is not in its variable.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{kind} runs through baton's gateway, which needs the API key in ${var}; it is not set")]
pub struct KeyMissing {
    pub kind: ExecutorKind,
    pub var: String,
}

impl KeyMissing {
    pub const CODE: &'static str = "EXECUTOR_KEY_MISSING";

    pub fn hint(&self) -> String {
        format!(
            "export {}=… (only baton's gateway holds it; the CLI gets a per-run token), or set [executors.{}] api_key_env",
            self.var, self.kind
        )
    }
}

/// How a CLI's invocation ended, the run's end already written.
#[derive(Debug)]
pub enum CliEnd {
    /// The CLI exited 0 claiming success (`claim`): the caller judges the files.
    Finished {
        claim: Option<String>,
    },
    /// It asked the person (the run waits).
    Question(String),
    /// The gateway refused a request that would cross a budget (the run is idle).
    Budget(Refusal),
    /// Stopped (Ctrl-C, SIGTERM): the run is idle, resumable.
    Interrupted,
    Failed {
        code: String,
        message: String,
    },
}

/// Runs `job` for `task` (whose meter the job's gateway must hold), stopping it when
/// `cancelled` completes, and writes the run's end. `outcome_of` sees the outcome before the
/// end is decided (the caller's own bookkeeping).
pub async fn drive(
    task: &ExternalTask,
    kind: ExecutorKind,
    job: Job<'_>,
    on_event: &mut (dyn FnMut(&Event) + Send),
    cancelled: impl Future<Output = ()>,
) -> Result<CliEnd, baton_engine::runner::RunnerError> {
    let ran = tokio::select! {
        r = crate::run::run(job, on_event) => Some(r),
        () = cancelled => None,
    };
    let end = match ran {
        None => CliEnd::Interrupted,
        Some(Err(e)) => CliEnd::Failed {
            code: e.code().to_string(),
            message: format!("{kind}: {e}"),
        },
        Some(Ok(o)) => judge(kind, o),
    };
    finish(task, &end)?;
    Ok(end)
}

/// What the outcome of a CLI that ran means, the files aside.
fn judge(kind: ExecutorKind, o: Outcome) -> CliEnd {
    if let Some(refusal) = o.budget {
        return CliEnd::Budget(refusal);
    }
    if let Some(question) = o.question {
        return CliEnd::Question(question);
    }
    let said = match &o.result {
        Some(Event::Result { text, is_error }) => Some((clip(text), *is_error)),
        _ => None,
    };
    if o.exit_code == Some(0) && !said.as_ref().is_some_and(|(_, err)| *err) {
        return CliEnd::Finished {
            claim: said.map(|(t, _)| t),
        };
    }
    CliEnd::Failed {
        code: "EXECUTOR_FAILED".into(),
        message: format!(
            "{kind} ended with exit code {}{}",
            o.exit_code
                .map_or("none (killed)".to_string(), |c| c.to_string()),
            said.map(|(t, _)| format!(": {t}")).unwrap_or_default()
        ),
    }
}

/// Writes the run's end as `end` says.
fn finish(
    task: &ExternalTask,
    end: &CliEnd,
) -> Result<TaskFinished, baton_engine::runner::RunnerError> {
    task.end(match end {
        CliEnd::Finished { claim } => TaskEnd::Finished {
            verdict: json!({"claim": claim, "judgedBy": "files"}),
        },
        CliEnd::Question(q) => TaskEnd::Waiting {
            question: q.clone(),
            reason: baton_engine::machine::WaitReason::Question,
        },
        CliEnd::Budget(r) => TaskEnd::Failed {
            code: BUDGET_EXCEEDED,
            message: r.message.clone(),
        },
        CliEnd::Interrupted => TaskEnd::Failed {
            code: baton_engine::driver::ABORTED,
            message: "stopped".into(),
        },
        CliEnd::Failed { message, .. } => TaskEnd::Failed {
            code: "EXECUTOR_FAILED",
            message: message.clone(),
        },
    })
}
