//! The `session.complete` tool: how the model ends a step's task run with one of seed 003's
//! four verdicts, and what a run that ends without it becomes.
//!
//! The arguments are checked here, strictly, so a bad call is answered with a message the
//! model can act on (and the run goes on) instead of landing in status.json.

use baton_llm::ToolDef;
use baton_ralph::schema::COMPLETION_STATUSES;
use baton_ralph::verbs::complete::CompleteArgs;
use serde_json::{Value, json};

pub const TOOL_NAME: &str = "session.complete";

/// Longest `concerns` / `reason` kept: status.json is read by people and by the next prompt.
const MAX_TEXT: usize = 4_000;
/// Most evidence paths one step may cite.
const MAX_EVIDENCE: usize = 64;
/// Most `decisions` / `deferred` items one step may record.
const MAX_ITEMS: usize = 32;

/// Seed 003's four ways a step ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Done,
    DoneWithConcerns,
    NeedsRetry,
    Blocked,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Done => "DONE",
            Status::DoneWithConcerns => "DONE_WITH_CONCERNS",
            Status::NeedsRetry => "NEEDS_RETRY",
            Status::Blocked => "BLOCKED",
        }
    }

    fn parse(raw: &str) -> Option<Status> {
        match raw.trim().to_uppercase().as_str() {
            "DONE" => Some(Status::Done),
            "DONE_WITH_CONCERNS" => Some(Status::DoneWithConcerns),
            "NEEDS_RETRY" => Some(Status::NeedsRetry),
            "BLOCKED" => Some(Status::Blocked),
            _ => None,
        }
    }
}

/// A checked `session.complete` call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub status: Status,
    pub evidence: Vec<String>,
    pub concerns: Option<String>,
    pub reason: Option<String>,
    /// maestro v0.5's completion record: what the step did in a sentence, the decisions it
    /// made, warnings for later steps, work it left for later.
    pub summary: Option<String>,
    pub decisions: Vec<String>,
    pub caveats: Option<String>,
    pub deferred: Vec<String>,
}

/// Why a `session.complete` call was refused; the message goes back to the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CompletionError {
    pub code: &'static str,
    pub message: String,
}

impl CompletionError {
    fn new(message: impl Into<String>) -> CompletionError {
        CompletionError {
            code: "SESSION_COMPLETE_INVALID",
            message: message.into(),
        }
    }
}

/// The tool as the model is offered it.
pub fn tool_def() -> ToolDef {
    ToolDef {
        name: TOOL_NAME.into(),
        description: "End this step. Call it exactly once, when the step's work is finished or \
                      cannot be: DONE (cite the files you produced in evidence), \
                      DONE_WITH_CONCERNS (say what worries you in concerns), NEEDS_RETRY (the \
                      attempt failed but another may succeed) or BLOCKED (a person must act; \
                      say why in reason). With DONE, give a one-sentence summary; decisions, \
                      caveats and deferred work reach the later steps."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "status": {"type": "string", "enum": COMPLETION_STATUSES},
                "evidence": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "project-relative paths of the files that show the work"
                },
                "concerns": {"type": "string"},
                "reason": {"type": "string"},
                "summary": {
                    "type": "string",
                    "description": "one sentence, verb first: what this step accomplished"
                },
                "decisions": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "key decisions the step made"
                },
                "caveats": {
                    "type": "string",
                    "description": "warnings the later steps must know"
                },
                "deferred": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "work items left for later"
                }
            },
            "required": ["status"],
            "additionalProperties": false
        }),
    }
}

fn text(
    args: &serde_json::Map<String, Value>,
    key: &str,
) -> Result<Option<String>, CompletionError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) if s.chars().count() > MAX_TEXT => Err(CompletionError::new(
            format!("{key} is longer than {MAX_TEXT} characters; say it shorter"),
        )),
        Some(Value::String(s)) => Ok(Some(s.trim().to_string())),
        Some(_) => Err(CompletionError::new(format!("{key} must be a string"))),
    }
}

/// A list of short texts (`decisions`, `deferred`); a lone string counts as one item.
fn items(args: &serde_json::Map<String, Value>, key: &str) -> Result<Vec<String>, CompletionError> {
    let values = match args.get(key) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::String(s)) => vec![Value::String(s.clone())],
        Some(Value::Array(a)) => a.clone(),
        Some(_) => {
            return Err(CompletionError::new(format!(
                "{key} must be an array of strings"
            )));
        }
    };
    if values.len() > MAX_ITEMS {
        return Err(CompletionError::new(format!(
            "{key} lists {} items; give at most {MAX_ITEMS}",
            values.len()
        )));
    }
    let mut out = Vec::new();
    for v in values {
        let Value::String(text) = v else {
            return Err(CompletionError::new(format!(
                "{key} must be an array of strings"
            )));
        };
        let text = text.trim();
        if text.chars().count() > MAX_TEXT {
            return Err(CompletionError::new(format!(
                "an item of {key} is longer than {MAX_TEXT} characters; say it shorter"
            )));
        }
        if !text.is_empty() {
            out.push(text.to_string());
        }
    }
    Ok(out)
}

fn evidence(args: &serde_json::Map<String, Value>) -> Result<Vec<String>, CompletionError> {
    let items = match args.get("evidence") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        // A lone path is a common slip; it means the same thing.
        Some(Value::String(s)) => vec![Value::String(s.clone())],
        Some(Value::Array(a)) => a.clone(),
        Some(_) => {
            return Err(CompletionError::new(
                "evidence must be an array of file paths",
            ));
        }
    };
    if items.len() > MAX_EVIDENCE {
        return Err(CompletionError::new(format!(
            "evidence lists {} paths; cite at most {MAX_EVIDENCE}",
            items.len()
        )));
    }
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let Value::String(path) = item else {
            return Err(CompletionError::new(
                "evidence must be an array of file paths (strings)",
            ));
        };
        let path = path.trim();
        // A path that could point outside the project or hide in a line break is not evidence.
        if path.is_empty() || path.contains(['\n', '\r', '\0']) || path.len() > 1_024 {
            return Err(CompletionError::new(format!(
                "evidence path {path:?} is not a usable file path"
            )));
        }
        out.push(path.to_string());
    }
    Ok(out)
}

/// The arguments `session.complete` takes.
const FIELDS: [&str; 8] = [
    "status",
    "evidence",
    "concerns",
    "reason",
    "summary",
    "decisions",
    "caveats",
    "deferred",
];

/// Checks the arguments of a `session.complete` call (the JSON text the model sent).
pub fn parse(arguments: &str) -> Result<Completion, CompletionError> {
    let value: Value = serde_json::from_str(arguments)
        .map_err(|e| CompletionError::new(format!("the arguments are not JSON: {e}")))?;
    let Value::Object(args) = value else {
        return Err(CompletionError::new("the arguments must be a JSON object"));
    };
    if let Some(unknown) = args.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(CompletionError::new(format!(
            "unknown argument {unknown:?}; the arguments are {}",
            FIELDS.join(", ")
        )));
    }
    let status = match args.get("status") {
        Some(Value::String(s)) => Status::parse(s).ok_or_else(|| {
            CompletionError::new(format!(
                "status must be one of {} (got {s:?})",
                COMPLETION_STATUSES.join(", ")
            ))
        })?,
        _ => {
            return Err(CompletionError::new(format!(
                "status is required: one of {}",
                COMPLETION_STATUSES.join(", ")
            )));
        }
    };
    let completion = Completion {
        status,
        evidence: evidence(&args)?,
        concerns: text(&args, "concerns")?,
        reason: text(&args, "reason")?,
        summary: text(&args, "summary")?,
        decisions: items(&args, "decisions")?,
        caveats: text(&args, "caveats")?,
        deferred: items(&args, "deferred")?,
    };
    if status == Status::Blocked && completion.reason.is_none() {
        // A paused session must tell the person what to do.
        return Err(CompletionError::new(
            "BLOCKED needs a reason: say what a person must do before this step can go on",
        ));
    }
    Ok(completion)
}

/// What a step's run that ended without `session.complete` becomes: one more attempt the
/// first time, then a blocked step (the session pauses for a person).
pub fn without_call(already_retried: bool) -> Completion {
    if already_retried {
        Completion {
            status: Status::Blocked,
            evidence: Vec::new(),
            concerns: None,
            reason: Some(format!(
                "the step ended twice without calling {TOOL_NAME}; look at its runs and \
                 finish it by hand or retry it"
            )),
            ..Completion::empty(Status::Blocked)
        }
    } else {
        Completion {
            status: Status::NeedsRetry,
            evidence: Vec::new(),
            concerns: None,
            reason: Some(format!("the step's run ended without calling {TOOL_NAME}")),
            ..Completion::empty(Status::NeedsRetry)
        }
    }
}

/// The engine's check of the finish tool: the accepted call, normalized, as JSON.
pub fn validator() -> baton_engine::task::Validate {
    Box::new(|arguments| parse(arguments).map(|c| c.to_json()).map_err(|e| e.message))
}

impl Completion {
    /// `status` and nothing else.
    pub fn empty(status: Status) -> Completion {
        Completion {
            status,
            evidence: Vec::new(),
            concerns: None,
            reason: None,
            summary: None,
            decisions: Vec::new(),
            caveats: None,
            deferred: Vec::new(),
        }
    }

    /// The accepted call as the run's log keeps it; the record fields only when given, so a
    /// log written before they existed reads the same.
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "status": self.status.as_str(),
            "evidence": self.evidence,
            "concerns": self.concerns,
            "reason": self.reason,
        });
        if let Some(m) = v.as_object_mut() {
            if let Some(s) = &self.summary {
                m.insert("summary".into(), json!(s));
            }
            if !self.decisions.is_empty() {
                m.insert("decisions".into(), json!(self.decisions));
            }
            if let Some(c) = &self.caveats {
                m.insert("caveats".into(), json!(c));
            }
            if !self.deferred.is_empty() {
                m.insert("deferred".into(), json!(self.deferred));
            }
        }
        v
    }

    /// Reads back what [`validator`] accepted.
    pub fn from_json(value: &Value) -> Result<Completion, CompletionError> {
        parse(&value.to_string())
    }

    /// The ralph `complete` verb's arguments for step `index`, claimed by `owner`.
    pub fn to_complete_args(&self, index: usize, owner: Option<&str>) -> CompleteArgs {
        CompleteArgs {
            index: index.to_string(),
            status: self.status.as_str().to_string(),
            evidence: self.evidence.clone(),
            concerns: self.concerns.clone(),
            reason: self.reason.clone(),
            summary: self.summary.clone(),
            decisions: self.decisions.clone(),
            caveats: self.caveats.clone(),
            deferred: self.deferred.clone(),
            owner: owner.map(str::to_owned),
            ..CompleteArgs::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_four_verdicts_parse_case_insensitively() {
        for (raw, want) in [
            ("done", Status::Done),
            ("DONE_WITH_CONCERNS", Status::DoneWithConcerns),
            (" needs_retry ", Status::NeedsRetry),
        ] {
            let c = parse(&json!({"status": raw}).to_string()).unwrap();
            assert_eq!(c.status, want);
        }
        let c = parse(r#"{"status":"BLOCKED","reason":"needs a database"}"#).unwrap();
        assert_eq!(c.status, Status::Blocked);
        assert_eq!(c.reason.as_deref(), Some("needs a database"));
    }

    #[test]
    fn evidence_and_concerns_are_kept() {
        let c = parse(
            r#"{"status":"DONE_WITH_CONCERNS","evidence":["a.md"," b/c.json "],"concerns":"slow"}"#,
        )
        .unwrap();
        assert_eq!(c.evidence, vec!["a.md", "b/c.json"]);
        assert_eq!(c.concerns.as_deref(), Some("slow"));
        let one = parse(r#"{"status":"DONE","evidence":"only.md"}"#).unwrap();
        assert_eq!(one.evidence, vec!["only.md"]);
    }

    #[test]
    fn bad_calls_are_refused_with_a_message_for_the_model() {
        for bad in [
            "not json",
            "[]",
            "{}",
            r#"{"status":"NEEDS_CONTEXT"}"#,
            r#"{"status":7}"#,
            r#"{"status":"DONE","evidence":[1]}"#,
            r#"{"status":"DONE","evidence":{"a":1}}"#,
            r#"{"status":"DONE","evidence":["a\nb"]}"#,
            r#"{"status":"DONE","extra":true}"#,
            r#"{"status":"DONE","concerns":["x"]}"#,
            r#"{"status":"BLOCKED"}"#,
            r#"{"status":"BLOCKED","reason":"  "}"#,
        ] {
            let e = parse(bad).unwrap_err();
            assert_eq!(e.code, "SESSION_COMPLETE_INVALID", "{bad}");
            assert!(!e.message.is_empty());
        }
        let long = "x".repeat(MAX_TEXT + 1);
        assert!(parse(&json!({"status":"DONE","concerns": long}).to_string()).is_err());
        let many: Vec<String> = (0..=MAX_EVIDENCE).map(|i| format!("f{i}")).collect();
        assert!(parse(&json!({"status":"DONE","evidence": many}).to_string()).is_err());
    }

    #[test]
    fn a_run_without_the_call_retries_once_then_blocks() {
        assert_eq!(without_call(false).status, Status::NeedsRetry);
        let second = without_call(true);
        assert_eq!(second.status, Status::Blocked);
        assert!(second.reason.is_some());
    }

    #[test]
    fn the_engine_validator_accepts_what_parse_accepts_and_round_trips() {
        let v =
            validator()(r#"{"status":"done_with_concerns","concerns":"slow","evidence":"a.md"}"#)
                .unwrap();
        let c = Completion::from_json(&v).unwrap();
        assert_eq!(c.status, Status::DoneWithConcerns);
        assert_eq!(c.evidence, vec!["a.md"]);
        assert_eq!(c.concerns.as_deref(), Some("slow"));
        assert!(
            validator()(r#"{"status":"BLOCKED"}"#)
                .unwrap_err()
                .contains("reason")
        );
    }

    #[test]
    fn the_tool_offers_exactly_the_four_statuses() {
        let def = tool_def();
        assert_eq!(def.name, "session.complete");
        assert_eq!(
            def.parameters["properties"]["status"]["enum"],
            json!(["DONE", "DONE_WITH_CONCERNS", "NEEDS_RETRY", "BLOCKED"])
        );
        let args = parse(r#"{"status":"DONE","evidence":["v.json"]}"#)
            .unwrap()
            .to_complete_args(3, Some("me"));
        assert_eq!(args.index, "3");
        assert_eq!(args.status, "DONE");
        assert_eq!(args.evidence, vec!["v.json"]);
    }
}
