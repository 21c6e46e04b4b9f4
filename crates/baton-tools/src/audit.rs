//! Audit lines: one `tool.exec` record per call, with large text replaced by its size and hash.

use crate::call::{CallContext, ToolCall};
use baton_package::digest::sha256_hex;
use serde_json::{Map, Value, json};
use std::time::Duration;

/// Fields whose text is replaced by `{bytes, sha256}` in the audit log.
const CONTENT_KEYS: [&str; 9] = [
    "content",
    "contentPreview",
    "find",
    "replace",
    "diff",
    "planContent",
    "stdout",
    "stderr",
    "script",
];

/// Fields replaced whole (any JSON value) by the size and hash of their JSON text: the
/// values of a command's environment and an MCP tool's structured result.
const VALUE_KEYS: [&str; 2] = ["env", "structuredContent"];

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
                    _ if VALUE_KEYS.contains(&k.as_str()) && !v.is_null() => {
                        let text = v.to_string();
                        json!({"bytes": text.len(), "sha256": sha256_hex(text.as_bytes())})
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

/// Strings longer than this in an MCP tool's arguments are replaced by their size and hash:
/// the server's schema is unknown, so any field may carry a file's content.
const MCP_ARG_MAX: usize = 200;

fn redact_long(value: &Value) -> Value {
    match value {
        Value::String(s) if s.len() > MCP_ARG_MAX => {
            json!({"bytes": s.len(), "sha256": sha256_hex(s.as_bytes())})
        }
        Value::Array(items) => Value::Array(items.iter().map(redact_long).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), redact_long(v)))
                .collect(),
        ),
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
        "input": if call.name.starts_with(crate::mcp::NAME_PREFIX) {
            redact_long(&redact(input))
        } else {
            redact(input)
        },
        "output": redact(output),
        "durationMs": took.as_millis() as u64,
    })
}
