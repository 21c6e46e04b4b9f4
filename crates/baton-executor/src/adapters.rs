//! Which adapter speaks for each CLI (apart from `kind`, which the adapters import).

use crate::{Adapter, ExecutorKind};

impl ExecutorKind {
    /// The adapter of a CLI (none for baton's own loop).
    pub fn adapter(self) -> Option<&'static dyn Adapter> {
        match self {
            ExecutorKind::Baton => None,
            ExecutorKind::ClaudeCode => Some(&crate::claude_code::ClaudeCode),
            ExecutorKind::Codex => Some(&crate::codex::Codex),
            ExecutorKind::Opencode => Some(&crate::opencode::Opencode),
        }
    }
}
