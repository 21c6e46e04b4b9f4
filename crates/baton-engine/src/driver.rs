//! The async driver: runs the machine's actions against a model, the ToolHost and the store.

use crate::composer::Intent;
use crate::context::ContextEvent;
use crate::machine::{Action, Input, Machine, StateSnapshot, WaitReason};
use crate::run_io;
use crate::spend::{self, Meter};
use baton_llm::{CallOptions, ChatModel, LlmError, TraceRecorder, Usage};
use baton_package::Workflow;
use baton_store::durable::Group;
use baton_store::{Durability, Phase, Project, StateFile};
use baton_tools::{CallContext, ToolHost};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

pub use crate::context::summary::SUMMARY_TIMEOUT;
pub use crate::durable::{DurableFuture, DurablePoint, DurableStop, OnDurable};
pub use crate::error::{ABORTED, EngineError};
pub use crate::event::EngineEvent;

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Completed { message: String },
    Waiting { question: String },
    Failed { code: String, message: String },
}

/// What one engine invocation did.
#[derive(Debug, Clone, PartialEq)]
pub struct RunReport {
    pub outcome: Outcome,
    pub model_calls: usize,
    pub tool_calls: usize,
    /// Stops for the user, answered automatically or not.
    pub waits: usize,
    pub usage: Usage,
}

/// Gives the answer to a question, if it has one.
pub type AnswerFn<'a> = &'a mut (dyn FnMut(&str) -> Option<String> + Send);

/// Everything one invocation works with.
pub struct Driver<'a> {
    pub machine: Machine<'a>,
    pub workflow: &'a Workflow,
    pub project: &'a Project,
    pub run_id: String,
    pub host: &'a mut ToolHost,
    pub model: &'a dyn ChatModel,
    pub recorder: Option<Arc<Mutex<TraceRecorder>>>,
    /// Answers for questions that need no person (replayed inputs, `--input`).
    pub answers: AnswerFn<'a>,
    /// Asks a person (an interactive terminal). The question is durably recorded first, so a
    /// person who walks away or stops the process leaves a run that `baton answer` continues.
    pub ask: Option<AnswerFn<'a>>,
    pub on_event: Option<&'a (dyn Fn(EngineEvent) + Send + Sync)>,
    pub cancel: CancellationToken,
    /// Where the model's context is logged, for `answer` and `resume`.
    pub conversation: Option<crate::conversation::ConversationLog>,
    /// The run's audit log, for engine events (the ToolHost writes the tool lines).
    pub audit: Option<baton_store::jsonl::JsonlWriter>,
    /// Budgets and what the run spent (see [`crate::spend`]).
    pub meter: Meter,
    /// Told at every durable point (see [`OnDurable`]).
    pub on_durable: Option<&'a dyn OnDurable>,
}

/// Tells the [`OnDurable`] hook, if any; its error stops the drive. (A free function: the
/// future must not hold the whole driver, which is not `Sync`.)
async fn durable(
    hook: Option<&dyn OnDurable>,
    run_id: &str,
    at: DurablePoint,
) -> Result<(), EngineError> {
    match hook {
        Some(hook) => hook.durable(run_id, at).await.map_err(EngineError::Stopped),
        None => Ok(()),
    }
}

pub fn is_confirmation(text: &str) -> bool {
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    compact.contains("WIDGET_SUBMIT") && compact.contains("\"confirmed\":true")
}

impl<'a> Driver<'a> {
    fn state(&self) -> StateFile {
        self.project.state_file(&self.run_id)
    }

    fn snapshot(&self) -> Result<StateSnapshot, EngineError> {
        let read = self
            .state()
            .read()
            .map_err(|e| EngineError::State(e.to_string()))?;
        let graph = &self.workflow.graph;
        Ok(StateSnapshot {
            node_id: read.doc.effective_node_id(graph).to_string(),
            complete: read.doc.is_complete(graph),
        })
    }

    /// Steps the machine and logs what it added to the conversation.
    fn step(&mut self, input: Input) -> Result<Action, EngineError> {
        let action = self.machine.step(input);
        if let Some(log) = self.conversation.as_mut() {
            log.sync(&mut self.machine)
                .map_err(|e| EngineError::State(e.to_string()))?;
        }
        for event in self.machine.take_events() {
            let fields = match &event {
                ContextEvent::Compressed(report) => {
                    json!({"event": "compressed", "report": report})
                }
                ContextEvent::ProtocolFallback { violation } => {
                    json!({"event": "protocol_fallback", "violation": violation})
                }
            };
            self.audit("engine.context", fields);
            self.emit(EngineEvent::Context(event));
        }
        Ok(action)
    }

    /// An `engine.*` audit line: fsynced, or made durable with the turn's group.
    fn audit(&mut self, kind: &str, fields: Value) {
        let node = self.machine.node().to_string();
        let group = self.host.flush_group().cloned();
        run_io::audit_with(
            self.audit.as_mut(),
            &self.run_id,
            Some(&node),
            kind,
            fields,
            group.is_none(),
        );
        if let (Some(group), Some(log)) = (group, &self.audit) {
            group.add_path(log.path());
        }
    }

    /// Makes the model turn's writes durable (tool files, state, `run.json`, audit and
    /// conversation lines): one device flush, before the next model call.
    fn flush_turn(&mut self) -> Result<(), EngineError> {
        let Some(group) = self.host.flush_group().cloned() else {
            return Ok(());
        };
        if let Some(log) = self.conversation.as_ref().filter(|l| l.has_unsynced()) {
            group.add_path(log.path());
        }
        group
            .flush()
            .map_err(|e| EngineError::State(e.to_string()))?;
        if let Some(log) = self.conversation.as_mut() {
            log.synced_elsewhere();
        }
        Ok(())
    }

    /// [`Self::set_phase_files`], then the [`OnDurable`] hook.
    async fn set_phase(
        &mut self,
        phase: Phase,
        waiting_for: Option<Value>,
        node: &str,
    ) -> Result<(), EngineError> {
        self.set_phase_files(phase, waiting_for, node)?;
        durable(self.on_durable, &self.run_id, DurablePoint::Phase(phase)).await
    }

    fn emit(&self, e: EngineEvent) {
        run_io::emit(self.on_event, e);
    }

    /// An end of the invocation (completed, failed, stopped, waiting for a person), durable
    /// with everything the turn wrote and both logs: one flush for all with `run.json`'s temp
    /// file, so a reader who sees the phase finds the records.
    fn set_phase_files(
        &mut self,
        phase: Phase,
        waiting_for: Option<Value>,
        node: &str,
    ) -> Result<(), EngineError> {
        let usage = Some(self.meter.recorded().run_usage());
        let Some(group) = self.host.flush_group().cloned() else {
            return run_io::set_phase(
                self.project,
                &self.run_id,
                phase,
                waiting_for,
                Some(node),
                usage,
            );
        };
        let logs: Vec<std::path::PathBuf> = self
            .conversation
            .as_ref()
            .map(|l| l.path().to_path_buf())
            .into_iter()
            .chain(self.audit.as_ref().map(|a| a.path().to_path_buf()))
            .collect();
        let logs: Vec<&std::path::Path> = logs.iter().map(|p| p.as_path()).collect();
        run_io::set_phase_with(
            self.project,
            &self.run_id,
            phase,
            waiting_for,
            Some(node),
            usage,
            Durability::PowerCutWith(&logs, &group),
        )?;
        if let Some(log) = self.conversation.as_mut() {
            log.synced_elsewhere();
        }
        Ok(())
    }

    /// Makes the question durable: the audit line and the index say the run waits for it,
    /// with the widget request when `ui.ask_user` asked it.
    async fn record_waiting(
        &mut self,
        question: &str,
        reason: &str,
        widget: Option<Value>,
    ) -> Result<(), EngineError> {
        let mut waiting =
            json!({"question": question, "nodeId": self.machine.node(), "reason": reason});
        if let Some(w) = widget {
            waiting["widget"] = w;
        }
        self.audit(
            "engine.waiting",
            json!({"reason": reason, "message": question}),
        );
        let node = self.machine.node().to_string();
        self.set_phase(Phase::WaitingUser, Some(waiting), &node)
            .await
    }

    fn record(&self, f: impl FnOnce(&mut TraceRecorder)) {
        run_io::record(&self.recorder, f);
    }

    /// Runs until the workflow completes, fails, or needs a person.
    pub async fn drive(
        &mut self,
        intent: Intent,
        user_input: Option<String>,
    ) -> Result<RunReport, EngineError> {
        // A model turn's writes are made durable together, before the next model call.
        let group = Group::new();
        self.host.set_flush_group(group.clone());
        if let Some(log) = self.conversation.as_mut() {
            log.defer_sync();
        }
        // A person's answer is made durable before the model call it leads to.
        let mut turn_writes = user_input.is_some();
        let state = self.snapshot()?;
        self.host.gate.arm(state.complete);
        if user_input.as_deref().is_some_and(is_confirmation) {
            self.host.gate.grant();
        }
        let mut report = RunReport {
            outcome: Outcome::Waiting {
                question: String::new(),
            },
            model_calls: 0,
            tool_calls: 0,
            waits: 0,
            usage: Usage::default(),
        };
        run_io::set_running(
            self.project,
            &self.run_id,
            Some(&state.node_id),
            self.model,
            Some(self.machine.policy()),
            // After a power cut nobody drives the run, which the phase before says as well.
            baton_store::Durability::Kill,
        )?;
        let intent_name = match intent {
            Intent::Start => "start",
            Intent::Continue => "continue",
            Intent::Resume => "resume",
        };
        self.audit(
            "engine.start",
            json!({"intent": intent_name, "complete": state.complete, "nodeId": state.node_id}),
        );
        let mut action = self.step(Input::Begin {
            intent,
            state,
            user_input,
        })?;
        // The widget request of the last `ui.ask_user` call, until the machine asks it.
        let mut asked_widget: Option<Value> = None;
        loop {
            action = match action {
                Action::CallModel(request) => {
                    if std::mem::take(&mut turn_writes) {
                        self.flush_turn()?;
                        durable(self.on_durable, &self.run_id, DurablePoint::Turn).await?;
                    }
                    let agent = self.machine.effective_agent();
                    let policy = self.machine_policy(&agent);
                    let node = self.machine.node().to_string();
                    let turn = run_io::Turn {
                        run_id: &self.run_id,
                        node: Some(&node),
                        agent: &agent,
                        audit: self.audit.as_mut(),
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
                        &policy,
                        &self.cancel,
                        turn,
                    )
                    .await;
                    if let Some(log) = &self.audit {
                        group.add_path(log.path());
                    }
                    match answer {
                        Ok(response) => self.step(Input::ModelAnswered(response))?,
                        Err((code, message)) => Action::Fail { code, message },
                    }
                }
                Action::Summarize(mut request) => {
                    // No streaming: the summary is for the context, not for the person.
                    let options = CallOptions {
                        on_event: None,
                        cancel: Some(&self.cancel),
                    };
                    // A summary call is a call: the budgets are checked before it too.
                    let estimate = match self.meter.prepare(&mut request, None) {
                        Ok(e) => e,
                        Err(stop) => {
                            action = Action::Fail {
                                code: stop.code,
                                message: stop.message,
                            };
                            continue;
                        }
                    };
                    let answer =
                        tokio::time::timeout(SUMMARY_TIMEOUT, self.model.chat(&request, options))
                            .await;
                    match answer {
                        Err(_elapsed) => self.step(Input::Summarized(Err("LLM_TIMEOUT".into())))?,
                        Ok(Err(LlmError::Cancelled)) => Action::Fail {
                            code: ABORTED,
                            message: "the run was stopped".into(),
                        },
                        Ok(Err(e)) => self.step(Input::Summarized(Err(e.code().to_string())))?,
                        Ok(Ok(response)) => {
                            let spend = self.meter.record(&estimate, &response);
                            self.audit("engine.summary", spend.audit_fields(&estimate));
                            if let Some(w) = spend.warning {
                                let node = self.machine.node().to_string();
                                run_io::warn_usage(
                                    self.audit.as_mut(),
                                    &self.run_id,
                                    Some(&node),
                                    self.on_event,
                                    w,
                                );
                            }
                            if let Some(u) = spend.reported {
                                report.usage.add(u);
                                self.emit(EngineEvent::Usage(u));
                            }
                            let text = response.message.content.unwrap_or_default();
                            self.step(Input::Summarized(Ok(text)))?
                        }
                    }
                }
                Action::RunTools(calls) => {
                    let agent = self.machine.effective_agent();
                    let node = self.machine.node().to_string();
                    let policy = self.machine_policy(&agent);
                    report.tool_calls += calls.len();
                    let run_io::Batch {
                        results,
                        question,
                        widget,
                    } = run_io::run_tools(
                        self.host,
                        calls,
                        CallContext {
                            agent_id: &agent,
                            node_id: &node,
                            policy: &policy,
                        },
                        self.project,
                        &self.run_id,
                        &self.recorder,
                        self.on_event,
                    );
                    let state = self.snapshot()?;
                    self.host.gate.arm(state.complete);
                    if state.node_id != node {
                        self.emit(EngineEvent::NodeChanged {
                            node: state.node_id.clone(),
                        });
                        let n = state.node_id.clone();
                        self.project.update_run_with(
                            &self.run_id,
                            Durability::Group(&group),
                            |r| r.current_node_id = Some(n),
                        )?;
                    }
                    asked_widget = widget;
                    turn_writes = true;
                    self.step(Input::ToolsExecuted {
                        results,
                        state,
                        question,
                    })?
                }
                Action::WaitForUser { question, reason } => {
                    // Only a question the widget call asked is that widget.
                    let widget = asked_widget.take().filter(|_| reason == WaitReason::Widget);
                    report.waits += 1;
                    let reason_text = run_io::wait_reason(reason);
                    self.record(|r| r.record_ui_after("waiting-user", reason_text));
                    let mut answer = (self.answers)(&question);
                    if let Some(a) = &answer {
                        self.emit(EngineEvent::Answered {
                            question: question.clone(),
                            answer: a.clone(),
                        });
                    } else {
                        self.record_waiting(&question, reason_text, widget).await?;
                        if let Some(ask) = self.ask.as_mut() {
                            answer = ask(&question);
                            if answer.is_some() {
                                let node = self.machine.node().to_string();
                                run_io::set_phase_with(
                                    self.project,
                                    &self.run_id,
                                    Phase::Running,
                                    None,
                                    Some(&node),
                                    None,
                                    Durability::Group(&group),
                                )?;
                            }
                        }
                    }
                    let Some(answer) = answer else {
                        report.outcome = Outcome::Waiting { question };
                        return Ok(report);
                    };
                    let wrapped = crate::composer::user_input(
                        &answer,
                        (!self.machine.is_complete()).then_some(self.machine.node()),
                    );
                    self.record(|r| r.record_user_input(&answer, &wrapped));
                    if is_confirmation(&answer) {
                        self.host.gate.grant();
                    }
                    turn_writes = true;
                    self.step(Input::UserAnswered(answer))?
                }
                Action::Complete { message } => {
                    self.record(|r| {
                        r.record_ui_after("completed", "assistant_no_toolCalls_and_complete")
                    });
                    // The line first: the phase's flush makes it durable.
                    self.audit(
                        "engine.completed",
                        json!({"turns": report.model_calls, "toolCalls": report.tool_calls}),
                    );
                    let node = self.machine.node().to_string();
                    self.set_phase(Phase::Completed, None, &node).await?;
                    report.outcome = Outcome::Completed { message };
                    return Ok(report);
                }
                Action::Fail { code, message } => {
                    self.record(|r| r.record_ui_after("failed", code));
                    let mut waiting = json!({"error": {"code": code, "message": message}});
                    if let Some(stop) = self
                        .meter
                        .take_stop()
                        .filter(|_| code == spend::BUDGET_EXCEEDED)
                    {
                        waiting["error"]["budget"] = stop.details;
                    }
                    let phase = run_io::phase_after_failure(code);
                    self.audit("engine.failed", json!({"code": code, "message": message}));
                    let node = self.machine.node().to_string();
                    self.set_phase(phase, Some(waiting), &node).await?;
                    report.outcome = Outcome::Failed {
                        code: code.to_string(),
                        message,
                    };
                    return Ok(report);
                }
            };
        }
    }

    fn machine_policy(&self, agent: &str) -> baton_tools::EffectivePolicy {
        self.machine.policy_for(agent)
    }
}

impl Machine<'_> {
    /// The merged tool policy of `agent`.
    pub fn policy_for(&self, agent: &str) -> baton_tools::EffectivePolicy {
        self.composer().policy(agent)
    }
}
