//! Drives a [`TaskMachine`] against a model, the ToolHost and the store: the IO of a task run,
//! with the persistence of a workflow run ([`crate::run_io`]). Every machine step is in the
//! conversation log before the next model call, so a run killed at any moment continues from
//! its log; the run's phase says running, waiting-for-user, completed, failed, or idle after
//! a stop (`ENGINE_ABORTED`).
//!
//! What is fsynced, and when: the log records and audit lines are written as they come (a
//! killed process loses none of them). The conversation log is fsynced once per turn, before
//! the next model call (a power cut costs at most the turn in flight); `running` is written
//! without an fsync (after a power cut nobody drives the run, which `idle` says as well); an
//! end of the invocation (completed, failed, stopped, waiting for a person) is durable, with
//! the conversation log and the audit log fsynced together with `run.json`.

use crate::driver::AnswerFn;
use crate::error::{ABORTED, EngineError};
use crate::event::EngineEvent;
use crate::machine::WaitReason;
use crate::run_io::{self, OnEvent};
use crate::task::{TaskAction, TaskInput, TaskMachine};
use baton_llm::{ChatModel, TraceRecorder, Usage};
use baton_store::jsonl::JsonlWriter;
use baton_store::{Durability, Phase, Project};
use baton_tools::{CallContext, EffectivePolicy, ToolHost};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// How an invocation of a task run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskEnd {
    /// The finish tool was called with accepted arguments.
    Finished {
        verdict: Value,
    },
    /// The run waits for a person (a question nobody answered, or a loop).
    Waiting {
        question: String,
        reason: WaitReason,
    },
    Failed {
        code: &'static str,
        message: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct TaskReport {
    pub end: TaskEnd,
    pub usage: Usage,
    pub model_calls: usize,
    pub tool_calls: usize,
}

/// What the first step of an invocation is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskStep {
    /// Start, or go on from the restored conversation.
    Begin,
    /// The person's answer to the question the run waits on.
    Answer(String),
}

/// Everything one invocation of a task run works with.
pub struct TaskDriver<'a> {
    pub machine: TaskMachine,
    pub project: &'a Project,
    pub run_id: String,
    /// Who runs the task (the run's agent), for the tool audit lines.
    pub agent_id: String,
    pub host: &'a mut ToolHost,
    pub policy: EffectivePolicy,
    pub model: &'a dyn ChatModel,
    pub recorder: Option<Arc<Mutex<TraceRecorder>>>,
    /// Answers that need no person (replayed inputs, answers given in advance).
    pub answers: AnswerFn<'a>,
    /// Asks a person; the question is recorded first, as for workflow runs.
    pub ask: Option<AnswerFn<'a>>,
    pub on_event: OnEvent<'a>,
    pub cancel: CancellationToken,
    pub conversation: crate::conversation::ConversationLog,
    pub audit: Option<JsonlWriter>,
    /// Budgets and what the run spent (see [`crate::spend`]).
    pub meter: crate::spend::Meter,
}

impl TaskDriver<'_> {
    fn step(&mut self, input: TaskInput) -> Result<TaskAction, EngineError> {
        let action = self.machine.step(input);
        self.conversation
            .sync_history(self.machine.history())
            .map_err(|e| EngineError::State(e.to_string()))?;
        Ok(action)
    }

    /// An audit line, not fsynced: the end of the invocation syncs the log.
    fn audit(&mut self, kind: &str, fields: Value) {
        run_io::audit_with(self.audit.as_mut(), &self.run_id, None, kind, fields, false);
    }

    /// `running`, not fsynced (see the module's note).
    fn set_running(&self) -> Result<(), EngineError> {
        run_io::set_running(
            self.project,
            &self.run_id,
            None,
            self.model,
            // A task run has one prompt and no nodes: no context policy to remember.
            None,
            Durability::Kill,
        )
    }

    /// An end of the invocation, durable with both logs: a reader who sees the phase finds
    /// every record that led to it.
    fn set_end_phase(
        &mut self,
        phase: Phase,
        waiting_for: Option<Value>,
    ) -> Result<(), EngineError> {
        let mut logs: Vec<&std::path::Path> = vec![self.conversation.path()];
        if let Some(a) = &self.audit {
            logs.push(a.path());
        }
        run_io::set_phase_with(
            self.project,
            &self.run_id,
            phase,
            waiting_for,
            None,
            Some(self.meter.recorded().run_usage()),
            Durability::PowerCut(&logs),
        )?;
        self.conversation.synced_elsewhere();
        Ok(())
    }

    /// Runs until the finish tool is accepted, the run fails, or it needs a person.
    pub async fn drive(&mut self, first: TaskStep) -> Result<TaskReport, EngineError> {
        let mut report = TaskReport {
            end: TaskEnd::Failed {
                code: ABORTED,
                message: String::new(),
            },
            usage: Usage::default(),
            model_calls: 0,
            tool_calls: 0,
        };
        self.set_running()?;
        let intent = match first {
            TaskStep::Begin => "continue",
            TaskStep::Answer(_) => "answer",
        };
        self.audit("engine.start", json!({"intent": intent, "task": true}));
        let mut action = match first {
            TaskStep::Begin => self.step(TaskInput::Begin)?,
            TaskStep::Answer(text) => {
                let wrapped = crate::composer::user_input(&text, None);
                run_io::record(&self.recorder, |r| r.record_user_input(&text, &wrapped));
                self.step(TaskInput::UserAnswered(text))?
            }
        };
        loop {
            action = match action {
                TaskAction::CallModel(request) => {
                    // The turn before (the answer and its tool results) in one flush.
                    self.conversation
                        .make_durable()
                        .map_err(|e| EngineError::State(e.to_string()))?;
                    let turn = run_io::Turn {
                        run_id: &self.run_id,
                        node: None,
                        agent: &self.agent_id,
                        audit: self.audit.as_mut(),
                        // Synced with the phase that ends the invocation.
                        audit_durable: false,
                        on_event: self.on_event,
                        calls: &mut report.model_calls,
                        usage: &mut report.usage,
                        meter: &mut self.meter,
                    };
                    let answer = run_io::model_turn(
                        self.model,
                        request,
                        self.host,
                        &self.policy,
                        &self.cancel,
                        turn,
                    )
                    .await;
                    match answer {
                        Ok(response) => self.step(TaskInput::ModelAnswered(Box::new(response)))?,
                        Err((code, message)) => TaskAction::Fail { code, message },
                    }
                }
                TaskAction::RunTools(calls) => {
                    // Stops only between steps, so a tool's write is never cut in half.
                    if self.cancel.is_cancelled() {
                        TaskAction::Fail {
                            code: ABORTED,
                            message: "the run was stopped".into(),
                        }
                    } else {
                        report.tool_calls += calls.len();
                        let agent = self.agent_id.clone();
                        let batch = run_io::run_tools(
                            self.host,
                            calls,
                            CallContext {
                                agent_id: &agent,
                                node_id: "",
                                policy: &self.policy,
                            },
                            self.project,
                            &self.run_id,
                            &self.recorder,
                            self.on_event,
                        );
                        self.step(TaskInput::ToolsExecuted {
                            results: batch.results,
                            question: batch.question,
                        })?
                    }
                }
                TaskAction::WaitForUser { question, reason } => {
                    let reason_text = run_io::wait_reason(reason);
                    run_io::record(&self.recorder, |r| {
                        r.record_ui_after("waiting-user", reason_text)
                    });
                    let mut answer = (self.answers)(&question);
                    if let Some(a) = &answer {
                        run_io::emit(
                            self.on_event,
                            EngineEvent::Answered {
                                question: question.clone(),
                                answer: a.clone(),
                            },
                        );
                    } else {
                        self.record_waiting(&question, reason_text)?;
                        if let Some(ask) = self.ask.as_mut() {
                            answer = ask(&question);
                            if answer.is_some() {
                                self.set_running()?;
                            }
                        }
                    }
                    let Some(answer) = answer else {
                        report.end = TaskEnd::Waiting { question, reason };
                        return Ok(report);
                    };
                    let wrapped = crate::composer::user_input(&answer, None);
                    run_io::record(&self.recorder, |r| r.record_user_input(&answer, &wrapped));
                    self.step(TaskInput::UserAnswered(answer))?
                }
                TaskAction::Finished { call, verdict } => {
                    run_io::record(&self.recorder, |r| {
                        r.record_ui_after("completed", "finish_tool_accepted")
                    });
                    self.audit(
                        "engine.completed",
                        json!({"turns": report.model_calls, "toolCalls": report.tool_calls,
                               "finishCallId": call.id, "verdict": verdict}),
                    );
                    self.set_end_phase(Phase::Completed, None)?;
                    report.end = TaskEnd::Finished { verdict };
                    return Ok(report);
                }
                TaskAction::Fail { code, message } => {
                    run_io::record(&self.recorder, |r| r.record_ui_after("failed", code));
                    let mut waiting = json!({"error": {"code": code, "message": message}});
                    if let Some(stop) = self
                        .meter
                        .take_stop()
                        .filter(|_| code == crate::spend::BUDGET_EXCEEDED)
                    {
                        waiting["error"]["budget"] = stop.details;
                    }
                    self.audit("engine.failed", json!({"code": code, "message": message}));
                    self.set_end_phase(run_io::phase_after_failure(code), Some(waiting))?;
                    report.end = TaskEnd::Failed { code, message };
                    return Ok(report);
                }
            };
        }
    }

    /// Makes the question durable: the audit line and the index say the run waits for it.
    fn record_waiting(&mut self, question: &str, reason: &str) -> Result<(), EngineError> {
        let waiting = json!({"question": question, "reason": reason});
        self.audit(
            "engine.waiting",
            json!({"reason": reason, "message": question}),
        );
        self.set_end_phase(Phase::WaitingUser, Some(waiting))
    }
}
