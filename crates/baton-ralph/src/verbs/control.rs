//! The session controls maestro leaves to hand edits of the JSON, with the rules its skill
//! states: `skip` (A_SKIP_STEP), `pause` (A_PAUSE_SESSION), `resume` (A_RESUME_SESSION, which
//! also repairs the active-pointer deadlock maestro cannot see), `abandon`, and `release` (free
//! the claim of a process that died).

use crate::Context;
use crate::claim::{self, Liveness};
use crate::error::{RalphError, Result};
use crate::handle::Target;
use crate::lease;
use crate::session::Session;
use crate::store::{self, Change};
use crate::time;
use crate::verbs::{Output, index_in, parse_index};
use serde_json::{Value, json};

fn done(s: &Session, verb: &str, text: String, extra: Value) -> Output {
    let mut json = json!({
        "ok": true,
        "verb": verb,
        "session_id": s.id,
        "session_status": s.status(),
        "revision": s.revision(),
        "active_step_index": s.active_index(),
    });
    if let (Value::Object(j), Value::Object(e)) = (&mut json, extra) {
        j.extend(e);
    }
    Output::new(json).out(text)
}

fn require_active(s: &Session, action: &'static str) -> Result<()> {
    if matches!(s.status(), "running" | "paused") {
        Ok(())
    } else {
        Err(RalphError::NotActive {
            status: s.status().to_string(),
            action,
        })
    }
}

/// `skip <i> [--reason T] [--force]`: a pending or failed step becomes `skipped` (a skipped
/// step needs no confirmation for the session to complete). A running step or a decision gate
/// is skipped only with `--force`: skipping a gate bypasses a quality check.
pub fn skip<'a>(
    ctx: &Context,
    session: impl Into<Target<'a>>,
    index: &str,
    reason: Option<&str>,
    force: bool,
    expect: Option<u64>,
) -> Result<Output> {
    parse_index(index)?;
    let (i, s) = store::transact(ctx, session, expect, |s| {
        require_active(s, "changed")?;
        let i = index_in(index, s.len())?;
        let step = s.step(i).ok_or(RalphError::NoClaim)?;
        let status = step.status().to_string();
        let allowed = match status.as_str() {
            "pending" | "failed" => force || step.decision().is_none(),
            "running" => force,
            _ => false,
        };
        if !allowed {
            let (status, action) = if status == "running" {
                ("\"running\"".to_string(), "skip it without --force")
            } else if step.decision().is_some() && status != "skipped" && status != "completed" {
                (
                    format!("a {status} decision gate"),
                    "skip it without --force",
                )
            } else {
                (format!("\"{status}\""), "skip it")
            };
            return Err(RalphError::StepState {
                index: i,
                status,
                action,
            });
        }
        mark_skipped(s, i, reason);
        Ok(Change::write(i))
    })?;
    let label = s.step(i).map(|st| st.label()).unwrap_or_default();
    Ok(done(
        &s,
        "skip",
        format!("— skipped step {i}: {label}\n"),
        json!({"index": i}),
    ))
}

/// A_SKIP_STEP's fields: skipped, not confirmed, the reason kept, the pointer released.
/// Callers check first that the step may be skipped.
pub fn mark_skipped(s: &mut Session, i: usize, reason: Option<&str>) {
    s.set_step(i, "status", json!("skipped"));
    s.set_step(i, "completion_confirmed", json!(false));
    if let Some(r) = reason {
        s.set_step(i, "concerns", json!(r));
    }
    if s.active_index() == Some(i) {
        s.release();
    }
}

/// `pause`: running → paused (already paused: nothing to do).
pub fn pause<'a>(
    ctx: &Context,
    session: impl Into<Target<'a>>,
    expect: Option<u64>,
) -> Result<Output> {
    let (changed, s) = store::transact(ctx, session, expect, |s| {
        require_active(s, "paused")?;
        if s.status() == "paused" {
            return Ok(Change::keep(false));
        }
        s.set("status", json!("paused"));
        Ok(Change::write(true))
    })?;
    let text = if changed {
        format!("⏸ Paused {}\n", s.id)
    } else {
        format!("⏸ {} was already paused\n", s.id)
    };
    Ok(done(&s, "pause", text, json!({"changed": changed})))
}

/// `resume`: A_RESUME_SESSION. Clears an active pointer that no longer holds a running step
/// (completed, skipped, failed — and pending or out of range, the deadlock maestro leaves),
/// puts running steps nobody points at back to pending, paused → running, and resets
/// `consec_exit2_count`.
pub fn resume<'a>(
    ctx: &Context,
    session: impl Into<Target<'a>>,
    expect: Option<u64>,
) -> Result<Output> {
    let (repairs, s) = store::transact(ctx, session, expect, |s| {
        require_active(s, "resumed")?;
        let mut repairs = Vec::new();
        if let Some(a) = s.active_raw().filter(|a| *a < 0) {
            repairs.push(format!("cleared active_step_index {a} (out of range)"));
            s.release();
        }
        if let Some(a) = s.active_index() {
            let status = s.step(a).map(|st| st.status().to_string());
            match status.as_deref() {
                Some("running") => {}
                Some(st) => {
                    repairs.push(format!("cleared active_step_index {a} (step was {st})"));
                    s.release();
                }
                None => {
                    repairs.push(format!("cleared active_step_index {a} (out of range)"));
                    s.release();
                }
            }
        }
        let active = s.active_index();
        let orphans: Vec<usize> = s
            .all_steps()
            .filter(|st| st.status() == "running" && Some(st.index()) != active)
            .map(|st| st.index())
            .collect();
        for i in orphans {
            s.set_step(i, "status", json!("pending"));
            repairs.push(format!(
                "step {i} was running with no active pointer: back to pending"
            ));
        }
        if s.doc
            .get("active_claim")
            .and_then(Value::as_object)
            .is_some()
            && s.claim().is_none_or(|c| Some(c.index) != s.active_index())
        {
            s.set("active_claim", Value::Null);
        }
        if s.status() == "paused" {
            s.set("status", json!("running"));
        }
        if s.doc.contains_key("consec_exit2_count") {
            s.set("consec_exit2_count", json!(0));
        }
        Ok(Change::write(repairs))
    })?;
    let mut text = format!("↻ Resume {}\n", s.id);
    for r in &repairs {
        text.push_str(&format!("  repaired: {r}\n"));
    }
    Ok(done(&s, "resume", text, json!({"repairs": repairs})))
}

/// `abandon [--reason T]`: the session stops for good. maestro's schema has no `abandoned`
/// status, so it becomes `failed` with `abandoned_at` (and `abandon_reason`) recorded; a
/// claimed step is released.
pub fn abandon<'a>(
    ctx: &Context,
    session: impl Into<Target<'a>>,
    reason: Option<&str>,
    expect: Option<u64>,
) -> Result<Output> {
    let ((), s) = store::transact(ctx, session, expect, |s| {
        require_active(s, "abandoned")?;
        s.set("status", json!("failed"));
        s.set("abandoned_at", json!(time::now_iso()));
        if let Some(r) = reason {
            s.set("abandon_reason", json!(r));
        }
        // Nothing runs in an abandoned session: a claimed step goes back to pending.
        if let Some(a) = s.active_index()
            && s.step(a).is_some_and(|st| st.status() == "running")
        {
            s.set_step(a, "status", json!("pending"));
        }
        s.release();
        Ok(Change::write(()))
    })?;
    Ok(done(
        &s,
        "abandon",
        format!("✗ Abandoned {}\n", s.id),
        json!({}),
    ))
}

/// `release [--force]`: frees the claimed step (back to pending) when its owner is a process
/// of this host that is gone; anything else needs `--force`, which also frees the session's
/// lease (maestro v0.5's `execution_owner` and `lease_id`; `owner_epoch` is kept).
pub fn release<'a>(
    ctx: &Context,
    session: impl Into<Target<'a>>,
    force: bool,
    expect: Option<u64>,
) -> Result<Output> {
    let ((index, holder), s) = store::transact(ctx, session, expect, |s| {
        require_active(s, "changed")?;
        // `--force` also frees maestro v0.5's session lease, with or without a claimed step.
        let leased = force && lease::held(s);
        if leased {
            lease::clear(s);
        }
        let Some(index) = s.active_index() else {
            if leased {
                return Ok(Change::write((None, None)));
            }
            return Err(RalphError::NoClaim);
        };
        let holder = s.claim_on(index).and_then(|c| c.owner);
        let running = s.step(index).is_some_and(|st| st.status() == "running");
        if running && !force {
            let liveness = holder.as_deref().map_or(Liveness::Unknown, claim::liveness);
            if liveness != Liveness::Dead {
                return Err(RalphError::ClaimHeld {
                    index,
                    holder: holder.unwrap_or_else(|| "an unrecorded owner".into()),
                    liveness: liveness.describe(),
                });
            }
        }
        if running {
            s.set_step(index, "status", json!("pending"));
        }
        s.release();
        Ok(Change::write((Some(index), holder)))
    })?;
    let by = holder.as_deref().unwrap_or("an unrecorded owner");
    let text = match index {
        Some(index) => {
            format!("released step {index} (was claimed by {by}); it is pending again\n")
        }
        None => "released the session's lease (execution_owner, lease_id)\n".to_string(),
    };
    Ok(done(
        &s,
        "release",
        text,
        json!({"index": index, "previous_owner": holder}),
    ))
}
