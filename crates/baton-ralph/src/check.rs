//! `check`: maestro's finding catalogue (E006–E010, W005–W008, same conditions and messages)
//! plus the two states maestro cannot see:
//!
//! - **W011** `active_step_index` points at a *pending* step. maestro deadlocks there: `next`
//!   answers exit 3, `complete` answers E009, `check` is silent. A warning (maestro's exit codes
//!   and `ok` are kept); `resume` repairs it.
//! - **W012** a later `<required_reading>` block names a missing file (maestro reads only the
//!   first block, so it is no E007).
//! - **W009** a step is `running` but the active pointer is elsewhere (a claim lost by a hand
//!   edit); `next` would run past it. `resume` puts it back to pending.

use super::context::Context;
pub use super::finding::{Finding, Level};
use super::manifest::{self, Manifest};
use super::schema::SchemaIssue;
use super::session::Step;
use serde_json::{Map, Value};

/// Which steps' command files are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every execution step that is not skipped (maestro's `check`).
    All,
    /// Only steps still to run (`next`: a missing command file of a finished step does not
    /// stop the session).
    Unfinished,
}

/// All findings for a session document (valid or not: schema problems become E010 findings
/// and the rest of the checks run on whatever is readable).
pub fn check(
    ctx: &Context,
    doc: Option<&Map<String, Value>>,
    issues: &[SchemaIssue],
    scope: Scope,
) -> Vec<Finding> {
    let mut findings: Vec<Finding> = issues
        .iter()
        .map(|i| Finding::new(Level::E, "E010", i.message.clone(), i.step_index))
        .collect();
    let Some(session) = doc else {
        return findings;
    };
    let Some(steps) = session.get("steps").and_then(Value::as_array) else {
        return findings;
    };
    let steps: Vec<Step> = steps
        .iter()
        .filter_map(Value::as_object)
        .map(Step)
        .collect();
    active_pointer(session, &steps, &mut findings);
    for step in &steps {
        if step.status() == "completed" && !step.confirmed() {
            findings.push(Finding::new(
                Level::W,
                "W006",
                "step.status=completed but completion_confirmed=false",
                Some(step.index()),
            ));
        }
    }
    for step in &steps {
        if step.decision().is_some() || step.status() == "skipped" {
            continue;
        }
        if scope == Scope::Unfinished && !matches!(step.status(), "pending" | "running") {
            continue;
        }
        command_file(ctx, step, &mut findings);
    }
    if let Some(last) = steps.last()
        && last.decision().is_none()
        && !last.skill().is_empty()
        && last.skill() != "maestro-milestone-complete"
    {
        findings.push(Finding::new(
            Level::W,
            "W008",
            format!(
                "chain does not terminate with milestone-complete (last skill: {})",
                last.skill()
            ),
            Some(last.index()),
        ));
    }
    findings
}

fn active_pointer(session: &Map<String, Value>, steps: &[Step], findings: &mut Vec<Finding>) {
    let raw = session.get("active_step_index");
    let active = raw.and_then(Value::as_u64);
    // A negative pointer is out of range too (maestro: `idx < 0 || idx >= steps.length`).
    if let Some(idx) = raw.and_then(Value::as_i64).filter(|i| *i < 0) {
        findings.push(Finding::new(
            Level::E,
            "E008",
            format!("active_step_index {idx} out of range"),
            None,
        ));
    }
    if let Some(idx) = active {
        match usize::try_from(idx).ok().and_then(|i| steps.get(i)) {
            None => findings.push(Finding::new(
                Level::E,
                "E008",
                format!("active_step_index {idx} out of range"),
                None,
            )),
            Some(step) => match step.status() {
                "completed" => findings.push(Finding::new(
                    Level::W,
                    "W005",
                    "active_step_index points to a completed step; next will auto-clear",
                    Some(step.index()),
                )),
                "running" => {}
                // maestro says nothing here and `next` answers exit 3; kept as a warning, so
                // exit codes and `ok` stay maestro's.
                "pending" => findings.push(Finding::new(
                    Level::W,
                    "W011",
                    "active_step_index points to a pending step: nothing runs it, next refuses (exit 3) and complete refuses (E009); run `resume` to clear it",
                    Some(step.index()),
                )),
                other => findings.push(Finding::new(
                    Level::E,
                    "E008",
                    format!("active_step_index step.status is \"{other}\"; expected running|pending"),
                    Some(step.index()),
                )),
            },
        }
    }
    for step in steps {
        if step.status() == "running" && active != Some(step.index() as u64) {
            findings.push(Finding::new(
                Level::W,
                "W009",
                "step.status=running but active_step_index does not point to it; `resume` puts it back to pending",
                Some(step.index()),
            ));
        }
    }
}

fn command_file(ctx: &Context, step: &Step, findings: &mut Vec<Finding>) {
    let i = Some(step.index());
    let Some(raw) = step.command_path() else {
        findings.push(Finding::new(
            Level::E,
            "E006",
            format!(
                "execution step has no command_path (skill=\"{}\")",
                step.skill()
            ),
            i,
        ));
        return;
    };
    let path = manifest::stored_path(raw, ctx.home.as_deref());
    if !path.exists() {
        findings.push(Finding::new(
            Level::E,
            "E006",
            format!("command_path missing on disk: {raw}"),
            i,
        ));
        return;
    }
    match Manifest::load(&path, ctx.home.as_deref()) {
        Ok(m) => {
            for p in m.missing_required() {
                findings.push(Finding::new(
                    Level::E,
                    "E007",
                    format!("required_reading missing: {p}"),
                    i,
                ));
            }
            for p in m.missing_later() {
                findings.push(Finding::new(
                    Level::W,
                    "W012",
                    format!(
                        "a later <required_reading> block names a missing file (only the first block is read): {p}"
                    ),
                    i,
                ));
            }
            let name = m.name();
            if !step.skill().is_empty() && !name.is_empty() && name != step.skill() {
                findings.push(Finding::new(
                    Level::W,
                    "W007",
                    format!(
                        "step.skill \"{}\" != frontmatter.name \"{name}\"",
                        step.skill()
                    ),
                    i,
                ));
            }
        }
        Err(e) => findings.push(Finding::new(
            Level::E,
            "E010",
            format!("failed to parse command_path manifest: {e}"),
            i,
        )),
    }
}

pub fn has_errors(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.level == Level::E)
}

pub fn counts(findings: &[Finding]) -> (usize, usize) {
    let e = findings.iter().filter(|f| f.level == Level::E).count();
    (e, findings.len() - e)
}
