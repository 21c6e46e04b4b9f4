//! A streamed Messages API answer: `message_start`, then per content block a start, deltas
//! and a stop, then `message_delta` (stop reason, output tokens) and `message_stop`; `ping`
//! anywhere, `error` when the provider gives up mid-way.

use super::blocks::{self, Block};
use crate::error::LlmError;
use crate::names::ToolNames;
use crate::types::ChatResponse;
use crate::wire::ChunkDelta;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Accumulates the events of one streamed answer.
#[derive(Debug, Default)]
pub struct MessageStream {
    blocks: BTreeMap<usize, Block>,
    stop_reason: Option<String>,
    /// `message_start`'s usage, updated by `message_delta`'s (its output count is the total).
    usage: Map<String, Value>,
    /// `message_stop` arrived: the answer is whole.
    pub done: bool,
}

/// The most content blocks one answer may open: a stream opening more is not an answer.
const MAX_BLOCKS: usize = 4096;

impl MessageStream {
    /// True once any of the answer arrived (text, thinking or a tool call).
    pub fn has_content(&self) -> bool {
        self.blocks.values().any(|b| match b {
            Block::Text(t) => !t.is_empty(),
            Block::ToolUse { .. } | Block::Thinking(_) => true,
            Block::Other => false,
        })
    }

    /// Feeds one SSE event's `data:` payload (its `type` says which event it is).
    pub fn push(&mut self, data: &str, names: &ToolNames) -> Result<ChunkDelta, LlmError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(ChunkDelta::default());
        }
        let v: Value = serde_json::from_str(data)
            .map_err(|e| LlmError::BadResponse(format!("a stream event is not JSON ({e})")))?;
        let mut out = ChunkDelta::default();
        match v["type"].as_str().unwrap_or_default() {
            "message_start" => {
                if let Some(Value::Object(u)) = v.pointer("/message/usage") {
                    self.usage = u.clone();
                }
            }
            "content_block_start" => {
                let index = self.index(&v)?;
                let block = Block::from_start(&v["content_block"]);
                if let Block::ToolUse { name, .. } = &block {
                    out.tool_started
                        .push((index, names.from_wire(name).to_string()));
                }
                if let Block::Text(t) = &block
                    && !t.is_empty()
                {
                    out.text = Some(t.clone());
                }
                self.blocks.insert(index, block);
            }
            "content_block_delta" => {
                let index = self.index(&v)?;
                out.text = self.apply_delta(index, &v["delta"])?;
            }
            "message_delta" => {
                if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(r.to_string());
                }
                if let Some(Value::Object(u)) = v.get("usage") {
                    for (k, x) in u {
                        if !x.is_null() {
                            self.usage.insert(k.clone(), x.clone());
                        }
                    }
                }
            }
            "message_stop" => self.done = true,
            "error" => return Err(blocks::error_event(&v)),
            // `ping`, `content_block_stop`, and event types added later.
            _ => {}
        }
        Ok(out)
    }

    fn index(&self, v: &Value) -> Result<usize, LlmError> {
        let index = v["index"]
            .as_u64()
            .ok_or_else(|| LlmError::BadResponse(format!("a {} event has no index", v["type"])))?;
        let index = usize::try_from(index).unwrap_or(usize::MAX);
        if index >= MAX_BLOCKS {
            return Err(LlmError::BadResponse(format!(
                "a stream event names content block {index}; at most {MAX_BLOCKS} are read"
            )));
        }
        Ok(index)
    }

    /// Applies a delta; returns text to show live.
    fn apply_delta(&mut self, index: usize, delta: &Value) -> Result<Option<String>, LlmError> {
        let kind = delta["type"].as_str().unwrap_or_default();
        let piece = |field: &str| delta[field].as_str().unwrap_or_default().to_string();
        let block = self.blocks.entry(index).or_insert_with(|| match kind {
            "input_json_delta" => Block::ToolUse {
                id: String::new(),
                name: String::new(),
                input: String::new(),
            },
            "thinking_delta" | "signature_delta" => {
                Block::Thinking(serde_json::json!({"type": "thinking", "thinking": ""}))
            }
            _ => Block::Text(String::new()),
        });
        match (kind, block) {
            ("text_delta", Block::Text(t)) => {
                let p = piece("text");
                t.push_str(&p);
                return Ok(Some(p).filter(|p| !p.is_empty()));
            }
            ("input_json_delta", Block::ToolUse { input, .. }) => {
                input.push_str(&piece("partial_json"));
            }
            ("thinking_delta", Block::Thinking(b)) => append(b, "thinking", &piece("thinking")),
            ("signature_delta", Block::Thinking(b)) => {
                append(b, "signature", &piece("signature"));
            }
            // Citations and deltas of block types baton does not use.
            (_, Block::Other) | ("citations_delta", _) => {}
            (kind, _) => {
                return Err(LlmError::BadResponse(format!(
                    "a {kind} arrived for content block {index}, which is not of that kind"
                )));
            }
        }
        Ok(None)
    }

    /// The answer. A stream that ended before the answer said how it ended is a broken stream,
    /// not a short answer.
    pub fn finish(self, names: &ToolNames) -> Result<ChatResponse, LlmError> {
        if !self.done && self.stop_reason.is_none() {
            return Err(LlmError::StreamInterrupted(
                "the stream ended before message_stop".into(),
            ));
        }
        let usage = Value::Object(self.usage);
        let usage = usage.as_object().filter(|u| !u.is_empty()).map(|_| &usage);
        blocks::response(
            self.blocks.into_values().collect(),
            self.stop_reason.as_deref(),
            usage,
            names,
        )
    }
}

fn append(block: &mut Value, field: &str, piece: &str) {
    let now = block[field].as_str().unwrap_or_default().to_string();
    block[field] = Value::String(now + piece);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(events: &[&str]) -> Result<ChatResponse, LlmError> {
        let names = ToolNames::new(["fs.read"]);
        let mut s = MessageStream::default();
        for e in events {
            s.push(e, &names)?;
        }
        s.finish(&names)
    }

    /// What a hostile or broken server streams is refused with a located reason, never taken
    /// for an answer.
    #[test]
    fn a_hostile_stream_is_refused() {
        let start = r#"{"type":"message_start","message":{"usage":{"input_tokens":3}}}"#;
        let cases: [(&[&str], &str); 5] = [
            (&[start, "not json"], "not JSON"),
            (
                &[
                    start,
                    r#"{"type":"content_block_start","index":99999999,"content_block":{"type":"text","text":""}}"#,
                ],
                "at most",
            ),
            (
                &[
                    start,
                    r#"{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"}}"#,
                ],
                "no index",
            ),
            (
                &[
                    start,
                    r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
                    r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}"#,
                ],
                "not of that kind",
            ),
            (
                &[
                    start,
                    r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":""}}"#,
                    r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"}}"#,
                ],
                "has no name",
            ),
        ];
        for (events, says) in cases {
            let e = feed(events).unwrap_err().to_string();
            assert!(e.contains(says), "{e} should say {says}");
        }
        // Usage figures that cannot be counts are left out and described, not believed.
        let lying = feed(&[
            r#"{"type":"message_start","message":{"usage":{"input_tokens":-5,"cache_read_input_tokens":"many"}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"ok"}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}"#,
            r#"{"type":"message_stop"}"#,
        ])
        .unwrap();
        assert_eq!(lying.message.text(), "ok");
        assert_eq!(lying.usage.unwrap().prompt_tokens, 0);
        assert_eq!(lying.usage_faults.len(), 2, "{:?}", lying.usage_faults);
    }
}
