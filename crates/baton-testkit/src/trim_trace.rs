//! How a recorded demo trace is committed: each request reduced to a short note (the replay
//! needs only the answers), so the files stay small enough for a person to read.
use serde_json::{Value, json};
use std::path::Path;

/// Rewrites the trace at `path` with its requests trimmed and `note` saying where it came
/// from; tool results longer than `tool_result_chars` are cut too (what a file read returned
/// is in the project).
pub fn trim_trace(path: &Path, note: &str, tool_result_chars: Option<usize>) {
    let mut trace: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    for d in trace["dialogues"].as_array_mut().into_iter().flatten() {
        let Some(messages) = d
            .pointer("/request/messages")
            .and_then(Value::as_array)
            .cloned()
        else {
            continue;
        };
        let last = messages.last().cloned().unwrap_or(Value::Null);
        let text: String = last["content"]
            .as_str()
            .unwrap_or("")
            .chars()
            .take(240)
            .collect();
        if let Some(max) = tool_result_chars
            && let Some(runs) = d
                .pointer_mut("/runtime/toolRuns")
                .and_then(Value::as_array_mut)
        {
            for r in runs {
                if let Some(c) = r.pointer_mut("/result/content")
                    && c.as_str().is_some_and(|t| t.len() > max)
                {
                    let short: String = c.as_str().unwrap_or("").chars().take(max).collect();
                    *c = json!(format!("{short}…"));
                }
            }
        }
        d["request"] = json!({
            "note": "recorded request omitted; its last message begins:",
            "messageCount": messages.len(),
            "lastMessage": {"role": last["role"], "content": text},
        });
    }
    trace["note"] = json!(note);
    let mut bytes = serde_json::to_vec_pretty(&trace).unwrap();
    bytes.push(b'\n');
    std::fs::write(path, bytes).unwrap();
}
