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

/// `{epicId, outcome, storiesCompleted, phasesRun, …}`: what `baton epic … --json` prints (a
/// dry run's `plan`, and `parallel`: the schedule of a parallel epic), with what the plan cannot
/// show (`unrecognized`, `notRunnable`, `legacyMapped`,
/// `retroItems`, `warnings`) and, with `[autopilot] retrospective = true`, `retrospective`.
pub fn to_json(r: &EpicReport) -> Value {
    let mut v = json!({
        "epicId": r.epic_id,
        "outcome": outcome_name(&r.outcome),
        "storiesCompleted": r.stories_completed,
        "phasesRun": r.phases_run,
        "pipeline": r.pipeline,
    });
    if let (Value::Object(map), Ok(Value::Object(findings))) =
        (&mut v, serde_json::to_value(&r.findings))
    {
        map.extend(findings);
    }
    // `[autopilot] retrospective = true`: whether the epic's retrospective runs, and what it writes.
    if let Some(r) = &r.retrospective {
        v["retrospective"] = json!(r);
    }
    match &r.outcome {
        EpicOutcome::Done { epic_done } => {
            v["epicDone"] = json!(epic_done);
            v["runnableLeft"] = json!(r.runnable_left);
        }
        EpicOutcome::Waiting { story, question } => {
            v["question"] = json!({
                "storyKey": story, "id": question.id, "question": question.question,
                "context": question.context,
            });
        }
        EpicOutcome::Paused { failure } => v["failure"] = json!(failure),
        EpicOutcome::Planned { plan, parallel } => {
            if let Some(p) = parallel {
                v["parallel"] = json!(p);
            }
            v["plan"] = plan
                .iter()
                .map(|p| {
                    let mut j = json!({"storyKey": p.key, "status": p.status, "startsAt": p.phase.as_str()});
                    if let Some(f) = &p.file {
                        j["file"] = json!(f);
                    }
                    if let Some(n) = &p.note {
                        j["note"] = json!(n);
                    }
                    j
                })
                .collect();
            v["phases"] = r
                .phases
                .iter()
                .map(|l| {
                    let mut p = json!({"phase": l.phase.as_str(), "package": l.package, "workflow": l.workflow});
                    if let Some(how) = &l.how {
                        p["rendered"] = json!(how);
                    }
                    p
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
