//! A decision gate's rules as code, on the status document (the core the `decide` verb and the
//! session loop share): the gate classes, seed 003's confidence and retry guards, the verdict
//! applied (fix-loop template inserted, escalation paused, the gate consumed) and the session's
//! completion test; and the mark a gate settled by code leaves when it asks a person first.
//!
//! Release protocol, with seed 003's defect fixed: the gate is *consumed* by its verdict
//! (completed, confirmed, `verdict` recorded, active pointer released). A `fix` inserts the
//! template of the gate, which closes with exactly one follow-up gate carrying `retry + 1`;
//! the seed's literal protocol would also put the gate itself back to pending *before* the fix
//! steps, so it would be evaluated again before any fix ran, and duplicated.

use super::Context;
use super::chain::{self, Item};
use super::error::{RalphError, Result};
use super::session::Session;
use super::time;
use serde_json::{Value, json};

/// What kind of gate a decision node is (its guards and what `fix` and `escalate` do).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Quality,
    Goal,
    Scope,
    Structural,
}

pub fn class(gate: &str) -> Class {
    match gate {
        "post-verify" | "post-business-test" | "post-review" | "post-test" => Class::Quality,
        "post-goal-audit" => Class::Goal,
        "post-analyze-scope" => Class::Scope,
        _ => Class::Structural,
    }
}

/// The decision line's `type`.
pub fn kind(class: Class) -> &'static str {
    match class {
        Class::Quality => "quality-gate",
        Class::Goal => "goal-gate",
        Class::Scope => "scope-gate",
        Class::Structural => "structural-gate",
    }
}

/// The verdict the guards make of the requested one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adjusted {
    pub verdict: &'static str,
    pub guards: Vec<String>,
    pub warnings: Vec<String>,
    pub suggested: Option<&'static str>,
    pub close_call: bool,
}

/// Seed 003's S_TICK_APPLY guards for quality and goal gates.
pub fn apply_guards(
    requested: &'static str,
    confidence: u8,
    retry: u64,
    max: u64,
    guarded: bool,
) -> Adjusted {
    let mut a = Adjusted {
        verdict: requested,
        guards: Vec::new(),
        warnings: Vec::new(),
        suggested: None,
        close_call: (50..=70).contains(&confidence),
    };
    if !guarded {
        return a;
    }
    if a.verdict == "proceed" && confidence < 60 {
        a.verdict = "fix";
        a.guards
            .push(format!("confidence {confidence} < 60: proceed → fix"));
    }
    if a.verdict == "fix" && retry >= max {
        a.verdict = "escalate";
        a.guards
            .push(format!("retries {retry}/{max} reached: fix → escalate"));
        a.warnings.push("W002: max retries, escalating".into());
    }
    if a.verdict == "fix" && confidence > 95 && retry > 0 {
        a.suggested = Some("proceed");
    }
    if confidence < 60 {
        a.warnings
            .push(format!("W004: low confidence ({confidence})"));
    }
    a
}

pub fn parse_verdict(raw: &str) -> Result<&'static str> {
    ["proceed", "fix", "escalate"]
        .into_iter()
        .find(|v| v.eq_ignore_ascii_case(raw))
        .ok_or_else(|| {
            RalphError::usage(
                "VERDICT_INVALID",
                format!("--verdict must be one of: proceed, fix, escalate (got \"{raw}\")"),
            )
        })
}

pub fn parse_confidence(raw: &str) -> Result<u8> {
    raw.parse::<u8>().ok().filter(|c| *c <= 100).ok_or_else(|| {
        RalphError::usage(
            "CONFIDENCE_INVALID",
            format!("--confidence must be an integer from 0 to 100 (got \"{raw}\")"),
        )
    })
}

/// The gate at `index`, if it may be decided now: a decision node, pending (or running and
/// claimed by the caller through a hand edit, as maestro's skill does), nothing else active,
/// and every earlier step finished (a gate judges the steps before it).
pub fn claimable_gate(s: &Session, index: usize) -> Result<(String, u64, u64)> {
    let step = s.step(index).ok_or(RalphError::NoClaim)?;
    let Some(gate) = step.decision() else {
        return Err(RalphError::NotDecision { index });
    };
    let active = s.active_index();
    if s.active_raw().is_some_and(|a| a != index as i64) {
        return Err(RalphError::NotActiveStep {
            index,
            active: s.active_raw(),
        });
    }
    match step.status() {
        "pending" => {}
        "running" if active == Some(index) => {}
        other => {
            return Err(RalphError::StepState {
                index,
                status: format!("\"{other}\""),
                action: "decide it (only a pending gate is decided)",
            });
        }
    }
    if let Some(blocking) = s
        .all_steps()
        .take(index)
        .find(|st| !matches!(st.status(), "completed" | "skipped"))
    {
        return Err(RalphError::GateOrder {
            index,
            gate: gate.to_string(),
            blocking: blocking.index(),
            blocking_status: blocking.status().to_string(),
        });
    }
    Ok((gate.to_string(), step.retry_count(), step.max_retries()))
}

/// Applies the adjusted verdict. Returns what happened and how many steps were inserted.
pub fn settle(
    ctx: &Context,
    s: &mut Session,
    index: usize,
    gate: &str,
    class: Class,
    adjusted: &Adjusted,
    gaps: &[String],
) -> Result<(&'static str, usize)> {
    let verdict = adjusted.verdict;
    let items: Option<Vec<Item>> = match (class, verdict) {
        (_, "proceed") => None,
        (Class::Quality | Class::Goal, "fix") => {
            let retry = s.step(index).map_or(0, |st| st.retry_count()) + 1;
            chain::template_items(gate, gaps, retry)
        }
        (Class::Quality | Class::Goal, _) => Some(chain::escalate_items(gaps)),
        (_, "fix") => {
            return Err(RalphError::VerdictNotApplicable {
                gate: gate.to_string(),
                verdict: verdict.to_string(),
            });
        }
        // escalate on a scope or structural gate: a person decides; the gate stays pending.
        _ => {
            s.set("status", json!("paused"));
            s.release();
            if s.step(index).is_some_and(|st| st.status() == "running") {
                s.set_step(index, "status", json!("pending"));
            }
            return Ok(("paused", 0));
        }
    };
    let inserted = match &items {
        Some(items) => chain::insert_after(ctx, s, index, items)?,
        None => 0,
    };
    consume(s, index, verdict);
    if verdict == "proceed" && class == Class::Goal {
        goals_done(s);
    }
    if verdict == "proceed"
        && class == Class::Quality
        && let Some(Value::Array(passed)) = s.doc.get_mut("passed_gates")
        && !passed.iter().any(|g| g.as_str() == Some(gate))
    {
        passed.push(json!(gate));
    }
    if verdict == "proceed" && finished(s) {
        s.set("status", json!("completed"));
        return Ok(("session-completed", inserted));
    }
    Ok((
        if inserted > 0 {
            "inserted"
        } else {
            "completed"
        },
        inserted,
    ))
}

/// The gate yielded its verdict: completed, confirmed, released.
pub fn consume(s: &mut Session, index: usize, verdict: &str) {
    s.set_step(index, "status", json!("completed"));
    s.set_step(index, "completion_confirmed", json!(true));
    s.set_step(index, "completed_at", json!(time::now_iso()));
    s.set_step(index, "verdict", json!(verdict));
    s.release();
}

/// A_APPLY_GOAL_DONE: every sub-goal done and confirmed, and the session's flag that lets it
/// complete.
fn goals_done(s: &mut Session) {
    let now = time::now_iso();
    if let Some(Value::Array(goals)) = s.doc.get_mut("task_decomposition") {
        for goal in goals.iter_mut().filter_map(Value::as_object_mut) {
            goal.insert("status".into(), json!("done"));
            goal.insert("completion_confirmed".into(), json!(true));
            goal.insert("completed_at".into(), json!(now));
        }
        s.set("task_decomposition_all_done", json!(true));
    }
}

/// A_COMPLETE_SESSION's test: nothing left to run, every non-skipped step confirmed, and the
/// sub-goals all done when the session has them.
pub fn finished(s: &Session) -> bool {
    let steps_done = s
        .all_steps()
        .all(|st| st.status() == "skipped" || (st.status() == "completed" && st.confirmed()));
    let goals_done = match s.doc.get("task_decomposition") {
        Some(Value::Array(goals)) if !goals.is_empty() => {
            s.doc
                .get("task_decomposition_all_done")
                .and_then(Value::as_bool)
                == Some(true)
        }
        _ => true,
    };
    steps_done && goals_done
}

/// The step field that records a question a code-settled gate asked (`scope`,
/// `planning-mode`); it stays on the gate once it is settled.
pub const ASKED: &str = "asked";

/// Pauses the session at gate `index` to ask `question` (inside the caller's transaction):
/// the gate stays pending, marked with the question.
pub fn mark_asked(s: &mut Session, index: usize, question: &str) {
    s.set_step(index, ASKED, json!(question));
    s.set("status", json!("paused"));
    s.release();
}
