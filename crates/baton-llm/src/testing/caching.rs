//! A played provider prompt cache, for tests and measurements: it reports usage the way
//! OpenAI's automatic prompt caching does. A request's prompt (its tool definitions, then its
//! messages, as [`crate::wire::prompt_bytes`] renders them) is counted at four bytes a token;
//! `cached_tokens` is the number of tokens of the longest prefix it shares with any prompt
//! seen before, counted only from 1,024 tokens on and in blocks of 128.
//!
//! [`CachingProvider::answer`] puts that usage on any answer, so a played model (a handler of
//! `baton_testkit::json_server`) becomes a caching provider; [`trace_answers`] turns a recorded
//! trace into answers served in order.

use crate::trace::Trace;
use crate::wire::{common_prefix, prompt_bytes};
use serde_json::{Value, json};
use std::sync::Mutex;

/// Bytes per token of the played tokenizer.
pub const BYTES_PER_TOKEN: usize = 4;
/// The shortest prefix that is cached, in tokens.
pub const MIN_CACHED_TOKENS: u64 = 1_024;
/// Cached prefixes grow in blocks of this many tokens.
pub const BLOCK_TOKENS: u64 = 128;
/// Prompts remembered (the oldest are forgotten first).
const REMEMBERED: usize = 512;

/// Tokens of `bytes` bytes of text.
pub fn tokens(bytes: usize) -> u64 {
    bytes.div_ceil(BYTES_PER_TOKEN) as u64
}

/// The cached tokens of a prefix of `prefix_tokens` tokens seen before.
pub fn cached_tokens(prefix_tokens: u64) -> u64 {
    if prefix_tokens < MIN_CACHED_TOKENS {
        return 0;
    }
    MIN_CACHED_TOKENS + (prefix_tokens - MIN_CACHED_TOKENS) / BLOCK_TOKENS * BLOCK_TOKENS
}

/// What the cache made of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Served {
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub completion_tokens: u64,
}

/// The prompts seen so far.
#[derive(Debug, Default)]
pub struct PromptCache {
    seen: Vec<Vec<u8>>,
}

impl PromptCache {
    /// Looks `prompt` up (the tokens of the longest prefix seen before, cached as the provider
    /// would count them), then remembers it.
    pub fn serve(&mut self, prompt: Vec<u8>) -> (u64, u64) {
        let shared = self
            .seen
            .iter()
            .map(|p| common_prefix(p, &prompt))
            .max()
            .unwrap_or(0);
        // Only whole tokens of the shared prefix count.
        let prefix_tokens = (shared / BYTES_PER_TOKEN) as u64;
        let prompt_tokens = tokens(prompt.len());
        let cached = cached_tokens(prefix_tokens).min(prompt_tokens);
        if self.seen.len() >= REMEMBERED {
            self.seen.remove(0);
        }
        self.seen.push(prompt);
        (prompt_tokens, cached)
    }
}

/// A provider whose answers carry caching usage; its record of what it served.
#[derive(Debug, Default)]
pub struct CachingProvider {
    cache: Mutex<PromptCache>,
    served: Mutex<Vec<Served>>,
}

impl CachingProvider {
    pub fn new() -> CachingProvider {
        CachingProvider::default()
    }

    /// `answer` (an OpenAI chat completion) to the request `body`, with its `usage` replaced by
    /// what a caching provider reports: the prompt's tokens, the cached ones under
    /// `prompt_tokens_details.cached_tokens`, and the answer message's tokens. An error answer
    /// (no `choices`) is returned as it is, and caches nothing.
    pub fn answer(&self, body: &Value, mut answer: Value) -> Value {
        let Some(message) = answer.pointer("/choices/0/message") else {
            return answer;
        };
        let completion = tokens(message.to_string().len());
        let (prompt, cached) = match self.cache.lock() {
            Ok(mut c) => c.serve(prompt_bytes(body)),
            Err(_) => return answer,
        };
        answer["usage"] = json!({
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        });
        if let Ok(mut s) = self.served.lock() {
            s.push(Served {
                prompt_tokens: prompt,
                cached_tokens: cached,
                completion_tokens: completion,
            });
        }
        answer
    }

    /// What a caching proxy in front of the played model at `upstream` answers to `body`: the
    /// upstream's answer with this provider's usage, or an error answer when it cannot be
    /// reached.
    pub fn proxy(&self, upstream: &str, body: &Value) -> Value {
        match forward(upstream, body) {
            Ok(answer) => self.answer(body, answer),
            Err(e) => json!({"error": {"message": e.to_string()}}),
        }
    }

    /// Every request answered so far.
    pub fn served(&self) -> Vec<Served> {
        self.served.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Prompt and cached tokens of all requests so far.
    pub fn totals(&self) -> (u64, u64) {
        self.served().iter().fold((0, 0), |(p, c), s| {
            (p + s.prompt_tokens, c + s.cached_tokens)
        })
    }
}

/// Posts `body` to `{base_url}/chat/completions` of a loopback server and returns its JSON
/// answer (blocking, one connection per request): what a caching proxy in front of a played
/// model calls. Only `http://127.0.0.1:<port>/…` addresses are accepted.
pub fn forward(base_url: &str, body: &Value) -> std::io::Result<Value> {
    use std::io::{Read, Write};
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidInput, m.to_string());
    let rest = base_url
        .strip_prefix("http://127.0.0.1:")
        .ok_or_else(|| bad("only http://127.0.0.1 is forwarded to"))?;
    let (port, path) = rest.split_once('/').unwrap_or((rest, ""));
    let port: u16 = port.parse().map_err(|_| bad("no port"))?;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port))?;
    let payload = body.to_string();
    write!(
        stream,
        "POST /{path}/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{payload}",
        payload.len()
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let start = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4)
        .ok_or_else(|| bad("no HTTP answer"))?;
    serde_json::from_slice(&raw[start..]).map_err(|e| bad(&e.to_string()))
}

/// The recorded assistant answers of `trace`, in order, as OpenAI chat completions (tool names
/// as on the wire, `fs.read` → `fs_read`; arguments as recorded).
pub fn trace_answers(trace: &Trace) -> Vec<Value> {
    trace
        .dialogues()
        .map(|d| {
            let message = if d.tool_calls.is_empty() {
                json!({"role": "assistant", "content": d.content})
            } else {
                let calls: Vec<Value> = d
                    .tool_calls
                    .iter()
                    .map(|c| {
                        json!({"id": c.id, "type": "function",
                            "function": {"name": c.name.replace('.', "_"), "arguments": c.arguments}})
                    })
                    .collect();
                json!({"role": "assistant", "content": null, "tool_calls": calls})
            };
            let finish = if d.tool_calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            };
            json!({"id": "chatcmpl-trace", "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}]})
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_tokens_start_at_1024_and_grow_in_blocks_of_128() {
        assert_eq!(cached_tokens(1_023), 0);
        assert_eq!(cached_tokens(1_024), 1_024);
        assert_eq!(cached_tokens(1_151), 1_024);
        assert_eq!(cached_tokens(1_152), 1_152);
        assert_eq!(cached_tokens(5_000), 4_992);
    }

    #[test]
    fn the_longest_prefix_seen_before_is_cached() {
        let mut cache = PromptCache::default();
        let a = vec![b'a'; 8_000];
        assert_eq!(cache.serve(a.clone()), (2_000, 0));
        let mut b = a.clone();
        b.extend_from_slice(&[b'b'; 800]);
        // 2,000 shared tokens: 1,024 + 7 blocks of 128.
        assert_eq!(cache.serve(b.clone()), (2_200, 1_920));
        let mut c = b[..6_000].to_vec();
        c.extend_from_slice(&[b'c'; 100]);
        assert_eq!(cache.serve(c), (1_525, 1_408));
        assert_eq!(cache.serve(vec![b'z'; 8_000]), (2_000, 0));
    }

    #[test]
    fn answers_get_caching_usage() {
        let provider = CachingProvider::new();
        let body = json!({"messages": [{"role": "user", "content": "x".repeat(6_000)}]});
        let answer = json!({"choices": [{"message": {"role": "assistant", "content": "ok"}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1}});
        let first = provider.answer(&body, answer.clone());
        assert_eq!(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
        let second = provider.answer(&body, answer);
        let prompt = second["usage"]["prompt_tokens"].as_u64().unwrap();
        let cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap();
        assert!(
            prompt > 1_500 && cached >= prompt - 128,
            "{prompt} {cached}"
        );
        assert_eq!(provider.served().len(), 2);
        let error = json!({"error": {"message": "no"}});
        assert_eq!(provider.answer(&body, error.clone()), error);
    }
}
