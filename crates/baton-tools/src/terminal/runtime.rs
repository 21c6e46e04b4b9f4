//! Where the terminal tools look for what they must not touch (baton's store, the user's home,
//! the parent environment, the kernel's capabilities), with overrides for tests.

use baton_sandbox::Capabilities;
use std::path::PathBuf;

/// Where the terminal tools look for what they must not touch, and overrides for tests.
#[derive(Clone, Default)]
pub struct TerminalRuntime {
    /// baton's store (`$BATON_HOME`): never readable by a command.
    pub store_home: Option<PathBuf>,
    /// The user's home, for the secrets list (default: `$HOME`).
    pub user_home: Option<PathBuf>,
    /// More paths no command may read.
    pub read_denied: Vec<PathBuf>,
    /// baton's environment as the allowlist sees it (default: the process environment).
    pub parent_env: Option<Vec<(String, String)>>,
    /// What the kernel can do (default: probed once).
    pub capabilities: Option<Capabilities>,
    /// Where the run's temporary home is created (default: the system's temp directory).
    pub temp_root: Option<PathBuf>,
    /// More directories the command may write beneath, besides the project and its home (the
    /// epic autopilot's git commands: a story's worktree lives outside the project).
    pub extra_writable: Vec<PathBuf>,
    /// Project-relative paths the commands of a [`ProjectShell`] may not change (the model's
    /// own commands take them from the policy instead).
    pub protected: Vec<String>,
    /// More existing paths beneath a writable directory that stay read-only (git's own
    /// configuration and hooks while baton's git runs).
    pub read_only: Vec<PathBuf>,
}

pub(super) fn parent_env(runtime: &TerminalRuntime) -> Vec<(String, String)> {
    match &runtime.parent_env {
        Some(e) => e.clone(),
        None => std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect(),
    }
}
