//! The run loop as a sans-IO state machine: it is fed what happened (a model answer, tool
//! results, a user's answer) and says what to do next. No I/O, no clock, no randomness, so
//! every transition is unit-testable and a recorded run replays exactly.

use crate::composer::{COMPLETION_REQUEST, Composer, Intent, user_input};
use crate::context::plan::Mode;
use crate::context::{
    Budget, CONTEXT_STILL_TOO_LARGE, ContextEvent, Prepared, TokenCounter, Window,
};
use baton_llm::{ChatRequest, ChatResponse, Message, Role, ToolCall, ToolDef};

pub const DEFAULT_MAX_TURNS: usize = 50;
/// The same failing call this many times in a row stops the run for the user.
pub const LOOP_LIMIT: usize = 3;

/// How much history a request carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextPolicy {
    /// The history restarts whenever the current node changes; state and artifacts carry the
    /// memory between nodes.
    Node,
    /// Everything since the start of this engine invocation.
    Full,
}

/// What the state says after a tool batch (or at the start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateSnapshot {
    /// The effective current node (an empty `currentNodeId` is the entry node).
    pub node_id: String,
    pub complete: bool,
}

/// One executed tool call, as the machine needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    pub call: ToolCall,
    /// The JSON result text sent back to the model.
    pub content: String,
    pub ok: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    Begin {
        intent: Intent,
        state: StateSnapshot,
        user_input: Option<String>,
    },
    ModelAnswered(ChatResponse),
    ToolsExecuted {
        results: Vec<ToolResult>,
        state: StateSnapshot,
        question: Option<String>,
    },
    UserAnswered(String),
    /// The summary model's answer to [`Action::Summarize`]: its text, or the error code.
    Summarized(Result<String, String>),
}

/// Why the machine stopped for the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitReason {
    /// The model answered in text while the workflow is incomplete: it is asking.
    Question,
    /// `ui.ask_user` was called.
    Widget,
    /// The same failing call came back `LOOP_LIMIT` times.
    LoopDetected,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    CallModel(ChatRequest),
    /// Ask the model for a rolling summary (no tools) and answer with [`Input::Summarized`];
    /// the window is over its budget. Not a turn of the run.
    Summarize(ChatRequest),
    RunTools(Vec<ToolCall>),
    WaitForUser {
        question: String,
        reason: WaitReason,
    },
    Complete {
        message: String,
    },
    Fail {
        code: &'static str,
        message: String,
    },
}

pub struct Machine<'p> {
    composer: Composer<'p>,
    active_agent: String,
    policy: ContextPolicy,
    max_turns: usize,
    history: Vec<Message>,
    node: String,
    complete: bool,
    turns: usize,
    last_failure: Option<(String, usize)>,
    /// Counts history restarts, so a log of the history can mark them.
    generation: u64,
    /// What a request carries of the history, compressed when over budget.
    window: Window,
}

impl<'p> Machine<'p> {
    pub fn new(
        composer: Composer<'p>,
        active_agent: &str,
        policy: ContextPolicy,
        max_turns: usize,
    ) -> Machine<'p> {
        Machine {
            composer,
            active_agent: active_agent.to_string(),
            policy,
            max_turns,
            history: Vec::new(),
            node: String::new(),
            complete: false,
            turns: 0,
            last_failure: None,
            generation: 0,
            window: Window::new(
                Mode::Run,
                Some(Budget::default()),
                TokenCounter::new(crate::context::Encoding::Chars),
            ),
        }
    }

    /// Sets the context budget (`None`: no limit) and how tokens are counted.
    pub fn with_budget(mut self, budget: Option<Budget>, counter: TokenCounter) -> Machine<'p> {
        self.window = Window::new(Mode::Run, budget, counter);
        self
    }

    pub fn budget(&self) -> Option<Budget> {
        self.window.budget()
    }

    /// What the next request carries after the system layers: the compressed part, then the
    /// rest of the history.
    pub fn window(&self) -> Vec<Message> {
        self.window.messages(&self.history)
    }

    /// The compressed form of the history and how many history messages it stands for.
    pub fn compaction(&self) -> (&[Message], usize) {
        self.window.compaction()
    }

    /// Changes when the compaction does (applied or dropped).
    pub fn compactions(&self) -> u64 {
        self.window.compactions()
    }

    /// Summary calls answered since the last call; the log records them with the compaction.
    pub fn take_summary_calls(&mut self) -> usize {
        self.window.take_summary_calls()
    }

    /// Puts back a compaction a previous invocation logged. One that does not fit the
    /// restored history is ignored (the window is then compressed again if needed).
    pub fn restore_compaction(&mut self, view: Vec<Message>, covered: usize) {
        self.window.restore(view, covered, self.history.len());
    }

    /// What the context management did since the last call.
    pub fn take_events(&mut self) -> Vec<ContextEvent> {
        self.window.take_events()
    }

    /// The conversation of the current window (what the next request carries after the
    /// system layers).
    pub fn history(&self) -> &[Message] {
        &self.history
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Puts back the window a previous invocation left (from the conversation log), so a
    /// resumed or answered run keeps its context.
    pub fn restore(&mut self, history: Vec<Message>) {
        self.history = history;
    }

    pub fn composer(&self) -> &Composer<'p> {
        &self.composer
    }

    pub fn turns(&self) -> usize {
        self.turns
    }

    pub fn node(&self) -> &str {
        &self.node
    }

    pub fn is_complete(&self) -> bool {
        self.complete
    }

    pub fn effective_agent(&self) -> String {
        self.composer
            .effective_agent(&self.node, &self.active_agent)
            .to_string()
    }

    /// The node id shown in `forNodeId`, directives and briefs; none after completion.
    fn active_node(&self) -> Option<String> {
        (!self.complete).then(|| self.node.clone())
    }

    /// Opens a window for the current node: directive (and brief while a node is active).
    fn open_window(&mut self, intent: Intent) {
        if self.policy == ContextPolicy::Node {
            self.history.clear();
            self.window.clear();
            self.generation += 1;
        }
        self.push_shells(intent);
    }

    /// Directive, and brief while a node is active.
    fn push_shells(&mut self, intent: Intent) {
        let agent = self.effective_agent();
        let node = self.active_node();
        self.history.push(Message::user(self.composer.run_directive(
            intent,
            node.as_deref(),
            &agent,
        )));
        if let Some(node) = node {
            self.history
                .push(Message::user(self.composer.node_brief(&node)));
        }
    }

    fn call_model(&mut self) -> Action {
        if self.turns >= self.max_turns {
            return Action::Fail {
                code: "ENGINE_MAX_TURNS_EXCEEDED",
                message: format!(
                    "the model took {} turns without finishing or asking",
                    self.max_turns
                ),
            };
        }
        let (system, tools) = self.fixed_parts();
        let prepared = self.window.prepare(&self.history, &system, &tools);
        action(prepared, tools)
    }

    /// The system layers and tools of the effective agent: the fixed part of a request.
    fn fixed_parts(&self) -> (Vec<Message>, Vec<ToolDef>) {
        let agent = self.effective_agent();
        let policy = self.composer.policy(&agent);
        (
            self.composer.system_layers(&agent),
            self.composer.tools(&policy),
        )
    }

    fn add_user_input(&mut self, raw: &str) {
        let node = self.active_node();
        self.history
            .push(Message::user(user_input(raw, node.as_deref())));
        if let Some(node) = node {
            self.history
                .push(Message::user(self.composer.reminder(&node)));
        }
    }

    pub fn step(&mut self, input: Input) -> Action {
        match input {
            Input::Begin {
                intent,
                state,
                user_input,
            } => {
                self.node = state.node_id;
                self.complete = state.complete;
                self.turns = 0;
                self.last_failure = None;
                // Stopped right after the model's last word: nothing to redo.
                if intent == Intent::Resume
                    && user_input.is_none()
                    && let Some(last) = self
                        .history
                        .last()
                        .filter(|m| m.role == Role::Assistant && m.tool_calls.is_empty())
                {
                    let text = last.text().to_string();
                    return if self.complete {
                        Action::Complete { message: text }
                    } else {
                        Action::WaitForUser {
                            question: text,
                            reason: WaitReason::Question,
                        }
                    };
                }
                if self.history.is_empty() {
                    self.open_window(intent);
                } else {
                    // A restored window goes on: the shells re-anchor the model.
                    self.push_shells(intent);
                }
                if let Some(text) = user_input {
                    self.add_user_input(&text);
                }
                self.call_model()
            }
            Input::UserAnswered(text) => {
                let agent = self.effective_agent();
                let node = self.active_node();
                self.history.push(Message::user(self.composer.run_directive(
                    Intent::Continue,
                    node.as_deref(),
                    &agent,
                )));
                self.add_user_input(&text);
                self.last_failure = None;
                self.call_model()
            }
            Input::Summarized(answer) => {
                let (system, tools) = self.fixed_parts();
                let prepared = self
                    .window
                    .summarized(answer, &self.history, &system, &tools);
                action(prepared, tools)
            }
            Input::ModelAnswered(response) => {
                self.turns += 1;
                let message = response.message;
                self.history.push(message.clone());
                if !message.tool_calls.is_empty() {
                    return Action::RunTools(message.tool_calls);
                }
                let text = message.content.unwrap_or_default();
                if self.complete {
                    Action::Complete { message: text }
                } else {
                    Action::WaitForUser {
                        question: text,
                        reason: WaitReason::Question,
                    }
                }
            }
            Input::ToolsExecuted {
                results,
                state,
                question,
            } => {
                let mut looping = false;
                for r in &results {
                    self.history
                        .push(Message::tool_result(r.call.id.clone(), r.content.clone()));
                    looping |= self.note_failure(r);
                }
                let was_node = std::mem::replace(&mut self.node, state.node_id);
                let was_complete = std::mem::replace(&mut self.complete, state.complete);
                if looping {
                    return Action::WaitForUser {
                        question: "The same tool call failed three times in a row (ENGINE_LOOP_DETECTED). How should I proceed?".into(),
                        reason: WaitReason::LoopDetected,
                    };
                }
                if let Some(q) = question {
                    return Action::WaitForUser {
                        question: q,
                        reason: WaitReason::Widget,
                    };
                }
                if self.complete && !was_complete {
                    self.history.push(Message::user(COMPLETION_REQUEST));
                } else if !self.complete && was_complete {
                    // A confirmed change reopened the workflow: back to the normal profile.
                    self.open_window(Intent::Continue);
                } else if !self.complete && self.node != was_node {
                    self.open_window(Intent::Continue);
                } else if !self.complete && self.composer.is_end(&self.node) {
                    self.history
                        .push(Message::user(self.composer.finalize_end(&self.node)));
                }
                self.call_model()
            }
        }
    }

    /// Tracks consecutive failures of the very same call; true at the limit.
    fn note_failure(&mut self, r: &ToolResult) -> bool {
        if r.ok {
            self.last_failure = None;
            return false;
        }
        let fingerprint = format!("{}\u{0}{}", r.call.name, r.call.arguments);
        let count = match &self.last_failure {
            Some((f, n)) if *f == fingerprint => n + 1,
            _ => 1,
        };
        self.last_failure = Some((fingerprint, count));
        count >= LOOP_LIMIT
    }
}

fn action(prepared: Prepared, tools: Vec<ToolDef>) -> Action {
    match prepared {
        Prepared::Send(messages) => Action::CallModel(ChatRequest {
            messages,
            tools,
            options: Default::default(),
        }),
        Prepared::Summarize(request) => Action::Summarize(request),
        Prepared::TooLarge { tokens, limit } => Action::Fail {
            code: CONTEXT_STILL_TOO_LARGE,
            message: Prepared::too_large_message(tokens, limit),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_llm::{Message, ToolCall};
    use baton_package::Package;
    use baton_tools::SystemToolSettings;

    fn package() -> Package {
        Package::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../examples/packages/create-story-micro"),
        )
        .unwrap()
    }

    fn machine(p: &Package, max_turns: usize) -> Machine<'_> {
        let composer = Composer {
            package: p,
            workflow: &p.workflows()[0],
            system: SystemToolSettings::default(),
            autopilot: true,
        };
        Machine::new(composer, "sm", ContextPolicy::Node, max_turns)
    }

    fn begin(m: &mut Machine<'_>) -> Action {
        m.step(Input::Begin {
            intent: Intent::Start,
            state: StateSnapshot {
                node_id: "step-01-select-story".into(),
                complete: false,
            },
            user_input: None,
        })
    }

    fn answer_with_call(args: &str) -> Input {
        let mut message = Message::assistant("");
        message.tool_calls = vec![ToolCall {
            id: "x".into(),
            name: "fs.read".into(),
            arguments: args.into(),
        }];
        Input::ModelAnswered(ChatResponse {
            message,
            finish_reason: None,
            usage: None,
        })
    }

    fn failed(args: &str) -> Input {
        Input::ToolsExecuted {
            results: vec![ToolResult {
                call: ToolCall {
                    id: "x".into(),
                    name: "fs.read".into(),
                    arguments: args.into(),
                },
                content: "{\"ok\":false}".into(),
                ok: false,
            }],
            state: StateSnapshot {
                node_id: "step-01-select-story".into(),
                complete: false,
            },
            question: None,
        }
    }

    #[test]
    fn the_same_failing_call_three_times_stops_for_the_user() {
        let p = package();
        let mut m = machine(&p, 50);
        assert!(matches!(begin(&mut m), Action::CallModel(_)));
        for i in 0..3 {
            assert!(matches!(
                m.step(answer_with_call("{\"path\":\"@project/nope\"}")),
                Action::RunTools(_)
            ));
            let next = m.step(failed("{\"path\":\"@project/nope\"}"));
            if i < 2 {
                assert!(matches!(next, Action::CallModel(_)), "{i}");
            } else {
                assert!(
                    matches!(
                        next,
                        Action::WaitForUser {
                            reason: WaitReason::LoopDetected,
                            ..
                        }
                    ),
                    "{next:?}"
                );
            }
        }
    }

    #[test]
    fn different_failures_do_not_count_as_a_loop() {
        let p = package();
        let mut m = machine(&p, 50);
        begin(&mut m);
        for i in 0..5 {
            m.step(answer_with_call(&format!("{{\"path\":\"@project/{i}\"}}")));
            assert!(matches!(
                m.step(failed(&format!("{{\"path\":\"@project/{i}\"}}"))),
                Action::CallModel(_)
            ));
        }
    }

    #[test]
    fn max_turns_fails_the_run() {
        let p = package();
        let mut m = machine(&p, 2);
        begin(&mut m);
        m.step(answer_with_call("{\"a\":1}"));
        assert!(matches!(m.step(failed("{\"a\":1}")), Action::CallModel(_)));
        m.step(answer_with_call("{\"a\":2}"));
        match m.step(failed("{\"a\":2}")) {
            Action::Fail { code, .. } => assert_eq!(code, "ENGINE_MAX_TURNS_EXCEEDED"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn text_while_incomplete_is_a_question_and_after_completion_the_end() {
        let p = package();
        let mut m = machine(&p, 50);
        begin(&mut m);
        let text = |t: &str| {
            Input::ModelAnswered(ChatResponse {
                message: Message::assistant(t),
                finish_reason: None,
                usage: None,
            })
        };
        assert!(matches!(
            m.step(text("Which story?")),
            Action::WaitForUser {
                reason: WaitReason::Question,
                ..
            }
        ));
        let mut done = machine(&p, 50);
        done.step(Input::Begin {
            intent: Intent::Continue,
            state: StateSnapshot {
                node_id: "end-99".into(),
                complete: true,
            },
            user_input: Some("thanks".into()),
        });
        assert!(matches!(
            done.step(text("You're welcome.")),
            Action::Complete { .. }
        ));
    }
}
