//! Tool results: `{ok: true, ...}` or `{ok: false, error: {code, message, details?}}`.

use serde_json::{Map, Value, json};

/// A refused or failed tool call. Messages and details name mount paths only.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    pub code: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

impl ToolError {
    pub fn new(code: &'static str, message: impl Into<String>) -> ToolError {
        ToolError {
            code,
            message: message.into(),
            details: None,
        }
    }

    pub fn sandbox(message: impl Into<String>) -> ToolError {
        ToolError::new("E_SANDBOX_VIOLATION", message)
    }

    pub fn invalid_args(message: impl Into<String>) -> ToolError {
        ToolError::new("E_INVALID_ARGS", message)
    }

    pub fn with_details(mut self, details: Value) -> ToolError {
        self.details = Some(details);
        self
    }

    pub fn to_json(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(d) = &self.details {
            error["details"] = d.clone();
        }
        json!({"ok": false, "error": error})
    }
}

impl From<baton_store::StateError> for ToolError {
    fn from(e: baton_store::StateError) -> ToolError {
        ToolError {
            code: e.code.as_str(),
            message: e.message,
            details: e.details,
        }
    }
}

/// Builds `{ok: true, ...fields}`.
pub fn ok(fields: Value) -> Value {
    let mut out = Map::new();
    out.insert("ok".into(), Value::Bool(true));
    if let Value::Object(map) = fields {
        out.extend(map);
    }
    Value::Object(out)
}
