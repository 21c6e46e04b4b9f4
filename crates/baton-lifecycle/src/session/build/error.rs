//! Every way the build phase (`baton session start`) refuses, with a stable code and a hint.

use crate::session::infer::InferError;
use baton_ralph::RalphError;
use baton_ralph::check::{Finding, Level};

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("the intent is empty")]
    IntentEmpty,
    #[error("an active session already exists: {0}")]
    SessionActive(String),
    #[error("lifecycle position \"{0}\" is not a stage the chain can start at")]
    PositionUnknown(String),
    #[error("command file(s) not found for: {}", .0.join(", "))]
    SkillsMissing(Vec<String>),
    #[error("the chain would not pass `ralph check`: {}", first_error(.0))]
    ChainInvalid(Vec<Finding>),
    #[error("the decomposition answer was rejected {attempts} times; last: {problem}")]
    DecompositionInvalid { attempts: u32, problem: String },
    #[error("the decomposition call failed ({code}): {message}")]
    DecompositionCall { code: &'static str, message: String },
    #[error("stopped before the session was created")]
    Interrupted,
    #[error("the plan was made for another project or intent; plan again")]
    PlanMismatch,
    #[error(transparent)]
    Infer(#[from] InferError),
    #[error(transparent)]
    Ralph(#[from] RalphError),
}

impl BuildError {
    /// The stable code scripts match on (maestro's E006 is kept for missing skills).
    pub fn code(&self) -> &'static str {
        match self {
            BuildError::IntentEmpty => "INTENT_EMPTY",
            BuildError::SessionActive(_) => "SESSION_ACTIVE",
            BuildError::PositionUnknown(_) => "POSITION_UNKNOWN",
            BuildError::SkillsMissing(_) => "E006",
            BuildError::ChainInvalid(f) => f
                .iter()
                .find(|f| f.level == Level::E)
                .map_or("CHAIN_INVALID", |f| f.code),
            BuildError::DecompositionInvalid { .. } => "DECOMPOSITION_INVALID",
            BuildError::DecompositionCall { .. } => "DECOMPOSITION_CALL_FAILED",
            BuildError::Interrupted => "INTERRUPTED",
            BuildError::PlanMismatch => "PLAN_MISMATCH",
            BuildError::Infer(e) => e.code(),
            BuildError::Ralph(e) => e.code(),
        }
    }

    /// What to do about it.
    pub fn hints(&self) -> Vec<String> {
        match self {
            BuildError::IntentEmpty => vec!["say what the session should achieve".into()],
            BuildError::SessionActive(id) => vec![
                format!("continue it: baton session continue --session {id}"),
                format!("or abandon it first: baton ralph abandon --session {id}"),
            ],
            BuildError::PositionUnknown(_) => {
                vec!["this is a bug in the position inference; please report it".into()]
            }
            BuildError::SkillsMissing(_) => vec![
                "nothing was created; install the command file(s) under .claude/commands/ \
                 (project) or ~/.claude/commands/ (global)"
                    .into(),
                "`baton ralph skills` lists what is found".into(),
            ],
            BuildError::ChainInvalid(findings) => {
                let mut lines: Vec<String> = findings
                    .iter()
                    .filter(|f| f.level == Level::E)
                    .take(10)
                    .map(Finding::line)
                    .collect();
                lines.push(
                    "nothing was created; install the files the command files require \
                     (their <required_reading>)"
                        .into(),
                );
                lines
            }
            BuildError::DecompositionInvalid { .. } => vec![
                "nothing was created; try again, or a more capable model, or a narrower intent"
                    .into(),
            ],
            BuildError::DecompositionCall { .. } => {
                vec!["nothing was created; check the model settings and retry".into()]
            }
            BuildError::Interrupted => vec!["nothing was created".into()],
            BuildError::PlanMismatch => vec!["call plan again, then create".into()],
            BuildError::Infer(e) => e.hint().into_iter().collect(),
            BuildError::Ralph(e) => e.hints("baton ralph"),
        }
    }
}

impl BuildError {
    /// ralph's "an active session exists" and "skills missing" become the build phase's own
    /// errors (with `session` hints); anything else stays ralph's.
    pub fn from_ralph(e: RalphError) -> BuildError {
        match e {
            RalphError::SessionActive(id) => BuildError::SessionActive(id),
            RalphError::SkillsMissing(m) => BuildError::SkillsMissing(m),
            other => BuildError::Ralph(other),
        }
    }
}

fn first_error(findings: &[Finding]) -> String {
    findings
        .iter()
        .find(|f| f.level == Level::E)
        .map_or_else(|| "unknown problem".into(), Finding::line)
}

pub type Result<T, E = BuildError> = std::result::Result<T, E>;
