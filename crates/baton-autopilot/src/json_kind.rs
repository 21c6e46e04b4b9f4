//! The type of a JSON value as an error message names it ("must be a string, not an array").

use serde_json::Value;

/// `null`, `a boolean`, `a number`, `a string`, `an array` or `an object`.
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_json_type_has_its_article() {
        let names: Vec<&str> = [
            json!(null),
            json!(true),
            json!(1),
            json!("x"),
            json!([]),
            json!({}),
        ]
        .iter()
        .map(json_kind)
        .collect();
        assert_eq!(
            names,
            [
                "null",
                "a boolean",
                "a number",
                "a string",
                "an array",
                "an object"
            ]
        );
    }
}
