//! `complete <index> --status DONE|DONE_WITH_CONCERNS|NEEDS_RETRY|BLOCKED` and `retry <index>`.
//!
//! maestro's rules and transitions, field for field: the index must be the active step (E008)
//! and the step must be running (E009). From maestro v0.5: the completion record
//! (`--summary`, `--decisions`, `--caveats`, `--deferred`), the lease flags, `--expected-skill`
//! and `--expected-step-index`, and a repeated identical `complete` answered as a success. On
//! top: a decision node is refused (gates are settled with `decide`), `--owner` must match the
//! claim when given, and the change is locked, compare-and-swapped and durable.

use crate::Context;
use crate::error::{RalphError, Result};
use crate::handle::Target;
use crate::lease::Lease;
use crate::schema::COMPLETION_STATUSES;
use crate::session::Step;
use crate::store::{self, Change};
use crate::time;
use crate::verbs::{Output, index_in, parse_index};
use serde_json::{Value, json};

#[derive(Debug, Clone, Default)]
pub struct CompleteArgs {
    pub index: String,
    pub status: String,
    pub evidence: Vec<String>,
    pub concerns: Option<String>,
    pub reason: Option<String>,
    /// maestro v0.5.38's completion record: `--summary`, `--decisions` (repeatable),
    /// `--caveats`, `--deferred` (repeatable).
    pub summary: Option<String>,
    pub decisions: Vec<String>,
    pub caveats: Option<String>,
    pub deferred: Vec<String>,
    pub owner: Option<String>,
    /// maestro v0.5.50's lease flags.
    pub lease: Lease,
    /// `--expected-skill`: the step must run this skill.
    pub expected_skill: Option<String>,
    /// `--expected-step-index`: must equal the index (as written).
    pub expected_step_index: Option<String>,
    pub expect_revision: Option<u64>,
}

impl CompleteArgs {
    fn has_record(&self) -> bool {
        self.summary.is_some()
            || self.caveats.is_some()
            || !self.decisions.is_empty()
            || !self.deferred.is_empty()
    }
}

/// `--status`, case-insensitive (maestro upper-cases it). `NEEDS_CONTEXT` is not a verdict.
pub fn parse_status(raw: &str) -> Result<&'static str> {
    let upper = raw.to_uppercase();
    COMPLETION_STATUSES
        .iter()
        .find(|s| **s == upper)
        .copied()
        .ok_or_else(|| {
            RalphError::usage(
                "STATUS_INVALID",
                format!(
                    "--status must be one of: {} (got \"{raw}\")",
                    COMPLETION_STATUSES.join(", ")
                ),
            )
        })
}

/// What `complete` did: recorded the outcome, or found it already recorded.
enum Done {
    Recorded(usize),
    Again(usize),
}

pub fn run<'a>(
    ctx: &Context,
    session: impl Into<Target<'a>>,
    args: &CompleteArgs,
) -> Result<Output> {
    // maestro's parser takes `-1` for an option it does not know, before anything else.
    if args.index.starts_with('-') && args.index.len() > 1 {
        return Err(RalphError::OptionUnknown(args.index.clone()));
    }
    let status = parse_status(&args.status)?;
    parse_index(&args.index)?;
    let (done, s) = store::transact(ctx, session, args.expect_revision, |s| {
        args.lease.check(s, "complete")?;
        let index = index_in(&args.index, s.len())?;
        let step = s.step(index).ok_or(RalphError::IndexOutOfRange {
            index: args.index.clone(),
            len: s.len(),
        })?;
        if let Some(expected) = &args.expected_skill
            && step.skill() != expected
        {
            return Err(RalphError::ExpectedSkill {
                expected: expected.clone(),
                actual: step.skill().to_string(),
            });
        }
        if let Some(expected) = &args.expected_step_index
            && expected.trim().parse::<usize>().ok() != Some(index)
        {
            return Err(RalphError::ExpectedIndex {
                expected: expected.clone(),
                index,
            });
        }
        if let Some(gate) = step.decision() {
            return Err(RalphError::IsDecision {
                index,
                gate: gate.to_string(),
            });
        }
        // maestro v0.5.50: the same outcome again is a success, another one is refused.
        if matches!(step.status(), "completed" | "failed") {
            if same_result(&step, status, args) {
                return Ok(Change::keep(Done::Again(index)));
            }
            return Err(RalphError::CompletionConflict { index });
        }
        if matches!(s.status(), "completed" | "failed") {
            return Err(RalphError::NotActive {
                status: s.status().to_string(),
                action: "changed",
            });
        }
        if s.active_index() != Some(index) {
            return Err(RalphError::NotActiveStep {
                index,
                active: s.active_raw(),
            });
        }
        if step.status() != "running" {
            return Err(RalphError::StepNotRunning {
                index,
                status: step.status().to_string(),
            });
        }
        if let Some(caller) = &args.owner
            && let Some(holder) = s.claim_on(index).and_then(|c| c.owner)
            && &holder != caller
        {
            return Err(RalphError::OwnerMismatch {
                index,
                holder,
                caller: caller.clone(),
            });
        }
        apply(s, index, status, args);
        Ok(Change::write(Done::Recorded(index)))
    })?;
    let (index, again) = match done {
        Done::Recorded(i) => (i, false),
        Done::Again(i) => (i, true),
    };
    let step_status = s.step(index).map_or("", |st| st.status()).to_string();
    let json = json!({
        "ok": true,
        "session_id": s.id,
        "index": index,
        "status": status,
        "step_status": step_status,
        "session_status": s.status(),
        "idempotent": again,
        "revision": s.revision(),
    });
    let line = if again {
        format!(
            "[ralph complete] idempotent success for session={} step={index}\n",
            s.id
        )
    } else {
        format!(
            "[ralph complete] session={} step={index} status={status}\n",
            s.id
        )
    };
    Ok(Output::new(json).err(line))
}

/// maestro's `isSameResult`: the status, summary, caveats, evidence, decisions and deferred
/// items all as recorded (absent and null alike).
fn same_result(step: &Step, status: &str, args: &CompleteArgs) -> bool {
    let text = |k: &str| step.str(k).map(str::to_owned);
    let list = |k: &str| -> Vec<String> {
        match step.get(k) {
            Some(Value::String(v)) => vec![v.clone()],
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                .collect(),
            _ => Vec::new(),
        }
    };
    step.str("completion_status") == Some(status)
        && text("completion_summary") == args.summary
        && text("completion_caveats") == args.caveats
        && list("completion_evidence") == args.evidence
        && list("completion_decisions") == args.decisions
        && list("completion_deferred") == args.deferred
}

/// maestro's `applyStatus`, in its assignment order (so fields a file lacks are appended in
/// the same order maestro appends them).
fn apply(s: &mut crate::session::Session, i: usize, status: &str, args: &CompleteArgs) {
    let now = time::now_iso();
    let evidence = match args.evidence.len() {
        0 => Value::Null,
        1 => json!(args.evidence[0]),
        _ => json!(args.evidence),
    };
    // maestro v0.5.38's completion record, on protocol-2 sessions (and whenever a record flag
    // is given); a v0.4.18 session keeps v0.4.18's fields.
    let record = s.str("ralph_protocol_version") == Some("2") || args.has_record();
    let list = |items: &[String]| {
        if items.is_empty() {
            Value::Null
        } else {
            json!(items)
        }
    };
    let (summary, decisions) = (json!(args.summary), list(&args.decisions));
    let (caveats, deferred) = (json!(args.caveats), list(&args.deferred));
    let mut set = |k: &str, v: Value| s.set_step(i, k, v);
    match status {
        "DONE" => {
            set("status", json!("completed"));
            set("completion_confirmed", json!(true));
            set("completion_status", json!("DONE"));
            set("completion_evidence", evidence);
            if record {
                set("completion_summary", summary);
                set("completion_decisions", decisions);
                set("completion_caveats", caveats);
                set("completion_deferred", deferred);
            }
            set("completed_at", json!(now));
            set("concerns", Value::Null);
        }
        "DONE_WITH_CONCERNS" => {
            set("status", json!("completed"));
            set("completion_confirmed", json!(true));
            set("completion_status", json!("DONE_WITH_CONCERNS"));
            set("completion_evidence", evidence);
            if record {
                set("completion_summary", summary);
                set("completion_decisions", decisions);
                set("completion_caveats", caveats);
                set("completion_deferred", deferred);
            }
            set("concerns", json!(args.concerns));
            set("completed_at", json!(now));
        }
        "NEEDS_RETRY" => {
            set("status", json!("pending"));
            set("retried", json!(true));
            set("completion_confirmed", json!(false));
            set("completion_status", json!("NEEDS_RETRY"));
            set("completion_evidence", evidence);
            set("completed_at", Value::Null);
        }
        _ => {
            set("status", json!("failed"));
            set("completion_confirmed", json!(false));
            set("completion_status", json!("BLOCKED"));
            set("completion_evidence", evidence);
            set("concerns", json!(args.reason));
            set("completed_at", json!(now));
            s.set("status", json!("paused"));
        }
    }
    s.release();
}
