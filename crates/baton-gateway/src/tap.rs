//! Reads an answer as it passes through, without changing it: the usage the upstream reports
//! and baton's own count of the answer's text. Bounded: an event (or a JSON answer) larger
//! than the limit is passed on unread.

use crate::wire::Wire;
use serde_json::{Map, Value};

/// The keys whose string values are the answer's text (message text, thinking, tool
/// arguments, a refusal) in any of the three APIs' answers and deltas.
const TEXT_KEYS: &[&str] = &[
    "text",
    "thinking",
    "partial_json",
    "arguments",
    "content",
    "reasoning_content",
    "reasoning",
    "refusal",
];

/// What a tap read from one answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Read {
    pub reported: Option<baton_llm::Usage>,
    pub counted_completion: u64,
}

/// Text counted piece by piece, estimated once at the end (a per-piece rounding would count
/// a thousand one-letter deltas as a thousand tokens).
#[derive(Debug, Default)]
struct Counter {
    ascii: u64,
    other: u64,
}

impl Counter {
    fn add(&mut self, s: &str) {
        let ascii = s.bytes().filter(u8::is_ascii).count() as u64;
        self.ascii = self.ascii.saturating_add(ascii);
        self.other = self
            .other
            .saturating_add(s.chars().filter(|c| !c.is_ascii()).count() as u64);
    }

    fn tokens(&self) -> u64 {
        self.ascii.div_ceil(4).saturating_add(self.other)
    }

    /// The text of an answer (or a delta) `v`, wherever it sits.
    fn add_answer(&mut self, v: &Value) {
        let mut stack = vec![v];
        while let Some(v) = stack.pop() {
            match v {
                Value::Array(items) => stack.extend(items),
                Value::Object(map) => {
                    for (k, v) in map {
                        match v {
                            Value::String(s) if TEXT_KEYS.contains(&k.as_str()) => self.add(s),
                            // Anthropic's tool_use input, whole in a non-streamed answer.
                            Value::Object(_) if k == "input" => self.add(&v.to_string()),
                            Value::Array(_) | Value::Object(_) => stack.push(v),
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// A tap on one answer.
#[derive(Debug)]
pub struct Tap {
    wire: Wire,
    stream: bool,
    max_event: usize,
    /// The line being read (server-sent events).
    line: Vec<u8>,
    /// The `data:` of the event being read.
    data: String,
    /// The current line or event is over the limit: skipped to its end.
    skip_line: bool,
    skip_event: bool,
    /// Anthropic's usage, from `message_start` then updated by `message_delta`.
    anthropic_usage: Map<String, Value>,
    usage: Option<Value>,
    counter: Counter,
    /// A JSON answer, while under the limit.
    whole: Vec<u8>,
    whole_over: bool,
}

impl Tap {
    /// A tap on an answer of `wire`; `stream` when it is server-sent events.
    pub fn new(wire: Wire, stream: bool, max_event: usize) -> Tap {
        Tap {
            wire,
            stream,
            max_event,
            line: Vec::new(),
            data: String::new(),
            skip_line: false,
            skip_event: false,
            anthropic_usage: Map::new(),
            usage: None,
            counter: Counter::default(),
            whole: Vec::new(),
            whole_over: false,
        }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        if !self.stream {
            if !self.whole_over && self.whole.len() + chunk.len() <= self.max_event {
                self.whole.extend_from_slice(chunk);
            } else {
                self.whole_over = true;
                self.whole = Vec::new();
            }
            return;
        }
        let mut rest = chunk;
        while !rest.is_empty() {
            match rest.iter().position(|b| *b == b'\n') {
                Some(i) => {
                    self.take(&rest[..i]);
                    self.end_line();
                    rest = &rest[i + 1..];
                }
                None => {
                    self.take(rest);
                    break;
                }
            }
        }
    }

    fn take(&mut self, bytes: &[u8]) {
        if self.skip_line {
            return;
        }
        if self.line.len() + bytes.len() > self.max_event {
            self.skip_line = true;
            self.skip_event = true;
            self.line = Vec::new();
        } else {
            self.line.extend_from_slice(bytes);
        }
    }

    fn end_line(&mut self) {
        let line = std::mem::take(&mut self.line);
        let skipped = std::mem::replace(&mut self.skip_line, false);
        let line = line.strip_suffix(b"\r").unwrap_or(&line);
        if skipped {
            return;
        }
        if line.is_empty() {
            let data = std::mem::take(&mut self.data);
            if !std::mem::replace(&mut self.skip_event, false) && !data.is_empty() {
                self.event(&data);
            }
            return;
        }
        if self.skip_event {
            return;
        }
        if let Some(payload) = line.strip_prefix(b"data:") {
            let payload = payload.strip_prefix(b" ").unwrap_or(payload);
            if self.data.len() + payload.len() + 1 > self.max_event {
                self.skip_event = true;
                self.data.clear();
                return;
            }
            if !self.data.is_empty() {
                self.data.push('\n');
            }
            self.data.push_str(&String::from_utf8_lossy(payload));
        }
    }

    fn event(&mut self, data: &str) {
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            // `[DONE]`, or an event that is not JSON: nothing to read.
            return;
        };
        let kind = v.get("type").and_then(Value::as_str).unwrap_or_default();
        match self.wire {
            Wire::AnthropicMessages => {
                let usage = match kind {
                    "message_start" => v.pointer("/message/usage"),
                    "message_delta" => v.get("usage"),
                    _ => None,
                };
                if let Some(Value::Object(u)) = usage {
                    for (k, x) in u {
                        self.anthropic_usage.insert(k.clone(), x.clone());
                    }
                }
                if kind == "content_block_delta"
                    && let Some(delta) = v.get("delta")
                {
                    self.counter.add_answer(delta);
                }
            }
            Wire::OpenAiResponses => {
                if matches!(
                    kind,
                    "response.completed" | "response.incomplete" | "response.failed"
                ) && let Some(u) = v.pointer("/response/usage")
                {
                    self.usage = Some(u.clone());
                }
                if kind.ends_with(".delta")
                    && let Some(Value::String(d)) = v.get("delta")
                {
                    self.counter.add(d);
                }
            }
            Wire::ChatCompletions => {
                if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
                    self.usage = Some(u.clone());
                }
                for choice in v
                    .get("choices")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if let Some(delta) = choice.get("delta") {
                        self.counter.add_answer(delta);
                    }
                }
            }
        }
    }

    /// What the answer reported and held.
    pub fn finish(mut self) -> Read {
        if self.stream {
            // An event the stream ended without a blank line after.
            if !self.line.is_empty() {
                self.end_line();
            }
            self.end_line();
        } else if !self.whole_over
            && let Ok(v) = serde_json::from_slice::<Value>(&self.whole)
        {
            self.usage = v.get("usage").filter(|u| !u.is_null()).cloned();
            let answer = match self.wire {
                Wire::AnthropicMessages => v.get("content"),
                Wire::OpenAiResponses => v.get("output"),
                Wire::ChatCompletions => v.get("choices"),
            };
            if let Some(answer) = answer {
                self.counter.add_answer(answer);
            }
        }
        let usage = if self.wire == Wire::AnthropicMessages && self.stream {
            (!self.anthropic_usage.is_empty()).then(|| Value::Object(self.anthropic_usage))
        } else {
            self.usage
        };
        Read {
            reported: baton_llm::wire::checked_usage(usage.as_ref()).0,
            counted_completion: self.counter.tokens(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(wire: Wire, stream: bool, body: &str, piece: usize) -> Read {
        let mut tap = Tap::new(wire, stream, 1 << 20);
        for chunk in body.as_bytes().chunks(piece) {
            tap.push(chunk);
        }
        tap.finish()
    }

    fn sse(events: &[Value]) -> String {
        events
            .iter()
            .map(|e| format!("event: x\r\ndata: {e}\r\n\r\n"))
            .collect()
    }

    #[test]
    fn anthropic_usage_is_the_start_updated_by_the_delta_whatever_the_chunking() {
        let body = sse(&[
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 10, "cache_read_input_tokens": 90, "cache_creation_input_tokens": 5, "output_tokens": 1}}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "abcdefgh"}}),
            json!({"type": "message_delta", "usage": {"output_tokens": 42}}),
        ]);
        for piece in [1, 7, body.len()] {
            let r = read(Wire::AnthropicMessages, true, &body, piece);
            let u = r.reported.unwrap();
            assert_eq!(
                (
                    u.prompt_tokens,
                    u.cached_prompt_tokens,
                    u.cache_write_tokens,
                    u.completion_tokens
                ),
                (105, 90, 5, 42)
            );
            assert_eq!(r.counted_completion, 2);
        }
    }

    #[test]
    fn responses_usage_comes_from_the_completed_event() {
        let body = sse(&[
            json!({"type": "response.output_text.delta", "delta": "abcd"}),
            json!({"type": "response.function_call_arguments.delta", "delta": "{\"a\":1}"}),
            json!({"type": "response.completed", "response": {"usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 60}, "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 8}, "total_tokens": 120}}}),
        ]);
        let r = read(Wire::OpenAiResponses, true, &body, 5);
        let u = r.reported.unwrap();
        assert_eq!(
            (
                u.prompt_tokens,
                u.cached_prompt_tokens,
                u.completion_tokens,
                u.reasoning_tokens
            ),
            (100, 60, 20, 8)
        );
        assert_eq!(r.counted_completion, 3);
    }

    #[test]
    fn chat_without_usage_is_counted_from_the_deltas() {
        let body = format!(
            "{}data: [DONE]\n\n",
            sse(&[
                json!({"choices": [{"delta": {"content": "abcdabcd"}}]}),
                json!({"choices": [{"delta": {"tool_calls": [{"function": {"arguments": "{\"p\":1}"}}]}}]}),
            ])
        );
        let r = read(Wire::ChatCompletions, true, &body, 3);
        assert_eq!(r.reported, None);
        assert_eq!(r.counted_completion, 4);
    }

    #[test]
    fn non_streamed_answers_are_read_whole() {
        let body = json!({"content": [{"type": "text", "text": "abcd"}, {"type": "tool_use", "id": "t", "name": "n", "input": {"k": "v"}}],
            "usage": {"input_tokens": 3, "output_tokens": 4}})
        .to_string();
        let r = read(Wire::AnthropicMessages, false, &body, 2);
        assert_eq!(r.reported.unwrap().completion_tokens, 4);
        assert_eq!(r.counted_completion, 1 + 3);
    }

    #[test]
    fn garbage_usage_is_left_out_and_an_oversize_event_is_skipped() {
        let body = sse(&[
            json!({"type": "message_start", "message": {"usage": {"input_tokens": -5, "cache_read_input_tokens": "many", "output_tokens": 1e300}}}),
            json!({"type": "message_delta", "usage": {"output_tokens": u64::MAX}}),
        ]);
        let r = read(Wire::AnthropicMessages, true, &body, 4);
        let u = r.reported.unwrap();
        assert_eq!((u.prompt_tokens, u.completion_tokens), (0, 0));
        let mut tap = Tap::new(Wire::ChatCompletions, true, 64);
        tap.push(format!("data: {}\n\n", "x".repeat(1000)).as_bytes());
        tap.push(b"data: {\"usage\": {\"prompt_tokens\": 3, \"completion_tokens\": 2}}\n\n");
        assert_eq!(tap.finish().reported.unwrap().prompt_tokens, 3);
    }
}
