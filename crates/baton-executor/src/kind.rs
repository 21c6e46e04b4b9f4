//! Which executor runs a phase or a step.

use serde::{Deserialize, Serialize};

/// `baton` is baton's own tool loop; the others are coding-agent CLIs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExecutorKind {
    Baton,
    ClaudeCode,
    Codex,
    Opencode,
}

/// The wire API a CLI's model requests speak (the gateway's).
pub use baton_gateway::Wire;

impl ExecutorKind {
    pub const ALL: [ExecutorKind; 4] = [
        ExecutorKind::Baton,
        ExecutorKind::ClaudeCode,
        ExecutorKind::Codex,
        ExecutorKind::Opencode,
    ];
    /// The coding-agent CLIs.
    pub const CLIS: [ExecutorKind; 3] = [
        ExecutorKind::ClaudeCode,
        ExecutorKind::Codex,
        ExecutorKind::Opencode,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ExecutorKind::Baton => "baton",
            ExecutorKind::ClaudeCode => "claude-code",
            ExecutorKind::Codex => "codex",
            ExecutorKind::Opencode => "opencode",
        }
    }

    pub fn parse(name: &str) -> Option<ExecutorKind> {
        ExecutorKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The CLI's usual command name on `PATH` (none for baton's own loop).
    pub fn default_command(self) -> Option<&'static str> {
        match self {
            ExecutorKind::Baton => None,
            ExecutorKind::ClaudeCode => Some("claude"),
            ExecutorKind::Codex => Some("codex"),
            ExecutorKind::Opencode => Some("opencode"),
        }
    }

    /// The variable the operator's real key is read from by default.
    pub fn default_api_key_env(self) -> Option<&'static str> {
        match self {
            ExecutorKind::Baton => None,
            ExecutorKind::ClaudeCode => Some("ANTHROPIC_API_KEY"),
            ExecutorKind::Codex | ExecutorKind::Opencode => Some("OPENAI_API_KEY"),
        }
    }

    /// The vendor's API base URL (the upstream when none is configured).
    pub fn default_upstream(self) -> Option<&'static str> {
        match self {
            ExecutorKind::Baton => None,
            ExecutorKind::ClaudeCode => Some("https://api.anthropic.com"),
            ExecutorKind::Codex | ExecutorKind::Opencode => Some("https://api.openai.com/v1"),
        }
    }

    pub fn wire(self) -> Option<Wire> {
        match self {
            ExecutorKind::Baton => None,
            ExecutorKind::ClaudeCode => Some(Wire::AnthropicMessages),
            ExecutorKind::Codex => Some(Wire::OpenAiResponses),
            ExecutorKind::Opencode => Some(Wire::ChatCompletions),
        }
    }
}

impl std::fmt::Display for ExecutorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
