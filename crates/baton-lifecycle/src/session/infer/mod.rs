//! The build phase's inference (seed 003: A_RESOLVE_PHASE, A_INFER_POSITION,
//! A_RESOLVE_SCOPE_VERDICT, A_DETERMINE_QUALITY_MODE, A_DETERMINE_PLANNING_MODE and the breadth
//! step of A_DECOMPOSE_TASKS) as pure, deterministic code: what `baton session start` knows
//! about a project before it builds a chain. Nothing here calls a model or writes a file.
//!
//! Where the seed asks the user, [`Inference::questions`] lists the question instead; the
//! caller asks it (or exits 10 without a terminal) and calls [`infer`] again with the answer
//! in [`Options::answers`], keyed by [`Question::id`]. An answered question is consumed, never
//! asked again. While questions remain, the other fields are provisional.

pub mod breadth;
pub mod error;
pub mod files;
pub mod intent;
pub mod modes;
pub mod phase;
pub mod position;
pub mod results;
pub mod state_file;

pub use error::InferError;

use crate::ralph::chain::PlanningMode;
use std::collections::BTreeMap;
use std::path::Path;

/// What the user asked for: the stage-independent options of `baton session start`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// `--quality`; `None` lets the rules choose.
    pub quality: Option<QualityMode>,
    /// `-y`: skips the questions the seed lets auto mode skip (never phase ambiguity or a broad
    /// intent's clarification).
    pub auto: bool,
    /// Answers already given, by [`Question::id`]. For a question with options the value is
    /// one option's [`Choice::value`]; for a free-text question any text.
    pub answers: BTreeMap<String, String>,
}

/// `quality_mode`: how long the quality pipeline after verify is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QualityMode {
    Full,
    Standard,
    Quick,
}

impl QualityMode {
    pub fn as_str(self) -> &'static str {
        match self {
            QualityMode::Full => "full",
            QualityMode::Standard => "standard",
            QualityMode::Quick => "quick",
        }
    }

    pub fn parse(s: &str) -> Option<QualityMode> {
        match s {
            "full" => Some(QualityMode::Full),
            "standard" => Some(QualityMode::Standard),
            "quick" => Some(QualityMode::Quick),
            _ => None,
        }
    }
}

/// `scope_verdict` of the latest macro analysis (`conclusions.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScopeVerdict {
    Large,
    Medium,
    Small,
    /// Relevant but not known yet: the chain takes the large path and the
    /// post-analyze-scope gate corrects it (build rule 11).
    Unknown,
}

impl ScopeVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            ScopeVerdict::Large => "large",
            ScopeVerdict::Medium => "medium",
            ScopeVerdict::Small => "small",
            ScopeVerdict::Unknown => "unknown",
        }
    }
}

/// How wide the intent is (A_DECOMPOSE_TASKS step 1): how much clarification it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Breadth {
    /// rewrite, overhaul, migrate…: clarified even with `-y`.
    Broad,
    /// clarified unless `-y`.
    Medium,
    /// a named file, function or bug: derived, never asked.
    Narrow,
}

impl Breadth {
    pub fn as_str(self) -> &'static str {
        match self {
            Breadth::Broad => "broad",
            Breadth::Medium => "medium",
            Breadth::Narrow => "narrow",
        }
    }
}

/// A refined position the seed's build table has no row for: a failed gate result found on
/// disk. Baton's mapping (documented, the seed leaves it undefined): the chain starts with the
/// fix-loop template [`Failed::template`] fed with [`Position::Failed::gaps`] and then goes on
/// with the stages after [`Failed::stage`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Failed {
    /// `verification.json` says `passed: false` or lists gaps.
    Verify,
    /// `review.json` says `verdict: "BLOCK"`.
    Review,
    /// `uat.md` reports failures.
    Test,
}

impl Failed {
    /// The seed's name (`lifecycle_position` in status.json).
    pub fn as_str(self) -> &'static str {
        match self {
            Failed::Verify => "verify-failed",
            Failed::Review => "review-failed",
            Failed::Test => "test-failed",
        }
    }

    /// The fix-loop template of `ralph::chain::template_items` the chain starts with.
    pub fn template(self) -> &'static str {
        match self {
            Failed::Verify => "post-verify",
            Failed::Review => "post-review",
            Failed::Test => "post-test",
        }
    }

    /// The stage the template closes; the chain continues with the stages after it.
    pub fn stage(self) -> &'static str {
        match self {
            Failed::Verify => "verify",
            Failed::Review => "review",
            Failed::Test => "test",
        }
    }
}

/// `lifecycle_position`: where the chain starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Position {
    /// A stage of [`crate::ralph::chain::STAGES`]; the chain starts there.
    Stage(&'static str),
    /// A failed gate result (see [`Failed`]), with the gaps the result file names (possibly
    /// none).
    Failed { kind: Failed, gaps: Vec<String> },
}

impl Position {
    /// The value for status.json's `lifecycle_position`.
    pub fn name(&self) -> &'static str {
        match self {
            Position::Stage(s) => s,
            Position::Failed { kind, .. } => kind.as_str(),
        }
    }
}

/// One choice of a [`Question`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// What goes into [`Options::answers`] when this is picked.
    pub value: String,
    pub label: String,
    pub description: String,
}

/// A question the seed asks the user (`ask_user`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// Stable id, the key of [`Options::answers`]: [`question::PHASE`],
    /// [`question::PLANNING_MODE`], [`question::CLARIFY_SCOPE`],
    /// [`question::CLARIFY_CONSTRAINTS`], [`question::CLARIFY_DONE`].
    pub id: String,
    pub text: String,
    /// Suggested answers (pre-filled from the intent and the project).
    pub options: Vec<Choice>,
    /// Whether an answer outside `options` is accepted.
    pub free_text: bool,
    /// Asked even with `-y` (phase ambiguity, a broad intent's clarification).
    pub even_with_auto: bool,
}

/// The ids of the questions [`infer`] can ask.
pub mod question {
    pub const PHASE: &str = "phase";
    pub const PLANNING_MODE: &str = "planning-mode";
    pub const CLARIFY_SCOPE: &str = "clarify-scope";
    pub const CLARIFY_CONSTRAINTS: &str = "clarify-constraints";
    pub const CLARIFY_DONE: &str = "clarify-done";
}

/// The answers of the clarification rounds, for the decomposition call (boundary contract,
/// execution criteria, definition of done).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Clarification {
    pub scope: Option<String>,
    pub constraints: Option<String>,
    pub done: Option<String>,
}

/// Everything the build phase infers before the decomposition and the chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inference {
    /// The resolved phase number (`None` for early stages or when not resolvable).
    pub phase: Option<u64>,
    /// The phase's slug when known (from `phase_slugs`, or derived from the intent for a new
    /// phase).
    pub phase_slug: Option<String>,
    /// True when the phase comes from the intent and matches nothing known: forces `analyze`.
    pub phase_is_new: bool,
    /// The phase's milestone (D-007 lookup, falling back to `current_milestone`).
    pub milestone: Option<String>,
    pub position: Position,
    /// Stages with a completed artifact for this milestone and phase (milestone only in
    /// unified mode), in [`crate::ralph::chain::STAGES`] order: build rule 2 skips them.
    pub completed_stages: Vec<&'static str>,
    pub quality: QualityMode,
    /// `None` while [`question::PLANNING_MODE`] is pending.
    pub planning_mode: Option<PlanningMode>,
    /// `None` where the seed skips S_RESOLVE_SCOPE (positions other than analyze-macro,
    /// roadmap and plan).
    pub scope_verdict: Option<ScopeVerdict>,
    pub breadth: Breadth,
    /// Whether S_DECOMPOSE runs (it is skipped for brainstorm, blueprint and init).
    pub decompose: bool,
    /// Latest macro analysis id (`ANL-…`), the source of `--from analyze:`.
    pub analyze_macro_id: Option<String>,
    /// Latest blueprint id (`BLP-…`), the source of `--from blueprint:`.
    pub blueprint_id: Option<String>,
    /// Whether the intent named a phase number (`phase 2`, `P3`).
    pub explicit_phase: bool,
    pub clarification: Clarification,
    /// What must be asked before the inference is final; empty when it is.
    pub questions: Vec<Question>,
}

/// The build phase's inference for `intent` in the project at `project`: reads
/// `.workflow/state.json` and the gate result files the tables name, never writes. Questions
/// come in rounds: while the phase is ambiguous only that question is returned (everything
/// after it depends on the phase); then the planning mode and the clarification rounds.
pub fn infer(project: &Path, intent_text: &str, opts: &Options) -> error::Result<Inference> {
    if intent_text.trim().is_empty() {
        return Err(InferError::IntentEmpty);
    }
    let workflow = project.join(".workflow");
    let state = if workflow.is_dir() {
        state_file::read(&workflow)?
    } else {
        None
    };
    let state = state.as_ref();
    let breadth = breadth::classify(intent_text);
    let explicit = !intent::explicit_phases(intent_text).is_empty()
        || opts.answers.contains_key(question::PHASE);
    let early = position::early(project, intent_text, breadth, explicit, state);
    let resolved = phase::resolve(intent_text, state, early.is_some(), &opts.answers)?;
    let position = match (early, state) {
        (Some(stage), _) => Position::Stage(stage),
        // No state.json always has an early position; kept total for the type's sake.
        (None, None) => Position::Stage("init"),
        // Provisional while the phase question is pending.
        (None, Some(_)) if resolved.question.is_some() => Position::Stage("analyze"),
        (None, Some(st)) => position::phase_aware(&workflow, st, resolved.phase, resolved.is_new)?,
    };
    let analyze_macro_id = state
        .and_then(modes::latest_macro_analysis)
        .map(|a| a.id.clone());
    let blueprint_id = modes::blueprint_id(&workflow, state);
    let quality = modes::quality(&workflow, opts.quality, resolved.phase);
    let decompose = !matches!(
        position,
        Position::Stage("brainstorm" | "blueprint" | "init")
    );
    let mut inference = Inference {
        phase: resolved.phase,
        phase_slug: resolved.slug.clone(),
        phase_is_new: resolved.is_new,
        milestone: resolved.milestone.clone(),
        position,
        completed_stages: Vec::new(),
        quality,
        planning_mode: None,
        scope_verdict: None,
        breadth,
        decompose,
        analyze_macro_id,
        blueprint_id,
        explicit_phase: resolved.explicit,
        clarification: Clarification::default(),
        questions: Vec::new(),
    };
    if let Some(q) = resolved.question {
        inference.questions.push(q);
        return Ok(inference);
    }
    let name = inference.position.name();
    inference.scope_verdict = modes::scope_verdict(&workflow, state, name)?;
    match modes::planning(&modes::PlanningInput {
        position: name,
        phase_is_new: resolved.is_new,
        explicit_phase: resolved.explicit,
        milestone: resolved.milestone.as_deref(),
        state,
        auto: opts.auto,
        answers: &opts.answers,
    })? {
        modes::Planning::Mode(m) => inference.planning_mode = Some(m),
        modes::Planning::Ask(q) => inference.questions.push(q),
    }
    if let Some(st) = state {
        inference.completed_stages = position::completed_stages(
            st,
            resolved.phase,
            resolved.milestone.as_deref(),
            inference.planning_mode == Some(PlanningMode::Unified),
        );
    }
    // Without a decomposition (brainstorm, blueprint, init) nothing is clarified: asked as if
    // narrow, which never asks; answers given anyway are kept.
    let (clarification, rounds) = if decompose {
        breadth::rounds(
            breadth,
            opts.auto,
            &opts.answers,
            &position::top_folders(project),
        )
    } else {
        breadth::rounds(Breadth::Narrow, opts.auto, &opts.answers, &[])
    };
    inference.clarification = clarification;
    inference.questions.extend(rounds);
    Ok(inference)
}

#[cfg(test)]
mod tests;
