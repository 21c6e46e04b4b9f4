//! A person's answer to a widget question, completed from the question: clients that only
//! know "yes" (`baton answer --confirm`, `{"confirm": true}` in the web API) send a
//! `WIDGET_SUBMIT` without the `widgetId`, which the model needs to tell its questions apart.
//! The engine fills it from the question the run waits on, so every client gets it right.

use serde_json::{Map, Value};

const PREFIX: &str = "WIDGET_SUBMIT\n";

/// `answer` with the pending widget's `widgetId` added when the answer is a widget submission
/// of the same type without one; any other answer is returned as it is.
pub fn complete(answer: &str, waiting_for: Option<&Value>) -> String {
    let Some(body) = answer.strip_prefix(PREFIX) else {
        return answer.to_string();
    };
    let Ok(Value::Object(mut submission)) = serde_json::from_str::<Value>(body) else {
        return answer.to_string();
    };
    let widget = waiting_for.and_then(|w| w.get("widget"));
    let id = widget
        .and_then(|w| w.get("widgetId"))
        .and_then(Value::as_str);
    let asked_type = widget.and_then(|w| w.get("type")).and_then(Value::as_str);
    let same_type = submission.get("type").and_then(Value::as_str) == asked_type;
    match id {
        Some(id) if same_type && !submission.contains_key("widgetId") => {
            let mut with_id = Map::new();
            with_id.insert("widgetId".into(), Value::String(id.into()));
            with_id.append(&mut submission);
            format!("{PREFIX}{}", Value::Object(with_id))
        }
        _ => answer.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn waiting(kind: &str) -> Value {
        json!({"question": "Go?", "widget": {"widgetId": "go", "type": kind, "message": "Go?"}})
    }

    const YES: &str =
        "WIDGET_SUBMIT\n{\"type\": \"confirmation\", \"value\": {\"confirmed\": true}}";

    #[test]
    fn a_confirmation_without_its_id_gets_the_questions_id() {
        let done = complete(YES, Some(&waiting("confirmation")));
        let body: Value = serde_json::from_str(done.strip_prefix(PREFIX).unwrap()).unwrap();
        assert_eq!(
            body,
            json!({"widgetId": "go", "type": "confirmation", "value": {"confirmed": true}})
        );
    }

    #[test]
    fn other_answers_are_left_as_they_are() {
        // Another widget type, an id already given, plain text, no widget asked, bad JSON.
        assert_eq!(complete(YES, Some(&waiting("selection"))), YES);
        let with_id = "WIDGET_SUBMIT\n{\"widgetId\":\"x\",\"type\":\"confirmation\"}";
        assert_eq!(complete(with_id, Some(&waiting("confirmation"))), with_id);
        assert_eq!(complete("yes", Some(&waiting("confirmation"))), "yes");
        assert_eq!(complete(YES, Some(&json!({"question": "Go?"}))), YES);
        assert_eq!(complete(YES, None), YES);
        let bad = "WIDGET_SUBMIT\n{not json";
        assert_eq!(complete(bad, Some(&waiting("confirmation"))), bad);
    }
}
