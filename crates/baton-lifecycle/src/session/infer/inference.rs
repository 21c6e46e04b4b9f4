//! What the build phase's inference concludes and the questions it asks: the types
//! [`super::infer()`] returns and its rule modules (phase, position, modes, breadth) fill in.

use baton_ralph::chain::PlanningMode;
use std::collections::BTreeMap;

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
    /// A stage of [`baton_ralph::chain::STAGES`]; the chain starts there.
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

/// The ids of the questions [`super::infer()`] can ask.
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
    /// unified mode), in [`baton_ralph::chain::STAGES`] order: build rule 2 skips them.
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
