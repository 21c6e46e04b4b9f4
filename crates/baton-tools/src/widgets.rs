//! `ui.ask_user`: validating a widget request and the question the run waits on.

use crate::result::ToolError;
use serde_json::Value;

/// A pending question; the engine records it as the run's `waitingFor`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Question {
    pub widget_id: String,
    #[serde(rename = "type")]
    pub widget_type: String,
    pub message: String,
    /// The whole validated request, for renderers.
    pub widget: Value,
}

fn non_empty_list<'a>(args: &'a Value, key: &str, kind: &str) -> Result<&'a Vec<Value>, ToolError> {
    args.get(key)
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
        .ok_or_else(|| {
            ToolError::invalid_args(format!("a {kind} widget needs a non-empty '{key}' list"))
        })
}

fn require_fields(items: &[Value], key: &str, fields: &[&str]) -> Result<(), ToolError> {
    for (i, item) in items.iter().enumerate() {
        for f in fields {
            if item
                .get(*f)
                .and_then(Value::as_str)
                .is_none_or(|s| s.is_empty())
            {
                return Err(ToolError::invalid_args(format!(
                    "{key}[{i}] needs a non-empty '{f}'"
                )));
            }
        }
    }
    Ok(())
}

pub fn validate(args: &Value) -> Result<Question, ToolError> {
    let text = |k: &str| {
        args.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let widget_type = text("type");
    match widget_type.as_str() {
        "confirmation" => {}
        "selection" => {
            let options = non_empty_list(args, "options", "selection")?;
            require_fields(options, "options", &["value", "label"])?;
        }
        "form" => {
            let props = args
                .pointer("/schema/properties")
                .and_then(Value::as_object)
                .filter(|p| !p.is_empty())
                .ok_or_else(|| {
                    ToolError::invalid_args("a form widget needs 'schema' with 'properties'")
                })?;
            for (name, prop) in props {
                let ty = prop.get("type").and_then(Value::as_str);
                let ok = matches!(ty, Some("string" | "number" | "integer" | "boolean"))
                    || prop.get("enum").is_some();
                if !ok {
                    return Err(ToolError::invalid_args(format!(
                        "form field '{name}' must be a string, number, integer, boolean or enum"
                    )));
                }
            }
        }
        "plan_review" => {
            if text("planContent").trim().is_empty() {
                return Err(ToolError::invalid_args(
                    "a plan_review widget needs 'planContent'",
                ));
            }
        }
        "feedback" => {
            let items = non_empty_list(args, "items", "feedback")?;
            require_fields(items, "items", &["id", "content"])?;
        }
        "action_selection" => {
            let actions = non_empty_list(args, "actions", "action_selection")?;
            require_fields(actions, "actions", &["id", "label"])?;
        }
        other => {
            return Err(ToolError::invalid_args(format!(
                "unknown widget type '{other}'"
            )));
        }
    }
    Ok(Question {
        widget_id: text("widgetId"),
        widget_type,
        message: text("message"),
        widget: args.clone(),
    })
}
