//! An epic invocation's report as JSON: the shape `baton epic … --json` prints and
//! `baton serve` returns.

use super::{EpicOutcome, EpicReport};
use serde_json::{Value, json};

/// The outcome as one word.
pub fn outcome_name(o: &EpicOutcome) -> &'static str {
    match o {
        EpicOutcome::Done { .. } => "done",
        EpicOutcome::Waiting { .. } => "waiting",
        EpicOutcome::Paused { .. } => "paused",
        EpicOutcome::Stopped => "stopped",
        EpicOutcome::Interrupted => "interrupted",
        EpicOutcome::Budget { .. } => "budget",
        EpicOutcome::Planned { .. } => "planned",
    }
}

/// `{epicId, outcome, storiesCompleted, phasesRun, …}`: what `baton epic … --json` prints.
pub fn to_json(r: &EpicReport) -> Value {
    let mut v = json!({
        "epicId": r.epic_id,
        "outcome": outcome_name(&r.outcome),
        "storiesCompleted": r.stories_completed,
        "phasesRun": r.phases_run,
    });
    match &r.outcome {
        EpicOutcome::Done { epic_done } => v["epicDone"] = json!(epic_done),
        EpicOutcome::Waiting { story, question } => {
            v["question"] = json!({
                "storyKey": story, "id": question.id, "question": question.question,
                "context": question.context,
            });
        }
        EpicOutcome::Paused { failure } => v["failure"] = json!(failure),
        EpicOutcome::Planned { plan } => {
            v["plan"] = plan
                .iter()
                .map(|p| json!({"storyKey": p.key, "status": p.status, "startsAt": p.phase.as_str()}))
                .collect();
            v["phases"] = r
                .phases
                .iter()
                .map(|(phase, package, workflow)| {
                    json!({"phase": phase.as_str(), "package": package, "workflow": workflow})
                })
                .collect();
        }
        EpicOutcome::Stopped | EpicOutcome::Interrupted => {}
        EpicOutcome::Budget {
            story,
            phase,
            run_id,
            message,
            budget,
        } => {
            v["budget"] = json!({"storyKey": story, "phase": phase.as_str(), "runId": run_id,
                "message": message, "budget": budget});
        }
    }
    v
}
