//! Why a run stopped and what a person does next: the same words in `baton runs show` and on
//! the run's page of `baton serve`, so the page never says less than the terminal.

use crate::run_meta::{BUDGET_EXCEEDED, MODEL_UNREACHABLE};
use crate::runs::{Phase, RunMetadata};
use serde_json::Value;

/// The error a run stopped on (`waitingFor.error` of its `run.json`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFailure {
    pub code: String,
    pub message: String,
    /// What fixes the cause, when baton knows.
    pub hint: Option<String>,
}

/// The hint for a model that was never reached.
pub const UNREACHABLE_HINT: &str = "the model was never reached; start its server, or fix the endpoint (--base-url, OPENAI_BASE_URL, base_url under [llm] in baton.toml)";

/// The first 13 characters of a run id: enough for every command that takes one.
pub fn short_id(id: &str) -> &str {
    id.get(..13).unwrap_or(id)
}

/// The error `run` stopped on, if it stopped on one.
pub fn failure(run: &RunMetadata) -> Option<RunFailure> {
    let error = run.waiting_for.as_ref()?.get("error")?;
    let text = |k: &str| error.get(k).and_then(Value::as_str).map(str::to_owned);
    let code = text("code").unwrap_or_else(|| "ERROR".to_string());
    let message = text("message").unwrap_or_else(|| error.to_string());
    let hint = text("hint").or_else(|| {
        (run.stop_reason.as_deref() == Some(MODEL_UNREACHABLE) || code == "LLM_CONNECT_ERROR")
            .then(|| UNREACHABLE_HINT.to_string())
    });
    Some(RunFailure {
        code,
        message,
        hint,
    })
}

/// The command that goes on with `run`, and why, when one does: a failed run is retried, a run
/// stopped by its budget goes on with a larger one, an interrupted run is resumed. `None` for a
/// completed run, one that waits for an answer, or one a process drives.
pub fn next_step(run: &RunMetadata, interrupted: bool) -> Option<String> {
    let short = short_id(&run.run_id);
    if interrupted {
        return Some(format!(
            "no process drives it; continue with: baton resume {short}"
        ));
    }
    let replay_ran_out = failure(run).is_some_and(|f| f.code.starts_with("REPLAY_"));
    match run.phase {
        // A replay that diverged or ran out fails the same way on a plain resume.
        Phase::Failed if replay_ran_out => Some(format!(
            "the run is kept; the recorded trace cannot take it further: go on live with baton resume {short} --model <MODEL>, or record a new trace"
        )),
        Phase::Failed => Some(format!("the run is kept; retry with: baton resume {short}")),
        Phase::Idle if run.stop_reason.as_deref() == Some(BUDGET_EXCEEDED) => Some(format!(
            "nothing lost; continue with a larger budget: baton resume {short} --budget-tokens N (or --budget-usd X)"
        )),
        Phase::Idle => Some(format!("continue with: baton resume {short}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(phase: &str, waiting: Option<Value>, reason: Option<&str>) -> RunMetadata {
        let mut v = json!({
            "runId": "0196abcd-1234-7000-8000-000000000000", "projectId": "p", "packageId": "x",
            "packageSha256": "00", "workflowRef": "w", "activeAgentId": "a", "phase": phase,
            "createdAt": "2026-11-22T10:00:00Z", "lastUpdatedAt": "2026-11-22T10:01:00Z",
        });
        if let Some(w) = waiting {
            v["waitingFor"] = w;
        }
        if let Some(r) = reason {
            v["stopReason"] = json!(r);
        }
        serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_failed_run_names_its_error_hint_and_the_retry() {
        let r = run(
            "failed",
            Some(json!({"error": {"code": "LLM_CONNECT_ERROR", "message": "refused"}})),
            Some(MODEL_UNREACHABLE),
        );
        let f = failure(&r).unwrap_or_else(|| panic!("a failure"));
        assert_eq!(f.code, "LLM_CONNECT_ERROR");
        assert_eq!(f.message, "refused");
        assert_eq!(f.hint.as_deref(), Some(UNREACHABLE_HINT));
        assert_eq!(
            next_step(&r, false).as_deref(),
            Some("the run is kept; retry with: baton resume 0196abcd-1234")
        );
    }

    #[test]
    fn a_replay_that_cannot_go_on_is_continued_live() {
        for code in ["REPLAY_MISMATCH", "REPLAY_EXHAUSTED"] {
            let r = run(
                "failed",
                Some(
                    json!({"error": {"code": code, "message": "the trace and the workflow disagree"}}),
                ),
                None,
            );
            let next = next_step(&r, false).unwrap_or_default();
            assert!(next.contains("--model <MODEL>"), "{next}");
            assert!(!next.contains("retry with"), "{next}");
        }
    }

    #[test]
    fn a_budget_stop_asks_for_a_larger_budget_and_a_completed_run_for_nothing() {
        let r = run(
            "idle",
            Some(json!({"error": {"code": "BUDGET_EXCEEDED", "message": "m", "hint": "h"}})),
            Some(BUDGET_EXCEEDED),
        );
        assert_eq!(failure(&r).and_then(|f| f.hint).as_deref(), Some("h"));
        assert!(next_step(&r, false).is_some_and(|n| n.contains("--budget-tokens N")));
        let done = run("completed", None, None);
        assert_eq!(failure(&done), None);
        assert_eq!(next_step(&done, false), None);
        assert!(next_step(&done, true).is_some_and(|n| n.contains("baton resume")));
    }
}
