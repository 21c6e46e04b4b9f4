//! Task runs driven by something other than baton's tool loop: a coding-agent CLI (Claude
//! Code, Codex, OpenCode) behind baton's model gateway. The caller runs the CLI; this keeps the
//! run's records as for a run baton drives — the driver lock for the invocation, `running`
//! while it runs, one audit line per model call (`engine.turn`, so budgets, boards and `runs
//! show` count it as any call) and per thing the CLI did, and a durable end phase — and checks
//! each model call against the run's budgets before the gateway forwards it.

use crate::runner::RunnerError;
use crate::spend::{self, BudgetStop, Cap, Counted, Estimate, Recorded};
use crate::task_driver::{TaskEnd, TaskReport};
use crate::task_run::{ClaimedTask, TaskContinuation, TaskFinished};
use baton_llm::{Price, Usage};
use baton_store::Durability;
use baton_store::jsonl::JsonlWriter;
use baton_store::{ModelRecord, Phase, Project, RunMetadata};
use serde_json::{Value, json};
use std::sync::Mutex;

/// What the run spent, its caps, and its audit log, shared with the gateway's threads.
struct Books {
    caps: Vec<Cap>,
    price: Option<Price>,
    recorded: Recorded,
    audit: Option<JsonlWriter>,
    stop: Option<BudgetStop>,
    calls: usize,
    tools: usize,
}

/// A claimed task run an external executor drives (see the module's note).
pub struct ExternalTask {
    claimed: ClaimedTask,
    books: Mutex<Books>,
}

fn io(e: impl std::fmt::Display) -> RunnerError {
    RunnerError::Io(e.to_string())
}

impl ExternalTask {
    /// Marks the run `running` with `model` as what drives it, its spending so far read from
    /// its log, under `caps` (priced at `price`).
    pub fn begin(
        claimed: ClaimedTask,
        model: ModelRecord,
        caps: Vec<Cap>,
        price: Option<Price>,
    ) -> Result<ExternalTask, RunnerError> {
        let paths = claimed.project().run_paths(&claimed.run().run_id);
        let recorded = spend::recorded(&paths.execution_log, price);
        claimed
            .project()
            .update_run_with(&claimed.run().run_id, Durability::Kill, |r| {
                r.phase = Phase::Running;
                r.waiting_for = None;
                r.stop_reason = None;
                r.model = Some(model);
            })?;
        let audit = JsonlWriter::open(&paths.execution_log).ok();
        Ok(ExternalTask {
            claimed,
            books: Mutex::new(Books {
                caps: caps.into_iter().filter(|c| !c.is_empty()).collect(),
                price,
                recorded,
                audit,
                stop: None,
                calls: 0,
                tools: 0,
            }),
        })
    }

    pub fn run(&self) -> &RunMetadata {
        self.claimed.run()
    }

    pub fn project(&self) -> &Project {
        self.claimed.project()
    }

    pub fn continuation(&self) -> &TaskContinuation {
        self.claimed.continuation()
    }

    fn books(&self) -> std::sync::MutexGuard<'_, Books> {
        self.books.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Checks a model call of `prompt_tokens` (baton's count of what will be sent) and at most
    /// `max_tokens` of answer against every cap; a refusal is kept for [`ExternalTask::end`].
    pub fn admit(&self, prompt_tokens: u64, max_tokens: u64) -> Result<Estimate, BudgetStop> {
        let mut b = self.books();
        let estimate = Estimate {
            prompt_tokens,
            max_tokens,
            usd: b.price.map(|p| p.bound(prompt_tokens, max_tokens)),
        };
        if let Err(stop) = spend::check_caps(&b.caps, b.recorded.spent, &estimate) {
            b.stop = Some(stop.clone());
            return Err(stop);
        }
        Ok(estimate)
    }

    /// Records a model call made: what the provider reported and baton's own count, in an
    /// `engine.turn` line (durable before the next call is admitted).
    pub fn settle(
        &self,
        estimate: &Estimate,
        reported: Option<Usage>,
        counted: Counted,
        extra: Value,
    ) {
        let mut b = self.books();
        let price = b.price;
        let reported = reported.map(|mut u| {
            u.cost_usd = price.map(|p| p.cost(&u));
            u
        });
        let mut fields =
            json!({"usage": reported, "counted": counted, "estimate": estimate.to_json()});
        if let (Some(obj), Value::Object(more)) = (fields.as_object_mut(), extra) {
            obj.extend(more);
        }
        b.recorded.add_line(&fields, price);
        b.calls += 1;
        let run_id = self.run().run_id.clone();
        append(b.audit.as_mut(), &run_id, "engine.turn", fields, true);
    }

    /// An audit line of what the executor did (`executor.tool`, `executor.message`, …).
    pub fn note(&self, kind: &str, fields: Value) {
        let mut b = self.books();
        if kind == "executor.tool" {
            b.tools += 1;
        }
        let run_id = self.run().run_id.clone();
        append(b.audit.as_mut(), &run_id, kind, fields, false);
    }

    /// What the run spent so far.
    pub fn spent(&self) -> spend::Spent {
        self.books().recorded.spent
    }

    /// Ends the invocation as `end` says, durably with the audit log: `completed`, waiting for
    /// a person, or failed (a budget stop or an interruption leaves the run idle, resumable).
    /// The driver lock is released when the value is dropped.
    pub fn end(&self, end: TaskEnd) -> Result<TaskFinished, RunnerError> {
        let claimed = &self.claimed;
        let mut guard = self.books();
        let b = &mut *guard;
        let run_id = claimed.run().run_id.clone();
        let (phase, waiting) = match &end {
            TaskEnd::Finished { verdict } => {
                let fields = json!({"turns": b.calls, "toolCalls": b.tools, "verdict": verdict});
                append(b.audit.as_mut(), &run_id, "engine.completed", fields, false);
                (Phase::Completed, None)
            }
            TaskEnd::Waiting { question, reason } => {
                let reason = crate::run_io::wait_reason(*reason);
                append(
                    b.audit.as_mut(),
                    &run_id,
                    "engine.waiting",
                    json!({"reason": reason, "message": question}),
                    false,
                );
                (
                    Phase::WaitingUser,
                    Some(json!({"question": question, "reason": reason})),
                )
            }
            TaskEnd::Failed { code, message } => {
                let mut waiting = json!({"error": {"code": code, "message": message}});
                if let Some(stop) = b.stop.take().filter(|_| *code == spend::BUDGET_EXCEEDED) {
                    waiting["error"]["budget"] = stop.details;
                }
                append(
                    b.audit.as_mut(),
                    &run_id,
                    "engine.failed",
                    json!({"code": code, "message": message}),
                    false,
                );
                (crate::run_io::phase_after_failure(code), Some(waiting))
            }
        };
        let log = claimed.project().run_paths(&run_id).execution_log;
        let usage = b.recorded.run_usage();
        claimed
            .project()
            .update_run_with(&run_id, Durability::PowerCut(&[log.as_path()]), |r| {
                r.phase = phase;
                r.waiting_for = waiting.clone();
                r.current_node_id = None;
                r.stop_reason = crate::run_io::stop_reason(phase, waiting.as_ref());
                r.usage = Some(usage);
            })
            .map_err(io)?;
        let run = claimed.project().get_run(&run_id)?;
        Ok(TaskFinished {
            run,
            report: TaskReport {
                end,
                usage: b.recorded.usage,
                model_calls: b.calls,
                tool_calls: b.tools,
            },
        })
    }
}

fn append(log: Option<&mut JsonlWriter>, run_id: &str, kind: &str, fields: Value, durable: bool) {
    let Some(log) = log else { return };
    let mut line = json!({"ts": baton_store::time::now_rfc3339(), "kind": kind, "runId": run_id, "nodeId": null});
    if let (Some(obj), Value::Object(extra)) = (line.as_object_mut(), fields) {
        obj.extend(extra);
    }
    let _ = log.append(&line, durable);
}
