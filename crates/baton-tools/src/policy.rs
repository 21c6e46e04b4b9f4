//! Tool policy: the system settings are the ceiling; an agent's `tools` can only tighten them.

use baton_package::model::ToolPolicy;

pub const DEFAULT_MAX_READ_BYTES: u64 = 524_288;
pub const DEFAULT_MAX_WRITE_BYTES: u64 = 2_097_152;
pub const LIST_LIMIT: usize = 200;

/// What the operator of baton allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemToolSettings {
    pub fs_enabled: bool,
    pub max_read_bytes: u64,
    pub max_write_bytes: u64,
    pub mcp_enabled: bool,
    pub mcp_allowed_servers: Option<Vec<String>>,
    /// Writes under `@project/.git/` (any case, at any depth). Off by default: a model that
    /// can write there can plant a hook that runs at the user's next commit.
    pub allow_git_writes: bool,
}

impl Default for SystemToolSettings {
    fn default() -> Self {
        SystemToolSettings {
            fs_enabled: true,
            max_read_bytes: DEFAULT_MAX_READ_BYTES,
            max_write_bytes: DEFAULT_MAX_WRITE_BYTES,
            mcp_enabled: false,
            mcp_allowed_servers: None,
            allow_git_writes: false,
        }
    }
}

/// The merged policy; one value feeds both the prompt text and the enforcement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectivePolicy {
    pub fs_enabled: bool,
    pub max_read_bytes: u64,
    pub max_write_bytes: u64,
    pub mcp_enabled: bool,
    pub mcp_allowed_servers: Vec<String>,
    /// Only the operator decides; an agent's `tools` has no say.
    pub allow_git_writes: bool,
}

impl EffectivePolicy {
    /// `enabled` is AND, limits are the minimum, server lists intersect.
    pub fn merge(system: &SystemToolSettings, agent: Option<&ToolPolicy>) -> EffectivePolicy {
        let fs = agent.and_then(|a| a.fs.as_ref());
        let mcp = agent.and_then(|a| a.mcp.as_ref());
        let min = |sys: u64, agent: Option<u64>| agent.map_or(sys, |a| a.min(sys));
        let servers = match (&system.mcp_allowed_servers, mcp.map(|m| &m.allowed_servers)) {
            (Some(sys), Some(agent)) => sys.iter().filter(|s| agent.contains(s)).cloned().collect(),
            (Some(sys), None) => sys.clone(),
            (None, Some(agent)) => agent.clone(),
            (None, None) => Vec::new(),
        };
        EffectivePolicy {
            fs_enabled: system.fs_enabled && fs.is_none_or(|f| f.enabled),
            max_read_bytes: min(system.max_read_bytes, fs.and_then(|f| f.max_read_bytes)),
            max_write_bytes: min(system.max_write_bytes, fs.and_then(|f| f.max_write_bytes)),
            mcp_enabled: system.mcp_enabled && mcp.is_some_and(|m| m.enabled),
            mcp_allowed_servers: servers,
            allow_git_writes: system.allow_git_writes,
        }
    }

    /// The tool-policy block of the system prompt.
    pub fn prompt_text(&self) -> String {
        let fs = if self.fs_enabled {
            format!(
                "enabled (maxReadBytes={}, maxWriteBytes={})",
                self.max_read_bytes, self.max_write_bytes
            )
        } else {
            "disabled".to_string()
        };
        let mcp = if self.mcp_enabled {
            "enabled"
        } else {
            "disabled"
        };
        format!(
            "Tool policy:\n- fs: {fs}\n- mcp: {mcp}\nPrefer fs.apply_patch for edits. All writes must be under @project or @state.\n"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_package::model::{FsPolicy, McpPolicy};

    #[test]
    fn agent_can_only_tighten() {
        let system = SystemToolSettings {
            max_read_bytes: 1000,
            mcp_allowed_servers: Some(vec!["a".into(), "b".into()]),
            mcp_enabled: true,
            ..Default::default()
        };
        let agent = ToolPolicy {
            fs: Some(FsPolicy {
                enabled: true,
                max_read_bytes: Some(5000),
                max_write_bytes: Some(10),
            }),
            mcp: Some(McpPolicy {
                enabled: true,
                allowed_servers: vec!["b".into(), "c".into()],
            }),
        };
        let p = EffectivePolicy::merge(&system, Some(&agent));
        assert_eq!(p.max_read_bytes, 1000, "an agent cannot raise a limit");
        assert_eq!(p.max_write_bytes, 10);
        assert_eq!(p.mcp_allowed_servers, vec!["b".to_string()]);
        let off = SystemToolSettings {
            fs_enabled: false,
            ..Default::default()
        };
        assert!(
            !EffectivePolicy::merge(&off, Some(&agent)).fs_enabled,
            "nor re-enable a tool"
        );
        let agent_off = ToolPolicy {
            fs: Some(FsPolicy {
                enabled: false,
                max_read_bytes: None,
                max_write_bytes: None,
            }),
            mcp: None,
        };
        assert!(
            !EffectivePolicy::merge(&SystemToolSettings::default(), Some(&agent_off)).fs_enabled
        );
    }

    #[test]
    fn prompt_text_matches_the_policy() {
        let p = EffectivePolicy::merge(&SystemToolSettings::default(), None);
        assert_eq!(
            p.prompt_text(),
            "Tool policy:\n- fs: enabled (maxReadBytes=524288, maxWriteBytes=2097152)\n- mcp: disabled\nPrefer fs.apply_patch for edits. All writes must be under @project or @state.\n"
        );
    }
}
