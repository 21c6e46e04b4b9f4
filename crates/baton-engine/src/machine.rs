//! The run loop as a sans-IO state machine: it is fed what happened (a model answer, tool
//! results, a user's answer) and says what to do next. No I/O, no clock, no randomness, so
//! every transition is unit-testable and a recorded run replays exactly.

use crate::composer::{COMPLETION_REQUEST, Composer, Intent, user_input};
use crate::context::groups::{AGENT_PERSONA, Kind, kind};
use crate::context::plan::Mode;
use crate::context::window::restart_note;
use crate::context::{
    Budget, CONTEXT_STILL_TOO_LARGE, ContextEvent, Prepared, TokenCounter, Window,
};
use baton_llm::{ChatRequest, ChatResponse, Message, Role, ToolCall, ToolDef};

pub const DEFAULT_MAX_TURNS: usize = 50;
/// The same failing call this many times in a row stops the run for the user.
pub const LOOP_LIMIT: usize = 3;

/// How much history a request carries (`Full`: see [`Budget::carry_limit`] for where the
/// earlier nodes are left out). Remembered with the run, in its metadata.
pub use baton_store::ContextPolicy;

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

    /// How much history the requests carry.
    pub fn policy(&self) -> ContextPolicy {
        self.policy
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

    /// Directive, and brief while a node is active; under the carrying policy first the
    /// persona of an agent that takes over.
    fn push_shells(&mut self, intent: Intent) {
        let agent = self.effective_agent();
        let node = self.active_node();
        if self.policy == ContextPolicy::Full && agent != self.persona_in_force() {
            self.history.push(Message::user(
                self.composer.agent_message(&agent, &self.active_agent),
            ));
        }
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
        if self.policy == ContextPolicy::Full {
            self.carry(&system, &tools);
        }
        let prepared = self.window.prepare(&self.history, &system, &tools);
        action(prepared, tools)
    }

    /// The carrying policy's compaction (see [`Window::carry`]): the history of the nodes
    /// before the current one left out once a request passes the carry limit.
    fn carry(&mut self, system: &[Message], tools: &[ToolDef]) {
        let segment = node_segment(&self.history, &self.node);
        if segment <= self.window.compaction().1 {
            return;
        }
        let mut head = vec![restart_note()];
        let persona = self.persona_in_force();
        let introduced = self.history[segment..]
            .iter()
            .any(|m| kind(m) == Kind::Shell(AGENT_PERSONA));
        if persona != self.active_agent && !introduced {
            head.push(Message::user(
                self.composer.agent_message(&persona, &self.active_agent),
            ));
        }
        self.window
            .carry(&self.history, system, tools, segment, head);
    }

    /// The agent whose persona the carried window gives: that of its last `AGENT_PERSONA`
    /// message, else the run's agent (the system layers').
    fn persona_in_force(&self) -> String {
        let (view, covered) = self.window.compaction();
        view.iter()
            .chain(self.history.iter().skip(covered))
            .rev()
            .find_map(|m| first_field(m, AGENT_PERSONA, "- effectiveAgentId: "))
            .unwrap_or(&self.active_agent)
            .to_string()
    }

    /// The system layers and tools: the fixed part of a request. The tools are the effective
    /// agent's; the system layers too, except under the carrying policy, where they stay the
    /// run's agent's.
    fn fixed_parts(&self) -> (Vec<Message>, Vec<ToolDef>) {
        let agent = self.effective_agent();
        let policy = self.composer.policy(&agent);
        let layers = match self.policy {
            ContextPolicy::Node => &agent,
            ContextPolicy::Full => &self.active_agent,
        };
        (
            self.composer.system_layers(layers),
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

/// The first line after the header of one of baton's messages (`NODE_BRIEF`,
/// `AGENT_PERSONA`), without `field`: the node or agent it is about.
fn first_field<'m>(m: &'m Message, shell: &str, field: &str) -> Option<&'m str> {
    if m.role != Role::User {
        return None;
    }
    let rest = m.text().strip_prefix(shell)?.strip_prefix('\n')?;
    rest.lines().next()?.strip_prefix(field).map(str::trim)
}

/// Where the window of the current node opened in a carried history: the persona and the
/// directive before the first `NODE_BRIEF` of `node` since the last brief of another node.
/// 0 when the history began there (nothing older to leave out).
fn node_segment(history: &[Message], node: &str) -> usize {
    fn brief(m: &Message) -> Option<&str> {
        first_field(m, "NODE_BRIEF", "- currentNodeId: ")
    }
    let from = history
        .iter()
        .rposition(|m| brief(m).is_some_and(|n| n != node))
        .map_or(0, |i| i + 1);
    let Some(at) = history[from..]
        .iter()
        .position(|m| brief(m) == Some(node))
        .map(|i| from + i)
    else {
        return 0;
    };
    let mut start = at;
    while start > from
        && matches!(
            kind(&history[start - 1]),
            Kind::Shell("RUN_DIRECTIVE") | Kind::Shell(AGENT_PERSONA)
        )
    {
        start -= 1;
    }
    start
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
            usage_faults: Vec::new(),
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

    fn request(a: Action) -> ChatRequest {
        match a {
            Action::CallModel(r) => r,
            other => panic!("{other:?}"),
        }
    }

    fn moved_to(node: &str) -> Input {
        Input::ToolsExecuted {
            results: vec![ToolResult {
                call: ToolCall {
                    id: "x".into(),
                    name: "fs.read".into(),
                    arguments: "{}".into(),
                },
                content: "{\"ok\":true}".into(),
                ok: true,
            }],
            state: StateSnapshot {
                node_id: node.into(),
                complete: false,
            },
            question: None,
        }
    }

    #[test]
    fn the_carrying_policy_keeps_the_system_layers_when_the_agent_changes() {
        let p = package();
        let composer = Composer {
            package: &p,
            workflow: &p.workflows()[0],
            system: SystemToolSettings::default(),
            autopilot: true,
        };
        let mut m = Machine::new(composer, "sm", ContextPolicy::Full, 50);
        let first = request(begin(&mut m));
        let system: Vec<&Message> = first
            .messages
            .iter()
            .filter(|m| m.role == Role::System)
            .collect();
        assert!(system.last().unwrap().text().starts_with("You are Bob"));
        let mut previous = first.messages;
        for node in [
            "step-02-discover-inputs",
            "end-99",
            "step-02-discover-inputs",
        ] {
            m.step(answer_with_call("{}"));
            let next = request(m.step(moved_to(node)));
            assert_eq!(
                next.messages[..previous.len()],
                previous[..],
                "at {node}: the request begins with the whole previous one"
            );
            let added: Vec<&str> = next.messages[previous.len()..]
                .iter()
                .map(|m| m.text())
                .collect();
            let persona = added.iter().find(|t| t.starts_with(AGENT_PERSONA));
            match node {
                "end-99" => {
                    let persona = persona.expect("the summarizer is introduced");
                    assert!(persona.contains("- effectiveAgentId: summarizer"));
                    assert!(persona.contains("You are Sam (Summarizer)"));
                }
                // Back to the run's agent: said again, since the history says otherwise.
                _ if previous.iter().any(|m| m.text().starts_with(AGENT_PERSONA)) => {
                    assert!(persona.unwrap().contains("- effectiveAgentId: sm"));
                }
                _ => assert!(persona.is_none(), "{added:?}"),
            }
            assert!(added.iter().any(|t| t.starts_with("NODE_BRIEF")));
            previous = next.messages;
        }
        // The node policy puts the summarizer in the system layers and restarts the history.
        let mut node = machine(&p, 50);
        begin(&mut node);
        node.step(answer_with_call("{}"));
        let at_end = request(node.step(moved_to("end-99")));
        assert!(
            at_end
                .messages
                .iter()
                .any(|m| m.role == Role::System && m.text().starts_with("You are Sam"))
        );
    }

    #[test]
    fn a_node_segment_begins_at_the_shells_that_opened_the_node() {
        let brief = |n: &str| Message::user(format!("NODE_BRIEF\n- currentNodeId: {n}\n"));
        let history = vec![
            Message::user("RUN_DIRECTIVE\n- intent: start"),
            brief("a"),
            Message::assistant("x"),
            Message::user("RUN_DIRECTIVE\n- intent: continue"),
            Message::user("USER_INPUT\n- forNodeId: a\nyes"),
            Message::user(format!("{AGENT_PERSONA}\n- effectiveAgentId: b\n")),
            Message::user("RUN_DIRECTIVE\n- intent: continue"),
            brief("b"),
            Message::assistant("y"),
        ];
        assert_eq!(node_segment(&history, "b"), 5);
        assert_eq!(node_segment(&history, "a"), 0);
        assert_eq!(
            node_segment(&history, "c"),
            0,
            "no brief: nothing to leave out"
        );
        let mut back = history.clone();
        back.push(Message::user("RUN_DIRECTIVE\n- intent: continue"));
        back.push(brief("a"));
        assert_eq!(node_segment(&back, "a"), 9, "a node seen again starts anew");
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
                usage_faults: Vec::new(),
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
