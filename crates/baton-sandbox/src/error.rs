//! How preparing or spawning a confined command fails.

use crate::layers::Layer;

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A layer the spec needs is missing on this system.
    #[error("the sandbox cannot be applied here: {} missing ({detail})", missing.iter().map(|l| l.as_str()).collect::<Vec<_>>().join(", "))]
    Unavailable { missing: Vec<Layer>, detail: String },
    /// Preparing the confinement failed (a ruleset or a path could not be set up).
    #[error("the sandbox could not be prepared: {0}")]
    Setup(String),
}

impl SandboxError {
    pub fn code(&self) -> &'static str {
        match self {
            SandboxError::Unavailable { .. } => "SANDBOX_UNAVAILABLE",
            SandboxError::Setup(_) => "SANDBOX_SETUP_FAILED",
        }
    }

    pub fn hint(&self) -> &'static str {
        match self {
            SandboxError::Unavailable { .. } => {
                "run `baton doctor` to see the layers this kernel enforces; set [tools.terminal] require_sandbox = false in baton.toml to run with the layers that exist"
            }
            SandboxError::Setup(_) => "run `baton doctor`; check that the project directory exists",
        }
    }
}

/// Where a spawn failed: in the sandbox setup between fork and exec, or at exec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpawnFailure {
    /// A confinement step failed in the child; the command did not run.
    Setup { step: &'static str, errno: i32 },
    /// `exec` itself failed (not found, not executable…).
    Exec(std::io::ErrorKind),
}
