//! Taking over a session another driver started (`baton session adopt`, `baton ralph
//! import`): a session maestro's skills built and drove with `maestro ralph` (v0.4.18 to
//! v0.5.50, `ralph-*` or `maestro-*`), kept in its folder and its files, made ready for
//! `baton session continue` to drive to the end.
//!
//! What changes, in one locked write:
//! - a step left `running` (maestro's agent stopped inside it, or claimed a gate by hand) goes
//!   back to `pending`, and the active pointer is cleared: baton runs it again from its start;
//! - maestro v0.5's lease (`execution_owner`, `lease_id`) is released: baton drives now (a
//!   session that still names an owner is refused without `force`, since that agent may still
//!   be at work; the epoch is kept);
//! - a step still to run whose command file is gone, or was never recorded (maestro's static
//!   `/maestro` chains wrote none), is resolved by its skill name as `baton session start`
//!   resolves one (the project's, the home's, then baton's bundled skills); a skill found
//!   nowhere is E006 and nothing is written;
//! - `consec_exit2_count` is reset (A_RESUME_SESSION), and `adopted_at` / `adopted_from`
//!   record the takeover.
//!
//! Everything else (steps done, decisions, sub-goals, unknown fields, the order of fields) is
//! kept. A paused session stays paused: `continue` asks why (a failed step: retry, skip or
//! abort) or goes on (paused by hand).

use baton_ralph::Context;
use baton_ralph::chain;
use baton_ralph::check::{self, Finding, Scope};
use baton_ralph::error::{RalphError, Result};
use baton_ralph::lease;
use baton_ralph::manifest;
use baton_ralph::session::Session;
use baton_ralph::store::{self, Change};
use baton_ralph::time;
use serde_json::{Value, json};

/// What the takeover did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adopted {
    pub session_id: String,
    pub status: String,
    /// One line per change, as a person reads it.
    pub changes: Vec<String>,
    /// What `ralph check` still says afterwards (warnings; an error would have refused).
    pub findings: Vec<Finding>,
}

/// Whether step `i`'s command file must be found again: no path, or a path that is gone.
fn unresolved(ctx: &Context, s: &Session, i: usize) -> bool {
    let Some(step) = s.step(i) else {
        return false;
    };
    if step.decision().is_some() || !matches!(step.status(), "pending" | "running") {
        return false;
    }
    match step.command_path() {
        None => true,
        Some(p) => !manifest::stored_path(p, ctx.home.as_deref()).is_file(),
    }
}

/// Takes over the running or paused session `session` (the newest one when `None`).
pub fn adopt(ctx: &Context, session: Option<&str>, force: bool) -> Result<Adopted> {
    let (changes, s) = store::transact(ctx, session, None, |s| {
        if !matches!(s.status(), "running" | "paused") {
            return Err(RalphError::NotActive {
                status: s.status().to_string(),
                action: "adopted",
            });
        }
        let mut changes = Vec::new();
        if lease::held(s) {
            if !force {
                return Err(RalphError::usage(
                    "SESSION_LEASED",
                    format!(
                        "the session is leased to {:?} (lease {:?}): that agent may still drive \
                         it; pass --force to take it over anyway",
                        s.str("execution_owner").unwrap_or(""),
                        s.str("lease_id").unwrap_or("")
                    ),
                ));
            }
            lease::clear(s);
            changes.push("released the lease (execution_owner, lease_id)".to_string());
        }
        // Command files first: nothing is written when a skill is found nowhere.
        let missing: Vec<usize> = (0..s.len()).filter(|&i| unresolved(ctx, s, i)).collect();
        if !missing.is_empty() {
            let mut steps: Vec<Value> = missing
                .iter()
                .filter_map(|&i| s.steps().get(i).cloned())
                .collect();
            let not_found = chain::resolve_commands(ctx, chain::platform_of(s), &mut steps);
            if !not_found.is_empty() {
                return Err(RalphError::SkillsMissing(not_found));
            }
            for (&i, step) in missing.iter().zip(steps) {
                let label = s.step(i).map(|st| st.label()).unwrap_or_default();
                for key in ["command_scope", "command_path"] {
                    s.set_step(i, key, step.get(key).cloned().unwrap_or(Value::Null));
                }
                let scope = step
                    .get("command_scope")
                    .and_then(Value::as_str)
                    .unwrap_or("?");
                changes.push(format!("step {i} ({label}): command file found ({scope})"));
            }
        }
        let running: Vec<usize> = s
            .all_steps()
            .filter(|st| st.status() == "running")
            .map(|st| st.index())
            .collect();
        for i in running {
            let label = s.step(i).map(|st| st.label()).unwrap_or_default();
            s.set_step(i, "status", json!("pending"));
            changes.push(format!(
                "step {i} ({label}) was running under the previous driver: pending again"
            ));
        }
        if s.active_raw().is_some() || s.claim().is_some() {
            if let Some(a) = s.active_raw() {
                changes.push(format!("cleared active_step_index {a}"));
            }
            s.release();
        }
        if s.doc.contains_key("consec_exit2_count") {
            s.set("consec_exit2_count", json!(0));
        }
        let from = s
            .str("source")
            .filter(|v| !v.is_empty())
            .unwrap_or("ralph")
            .to_string();
        s.set("adopted_at", json!(time::now_iso()));
        s.set("adopted_from", json!(from));
        let findings = check::check(ctx, Some(&s.doc), &[], Scope::Unfinished);
        if check::has_errors(&findings) {
            return Err(RalphError::Findings(findings));
        }
        Ok(Change::write(changes))
    })?;
    let findings = check::check(ctx, Some(&s.doc), &[], Scope::All);
    Ok(Adopted {
        session_id: s.id.clone(),
        status: s.status().to_string(),
        changes,
        findings,
    })
}
