//! The milestone gate (`post-milestone`), settled by code: seed 003's A_STRUCTURAL_EVALUATE
//! and A_ADVANCE_MILESTONE.
//!
//! The milestone the session worked on is `status.json`'s `milestone` (else state.json's
//! `current_milestone`: the milestone-complete step may already have moved that one on). Its
//! `type` in `.workflow/state.json` decides (default `standard`):
//!
//! - `standard` with a next milestone (the first one after it in `milestones[]` that is not
//!   completed): the session advances. `milestone`, `phase` and `planning_mode` take the next
//!   milestone's values, `passed_gates` is emptied, and the next milestone's chain, built with
//!   the build rules of `baton session start` (position per phase from its artifacts, stages
//!   already done skipped, the session's quality mode, sub-goal refs), is inserted after the
//!   gate. The goal audit is left out when every sub-goal is already done.
//! - `standard` without one, or `adhoc`: the session ends (`completed` once every step is);
//!   for `adhoc`, state.json's `current_milestone` becomes null (only when it still names the
//!   milestone), the field changed in place.
//!
//! Planning mode of the next milestone: none or one phase → independent (a milestone without
//! phases is planned as a whole: unified); several phases → unified under `-y`, otherwise the
//! person is asked (the question [`question`]); independent then runs each phase's stages in
//! turn (their args name the phase number), and the milestone-level stages once at the end.
//!
//! This module works the outcome out ([`evaluate`]; [`Planner`] hands it to ralph's `decide`);
//! ralph applies it in the same locked write as the gate's decision
//! ([`baton_ralph::milestone_gate`]), so a kill leaves either the gate pending or the advance
//! done, never half of it.

use super::build::goals::Goal;
use super::build::rules;
use super::infer::position;
use super::infer::state_file::{self, Milestone, State};
use super::infer::{Breadth, Clarification, Inference, Position, QualityMode};
use baton_ralph::Context;
use baton_ralph::chain::PlanningMode;
use baton_ralph::error::{RalphError, Result};
use baton_ralph::milestone_gate::MilestonePlanner;
pub use baton_ralph::milestone_gate::{GATE, Outcome, QUESTION, advance_fields, parse_planning};
use baton_ralph::session::Session;
use baton_ralph::{Handle, Target};
use serde_json::{Map, Value, json};
use std::path::Path;

/// Stages run once per milestone, after the phases' stages.
const MILESTONE_STAGES: [&str; 3] = ["milestone-audit", "goal-audit", "milestone-complete"];

fn state_error(e: super::infer::InferError) -> RalphError {
    RalphError::failed(e.code(), e.to_string())
}

/// Whether a milestone counts as done (its status says so).
fn done(m: &Milestone) -> bool {
    matches!(m.status.as_deref(), Some("completed" | "complete" | "done"))
}

/// The open sub-goals' ids and all sub-goals as the build rules take them.
fn goals_of(s: &Session) -> (Vec<Goal>, bool) {
    let items = s
        .doc
        .get("task_decomposition")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let text = |g: &Value, k: &str| g.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let mut open = false;
    let goals = items
        .iter()
        .filter(|g| g.get("status").and_then(Value::as_str) != Some("superseded"))
        .map(|g| {
            if g.get("status").and_then(Value::as_str) != Some("done") {
                open = true;
            }
            Goal {
                id: text(g, "id"),
                goal: text(g, "goal"),
                boundary: text(g, "boundary"),
                done_when: text(g, "done_when"),
                evidence: text(g, "evidence"),
                lifecycle: g
                    .get("lifecycle")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default(),
            }
        })
        .collect();
    (goals, open)
}

/// Decides what the gate does for session `s`, reading `.workflow/state.json`. `planning`
/// answers the planning-mode question (ignored when it is not asked).
pub fn evaluate(ctx: &Context, s: &Session, planning: Option<PlanningMode>) -> Result<Outcome> {
    let workflow = ctx.project.join(".workflow");
    let state = state_file::read(&workflow).map_err(state_error)?;
    let from = s
        .str("milestone")
        .filter(|m| !m.is_empty())
        .map(str::to_owned)
        .or_else(|| state.as_ref()?.current_milestone.clone());
    let end = |kind: &str, reason: String, clear_current: bool| Outcome::End {
        from: from.clone(),
        kind: kind.to_string(),
        reason,
        clear_current,
    };
    let Some(state) = state else {
        return Ok(end(
            "standard",
            "no .workflow/state.json: no next milestone".into(),
            false,
        ));
    };
    let Some(from_id) = from.clone() else {
        return Ok(end(
            "standard",
            "the session names no milestone: nothing to advance to".into(),
            false,
        ));
    };
    let Some(pos) = state.milestones.iter().position(|m| m.id == from_id) else {
        return Ok(end(
            "standard",
            format!("milestone {from_id} is not in state.json: nothing to advance to"),
            false,
        ));
    };
    let kind = state.milestones[pos]
        .kind
        .clone()
        .unwrap_or_else(|| "standard".into());
    if kind == "adhoc" {
        let clear = state.current_milestone.as_deref() == Some(from_id.as_str());
        return Ok(end(
            &kind,
            format!("milestone {from_id} is adhoc (self-contained): the session ends"),
            clear,
        ));
    }
    let Some(next) = state.milestones[pos + 1..].iter().find(|m| !done(m)) else {
        return Ok(end(
            &kind,
            format!("milestone {from_id} was the last one: the session ends"),
            false,
        ));
    };
    let phases = State::phases_of(next);
    let auto = s.doc.get("auto_mode").and_then(Value::as_bool) == Some(true);
    let mode = match (phases.len(), planning) {
        (0, _) => PlanningMode::Unified,
        (1, _) => PlanningMode::Independent,
        (_, Some(m)) => m,
        (_, None) if auto => PlanningMode::Unified,
        (n, None) => {
            return Ok(Outcome::Ask {
                from: from_id,
                to: next.id.clone(),
                phases: n,
            });
        }
    };
    let quality = s
        .str("quality_mode")
        .and_then(QualityMode::parse)
        .unwrap_or(QualityMode::Standard);
    let (goals, open) = goals_of(s);
    let steps = chain(
        &workflow, &state, next, &phases, mode, quality, &goals, open,
    )?;
    Ok(Outcome::Advance {
        from: from_id,
        to: next.id.clone(),
        phase: phases.first().copied(),
        planning: mode,
        steps,
    })
}

/// The inference the build rules take for one phase (or the whole milestone) of `m`.
fn inference(
    workflow: &Path,
    state: &State,
    m: &Milestone,
    phase: Option<u64>,
    mode: PlanningMode,
    quality: QualityMode,
) -> Result<Inference> {
    let unified = mode == PlanningMode::Unified;
    let position = if unified {
        Position::Stage("analyze")
    } else {
        position::phase_aware(workflow, state, phase, false).map_err(state_error)?
    };
    Ok(Inference {
        phase,
        phase_slug: phase.and_then(|p| m.phase_slugs.get(&p).cloned()),
        phase_is_new: false,
        milestone: Some(m.id.clone()),
        position,
        completed_stages: position::completed_stages(state, phase, Some(&m.id), unified),
        quality,
        planning_mode: Some(mode),
        scope_verdict: None,
        breadth: Breadth::Narrow,
        decompose: false,
        analyze_macro_id: None,
        blueprint_id: None,
        explicit_phase: false,
        clarification: Clarification::default(),
        questions: Vec::new(),
    })
}

fn is_milestone_stage(step: &Value) -> bool {
    step.get("stage")
        .and_then(Value::as_str)
        .is_some_and(|s| MILESTONE_STAGES.contains(&s))
}

/// The next milestone's steps (indices are set when they are inserted).
#[allow(clippy::too_many_arguments)]
fn chain(
    workflow: &Path,
    state: &State,
    m: &Milestone,
    phases: &[u64],
    mode: PlanningMode,
    quality: QualityMode,
    goals: &[Goal],
    goals_open: bool,
) -> Result<Vec<Value>> {
    let build = |phase: Option<u64>| -> Result<Vec<Value>> {
        let inf = inference(workflow, state, m, phase, mode, quality)?;
        rules::build(&inf, goals).map_err(|e| RalphError::failed(e.code(), e.to_string()))
    };
    let mut steps = if mode == PlanningMode::Independent && phases.len() > 1 {
        // Each phase's own stages, its number in the args; the milestone stages once.
        let mut all = Vec::new();
        let mut tail = Vec::new();
        for &p in phases {
            let built = build(Some(p))?;
            let cut = built
                .iter()
                .position(is_milestone_stage)
                .unwrap_or(built.len());
            let (own, rest) = built.split_at(cut);
            all.extend(own.iter().cloned().map(|mut st| {
                if let Some(args) = st.get("args").and_then(Value::as_str) {
                    let filled = args.replace("{phase}", &p.to_string());
                    st["args"] = json!(filled);
                }
                st
            }));
            tail = rest.to_vec();
        }
        all.extend(tail);
        all
    } else {
        build(phases.first().copied())?
    };
    if !goals_open {
        // Every sub-goal was met at an earlier audit: nothing left for this one to judge.
        steps.retain(|st| st.get("decision").and_then(Value::as_str) != Some("post-goal-audit"));
    }
    Ok(steps)
}

/// `adhoc`: state.json's `current_milestone` set to null in place (keys, their order and
/// unknown fields kept; written durably), when it still names `milestone`.
pub fn clear_current(ctx: &Context, milestone: &str) -> Result<()> {
    let path = ctx.project.join(".workflow").join("state.json");
    let text = super::infer::files::read_text(&path, super::infer::files::MAX_STATE_BYTES)
        .map_err(state_error)?;
    let Some(text) = text else {
        return Ok(());
    };
    let mut doc: Map<String, Value> = serde_json::from_str(&text).map_err(|e| {
        RalphError::failed("PROJECT_FILE_INVALID", format!("{}: {e}", path.display()))
    })?;
    if doc.get("current_milestone").and_then(Value::as_str) != Some(milestone) {
        return Ok(());
    }
    doc.insert("current_milestone".into(), Value::Null);
    let mut out = serde_json::to_string_pretty(&doc)
        .map_err(|e| RalphError::failed("PROJECT_FILE_INVALID", e.to_string()))?;
    if text.ends_with('\n') {
        out.push('\n');
    }
    baton_store::durable::atomic_write(&path, out.as_bytes())?;
    Ok(())
}

/// The milestone gate's planner: [`evaluate`] and [`clear_current`], for ralph's `decide`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Planner;

impl MilestonePlanner for Planner {
    fn evaluate(
        &self,
        ctx: &Context,
        s: &Session,
        planning: Option<PlanningMode>,
    ) -> Result<Outcome> {
        evaluate(ctx, s, planning)
    }

    fn clear_current(&self, ctx: &Context, milestone: &str) -> Result<()> {
        clear_current(ctx, milestone)
    }
}

/// What settling the milestone gate did in the session loop.
#[derive(Debug)]
pub enum Settled {
    /// Advanced or ended: `decide`'s report.
    Decided(baton_ralph::verbs::Output),
    /// The next milestone's planning mode is asked ([`QUESTION`]); the session paused.
    Asked,
}

/// Settles the milestone gate at `index` in the session loop: the question is asked (the
/// session pauses, the gate marked) when the next milestone has several phases and the
/// session is not in auto mode; otherwise the gate is decided (advance or end).
pub fn settle<'a>(ctx: &Context, session: impl Into<Target<'a>>, index: usize) -> Result<Settled> {
    use baton_ralph::store::{self, Change};
    use baton_ralph::verbs::decide::{self, DecideArgs};
    let (asked, s) = store::transact(ctx, session, None, |s| {
        let pending = s
            .step(index)
            .is_some_and(|st| st.decision() == Some(GATE) && st.status() == "pending");
        if s.status() != "running" || !pending {
            return Ok(Change::keep(false));
        }
        if matches!(evaluate(ctx, s, None)?, Outcome::Ask { .. }) {
            baton_ralph::gate::mark_asked(s, index, QUESTION);
            return Ok(Change::write(true));
        }
        Ok(Change::keep(false))
    })?;
    if asked {
        return Ok(Settled::Asked);
    }
    let args = DecideArgs {
        index: index.to_string(),
        verdict: "proceed".into(),
        confidence: "100".into(),
        reason: Some(format!("{GATE}: settled by code")),
        expect_revision: Some(s.revision()),
        ..DecideArgs::default()
    };
    // The session the transaction found, re-read by decide under its own lock.
    decide::run(ctx, &Handle::of(&s), &args, &Planner).map(Settled::Decided)
}
