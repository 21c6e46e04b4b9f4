//! Audit lines: one `tool.exec` record per call, with large text replaced by its size and hash.

use crate::host::{CallContext, ToolCall};
use baton_package::digest::sha256_hex;
use serde_json::{Map, Value, json};
use std::time::Duration;

/// Fields whose text is replaced by `{bytes, sha256}` in the audit log.
const CONTENT_KEYS: [&str; 6] = [
    "content",
    "contentPreview",
    "find",
    "replace",
    "diff",
    "planContent",
];

pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &s[..cut])
}

/// Replaces content fields (at any depth) by their size and hash.
pub fn redact(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut out = Map::with_capacity(map.len());
            for (k, v) in map {
                let replaced = match (CONTENT_KEYS.contains(&k.as_str()), v) {
                    (true, Value::String(s)) => {
                        json!({"bytes": s.len(), "sha256": sha256_hex(s.as_bytes())})
                    }
                    _ => redact(v),
                };
                out.insert(k.clone(), replaced);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(redact).collect()),
        other => other.clone(),
    }
}

pub fn line(
    ts: &str,
    run_id: &str,
    call: ToolCall<'_>,
    ctx: CallContext<'_>,
    input: &Value,
    output: &Value,
    took: Duration,
) -> Value {
    json!({
        "ts": ts,
        "kind": "tool.exec",
        "runId": run_id,
        "toolCallId": call.id,
        "toolName": call.name,
        "agentId": ctx.agent_id,
        "nodeId": ctx.node_id,
        "input": redact(input),
        "output": redact(output),
        "durationMs": took.as_millis() as u64,
    })
}
