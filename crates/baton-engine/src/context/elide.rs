//! Bulky arguments of executed tool calls, elided from what a request carries.
//!
//! A call's arguments stay in the history long after the call ran: a 3 MB `fs.write` (refused
//! as oversized) or a turn of 400 writes would keep every later request over the window. Once
//! a call has its result, its long strings are replaced by their size and sha256 (the written
//! text is on disk; the result says what became of the call), oldest call first, until the
//! request fits. The arguments stay valid JSON and the call keeps its id, so the pairing with
//! its result is untouched. Only what is sent changes; the conversation log keeps everything.

use super::tokens::TokenCounter;
use baton_llm::{Message, Role};
use baton_package::digest::sha256_hex;
use serde_json::{Map, Value, json};
use std::collections::HashSet;

/// A string argument longer than this (bytes) is bulky.
pub const BULKY_BYTES: usize = 256;
/// Arguments still longer than this once their strings are elided are replaced whole.
pub const MAX_ELIDED_BYTES: usize = 1_024;

/// The marker that stands for an elided text.
fn marker(text: &str) -> Value {
    json!({"elided": true, "bytes": text.len(), "sha256": sha256_hex(text.as_bytes())})
}

fn is_marker(v: &Value) -> bool {
    v.get("elided").and_then(Value::as_bool) == Some(true) && v.get("sha256").is_some()
}

/// Replaces bulky strings, depth first; true when something changed.
fn elide_value(v: &mut Value) -> bool {
    if is_marker(v) {
        return false;
    }
    match v {
        Value::String(s) if s.len() > BULKY_BYTES => {
            *v = marker(s);
            true
        }
        Value::Array(items) => items.iter_mut().fold(false, |c, i| elide_value(i) | c),
        Value::Object(map) => map.values_mut().fold(false, |c, i| elide_value(i) | c),
        _ => false,
    }
}

/// The arguments with their bulky parts elided, or `None` when nothing is bulky. Arguments that
/// are not JSON, or still long once their strings are elided, become one marker (with the
/// `path` kept when it is short), so the result is always small, valid JSON.
pub fn elided(arguments: &str) -> Option<String> {
    if arguments.len() <= BULKY_BYTES {
        return None;
    }
    let whole = || {
        let mut out = Map::new();
        if let Ok(Value::Object(args)) = serde_json::from_str::<Value>(arguments)
            && let Some(Value::String(path)) = args.get("path")
            && path.len() <= BULKY_BYTES
        {
            out.insert("path".into(), json!(path));
        }
        out.insert("arguments".into(), marker(arguments));
        Value::Object(out).to_string()
    };
    let Ok(mut value) = serde_json::from_str::<Value>(arguments) else {
        return Some(whole());
    };
    let changed = elide_value(&mut value);
    let text = value.to_string();
    if text.len() > MAX_ELIDED_BYTES {
        return Some(whole());
    }
    changed.then_some(text)
}

/// Elides the bulky arguments of executed calls (calls whose result follows them), oldest
/// first, until `over` tokens are saved or nothing is left to elide. Returns the calls elided
/// and the tokens saved.
pub fn elide_oldest(
    messages: &mut [Message],
    over: usize,
    counter: &mut TokenCounter,
) -> (usize, usize) {
    let mut saved = 0;
    let mut count = 0;
    for i in 0..messages.len() {
        if saved >= over {
            break;
        }
        if messages[i].role != Role::Assistant || messages[i].tool_calls.is_empty() {
            continue;
        }
        let answered: HashSet<String> = messages[i + 1..]
            .iter()
            .take_while(|m| m.role == Role::Tool)
            .filter_map(|m| m.tool_call_id.clone())
            .collect();
        for call in messages[i].tool_calls.iter_mut() {
            if saved >= over {
                break;
            }
            if !answered.contains(&call.id) {
                continue;
            }
            let Some(short) = elided(&call.arguments) else {
                continue;
            };
            let before = counter.text(&call.arguments);
            let after = counter.text(&short);
            call.arguments = short;
            saved += before.saturating_sub(after);
            count += 1;
        }
    }
    (count, saved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::tokens::Encoding;
    use baton_llm::ToolCall;

    fn write_call(id: &str, content: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "fs.write".into(),
            arguments: json!({"path": "@project/out/a.md", "content": content}).to_string(),
        }
    }

    #[test]
    fn a_bulky_content_becomes_its_size_and_sha256() {
        let content = "x".repeat(3 * 1024 * 1024);
        let short = elided(&write_call("a", &content).arguments).unwrap();
        let v: Value = serde_json::from_str(&short).unwrap();
        assert_eq!(v["path"], "@project/out/a.md");
        assert_eq!(v["content"]["elided"], true);
        assert_eq!(v["content"]["bytes"], content.len());
        assert_eq!(v["content"]["sha256"], sha256_hex(content.as_bytes()));
        assert!(short.len() < 200, "{short}");
        // Small arguments and already elided ones stay as they are.
        assert_eq!(elided(r#"{"path":"@project/a.md","content":"hi"}"#), None);
        assert_eq!(elided(&short), None);
    }

    #[test]
    fn hostile_arguments_become_one_small_marker() {
        let not_json = format!(
            "{{\"path\": \"@project/a.md\", \"content\": \"{}",
            "y".repeat(5_000)
        );
        let v: Value = serde_json::from_str(&elided(&not_json).unwrap()).unwrap();
        assert_eq!(v["arguments"]["bytes"], not_json.len());
        assert!(
            v.get("path").is_none(),
            "a path is only read from valid JSON"
        );
        // Many short strings: still long after eliding strings, replaced whole with the path.
        let many: Vec<String> = (0..500).map(|i| format!("item {i}")).collect();
        let args = json!({"path": "@project/b.md", "items": many}).to_string();
        let short = elided(&args).unwrap();
        let v: Value = serde_json::from_str(&short).unwrap();
        assert_eq!(v["path"], "@project/b.md");
        assert_eq!(v["arguments"]["sha256"], sha256_hex(args.as_bytes()));
        // A hostile path is elided too.
        let long_path = json!({"path": "p".repeat(10_000)}).to_string();
        assert!(elided(&long_path).unwrap().len() < 200);
    }

    #[test]
    fn only_executed_calls_are_elided_oldest_first() {
        let mut counter = TokenCounter::new(Encoding::Chars);
        let big = "z".repeat(4_000);
        let mut first = Message::assistant("");
        first.tool_calls = vec![write_call("a", &big), write_call("b", &big)];
        let mut open = Message::assistant("");
        open.tool_calls = vec![write_call("c", &big)];
        let mut messages = vec![
            first,
            Message::tool_result("a", "{\"ok\":true}"),
            Message::tool_result("b", "{\"ok\":true}"),
            open,
        ];
        // Saving a little elides only the oldest call.
        let (n, saved) = elide_oldest(&mut messages, 10, &mut counter);
        assert_eq!(n, 1);
        assert!(saved > 900, "{saved}");
        assert!(messages[0].tool_calls[0].arguments.len() < 200);
        assert!(messages[0].tool_calls[1].arguments.len() > 4_000);
        // Saving everything leaves the call without a result alone.
        let (n, _) = elide_oldest(&mut messages, usize::MAX, &mut counter);
        assert_eq!(n, 1);
        assert!(messages[3].tool_calls[0].arguments.len() > 4_000);
        assert_eq!(messages[0].tool_calls[1].id, "b");
        assert_eq!(baton_llm::protocol::validate(&messages[..3]), Ok(()));
    }
}
