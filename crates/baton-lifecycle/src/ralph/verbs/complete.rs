//! `complete <index> --status DONE|DONE_WITH_CONCERNS|NEEDS_RETRY|BLOCKED` and `retry <index>`.
//!
//! maestro's rules and transitions, field for field: the index must be the active step (E008)
//! and the step must be running (E009). On top: a decision node is refused (gates are settled
//! with `decide`), `--owner` must match the claim when given, and the change is locked,
//! compare-and-swapped and durable.

use crate::ralph::Context;
use crate::ralph::error::{RalphError, Result};
use crate::ralph::schema::COMPLETION_STATUSES;
use crate::ralph::store::{self, Change};
use crate::ralph::time;
use crate::ralph::verbs::{Output, index_in, parse_index};
use serde_json::{Value, json};

#[derive(Debug, Clone, Default)]
pub struct CompleteArgs {
    pub index: String,
    pub status: String,
    pub evidence: Vec<String>,
    pub concerns: Option<String>,
    pub reason: Option<String>,
    pub owner: Option<String>,
    pub expect_revision: Option<u64>,
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

pub fn run(ctx: &Context, session: Option<&str>, args: &CompleteArgs) -> Result<Output> {
    let status = parse_status(&args.status)?;
    parse_index(&args.index)?;
    let (index, s) = store::transact(ctx, session, args.expect_revision, |s| {
        if matches!(s.status(), "completed" | "failed") {
            return Err(RalphError::NotActive {
                status: s.status().to_string(),
                action: "changed",
            });
        }
        let index = index_in(&args.index, s.len())?;
        let step = s.step(index).ok_or(RalphError::IndexOutOfRange {
            index: args.index.clone(),
            len: s.len(),
        })?;
        if let Some(gate) = step.decision() {
            return Err(RalphError::IsDecision {
                index,
                gate: gate.to_string(),
            });
        }
        let active = s.active_index();
        if active != Some(index) {
            return Err(RalphError::NotActiveStep { index, active });
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
        Ok(Change::write(index))
    })?;
    let step_status = s.step(index).map_or("", |st| st.status()).to_string();
    let json = json!({
        "ok": true,
        "session_id": s.id,
        "index": index,
        "status": status,
        "step_status": step_status,
        "session_status": s.status(),
        "revision": s.revision(),
    });
    Ok(Output::new(json).err(format!(
        "[ralph complete] session={} step={index} status={status}\n",
        s.id
    )))
}

/// maestro's `applyStatus`, in its assignment order (so fields a file lacks are appended in
/// the same order maestro appends them).
fn apply(s: &mut crate::ralph::session::Session, i: usize, status: &str, args: &CompleteArgs) {
    let now = time::now_iso();
    let evidence = match args.evidence.len() {
        0 => Value::Null,
        1 => json!(args.evidence[0]),
        _ => json!(args.evidence),
    };
    let mut set = |k: &str, v: Value| s.set_step(i, k, v);
    match status {
        "DONE" => {
            set("status", json!("completed"));
            set("completion_confirmed", json!(true));
            set("completion_status", json!("DONE"));
            set("completion_evidence", evidence);
            set("completed_at", json!(now));
            set("concerns", Value::Null);
        }
        "DONE_WITH_CONCERNS" => {
            set("status", json!("completed"));
            set("completion_confirmed", json!(true));
            set("completion_status", json!("DONE_WITH_CONCERNS"));
            set("completion_evidence", evidence);
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
