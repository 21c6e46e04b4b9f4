//! S_RESOLVE_SCOPE, S_QUALITY_MODE and S_PLANNING_MODE: the scope verdict of the latest macro
//! analysis, the quality pipeline's length, and unified or independent planning (a question
//! for a multi-phase milestone without `-y`).

use super::error::{InferError, Result};
use super::inference::{Choice, QualityMode, Question, ScopeVerdict, question};
use super::position::{self, EARLY};
use super::results;
use super::state_file::{Artifact, State};
use baton_ralph::chain::PlanningMode;
use std::collections::BTreeMap;
use std::path::Path;

/// The newest macro analysis (any status: its id is what `--from analyze:` names).
pub fn latest_macro_analysis(state: &State) -> Option<&Artifact> {
    state
        .artifacts
        .iter()
        .filter(|a| a.is_macro_analysis())
        .max_by(|x, y| x.age_key().cmp(&y.age_key()))
}

/// A_RESOLVE_SCOPE_VERDICT. Only for positions analyze-macro, roadmap and plan (`None`
/// otherwise). With a macro analysis its `conclusions.json` decides (absent → unknown); at
/// analyze-macro without one the verdict is `unknown` (the large path, corrected by the
/// post-analyze-scope gate); at roadmap or plan without one there is nothing to read (`None`).
pub fn scope_verdict(
    workflow: &Path,
    state: Option<&State>,
    position: &str,
) -> Result<Option<ScopeVerdict>> {
    if !matches!(position, "analyze-macro" | "roadmap" | "plan") {
        return Ok(None);
    }
    let Some(a) = state.and_then(latest_macro_analysis) else {
        return Ok((position == "analyze-macro").then_some(ScopeVerdict::Unknown));
    };
    let Some(state) = state else {
        return Ok(None);
    };
    match position::dir_of(workflow, state, a)? {
        Some(dir) => results::scope_verdict(&dir.join("conclusions.json")).map(Some),
        None => Ok(Some(ScopeVerdict::Unknown)),
    }
}

/// The newest blueprint: a registry entry whose id starts `BLP-` or whose type is `blueprint`,
/// else the newest `.workflow/blueprint/BLP-*` folder by name (names end with their date).
pub fn blueprint_id(workflow: &Path, state: Option<&State>) -> Option<String> {
    let from_registry = state.and_then(|s| {
        s.artifacts
            .iter()
            .filter(|a| a.id.starts_with("BLP-") || a.kind == "blueprint")
            .max_by(|x, y| x.age_key().cmp(&y.age_key()))
            .map(|a| a.id.clone())
    });
    from_registry.or_else(|| {
        let entries = std::fs::read_dir(workflow.join("blueprint")).ok()?;
        entries
            .flatten()
            .take(position::MAX_SCAN)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("BLP-"))
            .max_by(|x, y| date_suffix(x).cmp(date_suffix(y)).then(x.cmp(y)))
    })
}

/// `BLP-auth-20260101` → `20260101` (the last `-` part).
fn date_suffix(name: &str) -> &str {
    name.rsplit('-').next().unwrap_or(name)
}

/// A_DETERMINE_QUALITY_MODE: `--quality` wins; `full` when `.workflow/specs/REQ-*.md` exists and
/// the phase is known; `standard` otherwise.
pub fn quality(workflow: &Path, requested: Option<QualityMode>, phase: Option<u64>) -> QualityMode {
    if let Some(q) = requested {
        return q;
    }
    if phase.is_some() && has_requirements(workflow) {
        QualityMode::Full
    } else {
        QualityMode::Standard
    }
}

fn has_requirements(workflow: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(workflow.join("specs")) else {
        return false;
    };
    entries.flatten().take(position::MAX_SCAN).any(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        name.starts_with("REQ-")
            && name.ends_with(".md")
            && e.file_type().is_ok_and(|t| t.is_file())
    })
}

/// What S_PLANNING_MODE decided: a mode, or the question to ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Planning {
    Mode(PlanningMode),
    Ask(Question),
}

pub struct PlanningInput<'a> {
    pub position: &'a str,
    pub phase_is_new: bool,
    pub explicit_phase: bool,
    pub milestone: Option<&'a str>,
    pub state: Option<&'a State>,
    pub auto: bool,
    pub answers: &'a BTreeMap<String, String>,
}

/// A_DETERMINE_PLANNING_MODE, in the seed's priority order; an answer to the question wins
/// over the question (asked only for a multi-phase milestone without `-y`).
pub fn planning(input: &PlanningInput) -> Result<Planning> {
    if EARLY.contains(&input.position) || input.phase_is_new || input.explicit_phase {
        return Ok(Planning::Mode(PlanningMode::Independent));
    }
    let phases = input
        .milestone
        .and_then(|id| input.state?.milestone(id))
        .map_or(0, |m| State::phases_of(m).len());
    if phases <= 1 {
        return Ok(Planning::Mode(PlanningMode::Independent));
    }
    if let Some(answer) = input.answers.get(question::PLANNING_MODE) {
        return match answer.trim() {
            "unified" => Ok(Planning::Mode(PlanningMode::Unified)),
            "independent" => Ok(Planning::Mode(PlanningMode::Independent)),
            other => Err(InferError::AnswerInvalid {
                id: question::PLANNING_MODE.into(),
                value: other.to_string(),
                options: vec!["unified".into(), "independent".into()],
            }),
        };
    }
    if input.auto {
        return Ok(Planning::Mode(PlanningMode::Unified));
    }
    Ok(Planning::Ask(Question {
        id: question::PLANNING_MODE.into(),
        text: format!("The current milestone has {phases} phases. Which planning mode?"),
        options: vec![
            Choice {
                value: "unified".into(),
                label: "Unified (recommended)".into(),
                description:
                    "analyze and plan the whole milestone at once; suits closely linked phases"
                        .into(),
            },
            Choice {
                value: "independent".into(),
                label: "Independent".into(),
                description:
                    "each phase runs the full lifecycle on its own; suits independent phases".into(),
            },
        ],
        free_text: false,
        even_with_auto: false,
    }))
}
