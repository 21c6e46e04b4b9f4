//! The build phase of `baton session start` after the inference: the decomposition (one model
//! call, validated strictly) and the chain (seed 003's build rules as code).
//!
//! - [`rules`]: build rules 0–13, an [`crate::session::infer::Inference`] and sub-goals in,
//!   status.json steps out.
//! - [`goals`]: the decomposition's shape and its strict validation.
//! - [`decompose`]: the model call, with one retry on a rejected answer.
//! - [`error`]: codes and hints.
//!
//! [`ChainLine`] is the chain as a person sees it before saying yes.

pub mod decompose;
pub mod error;
pub mod goals;
pub mod rules;
#[cfg(test)]
mod tests;

pub use error::BuildError;

use serde::Serialize;
use serde_json::Value;

/// One step of a chain, for showing it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainLine {
    pub index: usize,
    pub stage: String,
    /// The command (`maestro-plan`), empty for a gate.
    pub skill: String,
    pub args: String,
    /// The gate name of a decision step.
    pub decision: Option<String>,
    /// `project`, `global` (or `bundled`) once resolved.
    pub command_scope: Option<String>,
    pub goal_ref: Option<String>,
    pub source_artifact_ref: Option<String>,
    pub milestone_id: Option<String>,
}

impl ChainLine {
    pub fn from_step(step: &Value) -> ChainLine {
        let s = |k: &str| step.get(k).and_then(Value::as_str).map(str::to_owned);
        ChainLine {
            index: step
                .get("index")
                .and_then(Value::as_u64)
                .and_then(|i| usize::try_from(i).ok())
                .unwrap_or(0),
            stage: s("stage").unwrap_or_default(),
            skill: s("skill").unwrap_or_default(),
            args: s("args").unwrap_or_default(),
            decision: s("decision").filter(|d| !d.is_empty()),
            command_scope: s("command_scope"),
            goal_ref: s("goal_ref"),
            source_artifact_ref: s("source_artifact_ref"),
            milestone_id: s("milestone_id"),
        }
    }

    pub fn from_steps(steps: &[Value]) -> Vec<ChainLine> {
        steps.iter().map(ChainLine::from_step).collect()
    }

    /// `3. maestro-verify {phase} [project] → G1` or `4. ◆ post-verify`, as A_CREATE_SESSION
    /// shows a chain.
    pub fn line(&self) -> String {
        let mut out = match &self.decision {
            Some(gate) => format!("{}. ◆ {gate}", self.index),
            None => {
                let command = if self.args.is_empty() {
                    self.skill.clone()
                } else {
                    format!("{} {}", self.skill, self.args)
                };
                let scope = self.command_scope.as_deref().unwrap_or("?");
                format!("{}. {command} [{scope}]", self.index)
            }
        };
        if let Some(g) = &self.goal_ref {
            out.push_str(&format!(" → {g}"));
        }
        out
    }
}
