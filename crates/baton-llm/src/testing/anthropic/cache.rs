//! Anthropic's prompt cache as a played provider keeps it: a prefix is cached only up to a
//! block marked `cache_control`; a request reads the longest prefix written before that ends at
//! one of its breakpoints or at most [`LOOKBACK`] blocks before one; it writes the prefix up to
//! its last breakpoint. Usage is reported as the API does: `input_tokens` (neither read nor
//! written), `cache_read_input_tokens`, `cache_creation_input_tokens`.

use crate::testing::caching::tokens;
use serde_json::Value;
use std::collections::HashSet;

/// How many blocks before a breakpoint the API looks for an earlier cache entry.
pub const LOOKBACK: usize = 20;
/// The shortest prefix cached, in tokens (Anthropic's minimum for Sonnet and Opus).
pub const MIN_CACHED_TOKENS: u64 = 1_024;

/// What one request read and wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheUse {
    pub input_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub cache_creation_input_tokens: u64,
}

impl CacheUse {
    pub fn prompt_tokens(&self) -> u64 {
        self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens
    }
}

/// The prefixes written so far (their bytes).
#[derive(Debug, Default)]
pub struct BreakpointCache {
    written: HashSet<Vec<u8>>,
}

/// The prompt of a body as a sequence of blocks in the API's order (tools, system, messages),
/// each rendered without its `cache_control`, and which of them carry a breakpoint.
fn blocks(body: &Value) -> Vec<(Vec<u8>, bool)> {
    let mut out = Vec::new();
    let mut push = |prefix: &str, block: &Value| {
        let mut b = block.clone();
        let marked = b
            .as_object_mut()
            .is_some_and(|o| o.remove("cache_control").is_some());
        out.push((format!("{prefix}{b}\n").into_bytes(), marked));
    };
    for t in body["tools"].as_array().into_iter().flatten() {
        push("tool:", t);
    }
    match &body["system"] {
        Value::String(s) => push("system:", &serde_json::json!({"type": "text", "text": s})),
        Value::Array(a) => a.iter().for_each(|b| push("system:", b)),
        _ => {}
    }
    for m in body["messages"].as_array().into_iter().flatten() {
        let role = m["role"].as_str().unwrap_or_default();
        match &m["content"] {
            Value::String(s) => push(role, &serde_json::json!({"type": "text", "text": s})),
            Value::Array(a) => a.iter().for_each(|b| push(role, b)),
            _ => {}
        }
    }
    out
}

impl BreakpointCache {
    /// Serves `body`: what it reads and writes, remembered for the next request.
    pub fn serve(&mut self, body: &Value) -> CacheUse {
        let blocks = blocks(body);
        let mut prefixes: Vec<Vec<u8>> = Vec::with_capacity(blocks.len());
        let mut acc = Vec::new();
        for (bytes, _) in &blocks {
            acc.extend_from_slice(bytes);
            prefixes.push(acc.clone());
        }
        let total = tokens(acc.len());
        let breakpoints: Vec<usize> = blocks
            .iter()
            .enumerate()
            .filter(|(_, (_, marked))| *marked)
            .map(|(i, _)| i)
            .collect();
        let cacheable = |i: usize| tokens(prefixes[i].len()) >= MIN_CACHED_TOKENS;
        let mut read = 0;
        for &bp in &breakpoints {
            let hit = (bp.saturating_sub(LOOKBACK - 1)..=bp)
                .rev()
                .find(|&j| cacheable(j) && self.written.contains(&prefixes[j]));
            if let Some(j) = hit {
                read = read.max(tokens(prefixes[j].len()));
            }
        }
        let mut written_to = read;
        for &bp in &breakpoints {
            if cacheable(bp) {
                written_to = written_to.max(tokens(prefixes[bp].len()));
                self.written.insert(prefixes[bp].clone());
            }
        }
        let write = written_to - read;
        CacheUse {
            input_tokens: total - read - write,
            cache_read_input_tokens: read,
            cache_creation_input_tokens: write,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(turns: usize, marked: &[usize]) -> Value {
        let messages: Vec<Value> = (0..turns)
            .map(|i| {
                let mut block =
                    json!({"type": "text", "text": format!("{i}:{}", "x".repeat(2_000))});
                if marked.contains(&i) {
                    block["cache_control"] = json!({"type": "ephemeral"});
                }
                json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": [block]})
            })
            .collect();
        json!({"messages": messages})
    }

    #[test]
    fn a_request_reads_what_an_earlier_one_wrote_at_a_breakpoint() {
        let mut cache = BreakpointCache::default();
        let first = cache.serve(&body(3, &[2]));
        assert_eq!(first.cache_read_input_tokens, 0);
        assert!(first.cache_creation_input_tokens > 1_000, "{first:?}");
        // The next request extends it: reads the old end (within the lookback), writes the rest.
        let second = cache.serve(&body(5, &[4]));
        assert_eq!(second.cache_read_input_tokens, first.prompt_tokens());
        assert_eq!(
            second.cache_read_input_tokens + second.cache_creation_input_tokens,
            second.prompt_tokens() - second.input_tokens
        );
        assert!(second.cache_creation_input_tokens > 0);
        // Without breakpoints nothing is read or written.
        let none = cache.serve(&body(5, &[]));
        assert_eq!(
            (
                none.cache_read_input_tokens,
                none.cache_creation_input_tokens
            ),
            (0, 0)
        );
        // A short prefix is not cached.
        let mut short = BreakpointCache::default();
        let tiny = json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}]});
        short.serve(&tiny);
        assert_eq!(short.serve(&tiny).cache_read_input_tokens, 0);
    }
}
