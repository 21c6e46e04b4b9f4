//! From what a server says to what the model sees: bounded tool descriptions and schemas, and
//! call results as `{ok, content, structuredContent?}` with host paths replaced.

use serde_json::{Map, Value, json};

/// Most bytes of a call result's text (and of its structured part) given to the model.
pub const MAX_RESULT_BYTES: usize = 256 * 1024;
/// Most tools taken from one server.
pub const MAX_TOOLS: usize = 128;
pub const MAX_DESCRIPTION: usize = 1024;
pub const MAX_SCHEMA_BYTES: usize = 32 * 1024;

/// A description cut to its limit (on a character boundary).
pub fn description(text: Option<&str>) -> String {
    let text = text.unwrap_or("").trim();
    if text.len() <= MAX_DESCRIPTION {
        return text.to_string();
    }
    let mut cut = MAX_DESCRIPTION;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

/// The input schema as the model gets it: an object schema, or `None` when it is too large or
/// not an object.
pub fn schema(raw: &Map<String, Value>) -> Option<Value> {
    let mut schema = raw.clone();
    if schema.get("type").is_none() {
        schema.insert("type".into(), json!("object"));
    }
    if schema.get("type") != Some(&json!("object")) {
        return None;
    }
    if !schema.contains_key("properties") {
        schema.insert("properties".into(), json!({}));
    }
    let value = Value::Object(schema);
    (value.to_string().len() <= MAX_SCHEMA_BYTES).then_some(value)
}

/// Replaces host paths (longest first) in every string of `value`.
pub fn scrub(value: &mut Value, pairs: &[(String, &'static str)]) {
    match value {
        Value::String(s) => {
            for (host, alias) in pairs {
                if s.contains(host.as_str()) {
                    *s = s.replace(host.as_str(), alias);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| scrub(v, pairs)),
        Value::Object(map) => map.values_mut().for_each(|v| scrub(v, pairs)),
        _ => {}
    }
}

/// A `CallToolResult` (as JSON) → `Ok(result fields)` or `Err(message)` when the server
/// reported a tool error (`isError`).
pub fn result(raw: &Value) -> Result<Value, String> {
    let mut parts = Vec::new();
    for item in raw
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
        let text = match kind {
            "text" => item
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            "image" | "audio" => format!(
                "[{kind}: {}, {} bytes of base64 not shown]",
                item.get("mimeType")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown type"),
                item.get("data").and_then(Value::as_str).map_or(0, str::len)
            ),
            "resource" => {
                let r = item.get("resource").cloned().unwrap_or(Value::Null);
                match r.get("text").and_then(Value::as_str) {
                    Some(t) => t.to_string(),
                    None => format!(
                        "[resource {}]",
                        r.get("uri").and_then(Value::as_str).unwrap_or("")
                    ),
                }
            }
            "resource_link" => format!(
                "[link {}]",
                item.get("uri").and_then(Value::as_str).unwrap_or("")
            ),
            other => format!("[{other} content not shown]"),
        };
        parts.push(text);
    }
    let joined = parts.join("\n");
    let (content, truncated) = cap(&joined);
    if raw.get("isError").and_then(Value::as_bool) == Some(true) {
        return Err(if content.is_empty() {
            "the tool reported an error without a message".into()
        } else {
            content
        });
    }
    let mut out = json!({"content": content});
    if truncated {
        out["truncated"] = json!(true);
        out["contentBytes"] = json!(joined.len());
    }
    if let Some(s) = raw.get("structuredContent") {
        if s.to_string().len() <= MAX_RESULT_BYTES {
            out["structuredContent"] = s.clone();
        } else {
            out["structuredContentOmitted"] = json!("larger than the result limit");
        }
    }
    Ok(out)
}

fn cap(text: &str) -> (String, bool) {
    if text.len() <= MAX_RESULT_BYTES {
        return (text.to_string(), false);
    }
    let mut cut = MAX_RESULT_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    (text[..cut].to_string(), true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_bounded_and_errors_are_errors() {
        let ok = result(&json!({"content": [{"type": "text", "text": "a"}, {"type": "image", "mimeType": "image/png", "data": "AAAA"}]})).unwrap();
        assert_eq!(
            ok["content"],
            "a\n[image: image/png, 4 bytes of base64 not shown]"
        );
        let big = "x".repeat(MAX_RESULT_BYTES + 10);
        let r = result(&json!({"content": [{"type": "text", "text": big}]})).unwrap();
        assert_eq!(r["truncated"], true);
        assert_eq!(r["content"].as_str().unwrap().len(), MAX_RESULT_BYTES);
        let e =
            result(&json!({"content": [{"type": "text", "text": "bad input"}], "isError": true}));
        assert_eq!(e, Err("bad input".to_string()));
        assert!(schema(&serde_json::from_value(json!({"type": "string"})).unwrap()).is_none());
        let s = schema(&Map::new()).unwrap();
        assert_eq!(s["type"], "object");
        let mut v = json!({"a": ["/home/u/p/x.rs"]});
        scrub(&mut v, &[("/home/u/p".into(), "@project")]);
        assert_eq!(v["a"][0], "@project/x.rs");
        assert_eq!(description(Some(&"é".repeat(2000))).chars().count(), 513);
    }
}
