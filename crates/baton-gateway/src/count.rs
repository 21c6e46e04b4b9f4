//! baton's own token counts, with no tokenizer: `ceil(ASCII bytes / 4) + non-ASCII characters`
//! of the text a request or an answer carries, as baton counts prompts for models without a
//! known tokenizer (about chars/4 for English and code, a token per CJK character).

use serde_json::Value;

/// Every JSON object (a message, a block, a tool) costs a few tokens of framing.
const OBJECT_OVERHEAD: u64 = 3;

/// The estimate of one text.
pub fn text(s: &str) -> u64 {
    let ascii = s.bytes().filter(u8::is_ascii).count() as u64;
    let other = s.chars().filter(|c| !c.is_ascii()).count() as u64;
    ascii.div_ceil(4) + other
}

/// The estimate of a JSON document: its string values and numbers, plus framing per object.
/// Keys are left out (they are the API's, not the prompt's).
pub fn json(v: &Value) -> u64 {
    // Iterative, so the depth of a body costs no stack.
    let mut stack = vec![v];
    let mut sum = 0u64;
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) => sum = sum.saturating_add(text(s)),
            Value::Number(n) => sum = sum.saturating_add(text(&n.to_string())),
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => {
                sum = sum.saturating_add(OBJECT_OVERHEAD);
                stack.extend(map.values());
            }
            Value::Bool(_) | Value::Null => {}
        }
    }
    sum
}

/// The estimate of a request body: its JSON when it is JSON, else its bytes as text.
pub fn body(bytes: &[u8], parsed: Option<&Value>) -> u64 {
    match parsed {
        Some(v) => json(v),
        None => text(&String::from_utf8_lossy(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_is_counted_by_quarters_and_wide_characters_one_each() {
        assert_eq!(text(""), 0);
        assert_eq!(text("abcd"), 1);
        assert_eq!(text("abcde"), 2);
        assert_eq!(text("日本"), 2);
    }

    #[test]
    fn json_counts_values_and_framing_not_keys() {
        let v = json!({"messages": [{"role": "user", "content": "abcdabcd"}]});
        // Two objects, "user" (1), "abcdabcd" (2).
        assert_eq!(json(&v), 2 * OBJECT_OVERHEAD + 3);
        let deep = (0..1_000).fold(json!("x"), |v, _| json!([v]));
        assert_eq!(json(&deep), 1);
    }
}
