//! Build rules 0–13 of seed 003 (A_BUILD_STEPS) as code: from an [`Inference`] and the
//! sub-goals, the steps that go into status.json, before command resolution (rule 9, done at
//! creation so nothing is written when a skill is missing).
//!
//! Where the seed is silent or ambiguous, the choice made here:
//! - `test-gen` runs in standard mode "only if coverage < 80%"; coverage is not measured at
//!   build time, so standard mode keeps it (a step that writes missing tests is the safe side).
//! - `goal-audit` sits where the stage table puts it: after the last evidence stage's gate and
//!   after `milestone-audit`, immediately before `milestone-complete`.
//! - A chain that starts at `analyze-macro` runs a new macro analysis, so its roadmap and
//!   plan keep the `{analyze_macro_id}` placeholder (filled from the new analysis by the
//!   post-analyze-scope gate) instead of naming an older analysis.
//! - `--from blueprint:` goes into plan only when plan carries no phase number (a phase number
//!   wins, as rule 12 says).
//! - `goal_ref` takes the matching sub-goal with the smallest number (`G2` before `G10`), what
//!   "lexicographically smallest" means for ids written `G1`…`G9` and stays sensible beyond.
//! - A failed position (verify-failed, review-failed, test-failed) starts with that gate's
//!   fix-loop template fed with the gaps found, then the stages after the failed one.

use super::error::{BuildError, Result};
use super::goals::Goal;
use crate::session::infer::{Inference, Position, QualityMode, ScopeVerdict};
use baton_ralph::chain::{self, Item, PlanningMode, STAGES};
use serde_json::{Value, json};

/// Gaps of a failed result file put into a template, and the characters of each.
const MAX_GAPS: usize = 10;
const MAX_GAP_CHARS: usize = 300;

/// One step before it becomes JSON: the item and the audit trail of a `--from` injection.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Planned {
    item: Item,
    source_artifact_ref: Option<String>,
}

impl From<Item> for Planned {
    fn from(item: Item) -> Planned {
        Planned {
            item,
            source_artifact_ref: None,
        }
    }
}

/// Rule 3: whether `stage` belongs to the quality pipeline of `quality`.
fn kept_by_quality(stage: &str, quality: QualityMode) -> bool {
    match stage {
        "business-test" => quality == QualityMode::Full,
        "test-gen" | "test" => quality != QualityMode::Quick,
        _ => true,
    }
}

/// The position's first stage index in [`STAGES`] and the template items that precede it.
fn start(inf: &Inference) -> Result<(usize, Vec<Item>)> {
    let find = |stage: &str| {
        STAGES
            .iter()
            .position(|s| *s == stage)
            .ok_or_else(|| BuildError::PositionUnknown(stage.to_string()))
    };
    match &inf.position {
        Position::Stage(stage) => Ok((find(stage)?, Vec::new())),
        Position::Failed { kind, gaps } => {
            let gaps: Vec<String> = gaps
                .iter()
                .take(MAX_GAPS)
                .map(|g| g.chars().take(MAX_GAP_CHARS).collect())
                .collect();
            let items = chain::template_items(kind.template(), &gaps, 0)
                .ok_or_else(|| BuildError::PositionUnknown(kind.as_str().to_string()))?;
            Ok((find(kind.stage())? + 1, items))
        }
    }
}

/// Rules 11–12 for the plan step: the standalone `--from analyze:` column for a medium/small
/// scope, else the phase column, else `--from blueprint:`.
fn plan_step(inf: &Inference, mode: PlanningMode, runs_macro: bool, item: Item) -> Planned {
    let standalone = |item: &Item, args: String, source: Option<String>| {
        let mut item = item.clone();
        if let Item::Exec { args: a, scope, .. } = &mut item {
            *a = args;
            *scope = Some("standalone".into());
        }
        Planned {
            item,
            source_artifact_ref: source,
        }
    };
    let small = matches!(
        inf.scope_verdict,
        Some(ScopeVerdict::Medium | ScopeVerdict::Small)
    );
    let analysis = inf.analyze_macro_id.as_deref().filter(|_| !runs_macro);
    if small && (runs_macro || analysis.is_some()) {
        return match analysis {
            Some(id) => standalone(
                &item,
                format!("--from analyze:{id}"),
                Some(format!("analyze:{id}")),
            ),
            None => standalone(&item, "--from analyze:{analyze_macro_id}".into(), None),
        };
    }
    let phase_number = mode == PlanningMode::Independent && inf.phase.is_some();
    if !phase_number && let Some(id) = inf.blueprint_id.as_deref() {
        return standalone(
            &item,
            format!("--from blueprint:{id}"),
            Some(format!("blueprint:{id}")),
        );
    }
    item.into()
}

/// Rule 12 for roadmap: the known analysis, unless this chain makes a new one.
fn roadmap_step(inf: &Inference, runs_macro: bool, mut item: Item) -> Planned {
    let id = inf.analyze_macro_id.as_deref().filter(|_| !runs_macro);
    match (&mut item, id) {
        (Item::Exec { args, .. }, Some(id)) => {
            *args = format!("--from analyze:{id}");
            Planned {
                item,
                source_artifact_ref: Some(format!("analyze:{id}")),
            }
        }
        _ => item.into(),
    }
}

/// Rules 0–8 and 11–12: the chain's items, from the position to milestone-complete.
fn plan(inf: &Inference, goals: &[Goal]) -> Result<Vec<Planned>> {
    let mode = inf.planning_mode.unwrap_or(PlanningMode::Independent);
    let quick = inf.quality == QualityMode::Quick;
    let (first, template) = start(inf)?;
    let starts_macro = STAGES.get(first) == Some(&"analyze-macro");
    // The chain makes its own macro analysis: later steps wait for its id.
    let runs_macro = STAGES
        .iter()
        .skip(first)
        .any(|s| *s == "analyze-macro" && !inf.completed_stages.contains(s));
    // Rule 11: a medium/small scope at a macro start skips roadmap and analyze; unknown takes
    // the large path and the post-analyze-scope gate corrects it.
    let scope_skips = starts_macro
        && matches!(
            inf.scope_verdict,
            Some(ScopeVerdict::Medium | ScopeVerdict::Small)
        );
    let mut out: Vec<Planned> = template.into_iter().map(Planned::from).collect();
    for stage in STAGES.iter().skip(first).copied() {
        let terminal = stage == "milestone-complete";
        if !terminal && inf.completed_stages.contains(&stage) {
            continue;
        }
        if !kept_by_quality(stage, inf.quality)
            || (scope_skips && matches!(stage, "roadmap" | "analyze"))
            || (stage == "goal-audit" && goals.is_empty())
        {
            continue;
        }
        let items = chain::stage_items(stage, mode, quick)
            .ok_or_else(|| BuildError::PositionUnknown(stage.to_string()))?;
        for item in items {
            let is_exec = matches!(item, Item::Exec { .. });
            out.push(match stage {
                "plan" if is_exec => plan_step(inf, mode, runs_macro, item),
                "roadmap" if is_exec => roadmap_step(inf, runs_macro, item),
                _ => item.into(),
            });
        }
    }
    for p in &mut out {
        if let Item::Exec {
            stage, goal_ref, ..
        } = &mut p.item
            && goal_ref.is_none()
        {
            *goal_ref = goal_for(goals, stage);
        }
    }
    Ok(out)
}

/// Rule 7: the sub-goal whose lifecycle names `stage` (smallest number first).
fn goal_for(goals: &[Goal], stage: &str) -> Option<String> {
    goals
        .iter()
        .filter(|g| g.lifecycle.iter().any(|s| s == stage))
        .min_by_key(|g| g.number())
        .map(|g| g.id.clone())
}

/// The steps for status.json (rules 0–8, 10–13): indices, `milestone_id` on every step that
/// carries `{phase}`, initial completion fields, the `--from` audit trail. `command_scope` and
/// `command_path` stay null until [`baton_ralph::verbs::new::create`] resolves them.
pub fn build(inf: &Inference, goals: &[Goal]) -> Result<Vec<Value>> {
    let milestone = inf.milestone.clone().map_or(Value::Null, Value::String);
    let planned = plan(inf, goals)?;
    Ok(planned
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut step = chain::step_value(&p.item, i, &milestone);
            if let (Some(source), Some(m)) = (&p.source_artifact_ref, step.as_object_mut()) {
                m.insert("source_artifact_ref".into(), json!(source));
            }
            step
        })
        .collect())
}

/// The stage names of a chain's execution steps, in order, once each: what the
/// decomposition's `lifecycle` lists should name.
pub fn stages_of(steps: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in steps {
        let gate = s.get("decision").is_some_and(|d| !d.is_null());
        if let Some(stage) = s.get("stage").and_then(Value::as_str)
            && !gate
            && !out.iter().any(|o| o == stage)
        {
            out.push(stage.to_string());
        }
    }
    out
}
