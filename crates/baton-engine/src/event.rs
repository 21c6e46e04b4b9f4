//! What a run shows while it goes: model calls, streamed text, tool calls, node changes.

use crate::context::ContextEvent;
use baton_llm::Usage;

/// Something to show while a run goes.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineEvent {
    ModelCall {
        turn: usize,
        node: String,
        agent: String,
    },
    Text(String),
    /// Tokens the model reported for one answer.
    Usage(Usage),
    /// A question answered without a person (a recorded input, or one given in advance).
    Answered {
        question: String,
        answer: String,
    },
    ToolCall {
        name: String,
        ok: bool,
        /// A failed call's error code (`ENOENT`, `E_SANDBOX_VIOLATION`, …).
        error: Option<String>,
        /// What the call was about, as the model named it (`@project/…`, a command), cut
        /// to one short line.
        target: Option<String>,
    },
    NodeChanged {
        node: String,
    },
    /// The context was compressed (or a compressed window was given up).
    Context(ContextEvent),
    /// Something the person should know that does not stop the run (a model server's usage
    /// figures that cannot be true).
    Warning {
        code: String,
        message: String,
        hint: String,
    },
}
