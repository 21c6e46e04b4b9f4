//! A *task run*'s loop as a sans-IO state machine: no graph and no state document; the prompt
//! is one assembled text (a lifecycle step's prompt), the tools are the host's plus one
//! *finish tool* (`session.complete`), and the run ends when the model calls the finish tool
//! with arguments its validator accepts. What the finish tool means stays with the caller
//! (the orchestrator validates it); the machine only knows when the run is over.
//!
//! Rules, as for workflow runs: a text answer (or `ui.ask_user`) is a question for the user;
//! `max_turns` model calls per invocation; the same failing call `LOOP_LIMIT` times in a row
//! stops for the user. Every tool call gets its result, in call order (the protocol requires
//! it): calls after the finish call in the same answer are answered "not executed".
//!
//! The prompt is the first message of the history, as a workflow run's directive is: the
//! conversation log keeps it, so a continued run needs only its log. A restored history that
//! already holds an accepted finish call ends the run at once, without a model call: a run
//! killed after its verdict was logged never works twice.

use crate::machine::{LOOP_LIMIT, ToolResult, WaitReason};
use baton_llm::{ChatRequest, ChatResponse, Message, Role, ToolCall, ToolDef};
use serde_json::{Value, json};

pub const MAX_TURNS_EXCEEDED: &str = "ENGINE_MAX_TURNS_EXCEEDED";

/// Checks the finish tool's arguments: the accepted verdict, or a message for the model.
pub type Validate = Box<dyn Fn(&str) -> Result<Value, String> + Send + Sync>;

/// What a task run is.
pub struct TaskSpec {
    /// System layers (rules); the prompt follows as the first user message.
    pub system: Vec<Message>,
    /// The first user message of a new run; a restored history already holds it.
    pub prompt: String,
    /// The host's tools, per the policy.
    pub tools: Vec<ToolDef>,
    pub finish: ToolDef,
    pub validate: Validate,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TaskInput {
    Begin,
    // Boxed: an answer is far larger than the other inputs.
    ModelAnswered(Box<ChatResponse>),
    /// Results of the last [`TaskAction::RunTools`], in its order, and the question a
    /// `ui.ask_user` call asked, if any.
    ToolsExecuted {
        results: Vec<ToolResult>,
        question: Option<String>,
    },
    /// The person's answer, as typed (the machine wraps it as `USER_INPUT`).
    UserAnswered(String),
}

#[derive(Debug, Clone, PartialEq)]
pub enum TaskAction {
    CallModel(ChatRequest),
    /// Host tools to run, in order; answer with [`TaskInput::ToolsExecuted`].
    RunTools(Vec<ToolCall>),
    WaitForUser {
        question: String,
        reason: WaitReason,
    },
    /// The model called the finish tool with accepted arguments.
    Finished {
        call: ToolCall,
        verdict: Value,
    },
    Fail {
        code: &'static str,
        message: String,
    },
}

/// A batch whose host calls are running: what the rest of the batch holds.
struct Pending {
    /// The first finish call, if any, and everything after it.
    finish: Option<ToolCall>,
    after: Vec<ToolCall>,
}

pub struct TaskMachine {
    spec: TaskSpec,
    history: Vec<Message>,
    max_turns: usize,
    turns: usize,
    pending: Option<Pending>,
    /// The last failing call (name, arguments) and how many times in a row it failed.
    failing: Option<(String, String, usize)>,
}

fn result(call: &ToolCall, content: Value) -> Message {
    Message::tool_result(call.id.clone(), content.to_string())
}

impl TaskMachine {
    pub fn new(spec: TaskSpec, max_turns: usize) -> TaskMachine {
        TaskMachine {
            spec,
            history: Vec::new(),
            max_turns,
            turns: 0,
            pending: None,
            failing: None,
        }
    }

    /// The conversation after the system layers, prompt first (what the conversation log
    /// keeps).
    pub fn history(&self) -> &[Message] {
        &self.history
    }

    /// Puts back a conversation (resume, answer), prompt included.
    pub fn restore(&mut self, history: Vec<Message>) {
        self.history = history;
    }

    pub fn finish_name(&self) -> &str {
        &self.spec.finish.name
    }

    pub fn turns(&self) -> usize {
        self.turns
    }

    pub fn step(&mut self, input: TaskInput) -> TaskAction {
        match input {
            TaskInput::Begin => {
                if self.history.is_empty() {
                    self.history.push(Message::user(self.spec.prompt.clone()));
                }
                if let Some(finished) = self.logged_finish() {
                    return finished;
                }
                self.call_model()
            }
            TaskInput::UserAnswered(text) => {
                if self.history.is_empty() {
                    self.history.push(Message::user(self.spec.prompt.clone()));
                }
                self.history
                    .push(Message::user(crate::composer::user_input(&text, None)));
                self.failing = None;
                self.call_model()
            }
            TaskInput::ModelAnswered(response) => self.answered(response.message),
            TaskInput::ToolsExecuted { results, question } => self.executed(results, question),
        }
    }

    /// The accepted finish call the history already holds (its result says `ok: true`), as
    /// the end of the run; its arguments are validated again, so the verdict is the same.
    fn logged_finish(&self) -> Option<TaskAction> {
        let finish = &self.spec.finish.name;
        for (at, m) in self.history.iter().enumerate().rev() {
            for call in m.tool_calls.iter().filter(|c| c.name == *finish) {
                let accepted = self.history[at + 1..]
                    .iter()
                    .take_while(|r| r.role == Role::Tool)
                    .filter(|r| r.tool_call_id.as_deref() == Some(call.id.as_str()))
                    .any(|r| {
                        serde_json::from_str::<Value>(r.text())
                            .is_ok_and(|v| v.get("ok") == Some(&Value::Bool(true)))
                    });
                if !accepted {
                    continue;
                }
                if let Ok(verdict) = (self.spec.validate)(&call.arguments) {
                    return Some(TaskAction::Finished {
                        call: call.clone(),
                        verdict,
                    });
                }
            }
        }
        None
    }

    fn call_model(&mut self) -> TaskAction {
        if self.turns >= self.max_turns {
            return TaskAction::Fail {
                code: MAX_TURNS_EXCEEDED,
                message: format!(
                    "the task run used its {} model calls without calling {}",
                    self.max_turns, self.spec.finish.name
                ),
            };
        }
        self.turns += 1;
        let mut messages = self.spec.system.clone();
        messages.extend(self.history.iter().cloned());
        let mut tools = self.spec.tools.clone();
        tools.push(self.spec.finish.clone());
        TaskAction::CallModel(ChatRequest {
            messages,
            tools,
            options: Default::default(),
        })
    }

    fn answered(&mut self, message: Message) -> TaskAction {
        if message.tool_calls.is_empty() {
            let question = message.text().trim().to_string();
            self.history.push(message);
            let question = if question.is_empty() {
                format!(
                    "The model answered with nothing and did not call {}. How should it go on?",
                    self.spec.finish.name
                )
            } else {
                question
            };
            return TaskAction::WaitForUser {
                question,
                reason: WaitReason::Question,
            };
        }
        let calls = message.tool_calls.clone();
        self.history.push(message);
        let split = calls
            .iter()
            .position(|c| c.name == self.spec.finish.name)
            .unwrap_or(calls.len());
        let mut rest = calls[split..].iter().cloned();
        self.pending = Some(Pending {
            finish: rest.next(),
            after: rest.collect(),
        });
        let host = calls[..split].to_vec();
        if host.is_empty() {
            return self.executed(Vec::new(), None);
        }
        TaskAction::RunTools(host)
    }

    fn executed(&mut self, results: Vec<ToolResult>, question: Option<String>) -> TaskAction {
        let pending = self.pending.take().unwrap_or(Pending {
            finish: None,
            after: Vec::new(),
        });
        let mut last_failure = None;
        for r in results {
            self.history
                .push(Message::tool_result(r.call.id.clone(), r.content.clone()));
            last_failure = (!r.ok).then_some(r.call);
        }
        if let Some(finish) = pending.finish {
            let verdict = (self.spec.validate)(&finish.arguments);
            let content = match &verdict {
                Ok(_) => json!({"ok": true, "message": "the step is complete"}),
                Err(e) => json!({"ok": false, "error": {"code": "FINISH_INVALID", "message": e}}),
            };
            self.history.push(result(&finish, content));
            for call in &pending.after {
                self.history.push(result(
                    call,
                    json!({"ok": false, "error": {"code": "NOT_EXECUTED",
                        "message": "not executed: the step was finished by an earlier call"}}),
                ));
            }
            match verdict {
                Ok(verdict) => {
                    return TaskAction::Finished {
                        call: finish,
                        verdict,
                    };
                }
                Err(_) => last_failure = Some(finish),
            }
        }
        if let Some(question) = question {
            self.failing = None;
            return TaskAction::WaitForUser {
                question,
                reason: WaitReason::Widget,
            };
        }
        if self.repeated_failure(last_failure) {
            return TaskAction::WaitForUser {
                question: "The same tool call failed three times in a row (ENGINE_LOOP_DETECTED). How should I proceed?".into(),
                reason: WaitReason::LoopDetected,
            };
        }
        self.call_model()
    }

    /// Counts the batch's last failing call; true when it failed `LOOP_LIMIT` times in a row.
    fn repeated_failure(&mut self, failed: Option<ToolCall>) -> bool {
        let Some(call) = failed else {
            self.failing = None;
            return false;
        };
        let count = match &self.failing {
            Some((name, args, n)) if *name == call.name && *args == call.arguments => n + 1,
            _ => 1,
        };
        self.failing = Some((call.name, call.arguments, count));
        count >= LOOP_LIMIT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> TaskSpec {
        TaskSpec {
            system: vec![Message::system("rules")],
            prompt: "do the step".into(),
            tools: vec![ToolDef {
                name: "fs.read".into(),
                description: "read".into(),
                parameters: json!({"type": "object"}),
            }],
            finish: ToolDef {
                name: "session.complete".into(),
                description: "end".into(),
                parameters: json!({"type": "object"}),
            },
            validate: Box::new(|args| {
                let v: Value = serde_json::from_str(args).map_err(|e| e.to_string())?;
                match v["status"].as_str() {
                    Some("DONE") => Ok(v),
                    _ => Err("status must be DONE".into()),
                }
            }),
        }
    }

    fn calls(list: &[(&str, &str, &str)]) -> TaskInput {
        TaskInput::ModelAnswered(Box::new(ChatResponse {
            message: Message::assistant_calls(
                list.iter()
                    .map(|(id, n, a)| ToolCall::new(*id, *n, *a))
                    .collect(),
            ),
            finish_reason: None,
            usage: None,
            usage_faults: Vec::new(),
        }))
    }

    fn text(t: &str) -> TaskInput {
        TaskInput::ModelAnswered(Box::new(ChatResponse {
            message: Message::assistant(t),
            finish_reason: None,
            usage: None,
            usage_faults: Vec::new(),
        }))
    }

    fn ok(call: &ToolCall) -> ToolResult {
        ToolResult {
            call: call.clone(),
            content: r#"{"ok":true}"#.into(),
            ok: true,
        }
    }

    #[test]
    fn the_first_request_is_rules_prompt_and_tools_with_the_finish_tool() {
        let mut m = TaskMachine::new(spec(), 10);
        let TaskAction::CallModel(req) = m.step(TaskInput::Begin) else {
            panic!()
        };
        assert_eq!(req.messages.len(), 2);
        assert_eq!(req.messages[1].role, Role::User);
        assert_eq!(req.messages[1].text(), "do the step");
        let names: Vec<&str> = req.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["fs.read", "session.complete"]);
    }

    #[test]
    fn host_calls_run_then_the_finish_call_ends_the_run() {
        let mut m = TaskMachine::new(spec(), 10);
        m.step(TaskInput::Begin);
        let action = m.step(calls(&[
            ("c1", "fs.read", "{}"),
            ("c2", "session.complete", r#"{"status":"DONE"}"#),
            ("c3", "fs.read", "{}"),
        ]));
        let TaskAction::RunTools(host) = action else {
            panic!("{action:?}")
        };
        assert_eq!(host.len(), 1, "only the calls before the finish call run");
        let action = m.step(TaskInput::ToolsExecuted {
            results: vec![ok(&host[0])],
            question: None,
        });
        let TaskAction::Finished { call, verdict } = action else {
            panic!("{action:?}")
        };
        assert_eq!(call.id, "c2");
        assert_eq!(verdict["status"], "DONE");
        // Every call has its result, in order; the one after the finish was not executed.
        let ids: Vec<&str> = m
            .history()
            .iter()
            .filter_map(|msg| msg.tool_call_id.as_deref())
            .collect();
        assert_eq!(ids, ["c1", "c2", "c3"]);
        assert!(m.history()[4].text().contains("NOT_EXECUTED"));
        assert_eq!(
            m.history()[0].text(),
            "do the step",
            "the prompt is logged first"
        );
    }

    #[test]
    fn a_refused_finish_call_is_answered_and_the_run_goes_on() {
        let mut m = TaskMachine::new(spec(), 10);
        m.step(TaskInput::Begin);
        let action = m.step(calls(&[(
            "c1",
            "session.complete",
            r#"{"status":"maybe"}"#,
        )]));
        let TaskAction::CallModel(req) = action else {
            panic!("{action:?}")
        };
        let last = req.messages.last().unwrap();
        assert_eq!(last.tool_call_id.as_deref(), Some("c1"));
        assert!(last.text().contains("status must be DONE"));
    }

    #[test]
    fn the_same_refused_finish_three_times_stops_for_the_user() {
        let mut m = TaskMachine::new(spec(), 10);
        m.step(TaskInput::Begin);
        let bad = || calls(&[("c", "session.complete", "{}")]);
        assert!(matches!(m.step(bad()), TaskAction::CallModel(_)));
        assert!(matches!(m.step(bad()), TaskAction::CallModel(_)));
        let action = m.step(bad());
        assert!(
            matches!(
                action,
                TaskAction::WaitForUser {
                    reason: WaitReason::LoopDetected,
                    ..
                }
            ),
            "{action:?}"
        );
    }

    #[test]
    fn a_text_answer_is_a_question_and_the_answer_continues_the_run() {
        let mut m = TaskMachine::new(spec(), 10);
        m.step(TaskInput::Begin);
        let action = m.step(text("Which file?"));
        assert_eq!(
            action,
            TaskAction::WaitForUser {
                question: "Which file?".into(),
                reason: WaitReason::Question
            }
        );
        let TaskAction::CallModel(req) = m.step(TaskInput::UserAnswered("a.md".into())) else {
            panic!()
        };
        assert_eq!(req.messages.last().unwrap().text(), "USER_INPUT\na.md");
        let empty = m.step(text("  "));
        assert!(
            matches!(empty, TaskAction::WaitForUser { question, .. } if question.contains("session.complete"))
        );
    }

    #[test]
    fn a_model_that_never_finishes_runs_out_of_turns() {
        let mut m = TaskMachine::new(spec(), 3);
        let mut action = m.step(TaskInput::Begin);
        let mut n = 0;
        while let TaskAction::CallModel(_) = action {
            n += 1;
            let TaskAction::RunTools(host) = m.step(calls(&[("c", "fs.read", &format!("{n}"))]))
            else {
                panic!()
            };
            action = m.step(TaskInput::ToolsExecuted {
                results: vec![ok(&host[0])],
                question: None,
            });
        }
        assert_eq!(n, 3);
        assert!(matches!(action, TaskAction::Fail { code, .. } if code == MAX_TURNS_EXCEEDED));
    }

    #[test]
    fn a_restored_history_is_sent_as_it_is() {
        let mut m = TaskMachine::new(spec(), 10);
        m.restore(vec![
            Message::user("the logged prompt"),
            Message::assistant("earlier"),
            Message::user("answer"),
        ]);
        let TaskAction::CallModel(req) = m.step(TaskInput::Begin) else {
            panic!()
        };
        let texts: Vec<&str> = req.messages.iter().map(Message::text).collect();
        assert_eq!(texts, ["rules", "the logged prompt", "earlier", "answer"]);
    }

    #[test]
    fn a_restored_accepted_finish_ends_the_run_without_a_model_call() {
        let mut first = TaskMachine::new(spec(), 10);
        first.step(TaskInput::Begin);
        first.step(calls(&[(
            "c1",
            "session.complete",
            r#"{"status":"maybe"}"#,
        )]));
        let action = first.step(calls(&[("c2", "session.complete", r#"{"status":"DONE"}"#)]));
        assert!(matches!(action, TaskAction::Finished { .. }));
        let mut again = TaskMachine::new(spec(), 10);
        again.restore(first.history().to_vec());
        let TaskAction::Finished { call, verdict } = again.step(TaskInput::Begin) else {
            panic!("a logged verdict must not call the model again")
        };
        assert_eq!(call.id, "c2");
        assert_eq!(verdict["status"], "DONE");
        assert_eq!(again.turns(), 0);
        // A refused finish alone is no verdict: the run goes on.
        let mut refused = TaskMachine::new(spec(), 10);
        refused.restore(first.history()[..3].to_vec());
        assert!(matches!(
            refused.step(TaskInput::Begin),
            TaskAction::CallModel(_)
        ));
    }

    #[test]
    fn an_ask_user_call_waits_for_the_person() {
        let mut m = TaskMachine::new(spec(), 10);
        m.step(TaskInput::Begin);
        let TaskAction::RunTools(host) = m.step(calls(&[("c1", "ui.ask_user", "{}")])) else {
            panic!()
        };
        let action = m.step(TaskInput::ToolsExecuted {
            results: vec![ok(&host[0])],
            question: Some("CSV or XLSX?".into()),
        });
        assert_eq!(
            action,
            TaskAction::WaitForUser {
                question: "CSV or XLSX?".into(),
                reason: WaitReason::Widget
            }
        );
    }
}
