//! The window a request carries: the compressed part (`view`, standing for the first
//! `covered` messages of the history) and the rest of the history as it is. Between two
//! compressions the history only grows, so each request's prefix is the previous request,
//! byte for byte, and a provider's prompt cache keeps working.
//!
//! Used by the run machine and by agent chats; pure like them.

use super::budget::{Budget, CONTEXT_STILL_TOO_LARGE};
use super::elide;
use super::event::ContextEvent;
use super::groups::CONTEXT_RESTART;
use super::plan::{self, Compaction, Mode, Pending, Plan, Report};
use super::tokens::TokenCounter;
use baton_llm::{ChatRequest, Message, ToolDef};

/// What to do for the next request.
#[derive(Debug, Clone, PartialEq)]
pub enum Prepared {
    /// Send these messages (system layers included).
    Send(Vec<Message>),
    /// First ask the model for a summary; answer with [`Window::summarized`].
    Summarize(ChatRequest),
    /// Even compressed, the request would pass the model's context.
    TooLarge { tokens: usize, limit: usize },
}

impl Prepared {
    /// The message of a refusal.
    pub fn too_large_message(tokens: usize, limit: usize) -> String {
        format!(
            "the next request needs about {tokens} tokens and the model's context is {limit}, even after compression; give a shorter input, or set context_tokens in baton.toml if the model has a larger window"
        )
    }
}

/// The message that stands for the history of earlier nodes once [`Window::carry`] left it
/// out.
pub fn restart_note() -> Message {
    Message::user(format!(
        "{CONTEXT_RESTART}\nThe conversation of the earlier nodes was left out of the requests to keep them small (the run's log keeps it). @state/workflow.md and the artifacts hold what those nodes did: read them when you need it."
    ))
}

/// The code of [`Prepared::TooLarge`].
pub const TOO_LARGE: &str = CONTEXT_STILL_TOO_LARGE;

#[derive(Debug, Clone)]
pub struct Window {
    mode: Mode,
    /// `None`: no budget, requests are sent whole.
    budget: Option<Budget>,
    counter: TokenCounter,
    view: Vec<Message>,
    covered: usize,
    /// Counts changes of `view`, so a log can record them.
    compactions: u64,
    /// Summary calls answered since the last call of `take_summary_calls`.
    summary_calls: usize,
    pending: Option<Box<Pending>>,
    events: Vec<ContextEvent>,
}

impl Window {
    pub fn new(mode: Mode, budget: Option<Budget>, counter: TokenCounter) -> Window {
        Window {
            mode,
            budget,
            counter,
            view: Vec::new(),
            covered: 0,
            compactions: 0,
            summary_calls: 0,
            pending: None,
            events: Vec::new(),
        }
    }

    pub fn budget(&self) -> Option<Budget> {
        self.budget
    }

    /// The messages after the system layers: `view`, then `history[covered..]`.
    pub fn messages(&self, history: &[Message]) -> Vec<Message> {
        let mut w = self.view.clone();
        w.extend(history.iter().skip(self.covered).cloned());
        w
    }

    /// The compressed part and how many history messages it stands for.
    pub fn compaction(&self) -> (&[Message], usize) {
        (&self.view, self.covered)
    }

    pub fn compactions(&self) -> u64 {
        self.compactions
    }

    pub fn take_summary_calls(&mut self) -> usize {
        std::mem::take(&mut self.summary_calls)
    }

    pub fn take_events(&mut self) -> Vec<ContextEvent> {
        std::mem::take(&mut self.events)
    }

    /// The history restarted: nothing is compressed any more.
    pub fn clear(&mut self) {
        self.view.clear();
        self.covered = 0;
        self.pending = None;
    }

    /// Puts back a logged compaction; one that does not fit the history is ignored.
    pub fn restore(&mut self, view: Vec<Message>, covered: usize, history_len: usize) {
        if covered <= history_len && !view.is_empty() {
            self.view = view;
            self.covered = covered;
        }
    }

    /// Compresses when over the trigger, then checks the request.
    pub fn prepare(
        &mut self,
        history: &[Message],
        system: &[Message],
        tools: &[ToolDef],
    ) -> Prepared {
        if let Some(budget) = self.budget {
            let fixed = self.counter.messages(system) + self.counter.tools(tools);
            let window = self.messages(history);
            match plan::plan(&window, fixed, &budget, self.mode, &mut self.counter) {
                Plan::NotNeeded => {}
                Plan::NeedsSummary(pending) => {
                    let request = pending.request.clone();
                    self.pending = Some(pending);
                    return Prepared::Summarize(request);
                }
                other => {
                    if let Some(refused) = self.settle(other, history, fixed, &budget) {
                        return refused;
                    }
                }
            }
        }
        self.finish(history, system, tools)
    }

    /// The carrying policy's compaction, one step when a request would pass
    /// [`Budget::carry_limit`]: the history before `segment` (where the current node's window
    /// opened) is left out, `head` (a [`restart_note`], and the persona in force when
    /// it was given before `segment`) stands for it, and the bulky arguments of the node's
    /// executed calls are elided at the same time, so no later turn rewrites them. Nothing
    /// happens when the part before `segment` is already compressed or nothing would be saved;
    /// the requests after it extend each other again. True when it was done.
    pub fn carry(
        &mut self,
        history: &[Message],
        system: &[Message],
        tools: &[ToolDef],
        segment: usize,
        head: Vec<Message>,
    ) -> bool {
        let Some(budget) = self.budget else {
            return false;
        };
        if segment <= self.covered || segment > history.len() {
            return false;
        }
        let fixed = self.counter.messages(system) + self.counter.tools(tools);
        let before = fixed + self.counter.messages(&self.messages(history));
        if before <= budget.carry_limit() {
            return false;
        }
        let mut kept = head;
        kept.extend(history[segment..].iter().cloned());
        let (elided, _) = elide::elide_oldest(&mut kept, usize::MAX, &mut self.counter);
        let after = fixed + self.counter.messages(&kept);
        if after >= before || plan::check(&kept).is_err() {
            return false;
        }
        self.view = kept;
        self.covered = history.len();
        self.pending = None;
        self.compactions += 1;
        self.events.push(ContextEvent::Compressed(Report {
            status: "attempted_effective",
            tokens_before: before,
            tokens_after: after,
            budget: budget.limit(),
            target: budget.carry_limit(),
            summarized_tool_groups: 0,
            dropped_instructions: 0,
            elided_arguments: elided,
            summary: None,
            window: "restart",
            target_exceeded: after > budget.carry_limit(),
        }));
        true
    }

    /// Completes a compression with the summary model's answer (`Err(code)` if it failed).
    pub fn summarized(
        &mut self,
        answer: Result<String, String>,
        history: &[Message],
        system: &[Message],
        tools: &[ToolDef],
    ) -> Prepared {
        if answer.is_ok() {
            self.summary_calls += 1;
        }
        if let (Some(pending), Some(budget)) = (self.pending.take(), self.budget) {
            let fixed = self.counter.messages(system) + self.counter.tools(tools);
            let done = plan::finish(*pending, answer, &budget, &mut self.counter);
            if let Some(refused) = self.settle(done, history, fixed, &budget) {
                return refused;
            }
        }
        self.finish(history, system, tools)
    }

    fn settle(
        &mut self,
        outcome: Plan,
        history: &[Message],
        fixed: usize,
        budget: &Budget,
    ) -> Option<Prepared> {
        match outcome {
            Plan::Compressed(c) => self.apply(c, history.len()),
            Plan::TooLarge { tokens, limit } => return Some(Prepared::TooLarge { tokens, limit }),
            Plan::Invalid { violation } => {
                // Nothing was replaced: the uncompressed window goes, if it fits at all.
                self.events
                    .push(ContextEvent::ProtocolFallback { violation });
                let tokens = fixed + self.counter.messages(&self.messages(history));
                if tokens > budget.limit() {
                    return Some(Prepared::TooLarge {
                        tokens,
                        limit: budget.limit(),
                    });
                }
            }
            Plan::NotNeeded | Plan::NeedsSummary(_) => {}
        }
        None
    }

    fn apply(&mut self, c: Compaction, history_len: usize) {
        if c.report.status == "attempted_noop" {
            return;
        }
        self.view = c.messages;
        self.covered = history_len;
        self.compactions += 1;
        self.events.push(ContextEvent::Compressed(c.report));
    }

    /// The request's messages, checked against the tool protocol. A compressed window that
    /// fails the check (a damaged log put it back) gives way to the whole history.
    fn finish(&mut self, history: &[Message], system: &[Message], tools: &[ToolDef]) -> Prepared {
        let mut messages = system.to_vec();
        messages.extend(self.messages(history));
        if !self.view.is_empty()
            && let Err(violation) = plan::check(&messages)
        {
            self.events
                .push(ContextEvent::ProtocolFallback { violation });
            self.clear();
            self.compactions += 1;
            messages = system.to_vec();
            messages.extend(history.iter().cloned());
            if let Some(budget) = self.budget {
                let tokens = self.counter.request(&messages, tools);
                if tokens > budget.limit() {
                    return Prepared::TooLarge {
                        tokens,
                        limit: budget.limit(),
                    };
                }
            }
        }
        Prepared::Send(messages)
    }
}
