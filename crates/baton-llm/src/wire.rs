//! The OpenAI Chat Completions wire format: request bodies, and lenient decoding of answers
//! (whole or streamed) from providers that are only "compatible".

use crate::error::LlmError;
use crate::names::ToolNames;
use crate::types::{ChatRequest, ChatResponse, Message, Role, ToolCall, Usage};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// Provider fields of an assistant message that must be sent back on the next turn.
const KEPT_EXTRAS: [&str; 2] = ["reasoning_content", "reasoning"];

pub fn request_body(model: &str, req: &ChatRequest, names: &ToolNames, stream: bool) -> Value {
    let messages: Vec<Value> = req
        .messages
        .iter()
        .map(|m| message_json(m, names))
        .collect();
    let mut body = json!({"model": model, "messages": messages, "stream": stream});
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": names.to_wire(&t.name), "description": t.description, "parameters": t.parameters}})
            })
            .collect();
        body["tools"] = Value::Array(tools);
        body["tool_choice"] = json!("auto");
    }
    if stream {
        body["stream_options"] = json!({"include_usage": true});
    }
    if let Some(t) = req.options.temperature {
        body["temperature"] = json!(t);
    }
    if let Some(m) = req.options.max_tokens {
        body["max_tokens"] = json!(m);
    }
    body
}

fn message_json(m: &Message, names: &ToolNames) -> Value {
    let role = m.role.as_str();
    let mut out = Map::new();
    out.insert("role".into(), json!(role));
    match m.role {
        Role::Assistant if !m.tool_calls.is_empty() => {
            out.insert(
                "content".into(),
                m.content.clone().map_or(Value::Null, Value::String),
            );
            let calls: Vec<Value> = m
                .tool_calls
                .iter()
                .map(|c| json!({"id": c.id, "type": "function", "function": {"name": names.to_wire(&c.name), "arguments": c.arguments}}))
                .collect();
            out.insert("tool_calls".into(), Value::Array(calls));
        }
        _ => {
            out.insert("content".into(), json!(m.text()));
        }
    }
    if let Some(id) = &m.tool_call_id {
        out.insert("tool_call_id".into(), json!(id));
    }
    for (k, v) in &m.extra {
        out.insert(k.clone(), v.clone());
    }
    Value::Object(out)
}

/// `arguments` arrives as a JSON string from most providers and as an object from some.
fn arguments_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// Content may be a string, null, or a list of parts (`[{type: "text", text}]`).
fn content_text(v: Option<&Value>) -> Option<String> {
    match v {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Array(parts)) => {
            let text: String = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            Some(text)
        }
        _ => None,
    }
}

fn finish_reason(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

fn usage(v: Option<&Value>) -> Option<Usage> {
    let u = v?.as_object()?;
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let (p, c) = (n("prompt_tokens"), n("completion_tokens"));
    Some(Usage {
        prompt_tokens: p,
        completion_tokens: c,
        total_tokens: u
            .get("total_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(p + c),
    })
}

fn provider_message(body: &Value) -> Option<String> {
    body.pointer("/error/message")
        .and_then(Value::as_str)
        .or_else(|| body.get("error").and_then(Value::as_str))
        .or_else(|| body.get("message").and_then(Value::as_str))
        .map(str::to_owned)
}

/// The provider's error text from an error body, for `LLM_HTTP_ERROR`.
pub fn error_message(body: &[u8]) -> String {
    match serde_json::from_slice::<Value>(body) {
        Ok(v) => provider_message(&v).unwrap_or_else(|| truncate(&v.to_string())),
        Err(_) => truncate(&String::from_utf8_lossy(body)),
    }
}

fn truncate(s: &str) -> String {
    let s = s.trim();
    if s.len() <= 300 {
        return s.to_string();
    }
    let mut cut = 300;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &s[..cut])
}

/// Decodes a non-streamed answer.
pub fn parse_response(body: &[u8], names: &ToolNames) -> Result<ChatResponse, LlmError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| LlmError::BadResponse(format!("not JSON ({e})")))?;
    if let Some(msg) = v.get("error").and_then(|_| provider_message(&v)) {
        return Err(LlmError::BadResponse(format!(
            "the provider reported an error: {msg}"
        )));
    }
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| LlmError::BadResponse("no choices in the answer".into()))?;
    let m = choice
        .get("message")
        .ok_or_else(|| LlmError::BadResponse("the choice has no message".into()))?;
    let mut tool_calls = Vec::new();
    for (i, call) in m
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let f = call.get("function").unwrap_or(call);
        let Some(name) = f
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        else {
            return Err(LlmError::BadResponse(format!("tool call {i} has no name")));
        };
        tool_calls.push(ToolCall {
            id: call
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .unwrap_or_else(|| format!("call_{i}")),
            name: names.from_wire(name).to_string(),
            arguments: arguments_text(f.get("arguments")),
        });
    }
    let mut extra = Map::new();
    for k in KEPT_EXTRAS {
        if let Some(x) = m.get(k).filter(|x| !x.is_null()) {
            extra.insert(k.to_string(), x.clone());
        }
    }
    Ok(ChatResponse {
        message: Message {
            role: Role::Assistant,
            content: content_text(m.get("content")),
            tool_calls,
            tool_call_id: None,
            extra,
        },
        finish_reason: finish_reason(choice.get("finish_reason")),
        usage: usage(v.get("usage")),
    })
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Accumulates streamed chunks into one answer. Tool calls are merged by `index`; argument
/// fragments are concatenated in arrival order.
#[derive(Debug, Default)]
pub struct StreamAccumulator {
    content: String,
    saw_content: bool,
    extras: Map<String, Value>,
    calls: BTreeMap<usize, PartialCall>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    pub done: bool,
}

/// What one chunk added, for live display.
#[derive(Debug, Default, PartialEq)]
pub struct ChunkDelta {
    pub text: Option<String>,
    pub tool_started: Vec<(usize, String)>,
}

impl StreamAccumulator {
    /// True once anything of the answer arrived (text, reasoning or a tool call).
    pub fn has_content(&self) -> bool {
        self.saw_content || !self.calls.is_empty() || !self.extras.is_empty()
    }

    /// Feeds one SSE `data:` payload.
    pub fn push(&mut self, data: &str, names: &ToolNames) -> Result<ChunkDelta, LlmError> {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(ChunkDelta::default());
        }
        if data.is_empty() {
            return Ok(ChunkDelta::default());
        }
        let v: Value = serde_json::from_str(data)
            .map_err(|e| LlmError::BadResponse(format!("a stream chunk is not JSON ({e})")))?;
        if v.get("error").is_some() {
            return Err(LlmError::BadResponse(format!(
                "the provider reported an error mid-stream: {}",
                provider_message(&v).unwrap_or_else(|| v.to_string())
            )));
        }
        if let Some(u) = usage(v.get("usage")) {
            self.usage = Some(u);
        }
        let mut delta_out = ChunkDelta::default();
        let Some(choice) = v
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(delta_out);
        };
        if let Some(r) = finish_reason(choice.get("finish_reason")) {
            self.finish_reason = Some(r);
        }
        let Some(delta) = choice.get("delta").or_else(|| choice.get("message")) else {
            return Ok(delta_out);
        };
        if let Some(text) = content_text(delta.get("content")).filter(|t| !t.is_empty()) {
            self.content.push_str(&text);
            self.saw_content = true;
            delta_out.text = Some(text);
        }
        for k in KEPT_EXTRAS {
            if let Some(Value::String(s)) = delta.get(k) {
                let slot = self
                    .extras
                    .entry(k.to_string())
                    .or_insert_with(|| Value::String(String::new()));
                if let Value::String(acc) = slot {
                    acc.push_str(s);
                }
            }
        }
        for (pos, call) in delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let index = call
                .get("index")
                .and_then(Value::as_u64)
                .map(|i| i as usize)
                .unwrap_or(pos);
            let entry = self.calls.entry(index).or_default();
            if let Some(id) = call
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                entry.id = id.to_string();
            }
            let f = call.get("function").unwrap_or(call);
            if let Some(name) = f
                .get("name")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                if entry.name.is_empty() {
                    delta_out
                        .tool_started
                        .push((index, names.from_wire(name).to_string()));
                }
                entry.name.push_str(name);
            }
            match f.get("arguments") {
                Some(Value::String(s)) => entry.arguments.push_str(s),
                Some(Value::Null) | None => {}
                Some(other) => entry.arguments.push_str(&other.to_string()),
            }
        }
        Ok(delta_out)
    }

    pub fn finish(self, names: &ToolNames) -> Result<ChatResponse, LlmError> {
        let mut tool_calls = Vec::with_capacity(self.calls.len());
        for (index, call) in self.calls {
            if call.name.is_empty() {
                return Err(LlmError::BadResponse(format!(
                    "streamed tool call {index} has no name"
                )));
            }
            tool_calls.push(ToolCall {
                id: if call.id.is_empty() {
                    format!("call_{index}")
                } else {
                    call.id
                },
                name: names.from_wire(&call.name).to_string(),
                arguments: call.arguments,
            });
        }
        Ok(ChatResponse {
            message: Message {
                role: Role::Assistant,
                content: (self.saw_content || tool_calls.is_empty()).then_some(self.content),
                tool_calls,
                tool_call_id: None,
                extra: self.extras,
            },
            finish_reason: self.finish_reason,
            usage: self.usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenient_decoding() {
        let names = ToolNames::new(["fs.read"]);
        let body = br#"{"choices":[{"message":{"role":"assistant","content":null,"reasoning_content":"think",
            "tool_calls":[{"id":"","function":{"name":"fs_read","arguments":{"path":"@project/a.md"}}}]},
            "finish_reason":""}],"usage":{"prompt_tokens":3,"completion_tokens":2},"unknown":1}"#;
        let r = parse_response(body, &names).unwrap();
        assert_eq!(r.finish_reason, None);
        assert_eq!(r.message.tool_calls[0].name, "fs.read");
        assert_eq!(r.message.tool_calls[0].id, "call_0");
        assert_eq!(
            r.message.tool_calls[0].arguments,
            r#"{"path":"@project/a.md"}"#
        );
        assert_eq!(r.message.extra["reasoning_content"], "think");
        assert_eq!(r.usage.unwrap().total_tokens, 5);
        assert!(parse_response(b"{}", &names).is_err());
        assert!(parse_response(b"<html>", &names).is_err());
    }

    #[test]
    fn stream_merges_tool_calls_by_index() {
        let names = ToolNames::new(["fs.read", "fs.write"]);
        let mut acc = StreamAccumulator::default();
        for chunk in [
            r#"{"choices":[{"delta":{"role":"assistant","content":"Hel"}}]}"#,
            r#"{"choices":[{"delta":{"content":"lo"}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"fs_write","arguments":"{\"pa"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"fs_read","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"th\":1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}"#,
            "[DONE]",
        ] {
            acc.push(chunk, &names).unwrap();
        }
        assert!(acc.done);
        let r = acc.finish(&names).unwrap();
        assert_eq!(r.message.content.as_deref(), Some("Hello"));
        assert_eq!(
            r.message.tool_calls[0],
            ToolCall {
                id: "a".into(),
                name: "fs.read".into(),
                arguments: "{}".into()
            }
        );
        assert_eq!(
            r.message.tool_calls[1],
            ToolCall {
                id: "b".into(),
                name: "fs.write".into(),
                arguments: "{\"path\":1}".into()
            }
        );
        assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(r.usage.unwrap().total_tokens, 15);
    }
}
