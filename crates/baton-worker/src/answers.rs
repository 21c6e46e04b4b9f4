//! Questions of queued runs, answered from the database.
//!
//! A run that asks a person ends its unit `waiting`, the question (as the run asked it: text,
//! node, reason, and the widget with its options when there is one) stored in the unit. An
//! answer puts the unit back in the queue with the answer as an `answer` write; the next worker
//! to claim it restores the run from its checkpoint and continues it with that answer, as
//! `baton answer` does locally. An answer is applied once: the run's next checkpoint records
//! it, and a worker that claims the unit after that resumes the run instead.
//!
//! `baton answer <UNIT> --db URL` and the web page both call [`answer_unit`]; `baton queue
//! status` and the web page list [`pending_questions`].

use crate::WorkerError;
use baton_queue::{DbConfig, Queue, QueueError, UnitKind, UnitState};
use serde::Serialize;
use serde_json::{Value, json};

/// The unit is not waiting for a person (already answered, running, or finished).
pub const QUEUE_UNIT_NOT_WAITING: &str = "QUEUE_UNIT_NOT_WAITING";
/// The answer cannot be stored (empty, too long, or with a NUL character).
pub const QUEUE_ANSWER_INVALID: &str = "QUEUE_ANSWER_INVALID";
/// The longest answer accepted, in bytes of UTF-8.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// What [`answer_unit`] did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerReceipt {
    pub unit: i64,
    /// The run the unit's worker created, when the question said which.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The database, without its password.
    pub database: String,
    /// Where the unit is now: `queued`, for the next worker to go on with.
    pub state: UnitState,
}

/// A question a queued run waits on.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingQuestion {
    pub unit: i64,
    pub kind: UnitKind,
    pub queue: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The question as the run asked it.
    pub question: String,
    /// The node of the workflow that asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
    /// Why the run stopped: a question of the model, a widget, a confirmation, …
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The widget the run asked with (its type and options), when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub widget: Option<Value>,
    /// When the unit began waiting (RFC 3339, UTC).
    pub since: String,
    pub waiting_s: f64,
}

impl PendingQuestion {
    fn from_unit(w: baton_queue::WaitingUnit) -> PendingQuestion {
        let q = w.question.unwrap_or(Value::Null);
        let text = |key: &str| q.get(key).and_then(Value::as_str).map(str::to_owned);
        PendingQuestion {
            unit: w.id,
            kind: w.kind,
            queue: w.queue,
            run_id: text("runId"),
            question: question_text(&q),
            node_id: text("nodeId"),
            reason: text("reason"),
            widget: q.get("widget").filter(|v| !v.is_null()).cloned(),
            since: w.since,
            waiting_s: w.waiting_s,
        }
    }
}

/// The text of a stored question (`question`, else `message`, else the whole value).
pub fn question_text(question: &Value) -> String {
    match question {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        q => q
            .get("question")
            .or_else(|| q.get("message"))
            .and_then(Value::as_str)
            .map_or_else(|| q.to_string(), str::to_owned),
    }
}

/// Checks an answer before anything is written.
pub fn check_answer(answer: &str) -> Result<(), WorkerError> {
    let hint = "give the answer as text, as you would to `baton answer` for a local run";
    if answer.trim().is_empty() {
        return Err(WorkerError::refused(
            QUEUE_ANSWER_INVALID,
            "the answer is empty",
            hint,
        ));
    }
    if answer.len() > MAX_ANSWER_BYTES {
        return Err(WorkerError::refused(
            QUEUE_ANSWER_INVALID,
            format!(
                "the answer is {} bytes; at most {MAX_ANSWER_BYTES} are accepted",
                answer.len()
            ),
            "shorten it, or put the long text in a file of the project and answer with its path",
        ));
    }
    if answer.contains('\0') {
        return Err(WorkerError::refused(
            QUEUE_ANSWER_INVALID,
            "the answer contains a NUL character",
            hint,
        ));
    }
    Ok(())
}

fn not_waiting(unit: i64, state: &str) -> WorkerError {
    let (message, hint) = match state {
        "queued" | "leased" => (
            format!("unit {unit} is {state}, not waiting for an answer"),
            "it was answered already, or it is running: `baton queue status` lists the units \
             that wait for a person"
                .to_string(),
        ),
        _ => (
            format!("unit {unit} is {state}: nothing waits for an answer"),
            format!("`baton runs show {unit} --db URL` shows how it ended"),
        ),
    };
    WorkerError::refused(QUEUE_UNIT_NOT_WAITING, message, hint)
}

/// Answers the question a waiting unit's run asked: the answer is stored with the unit, which
/// goes back to the queue; the next worker continues the run with it. Refused when the unit
/// does not wait for an answer (`QUEUE_UNIT_NOT_WAITING`) or the answer cannot be stored
/// (`QUEUE_ANSWER_INVALID`); nothing is written then.
pub async fn answer_unit(
    config: &DbConfig,
    unit: i64,
    answer: &str,
) -> Result<AnswerReceipt, WorkerError> {
    check_answer(answer)?;
    let queue = Queue::open(config).await?;
    let found = queue.unit(unit).await?;
    if found.state != UnitState::Waiting {
        return Err(not_waiting(unit, found.state.as_str()));
    }
    let run_id = found
        .question
        .as_ref()
        .and_then(|q| q.get("runId"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    match queue.answer(unit, &json!({ "text": answer })).await {
        Ok(()) => {}
        // Answered or cancelled by someone else in the meantime.
        Err(QueueError::UnitState { state, .. }) => return Err(not_waiting(unit, &state)),
        Err(e) => return Err(e.into()),
    }
    Ok(AnswerReceipt {
        unit,
        run_id,
        database: queue.database().to_string(),
        state: UnitState::Queued,
    })
}

/// The questions queued runs wait on, longest waiting first, at most `limit`.
pub async fn pending_questions(
    config: &DbConfig,
    limit: i64,
) -> Result<Vec<PendingQuestion>, WorkerError> {
    let queue = Queue::open(config).await?;
    Ok(queue
        .waiting_units(limit)
        .await?
        .into_iter()
        .map(PendingQuestion::from_unit)
        .collect())
}

/// The text of the answer an `answer` write carries.
pub(crate) fn answer_text(body: &Value) -> Option<String> {
    match body {
        Value::String(s) => Some(s.clone()),
        b => b.get("text").and_then(Value::as_str).map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn answers_are_checked_before_anything_is_written() {
        assert!(check_answer("1-2-user-authentication").is_ok());
        for bad in ["", "  \n", "a\0b"] {
            assert_eq!(check_answer(bad).unwrap_err().code(), QUEUE_ANSWER_INVALID);
        }
        let long = "x".repeat(MAX_ANSWER_BYTES + 1);
        let e = check_answer(&long).unwrap_err();
        assert_eq!(e.code(), QUEUE_ANSWER_INVALID);
        assert!(e.hint().is_some());
        assert!(check_answer(&"x".repeat(MAX_ANSWER_BYTES)).is_ok());
    }

    #[test]
    fn a_stored_question_reads_back_as_the_run_asked_it() {
        let q = json!({"question": "Which story?", "runId": "r1", "nodeId": "step-01",
                       "reason": "widget", "widget": {"type": "choice", "options": ["a", "b"]}});
        assert_eq!(question_text(&q), "Which story?");
        assert_eq!(question_text(&json!({"message": "m"})), "m");
        assert_eq!(question_text(&json!("plain")), "plain");
        assert_eq!(answer_text(&json!({"text": "yes"})).as_deref(), Some("yes"));
        assert_eq!(answer_text(&json!("yes")).as_deref(), Some("yes"));
        assert_eq!(answer_text(&json!({"other": 1})), None);
    }

    #[test]
    fn a_unit_not_waiting_is_refused_with_a_code_and_a_hint() {
        for state in ["queued", "leased", "done", "failed", "cancelled"] {
            let e = not_waiting(7, state);
            assert_eq!(e.code(), QUEUE_UNIT_NOT_WAITING);
            assert!(e.to_string().contains("unit 7"), "{e}");
            assert!(e.hint().is_some());
        }
    }
}
