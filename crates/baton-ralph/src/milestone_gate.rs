//! The milestone gate (`post-milestone`) on the status document: seed 003's
//! A_STRUCTURAL_EVALUATE outcome (the next milestone's chain, or the end of the session)
//! applied in the same locked write as the gate's decision, so a kill leaves either the gate
//! pending or the advance done, never half of it.
//!
//! What the outcome is needs the project's `.workflow/state.json` and the build rules of
//! `baton session start`: a [`MilestonePlanner`] works it out (baton-lifecycle's
//! `session::milestone::Planner`); this module only applies it.

use super::Context;
use super::chain::{self, PlanningMode};
use super::error::{RalphError, Result};
use super::gate;
use super::session::Session;
use serde_json::{Map, Value, json};

/// The milestone gate.
pub const GATE: &str = "post-milestone";

/// The id of the question asked for a multi-phase next milestone without `-y`.
pub const QUESTION: &str = "planning-mode";

/// What the milestone gate does.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Go on with the next milestone: these steps after the gate.
    Advance {
        from: String,
        to: String,
        phase: Option<u64>,
        planning: PlanningMode,
        steps: Vec<Value>,
    },
    /// The session ends here.
    End {
        from: Option<String>,
        kind: String,
        reason: String,
        /// `adhoc`: state.json's `current_milestone` is set to null.
        clear_current: bool,
    },
    /// The next milestone has several phases and nobody said how to plan them.
    Ask {
        from: String,
        to: String,
        phases: usize,
    },
}

/// Works out what the milestone gate does for a session, and changes the project's
/// `.workflow/state.json` when an adhoc milestone ends.
pub trait MilestonePlanner {
    /// What the gate does for `s`; `planning` answers the planning-mode question (ignored when
    /// it is not asked).
    fn evaluate(
        &self,
        ctx: &Context,
        s: &Session,
        planning: Option<PlanningMode>,
    ) -> Result<Outcome>;

    /// `adhoc`: state.json's `current_milestone` set to null when it still names `milestone`.
    fn clear_current(&self, ctx: &Context, milestone: &str) -> Result<()>;
}

/// Applies an advance to the session fields (A_ADVANCE_MILESTONE step 1); the steps are
/// inserted by the caller.
pub fn advance_fields(s: &mut Session, to: &str, phase: Option<u64>, planning: PlanningMode) {
    s.set("milestone", json!(to));
    s.set("phase", phase.map_or(Value::Null, |p| json!(p)));
    if s.doc.contains_key("phase_is_new") {
        s.set("phase_is_new", json!(false));
    }
    s.set(
        "planning_mode",
        json!(match planning {
            PlanningMode::Unified => "unified",
            PlanningMode::Independent => "independent",
        }),
    );
    s.set("passed_gates", json!([]));
}

/// The person's planning-mode choice for the next milestone.
pub fn parse_planning(raw: &str) -> Result<PlanningMode> {
    match raw.trim() {
        "unified" => Ok(PlanningMode::Unified),
        "independent" => Ok(PlanningMode::Independent),
        other => Err(RalphError::usage(
            "PLANNING_MODE_INVALID",
            format!("--planning-mode must be unified or independent (got \"{other}\")"),
        )),
    }
}

/// `proceed` on the milestone gate: the next milestone's chain inserted after it, or the end
/// of the session (as the planner says). Returns the effect, the steps inserted and the fields
/// the decision line gets (`milestone_from`, `milestone_to`, `milestone_type`).
pub fn settle(
    ctx: &Context,
    s: &mut Session,
    index: usize,
    planning: Option<PlanningMode>,
    planner: &dyn MilestonePlanner,
) -> Result<(&'static str, usize, Map<String, Value>)> {
    let mut extra = Map::new();
    match planner.evaluate(ctx, s, planning)? {
        Outcome::Ask { from, to, phases } => Err(RalphError::usage(
            "PLANNING_MODE_REQUIRED",
            format!(
                "milestone {from} is done; the next one, {to}, has {phases} phases: say how to \
                 plan them with --planning-mode unified|independent"
            ),
        )),
        Outcome::Advance {
            from,
            to,
            phase,
            planning,
            steps,
        } => {
            let inserted = chain::insert_steps_after(ctx, s, index, steps)?;
            advance_fields(s, &to, phase, planning);
            // The gate closes its milestone: the board groups the steps by it.
            s.set_step(index, "milestone_id", json!(from));
            gate::consume(s, index, "proceed");
            extra.insert("milestone_from".into(), json!(from));
            extra.insert("milestone_to".into(), json!(to));
            extra.insert("milestone_type".into(), json!("standard"));
            Ok(("milestone-advanced", inserted, extra))
        }
        Outcome::End {
            from,
            kind,
            reason,
            clear_current,
        } => {
            if clear_current && let Some(m) = &from {
                // state.json first: a kill before status.json's write finds the gate pending
                // and clears (nothing) again.
                planner.clear_current(ctx, m)?;
            }
            if let Some(m) = &from {
                s.set_step(index, "milestone_id", json!(m));
            }
            gate::consume(s, index, "proceed");
            extra.insert("milestone_from".into(), json!(from));
            extra.insert("milestone_to".into(), Value::Null);
            extra.insert("milestone_type".into(), json!(kind));
            extra.insert("milestone_end".into(), json!(reason));
            if gate::finished(s) {
                s.set("status", json!("completed"));
                return Ok(("session-completed", 0, extra));
            }
            Ok(("completed", 0, extra))
        }
    }
}
