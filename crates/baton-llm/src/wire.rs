//! The OpenAI Chat Completions wire format: request bodies, and lenient decoding of answers
//! (whole or streamed) from providers that are only "compatible".

use crate::error::LlmError;
use crate::names::ToolNames;
use crate::types::{ChatRequest, ChatResponse, Message, Role, ToolCall, Usage};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// Provider fields of an assistant message that must be sent back on the next turn.
const KEPT_EXTRAS: [&str; 2] = ["reasoning_content", "reasoning"];

/// The completion cap sent when nothing else is configured.
pub const DEFAULT_MAX_COMPLETION_TOKENS: u32 = 8_192;

/// Which body field carries the completion cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapField {
    /// `max_tokens`: what most OpenAI-compatible servers read.
    MaxTokens,
    /// `max_completion_tokens`: OpenAI's current name, the only one its reasoning models take.
    MaxCompletionTokens,
}

impl CapField {
    pub fn as_str(self) -> &'static str {
        match self {
            CapField::MaxTokens => "max_tokens",
            CapField::MaxCompletionTokens => "max_completion_tokens",
        }
    }
}

/// How a request body is written beyond the request itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyOptions {
    pub cap_field: CapField,
    /// The cap sent when the request names none: every request carries one.
    pub default_cap: u32,
    /// Send the request's `cache_key` as `prompt_cache_key`.
    pub prompt_cache_key: bool,
}

impl Default for BodyOptions {
    fn default() -> Self {
        BodyOptions {
            cap_field: CapField::MaxTokens,
            default_cap: DEFAULT_MAX_COMPLETION_TOKENS,
            prompt_cache_key: false,
        }
    }
}

pub fn request_body(
    model: &str,
    req: &ChatRequest,
    names: &ToolNames,
    stream: bool,
    options: &BodyOptions,
) -> Value {
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
    let cap = req.options.max_tokens.unwrap_or(options.default_cap);
    body[options.cap_field.as_str()] = json!(cap);
    if options.prompt_cache_key
        && let Some(key) = &req.options.cache_key
    {
        body["prompt_cache_key"] = json!(key);
    }
    body
}

/// The prompt of a request body as a caching provider sees it: the tool definitions, then the
/// messages, each as its JSON. Two requests share a cached prefix as far as these bytes agree;
/// the other fields (model, stream, cap, cache key) are not part of the prompt.
pub fn prompt_bytes(body: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    for part in [body.get("tools"), body.get("messages")] {
        for item in part.and_then(Value::as_array).into_iter().flatten() {
            out.extend_from_slice(item.to_string().as_bytes());
            out.push(b'\n');
        }
    }
    out
}

/// [`prompt_bytes`] of the body `request` would be sent as (tool names as on the wire).
pub fn request_prompt_bytes(request: &ChatRequest) -> Vec<u8> {
    let names = ToolNames::new(request.tools.iter().map(|t| t.name.as_str()));
    prompt_bytes(&request_body(
        "",
        request,
        &names,
        false,
        &BodyOptions::default(),
    ))
}

/// How many leading bytes `a` and `b` share.
pub fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
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

/// The largest token figure believed for one call: no model reads or writes a billion tokens
/// in one request, so a larger figure is a provider fault, not a count.
pub const MAX_PLAUSIBLE_TOKENS: u64 = 1_000_000_000;

/// The usage of an answer, whichever provider wrote it (see [`checked_usage`]); figures that
/// cannot be counts are left out.
pub fn usage(v: Option<&Value>) -> Option<Usage> {
    checked_usage(v).0
}

/// The usage of an answer, whichever provider wrote it: OpenAI's `prompt_tokens_details.
/// cached_tokens` and `completion_tokens_details.reasoning_tokens`, DeepSeek's
/// `prompt_cache_hit_tokens`/`prompt_cache_miss_tokens`, Anthropic-style `input_tokens`,
/// `output_tokens` and `cache_read_input_tokens` (where `input_tokens` leaves the cached and
/// cache-written tokens out).
///
/// Also the provider's faults: a figure that is negative, fractional, not a number or over
/// [`MAX_PLAUSIBLE_TOKENS`] is left out (so it can never lower a sum), and a `total_tokens`
/// under prompt + completion is replaced by their sum; each is described for a warning.
pub fn checked_usage(v: Option<&Value>) -> (Option<Usage>, Vec<String>) {
    let Some(u) = v.and_then(Value::as_object) else {
        return (None, Vec::new());
    };
    let faults = std::cell::RefCell::new(Vec::new());
    // A figure the provider gave, if it can be a count of tokens.
    let figure = |name: &str, x: Option<&Value>| -> Option<u64> {
        let x = x.filter(|x| !x.is_null())?;
        let n = match x {
            Value::Number(n) => n,
            other => {
                let kind = match other {
                    Value::String(_) => "a string",
                    Value::Bool(_) => "a boolean",
                    Value::Array(_) => "an array",
                    _ => "an object",
                };
                faults
                    .borrow_mut()
                    .push(format!("{name} is {kind}, not a number"));
                return None;
            }
        };
        let count = n.as_u64().or_else(|| {
            // `12.0` from a server that writes floats is still a count.
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= MAX_PLAUSIBLE_TOKENS as f64)
                .map(|f| f as u64)
        });
        match count {
            Some(c) if c <= MAX_PLAUSIBLE_TOKENS => Some(c),
            Some(c) => {
                faults
                    .borrow_mut()
                    .push(format!("{name} is {c}, more than any call can use"));
                None
            }
            None => {
                let what = if n.as_f64().is_some_and(|f| f < 0.0) {
                    "negative"
                } else if n.as_f64().is_some_and(|f| f > MAX_PLAUSIBLE_TOKENS as f64) {
                    "more than any call can use"
                } else {
                    "not a whole number"
                };
                faults.borrow_mut().push(format!("{name} is {what} ({n})"));
                None
            }
        }
    };
    let get = |k: &str| figure(k, u.get(k));
    let at = |p: &str| figure(&p[1..].replace('/', "."), v.and_then(|v| v.pointer(p)));
    let cache_read = get("cache_read_input_tokens");
    let cached_openai = at("/prompt_tokens_details/cached_tokens");
    let hit = get("prompt_cache_hit_tokens");
    let miss = get("prompt_cache_miss_tokens");
    let cached_input = at("/input_tokens_details/cached_tokens");
    // Mistral's name for the cached part of the prompt.
    let cached_mistral = get("num_cached_tokens");
    let cache_write = get("cache_creation_input_tokens");
    let cached = cached_openai
        .or(hit)
        .or(cache_read)
        .or(cached_input)
        .or(cached_mistral)
        .unwrap_or(0);
    let prompt = match get("prompt_tokens") {
        Some(p) => p,
        None => match (hit, miss) {
            (Some(hit), Some(miss)) => hit + miss,
            _ => {
                // Anthropic's shape: the uncached input, the cache read and the cache write.
                get("input_tokens").unwrap_or(0)
                    + cache_read.unwrap_or(0)
                    + cache_write.unwrap_or(0)
            }
        },
    };
    let completion = get("completion_tokens")
        .or(get("output_tokens"))
        .unwrap_or(0);
    let reasoning = at("/completion_tokens_details/reasoning_tokens")
        .or(at("/output_tokens_details/reasoning_tokens"))
        // Anthropic's name, in a thinking answer's usage.
        .or(at("/output_tokens_details/thinking_tokens"))
        .or(get("reasoning_tokens"))
        .unwrap_or(0);
    // Most providers count reasoning inside the completion; xAI counts it beside it (its total
    // is prompt + completion + reasoning). Reasoning larger than the completion, or a total
    // that holds it beside the completion, is taken as counted outside: the completion then
    // carries it, so no reasoning token is lost from the total or the cost.
    let given_total = get("total_tokens");
    let beside = reasoning > 0
        && (reasoning > completion
            || given_total
                .is_some_and(|t| t > prompt + completion && t >= prompt + completion + reasoning));
    let completion = if beside {
        completion + reasoning
    } else {
        completion
    };
    // Gemini's OpenAI-compatible endpoint names no reasoning figure, yet its total holds the
    // thinking it bills as output (66 + 6 of 100): the rest of the total is reasoning counted
    // beside the completion, or its tokens would be missing from the cost.
    let hidden = match given_total {
        Some(t) if reasoning == 0 && t > prompt + completion => t - prompt - completion,
        _ => 0,
    };
    let (completion, reasoning) = (completion + hidden, reasoning + hidden);
    let parts = prompt + completion;
    // The total is never believed under its parts: a server answering 0 spent nothing less.
    let total = match given_total {
        Some(t) if t < parts => {
            faults.borrow_mut().push(format!(
                "total_tokens is {t}, less than prompt + completion tokens ({parts})"
            ));
            parts
        }
        Some(t) => t,
        None => parts,
    };
    let usage = Usage {
        prompt_tokens: prompt,
        cached_prompt_tokens: cached.min(prompt),
        cache_write_tokens: cache_write.unwrap_or(0).min(prompt - cached.min(prompt)),
        completion_tokens: completion,
        reasoning_tokens: reasoning,
        total_tokens: total,
        cost_usd: None,
    };
    (Some(usage), faults.into_inner())
}

/// Where an answer (or a stream chunk) carries its usage: `usage`, or Groq's `x_groq.usage`
/// (its streams put the figures only there).
fn usage_of_chunk(v: &Value) -> Option<&Value> {
    v.get("usage")
        .filter(|u| !u.is_null())
        .or_else(|| v.pointer("/x_groq/usage"))
}

fn provider_message(body: &Value) -> Option<String> {
    let message = body
        .pointer("/error/message")
        .and_then(Value::as_str)
        .or_else(|| body.get("error").and_then(Value::as_str))
        .or_else(|| body.get("message").and_then(Value::as_str))
        .map(str::to_owned)?;
    // OpenRouter says only "Provider returned error"; the upstream's own reason is in
    // `error.metadata.raw` (a string, often JSON) and the upstream's name beside it.
    let raw = body.pointer("/error/metadata/raw").and_then(|r| match r {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Value::Null | Value::String(_) => None,
        other => Some(other.to_string()),
    });
    Some(match raw {
        Some(raw) => {
            let from = body
                .pointer("/error/metadata/provider_name")
                .and_then(Value::as_str)
                .map(|p| format!(" ({p})"))
                .unwrap_or_default();
            format!("{message}{from}: {}", truncate(&raw))
        }
        None => message,
    })
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
    let (usage, usage_faults) = checked_usage(usage_of_chunk(&v));
    Ok(ChatResponse {
        message: Message {
            role: Role::Assistant,
            content: content_text(m.get("content")),
            tool_calls,
            tool_call_id: None,
            extra,
        },
        finish_reason: finish_reason(choice.get("finish_reason")),
        usage,
        usage_faults,
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
    /// The faults of the chunk that gave `usage`.
    usage_faults: Vec<String>,
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
        if let (Some(u), faults) = checked_usage(usage_of_chunk(&v)) {
            self.usage = Some(u);
            self.usage_faults = faults;
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
                    entry.name.push_str(name);
                } else if entry.name != name {
                    // A name in fragments is joined; a later delta that repeats the whole name
                    // (Kimi K2 through OpenRouter repeats id and name) is the same name.
                    entry.name.push_str(name);
                }
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
            usage_faults: self.usage_faults,
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

    /// OpenRouter's error body: the upstream's reason is under `error.metadata.raw`.
    #[test]
    fn openrouters_upstream_reason_is_kept() {
        let body = br#"{"error":{"message":"Provider returned error","code":400,"metadata":{"raw":"{\"object\":\"error\",\"message\":\"max_tokens must be at least 1, got -1.\",\"type\":\"BadRequestError\",\"code\":400}","provider_name":"DeepInfra"}},"user_id":"user_1"}"#;
        let message = error_message(body);
        assert!(
            message.starts_with("Provider returned error (DeepInfra): ")
                && message.contains("max_tokens must be at least 1"),
            "{message}"
        );
        // A hostile upstream reason is bounded, whatever its type.
        let huge = json!({"error": {"message": "Provider returned error",
            "metadata": {"raw": "x".repeat(1 << 20), "provider_name": "P"}}});
        assert!(error_message(huge.to_string().as_bytes()).len() < 400);
        let object = json!({"error": {"message": "Provider returned error",
            "metadata": {"raw": {"detail": "overloaded"}}}});
        assert!(
            error_message(object.to_string().as_bytes()).ends_with(r#"{"detail":"overloaded"}"#)
        );
        // Without metadata the message is as the provider wrote it.
        assert_eq!(
            error_message(br#"{"error":{"message":"Invalid model","code":400}}"#),
            "Invalid model"
        );
    }

    /// Kimi K2 through OpenRouter: the second delta of a call repeats its id and whole name
    /// beside the next argument fragment (shape of a recorded OpenRouter stream).
    #[test]
    fn a_repeated_tool_call_name_is_the_same_name() {
        let names = ToolNames::new(["llm.version"]);
        let mut acc = StreamAccumulator::default();
        for chunk in [
            r#"{"id":"gen-1","provider":"Moonshot AI","model":"moonshotai/kimi-k2","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"index":0,"id":"functions.llm_version:0","type":"function","function":{"name":"llm_version","arguments":""}}]},"finish_reason":null}]}"#,
            r#"{"id":"gen-1","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"index":0,"id":"functions.llm_version:0","type":"function","function":{"name":"llm_version","arguments":"{}"}}]},"finish_reason":null}]}"#,
            r#"{"id":"gen-1","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":61,"completion_tokens":17,"total_tokens":78}}"#,
            "[DONE]",
        ] {
            acc.push(chunk, &names).unwrap();
        }
        let r = acc.finish(&names).unwrap();
        assert_eq!(r.message.tool_calls.len(), 1);
        assert_eq!(r.message.tool_calls[0].name, "llm.version");
        assert_eq!(r.message.tool_calls[0].arguments, "{}");
        // A name that really arrives in fragments is still joined.
        let mut acc = StreamAccumulator::default();
        for chunk in [
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"llm_","arguments":""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"version","arguments":"{}"}}]}}]}"#,
        ] {
            acc.push(chunk, &names).unwrap();
        }
        assert_eq!(
            acc.finish(&names).unwrap().message.tool_calls[0].name,
            "llm.version"
        );
    }

    /// xAI (grok-3-mini) counts reasoning beside the completion: 291 + 26 + 196 = 513.
    #[test]
    fn reasoning_counted_beside_the_completion_is_not_lost() {
        let xai = usage(Some(&json!({"prompt_tokens": 291, "completion_tokens": 26,
            "total_tokens": 513,
            "prompt_tokens_details": {"text_tokens": 291, "audio_tokens": 0, "image_tokens": 0, "cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 196, "audio_tokens": 0,
                "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
            "num_sources_used": 0})))
        .unwrap();
        assert_eq!(
            (
                xai.prompt_tokens,
                xai.completion_tokens,
                xai.reasoning_tokens,
                xai.total_tokens
            ),
            (291, 222, 196, 513)
        );
        assert_eq!(xai.prompt_tokens + xai.completion_tokens, xai.total_tokens);
        // OpenAI's accounting (reasoning inside the completion) is kept as it is.
        let openai = usage(Some(&json!({"prompt_tokens": 20, "completion_tokens": 300,
            "total_tokens": 320, "completion_tokens_details": {"reasoning_tokens": 256}})))
        .unwrap();
        assert_eq!(
            (openai.completion_tokens, openai.reasoning_tokens),
            (300, 256)
        );
    }

    /// Mistral names the cached part of the prompt `num_cached_tokens`.
    #[test]
    fn mistrals_cached_tokens_are_read() {
        let mistral = usage(Some(&json!({"prompt_tokens": 77, "total_tokens": 89,
            "completion_tokens": 12, "num_cached_tokens": 76})))
        .unwrap();
        assert_eq!(
            (mistral.prompt_tokens, mistral.cached_prompt_tokens),
            (77, 76)
        );
    }

    /// Groq's streams carry the usage only under `x_groq.usage` of the last chunk.
    #[test]
    fn groqs_usage_under_x_groq_is_read() {
        let names = ToolNames::new(["fs.read"]);
        let mut acc = StreamAccumulator::default();
        for chunk in [
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"llama-3.3-70b-versatile","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"x_groq":{"id":"req_1"}}"#,
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"x_groq":{"id":"req_1","usage":{"queue_time":0.05,"prompt_tokens":38,"prompt_time":0.002,"completion_tokens":9,"completion_time":0.007,"total_tokens":47,"total_time":0.009}}}"#,
            "[DONE]",
        ] {
            acc.push(chunk, &names).unwrap();
        }
        let r = acc.finish(&names).unwrap();
        let u = r.usage.unwrap();
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.total_tokens),
            (38, 9, 47)
        );
        assert!(r.usage_faults.is_empty(), "{:?}", r.usage_faults);
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

    #[test]
    fn every_providers_cache_and_reasoning_fields_are_read() {
        let parse = |v: Value| usage(Some(&v)).unwrap();
        let openai = parse(
            json!({"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
            "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 128}}),
        );
        assert_eq!(
            (
                openai.prompt_tokens,
                openai.cached_prompt_tokens,
                openai.reasoning_tokens,
                openai.total_tokens
            ),
            (2006, 1920, 128, 2306)
        );
        let deepseek = parse(
            json!({"prompt_tokens": 1500, "completion_tokens": 20, "total_tokens": 1520,
            "prompt_cache_hit_tokens": 1280, "prompt_cache_miss_tokens": 220}),
        );
        assert_eq!(
            (deepseek.prompt_tokens, deepseek.cached_prompt_tokens),
            (1500, 1280)
        );
        let hit_miss_only = parse(
            json!({"prompt_cache_hit_tokens": 1024, "prompt_cache_miss_tokens": 10, "completion_tokens": 5}),
        );
        assert_eq!(
            (
                hit_miss_only.prompt_tokens,
                hit_miss_only.cached_prompt_tokens,
                hit_miss_only.total_tokens
            ),
            (1034, 1024, 1039)
        );
        // A gateway in front of Anthropic: prompt_tokens is the whole prompt.
        let gateway = parse(
            json!({"prompt_tokens": 3000, "completion_tokens": 10, "cache_read_input_tokens": 2048}),
        );
        assert_eq!(
            (gateway.prompt_tokens, gateway.cached_prompt_tokens),
            (3000, 2048)
        );
        // Anthropic's own shape: input_tokens leaves the cache out.
        let anthropic = parse(json!({"input_tokens": 50, "output_tokens": 10,
            "cache_read_input_tokens": 2000, "cache_creation_input_tokens": 100}));
        assert_eq!(
            (
                anthropic.prompt_tokens,
                anthropic.cached_prompt_tokens,
                anthropic.completion_tokens,
                anthropic.total_tokens
            ),
            (2150, 2000, 10, 2160)
        );
        // Nonsense is bounded: never more cached than prompt tokens; reasoning larger than the
        // completion was counted beside it (never clamped away).
        let odd = parse(json!({"prompt_tokens": 10, "completion_tokens": 1,
            "prompt_tokens_details": {"cached_tokens": 99}, "completion_tokens_details": {"reasoning_tokens": 7}}));
        assert_eq!(
            (
                odd.cached_prompt_tokens,
                odd.reasoning_tokens,
                odd.completion_tokens,
                odd.total_tokens
            ),
            (10, 7, 8, 18)
        );
        let plain = parse(
            json!({"prompt_tokens": 3, "completion_tokens": 2, "prompt_tokens_details": null}),
        );
        assert_eq!(
            (
                plain.cached_prompt_tokens,
                plain.total_tokens,
                plain.cost_usd
            ),
            (0, 5, None)
        );
    }

    #[test]
    fn usage_figures_that_cannot_be_counts_are_left_out_and_described() {
        let check = |v: Value| checked_usage(Some(&v));
        // Negative figures are faults, never subtracted.
        let (u, faults) =
            check(json!({"prompt_tokens": -500, "completion_tokens": -20, "total_tokens": -520}));
        let u = u.unwrap();
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.total_tokens),
            (0, 0, 0)
        );
        assert_eq!(faults.len(), 3, "{faults:?}");
        assert!(
            faults[0].contains("prompt_tokens is negative"),
            "{faults:?}"
        );
        // Absurd figures are left out: no call reads or writes a billion tokens.
        let (u, faults) = check(json!({"prompt_tokens": 18446744073709551615u64,
            "completion_tokens": 1e300, "total_tokens": 5_000_000_000u64}));
        assert_eq!(u.unwrap().total_tokens, 0);
        assert_eq!(faults.len(), 3, "{faults:?}");
        assert!(
            faults.iter().all(|f| f.contains("more than any call")),
            "{faults:?}"
        );
        // A total under its parts is replaced by their sum.
        let (u, faults) =
            check(json!({"prompt_tokens": 1200, "completion_tokens": 80, "total_tokens": 0}));
        assert_eq!(u.unwrap().total_tokens, 1280);
        assert!(faults[0].contains("total_tokens is 0"), "{faults:?}");
        // Fractions, strings and nested faults.
        let (_, faults) = check(json!({"prompt_tokens": 1.5, "completion_tokens": "7",
            "prompt_tokens_details": {"cached_tokens": -1}}));
        assert_eq!(faults.len(), 3, "{faults:?}");
        assert!(
            faults
                .iter()
                .any(|f| f.contains("prompt_tokens_details.cached_tokens"))
        );
        // Honest figures (whole floats included) and zeros are not faults.
        let (u, faults) = check(json!({"prompt_tokens": 12.0, "completion_tokens": 3}));
        assert_eq!((u.unwrap().total_tokens, faults.len()), (15, 0));
        assert!(
            check(json!({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}))
                .1
                .is_empty()
        );
        assert_eq!(check(json!(null)), (None, Vec::new()));
        // The faults reach the response, streamed or not.
        let names = ToolNames::new(["fs.read"]);
        let body = br#"{"choices":[{"message":{"role":"assistant","content":"hi"}}],
            "usage":{"prompt_tokens":-3,"completion_tokens":2}}"#;
        let r = parse_response(body, &names).unwrap();
        assert_eq!(r.usage.unwrap().prompt_tokens, 0);
        assert_eq!(r.usage_faults.len(), 1);
        let mut acc = StreamAccumulator::default();
        acc.push(r#"{"choices":[{"delta":{"content":"hi"}}]}"#, &names)
            .unwrap();
        acc.push(r#"{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":-1}}"#, &names)
            .unwrap();
        let r = acc.finish(&names).unwrap();
        assert_eq!(r.usage.unwrap().total_tokens, 15);
        assert_eq!(r.usage_faults.len(), 1, "{:?}", r.usage_faults);
    }

    #[test]
    fn every_body_carries_a_completion_cap_and_the_cache_key_only_when_allowed() {
        let names = ToolNames::new(["fs.read"]);
        let mut req = ChatRequest {
            messages: vec![Message::user("hi")],
            ..ChatRequest::default()
        };
        req.options.cache_key = Some("baton-run-node".into());
        let body = request_body("m", &req, &names, false, &BodyOptions::default());
        assert_eq!(body["max_tokens"], 8192);
        assert!(body.get("prompt_cache_key").is_none());
        req.options.max_tokens = Some(100);
        let openai = BodyOptions {
            cap_field: CapField::MaxCompletionTokens,
            default_cap: 4096,
            prompt_cache_key: true,
        };
        let body = request_body("m", &req, &names, false, &openai);
        assert_eq!(body["max_completion_tokens"], 100);
        assert!(body.get("max_tokens").is_none());
        assert_eq!(body["prompt_cache_key"], "baton-run-node");
        // The prompt is tools then messages; the cap and key are not part of it.
        assert_eq!(
            prompt_bytes(&body),
            b"{\"role\":\"user\",\"content\":\"hi\"}\n"
        );
        assert_eq!(common_prefix(b"abcd", b"abxy"), 2);
    }
}
