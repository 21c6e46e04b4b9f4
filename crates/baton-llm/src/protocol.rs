//! The tool-call protocol OpenAI enforces on a request's messages: every tool call of an
//! assistant message is answered by a `tool` message right after it (before any other message),
//! ids are unique within a message, and no `tool` message answers a call that is not open.
//! A request breaking these rules gets HTTP 400 from OpenAI, so baton checks its own requests
//! the same way in replays and in its scripted test servers.

use crate::types::{Message, Role};
use std::collections::HashSet;

/// Why a message list is not a well-formed conversation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolViolation {
    #[error("message {index}: tool call '{id}' has no result before the next message")]
    Unanswered { index: usize, id: String },
    #[error("message {index}: a tool message answers '{id}', which is not an open tool call")]
    Orphan { index: usize, id: String },
    #[error("message {index}: tool call id '{id}' appears twice in one assistant message")]
    DuplicateId { index: usize, id: String },
    #[error("message {index}: tool call id is empty")]
    EmptyId { index: usize },
    #[error("message {index}: a tool message has no tool_call_id")]
    MissingToolCallId { index: usize },
}

/// Checks `messages` as OpenAI would; the first violation found.
pub fn validate(messages: &[Message]) -> Result<(), ProtocolViolation> {
    // Calls of the last assistant message that still wait for their result.
    let mut open: Vec<String> = Vec::new();
    let mut open_since = 0;
    for (index, m) in messages.iter().enumerate() {
        if m.role == Role::Tool {
            let Some(id) = m.tool_call_id.as_deref() else {
                return Err(ProtocolViolation::MissingToolCallId { index });
            };
            match open.iter().position(|o| o == id) {
                Some(at) => {
                    open.remove(at);
                }
                None => {
                    return Err(ProtocolViolation::Orphan {
                        index,
                        id: id.to_string(),
                    });
                }
            }
            continue;
        }
        if let Some(id) = open.first() {
            return Err(ProtocolViolation::Unanswered {
                index: open_since,
                id: id.clone(),
            });
        }
        if m.role == Role::Assistant && !m.tool_calls.is_empty() {
            let mut seen = HashSet::new();
            for call in &m.tool_calls {
                if call.id.is_empty() {
                    return Err(ProtocolViolation::EmptyId { index });
                }
                if !seen.insert(call.id.as_str()) {
                    return Err(ProtocolViolation::DuplicateId {
                        index,
                        id: call.id.clone(),
                    });
                }
            }
            open = m.tool_calls.iter().map(|c| c.id.clone()).collect();
            open_since = index;
        }
    }
    match open.first() {
        Some(id) => Err(ProtocolViolation::Unanswered {
            index: open_since,
            id: id.clone(),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ToolCall;

    fn call(ids: &[&str]) -> Message {
        Message::assistant_calls(
            ids.iter()
                .map(|id| ToolCall::new(*id, "fs.read", "{}"))
                .collect(),
        )
    }

    fn result(id: &str) -> Message {
        Message::tool_result(id, "{}")
    }

    #[test]
    fn well_formed_conversations_pass() {
        let ok = [
            Message::user("hi"),
            call(&["a", "b"]),
            result("b"),
            result("a"),
            Message::user("next"),
            // The same id again in a later message is accepted, as OpenAI does.
            call(&["a"]),
            result("a"),
            Message::assistant("done"),
        ];
        assert_eq!(validate(&ok), Ok(()));
    }

    #[test]
    fn violations_are_found() {
        let cases: Vec<(Vec<Message>, ProtocolViolation)> = vec![
            (
                vec![Message::user("x"), call(&["a"]), Message::user("y")],
                ProtocolViolation::Unanswered {
                    index: 1,
                    id: "a".into(),
                },
            ),
            (
                vec![call(&["a", "b"]), result("a")],
                ProtocolViolation::Unanswered {
                    index: 0,
                    id: "b".into(),
                },
            ),
            (
                vec![Message::user("x"), result("a")],
                ProtocolViolation::Orphan {
                    index: 1,
                    id: "a".into(),
                },
            ),
            (
                vec![call(&["a"]), result("a"), result("a")],
                ProtocolViolation::Orphan {
                    index: 2,
                    id: "a".into(),
                },
            ),
            (
                vec![call(&["a", "a"])],
                ProtocolViolation::DuplicateId {
                    index: 0,
                    id: "a".into(),
                },
            ),
            (vec![call(&[""])], ProtocolViolation::EmptyId { index: 0 }),
        ];
        for (messages, expected) in cases {
            assert_eq!(validate(&messages), Err(expected));
        }
    }
}
