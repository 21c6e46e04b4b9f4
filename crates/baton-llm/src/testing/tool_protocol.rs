//! The tool-call rule OpenAI enforces, checked on the wire JSON a client sent: every id of an
//! assistant message's `tool_calls` is answered by a `tool` message with that `tool_call_id`
//! before the next message of another role (or the end), and every `tool` message answers such
//! a call. A scripted server that checks it catches a client or engine that would get HTTP 400
//! from the real API.

use serde_json::{Value, json};

/// The message OpenAI-style servers give a request that breaks the rule; `None` if it keeps it
/// (or has no `messages` to check).
pub fn violation(body: &Value) -> Option<String> {
    let messages = body.get("messages")?.as_array()?;
    // Calls of the last assistant message still waiting for their result.
    let mut open: Vec<&str> = Vec::new();
    for (index, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if role == "tool" {
            let id = m.get("tool_call_id").and_then(Value::as_str).unwrap_or("");
            match open.iter().position(|o| *o == id) {
                Some(at) => {
                    open.remove(at);
                }
                None => {
                    return Some(format!(
                        "Invalid parameter: messages[{index}] with role 'tool' must be a response to a preceding message with 'tool_calls' (tool_call_id '{id}' is not an open call)."
                    ));
                }
            }
            continue;
        }
        if !open.is_empty() {
            return Some(unanswered(&open));
        }
        if role == "assistant" {
            open = m
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|c| c.get("id").and_then(Value::as_str).unwrap_or(""))
                .collect();
        }
    }
    (!open.is_empty()).then(|| unanswered(&open))
}

fn unanswered(open: &[&str]) -> String {
    format!(
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
        open.join(", ")
    )
}

/// The HTTP 400 body for a violation, shaped like OpenAI's.
pub fn error_body(message: &str) -> Value {
    json!({"error": {"message": message, "type": "invalid_request_error", "param": "messages", "code": null}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(ids: &[&str]) -> Value {
        let calls: Vec<Value> = ids
            .iter()
            .map(|id| json!({"id": id, "type": "function", "function": {"name": "fs_read", "arguments": "{}"}}))
            .collect();
        json!({"role": "assistant", "content": null, "tool_calls": calls})
    }

    fn result(id: &str) -> Value {
        json!({"role": "tool", "tool_call_id": id, "content": "{}"})
    }

    fn user() -> Value {
        json!({"role": "user", "content": "go"})
    }

    fn check(messages: Vec<Value>) -> Option<String> {
        violation(&json!({ "messages": messages }))
    }

    #[test]
    fn kept_and_broken_rules() {
        assert_eq!(
            check(vec![
                user(),
                call(&["a", "b"]),
                result("b"),
                result("a"),
                user(),
                call(&["a"]),
                result("a"),
            ]),
            None
        );
        assert_eq!(violation(&json!({"no": "messages"})), None);
        let orphan = check(vec![user(), result("x")]).unwrap();
        assert!(orphan.contains("tool_call_id 'x'"), "{orphan}");
        let twice = check(vec![call(&["a"]), result("a"), result("a")]).unwrap();
        assert!(twice.contains("tool_call_id 'a'"), "{twice}");
        let cut = check(vec![call(&["a", "b"]), result("a"), user()]).unwrap();
        assert!(cut.ends_with(": b"), "{cut}");
        let last = check(vec![user(), call(&["a"])]).unwrap();
        assert!(last.contains("tool_call_id"), "{last}");
    }
}
