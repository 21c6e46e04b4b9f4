//! Tool results over 50 KB leave the conversation: the full result goes to a file under
//! `@state/logs/tool-results/` (the driver writes it) and the message keeps a preview and the
//! mount path, so the model can read more with `fs.read` when it needs to.

use serde_json::{Value, json};
use std::hash::{DefaultHasher, Hash, Hasher};

/// Results longer than this (bytes of the JSON text) are offloaded.
pub const OFFLOAD_BYTES: usize = 50 * 1024;
/// Characters of the result kept in the message.
pub const PREVIEW_CHARS: usize = 500;
/// Where offloaded results go, inside the run's `@state`.
pub const DIR: &str = "logs/tool-results";

/// A file name for the result of `call_id`: the id made safe (a model chooses it) plus a hash
/// of the exact id, so two ids that look alike after cleaning never share a file.
pub fn file_name(call_id: &str) -> String {
    let safe: String = call_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(48)
        .collect();
    let mut h = DefaultHasher::new();
    call_id.hash(&mut h);
    format!("{safe}-{:016x}.json", h.finish())
}

/// The message content that replaces an offloaded result.
pub fn replacement(content: &str, mount_path: Option<&str>) -> String {
    let original: Option<Value> = serde_json::from_str(content).ok();
    let ok = original
        .as_ref()
        .and_then(|v| v.get("ok"))
        .and_then(Value::as_bool);
    let preview: String = content.chars().take(PREVIEW_CHARS).collect();
    let mut out = json!({
        "ok": ok.unwrap_or(true),
        "offloaded": true,
        "bytes": content.len(),
        "preview": preview,
    });
    match mount_path {
        Some(path) => {
            out["fullOutputPath"] = json!(path);
            out["hint"] = json!(format!(
                "[Full output: {path}] The result was too large for the conversation; read the parts you need with fs.read (startLine/endLine) or fs.search on that path."
            ));
        }
        None => {
            out["hint"] = json!(
                "The result was too large for the conversation and could not be saved; ask for a smaller part (startLine/endLine, a narrower search)."
            );
        }
    }
    if let Some(code) = original
        .as_ref()
        .and_then(|v| v.pointer("/error/code"))
        .cloned()
    {
        out["error"] = json!({"code": code, "message": "see the preview"});
    }
    out.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_safe_and_distinct() {
        let a = file_name("../../etc/passwd");
        assert!(!a.contains('/') && !a.contains(".."), "{a}");
        assert!(a.ends_with(".json"));
        assert_ne!(file_name("a/b"), file_name("a_b"));
        assert_eq!(file_name("call_1"), file_name("call_1"));
        assert!(file_name(&"x".repeat(10_000)).len() < 80);
    }

    #[test]
    fn the_replacement_is_small_json_with_the_path() {
        let big = format!("{{\"ok\":true,\"content\":\"{}\"}}", "z".repeat(100_000));
        let r = replacement(&big, Some("@state/logs/tool-results/c.json"));
        assert!(r.len() < 1_500, "{}", r.len());
        let v: Value = serde_json::from_str(&r).unwrap();
        assert_eq!(v["ok"], true);
        assert_eq!(v["bytes"], big.len());
        assert_eq!(v["fullOutputPath"], "@state/logs/tool-results/c.json");
        assert!(
            v["hint"]
                .as_str()
                .unwrap()
                .contains("[Full output: @state/logs/tool-results/c.json]")
        );
    }
}
