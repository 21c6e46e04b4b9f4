//! The `status.json` schema (maestro v0.4.18, `status-schema.ts` plus the beta skill appendix)
//! and its validation. Every read goes through [`validate`]: a damaged file is reported with the
//! field and step it concerns (E010) instead of crashing or being skipped.
//!
//! Only the fields ralph reads or writes are typed; every other field is left alone and kept in
//! place when the file is written back.

use baton_autopilot::json_kind::json_kind;
use serde::Serialize;
use serde_json::{Map, Value};

pub const SESSION_STATUSES: [&str; 4] = ["running", "paused", "completed", "failed"];
pub const STEP_STATUSES: [&str; 5] = ["pending", "running", "completed", "skipped", "failed"];
pub const COMPLETION_STATUSES: [&str; 4] = ["DONE", "DONE_WITH_CONCERNS", "NEEDS_RETRY", "BLOCKED"];

/// One problem in a status.json: where (`steps[3].status`), which step, and what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SchemaIssue {
    pub at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_index: Option<usize>,
    pub message: String,
}

impl SchemaIssue {
    fn new(at: impl Into<String>, step_index: Option<usize>, message: impl Into<String>) -> Self {
        SchemaIssue {
            at: at.into(),
            step_index,
            message: message.into(),
        }
    }

    /// `at steps[3].status: …`
    pub fn located(&self) -> String {
        format!("at {}: {}", self.at, self.message)
    }
}

/// Parses and validates a status.json. `Err` holds every problem found (at least one).
pub fn parse(bytes: &[u8]) -> Result<Value, Vec<SchemaIssue>> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(vec![SchemaIssue::new(
            "$",
            None,
            "the file is empty (a write was cut short?)",
        )]);
    }
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| {
        vec![SchemaIssue::new(
            "$",
            None,
            format!(
                "not valid JSON: {} (line {}, column {})",
                strip_position(&e.to_string()),
                e.line(),
                e.column()
            ),
        )]
    })?;
    let issues = validate(&doc);
    if issues.is_empty() {
        Ok(doc)
    } else {
        Err(issues)
    }
}

/// serde_json appends " at line L column C"; the message prints the position itself.
fn strip_position(message: &str) -> &str {
    message.find(" at line ").map_or(message, |i| &message[..i])
}

/// Every schema problem of a parsed document. maestro's `check` messages are kept word for
/// word for the conditions maestro detects.
pub fn validate(doc: &Value) -> Vec<SchemaIssue> {
    let mut issues = Vec::new();
    let Some(session) = doc.as_object() else {
        issues.push(SchemaIssue::new(
            "$",
            None,
            format!(
                "status.json must hold a JSON object, found {}",
                json_kind(doc)
            ),
        ));
        return issues;
    };
    for field in ["session_id", "status", "steps"] {
        if !session.contains_key(field) {
            issues.push(SchemaIssue::new(
                field,
                None,
                format!("session is missing required field: {field}"),
            ));
        }
    }
    check_session_fields(session, &mut issues);
    match session.get("steps") {
        Some(Value::Array(steps)) => {
            for (i, step) in steps.iter().enumerate() {
                check_step(i, step, &mut issues);
            }
        }
        // maestro reports a missing `steps` twice (missing, and not an array); so do we.
        _ => issues.push(SchemaIssue::new(
            "steps",
            None,
            "session.steps is not an array",
        )),
    }
    issues
}

fn check_session_fields(s: &Map<String, Value>, issues: &mut Vec<SchemaIssue>) {
    let mut field = |name: &str, ok: bool, expected: &str| {
        if let Some(v) = s.get(name)
            && !ok
        {
            issues.push(SchemaIssue::new(
                name,
                None,
                format!("session.{name} must be {expected}, found {}", show(v)),
            ));
        }
    };
    field("session_id", is_str(s.get("session_id")), "a string");
    field(
        "status",
        one_of(s.get("status"), &SESSION_STATUSES),
        "one of running|paused|completed|failed",
    );
    // Any integer: a negative or too large one is a pointer out of range (E008, as maestro
    // reports it), not a damaged file.
    field(
        "active_step_index",
        s.get("active_step_index")
            .is_none_or(|v| v.is_null() || v.is_i64() || v.is_u64()),
        "null or an integer",
    );
    field(
        "revision",
        is_uint(s.get("revision")),
        "a non-negative integer",
    );
    field(
        "consec_exit2_count",
        is_uint(s.get("consec_exit2_count")),
        "a non-negative integer",
    );
    field("intent", null_or_str(s.get("intent")), "a string");
    field("auto_mode", is_bool(s.get("auto_mode")), "true or false");
    field(
        "passed_gates",
        matches!(
            s.get("passed_gates"),
            Some(Value::Array(_)) | Some(Value::Null)
        ),
        "an array",
    );
    field(
        "ralph_protocol_version",
        null_or_str(s.get("ralph_protocol_version")),
        "a string",
    );
    if let Some(claim) = s.get("active_claim") {
        match claim {
            Value::Null => {}
            Value::Object(c) => {
                if !is_uint(c.get("index")) || !c.contains_key("index") {
                    issues.push(SchemaIssue::new(
                        "active_claim.index",
                        None,
                        "active_claim.index must be a non-negative integer",
                    ));
                }
                if !null_or_str(c.get("owner")) || !null_or_str(c.get("claimed_at")) {
                    issues.push(SchemaIssue::new(
                        "active_claim",
                        None,
                        "active_claim.owner and .claimed_at must be strings",
                    ));
                }
            }
            other => issues.push(SchemaIssue::new(
                "active_claim",
                None,
                format!(
                    "session.active_claim must be null or an object, found {}",
                    show(other)
                ),
            )),
        }
    }
    if let Some(goals) = s.get("task_decomposition") {
        match goals {
            Value::Null => {}
            Value::Array(items) => {
                for (i, g) in items.iter().enumerate() {
                    if !g.is_object() {
                        issues.push(SchemaIssue::new(
                            format!("task_decomposition[{i}]"),
                            None,
                            format!("a sub-goal must be an object, found {}", show(g)),
                        ));
                    }
                }
            }
            other => issues.push(SchemaIssue::new(
                "task_decomposition",
                None,
                format!(
                    "session.task_decomposition must be an array, found {}",
                    show(other)
                ),
            )),
        }
    }
}

fn check_step(i: usize, step: &Value, issues: &mut Vec<SchemaIssue>) {
    let Some(s) = step.as_object() else {
        issues.push(SchemaIssue::new(
            format!("steps[{i}]"),
            Some(i),
            format!("step must be an object, found {}", show(step)),
        ));
        return;
    };
    for field in ["index", "stage", "status"] {
        if !s.contains_key(field) {
            issues.push(SchemaIssue::new(
                format!("steps[{i}].{field}"),
                Some(i),
                format!("step is missing required field: {field}"),
            ));
        }
    }
    if let Some(index) = s.get("index")
        && index.as_u64() != Some(i as u64)
    {
        issues.push(SchemaIssue::new(
            format!("steps[{i}].index"),
            Some(i),
            format!("step.index {} != position {i}", show(index)),
        ));
    }
    let mut field = |name: &str, ok: bool, expected: &str| {
        if let Some(v) = s.get(name)
            && !ok
        {
            issues.push(SchemaIssue::new(
                format!("steps[{i}].{name}"),
                Some(i),
                format!("step.{name} must be {expected}, found {}", show(v)),
            ));
        }
    };
    field("stage", null_or_str(s.get("stage")), "a string");
    field(
        "status",
        one_of(s.get("status"), &STEP_STATUSES),
        "one of pending|running|completed|skipped|failed",
    );
    for name in [
        "skill",
        "args",
        "decision",
        "command_path",
        "command_scope",
        "completed_at",
        "concerns",
        "goal_ref",
    ] {
        field(name, null_or_str(s.get(name)), "a string or null");
    }
    for name in ["retry_count", "max_retries"] {
        field(name, null_or_uint(s.get(name)), "a non-negative integer");
    }
    for name in ["completion_confirmed", "retried"] {
        field(name, is_bool(s.get(name)), "true or false");
    }
    field(
        "completion_status",
        matches!(s.get("completion_status"), Some(Value::Null))
            || one_of(s.get("completion_status"), &COMPLETION_STATUSES),
        "null or one of DONE|DONE_WITH_CONCERNS|NEEDS_RETRY|BLOCKED",
    );
    field(
        "completion_evidence",
        match s.get("completion_evidence") {
            Some(Value::Null | Value::String(_)) | None => true,
            Some(Value::Array(a)) => a.iter().all(Value::is_string),
            _ => false,
        },
        "null, a string or an array of strings",
    );
    field(
        "deferred_reads",
        match s.get("deferred_reads") {
            Some(Value::Array(a)) => a.iter().all(Value::is_string),
            Some(Value::Null) | None => true,
            _ => false,
        },
        "an array of strings",
    );
    field(
        "load",
        matches!(s.get("load"), Some(Value::Null | Value::Object(_))),
        "null or an object",
    );
}

fn is_str(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::String(_)) | None)
}
fn null_or_str(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::String(_) | Value::Null) | None)
}
fn is_uint(v: Option<&Value>) -> bool {
    v.is_none_or(|v| v.as_u64().is_some())
}
fn null_or_uint(v: Option<&Value>) -> bool {
    v.is_none_or(|v| v.is_null() || v.as_u64().is_some())
}
fn is_bool(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::Bool(_)) | None)
}
fn one_of(v: Option<&Value>, allowed: &[&str]) -> bool {
    match v {
        None => true,
        Some(Value::String(s)) => allowed.contains(&s.as_str()),
        _ => false,
    }
}

/// A short rendering of a bad value for a message.
fn show(v: &Value) -> String {
    match v {
        Value::Array(_) | Value::Object(_) => json_kind(v).to_string(),
        other => {
            let text = other.to_string();
            if text.chars().count() > 60 {
                format!("{}…", text.chars().take(60).collect::<String>())
            } else {
                text
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_minimal_session_is_valid() {
        let doc = json!({"session_id": "ralph-1", "status": "running", "steps": [
            {"index": 0, "stage": "plan", "status": "pending"}
        ]});
        assert!(validate(&doc).is_empty());
    }

    #[test]
    fn problems_are_located() {
        let doc = json!({"status": "done", "steps": [
            {"index": 1, "stage": "plan", "status": "finished"}
        ]});
        let issues = validate(&doc);
        let at: Vec<_> = issues.iter().map(|i| i.at.as_str()).collect();
        assert_eq!(
            at,
            ["session_id", "status", "steps[0].index", "steps[0].status"]
        );
        let missing = validate(&json!({"session_id": "x", "status": "running"}));
        assert_eq!(missing.len(), 2);
        assert_eq!(issues[2].message, "step.index 1 != position 0");
        assert_eq!(issues[3].step_index, Some(0));
    }

    #[test]
    fn half_written_and_empty_files_are_reported() {
        assert!(parse(b"").unwrap_err()[0].message.contains("empty"));
        let issue = &parse(b"{\"session_id\": \"x\", \"st").unwrap_err()[0];
        assert!(
            issue.message.starts_with("not valid JSON"),
            "{}",
            issue.message
        );
        assert!(
            parse(b"[1]").unwrap_err()[0]
                .message
                .contains("JSON object")
        );
    }
}
