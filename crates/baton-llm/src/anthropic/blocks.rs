//! An answer's content blocks, as baton's assistant message: text joined, `tool_use` as tool
//! calls, thinking blocks kept to be sent back; `stop_reason` as a finish reason.

use crate::error::LlmError;
use crate::names::ToolNames;
use crate::types::{ChatResponse, Message, Role, ToolCall};
use crate::wire;
use serde_json::{Map, Value};

/// The key of [`crate::Message::extra`] holding an answer's thinking blocks, as received.
pub const THINKING_BLOCKS: &str = "thinking_blocks";

/// One content block as it is assembled.
#[derive(Debug)]
pub(super) enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        /// The input as JSON text: streamed fragments joined, or the whole object written.
        input: String,
    },
    /// A thinking or redacted_thinking block, as received (deltas applied).
    Thinking(Value),
    /// A block type baton does not use (e.g. a server tool's): dropped.
    Other,
}

impl Block {
    pub(super) fn from_start(block: &Value) -> Block {
        match block["type"].as_str() {
            Some("text") => Block::Text(block["text"].as_str().unwrap_or_default().to_string()),
            Some("tool_use") => Block::ToolUse {
                id: block["id"].as_str().unwrap_or_default().to_string(),
                name: block["name"].as_str().unwrap_or_default().to_string(),
                // A streamed block starts with `input: {}` and gets its JSON in deltas.
                input: match block.get("input") {
                    Some(Value::Object(o)) if !o.is_empty() => Value::Object(o.clone()).to_string(),
                    _ => String::new(),
                },
            },
            Some("thinking" | "redacted_thinking") => Block::Thinking(block.clone()),
            _ => Block::Other,
        }
    }
}

/// `stop_reason` in OpenAI's words, which the rest of baton reads: a cut answer is
/// `length` whichever cap cut it.
pub(super) fn finish_reason(stop_reason: &str) -> String {
    match stop_reason {
        "end_turn" | "stop_sequence" => "stop",
        "tool_use" => "tool_calls",
        "max_tokens" | "model_context_window_exceeded" => "length",
        "refusal" => "content_filter",
        other => other,
    }
    .to_string()
}

/// The assembled answer.
pub(super) fn response(
    blocks: Vec<Block>,
    stop_reason: Option<&str>,
    usage: Option<&Value>,
    names: &ToolNames,
) -> Result<ChatResponse, LlmError> {
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    let mut thinking = Vec::new();
    for block in blocks {
        match block {
            Block::Text(t) => text.push_str(&t),
            Block::ToolUse { id, name, input } => {
                if name.is_empty() {
                    return Err(LlmError::BadResponse(format!(
                        "tool_use block {} has no name",
                        tool_calls.len()
                    )));
                }
                let id = if id.is_empty() {
                    format!("toolu_{}", tool_calls.len())
                } else {
                    id
                };
                let arguments = if input.trim().is_empty() {
                    "{}".to_string()
                } else {
                    input
                };
                tool_calls.push(ToolCall {
                    id,
                    name: names.from_wire(&name).to_string(),
                    arguments,
                });
            }
            Block::Thinking(b) => thinking.push(b),
            Block::Other => {}
        }
    }
    let mut extra = Map::new();
    if !thinking.is_empty() {
        extra.insert(THINKING_BLOCKS.into(), Value::Array(thinking));
    }
    let (usage, usage_faults) = wire::checked_usage(usage);
    Ok(ChatResponse {
        message: Message {
            role: Role::Assistant,
            content: Some(text),
            tool_calls,
            tool_call_id: None,
            extra,
        },
        finish_reason: stop_reason.map(finish_reason),
        usage,
        usage_faults,
    })
}

/// Decodes a whole (not streamed) answer.
pub fn parse_response(body: &[u8], names: &ToolNames) -> Result<ChatResponse, LlmError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| LlmError::BadResponse(format!("not JSON ({e})")))?;
    if v["type"] == "error" {
        return Err(error_event(&v));
    }
    let content = v
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| LlmError::BadResponse("the answer has no content list".into()))?;
    let blocks = content.iter().map(Block::from_start).collect();
    response(
        blocks,
        v["stop_reason"].as_str(),
        v.get("usage").filter(|u| u.is_object()),
        names,
    )
}

/// An `error` event or body as an error the retry loop understands: overloaded as HTTP 529,
/// a rate limit as 429, an internal error as 500 (all retried); anything else a bad answer.
pub(super) fn error_event(v: &Value) -> LlmError {
    let message = wire::error_message(v.to_string().as_bytes());
    match v.pointer("/error/type").and_then(Value::as_str) {
        Some("overloaded_error") => LlmError::Http {
            status: 529,
            message,
        },
        Some("rate_limit_error") => LlmError::RateLimited {
            message,
            retry_after: None,
        },
        Some("api_error") => LlmError::Http {
            status: 500,
            message,
        },
        _ => LlmError::BadResponse(format!("the provider reported an error: {message}")),
    }
}
