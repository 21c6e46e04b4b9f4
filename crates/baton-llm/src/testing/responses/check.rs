//! The checks the Responses API makes before it answers, with its own error messages: a
//! request the real API refuses is refused here too, so a client that would fail against OpenAI
//! fails in tests.

use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// A refusal: HTTP status and the body's `error` fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub status: u16,
    pub kind: &'static str,
    pub code: Option<&'static str>,
    pub param: Option<&'static str>,
    pub message: String,
}

impl Refusal {
    fn invalid(code: &'static str, param: Option<&'static str>, message: String) -> Refusal {
        Refusal {
            status: 400,
            kind: "invalid_request_error",
            code: Some(code),
            param,
            message,
        }
    }

    /// The body the API sends with it.
    pub fn body(&self) -> Value {
        serde_json::json!({"error": {
            "message": self.message,
            "type": self.kind,
            "param": self.param,
            "code": self.code,
        }})
    }
}

/// The item types that call a tool, and the type of the item that must answer each.
const CALLS: [(&str, &str); 2] = [
    ("function_call", "function_call_output"),
    ("custom_tool_call", "custom_tool_call_output"),
];

/// The `Authorization` header against the configured key (none configured: anything goes).
pub fn key(headers: &[(String, String)], expected: Option<&str>) -> Result<(), Refusal> {
    let Some(expected) = expected else {
        return Ok(());
    };
    let given = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        .and_then(|(_, v)| v.strip_prefix("Bearer "));
    match given {
        Some(k) if k == expected => Ok(()),
        Some(k) => Err(Refusal {
            status: 401,
            kind: "invalid_request_error",
            code: Some("invalid_api_key"),
            param: None,
            // The API shows only the key's last characters; so does this.
            message: format!(
                "Incorrect API key provided: ***{}.",
                k.chars()
                    .rev()
                    .take(4)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<String>()
            ),
        }),
        None => Err(Refusal {
            status: 401,
            kind: "invalid_request_error",
            code: None,
            param: None,
            message: "You didn't provide an API key.".into(),
        }),
    }
}

/// A `POST /v1/responses` body, given the outputs of the responses stored so far (by id).
pub fn request(body: &Value, stored: &HashMap<String, Vec<Value>>) -> Result<(), Refusal> {
    let Some(obj) = body.as_object() else {
        return Err(Refusal::invalid(
            "invalid_json",
            None,
            "We could not parse the JSON body of your request.".into(),
        ));
    };
    if !obj.get("model").is_some_and(Value::is_string) {
        return Err(Refusal::invalid(
            "missing_required_parameter",
            Some("model"),
            "Missing required parameter: 'model'.".into(),
        ));
    }
    let previous = match obj.get("previous_response_id") {
        None | Some(Value::Null) => &[][..],
        Some(id) => {
            let id = id.as_str().unwrap_or_default();
            match stored.get(id) {
                Some(output) => output.as_slice(),
                None => {
                    return Err(Refusal::invalid(
                        "previous_response_not_found",
                        Some("previous_response_id"),
                        format!("Previous response with id '{id}' not found."),
                    ));
                }
            }
        }
    };
    let input: &[Value] = match obj.get("input") {
        None | Some(Value::String(_)) => &[],
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(Refusal::invalid(
                "invalid_type",
                Some("input"),
                "Invalid type for 'input': expected a string or an array.".into(),
            ));
        }
    };
    pairs(previous, input)
}

/// Every tool call (in the previous response or the input) answered in the input by an output
/// of its kind with its `call_id`, and every output answering a call.
fn pairs(previous: &[Value], input: &[Value]) -> Result<(), Refusal> {
    let kind = |item: &Value| item["type"].as_str().unwrap_or_default().to_string();
    let call_id = |item: &Value| item["call_id"].as_str().unwrap_or_default().to_string();
    let mut calls: HashMap<String, &str> = HashMap::new();
    let mut answered = HashSet::new();
    for item in previous.iter().chain(input) {
        let t = kind(item);
        if let Some((_, output)) = CALLS.iter().find(|(call, _)| *call == t) {
            calls.insert(call_id(item), output);
        }
    }
    for item in input {
        let t = kind(item);
        if !CALLS.iter().any(|(_, output)| *output == t) {
            continue;
        }
        let id = call_id(item);
        match calls.get(&id) {
            Some(expected) if *expected == t => {
                answered.insert(id);
            }
            _ => {
                return Err(Refusal::invalid(
                    "invalid_value",
                    Some("input"),
                    format!("No tool call found for {t} with call_id {id}."),
                ));
            }
        }
    }
    // In the order the calls came, so the message names the first unanswered one.
    for item in previous.iter().chain(input) {
        let t = kind(item);
        if CALLS.iter().any(|(call, _)| *call == t) && !answered.contains(&call_id(item)) {
            return Err(Refusal::invalid(
                "invalid_value",
                Some("input"),
                format!(
                    "No tool output found for {} {}.",
                    t.replace('_', " "),
                    call_id(item)
                ),
            ));
        }
    }
    Ok(())
}
