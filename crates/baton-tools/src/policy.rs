//! Tool policy: the system settings are the ceiling; an agent's `tools` can only tighten them.

use baton_package::model::{TerminalPolicy, ToolPolicy};

pub const DEFAULT_MAX_READ_BYTES: u64 = 524_288;
pub const DEFAULT_MAX_WRITE_BYTES: u64 = 2_097_152;
pub const LIST_LIMIT: usize = 200;

/// `terminal.run` / `shell.exec` settings. As system settings they are the ceiling; merged
/// with an agent's `tools.terminal` they are what one call may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalSettings {
    /// Off unless the operator turns it on, and then only for agents that ask for it.
    pub enabled: bool,
    /// Command names (the last path component) a call may start; `None` = any.
    pub allowed_commands: Option<Vec<String>>,
    /// Mount paths a command may start in; `None` = anywhere under `@project`.
    pub allowed_roots: Option<Vec<String>>,
    /// The default and the longest a call may ask for.
    pub timeout_ms: u64,
    pub max_stdout_bytes: u64,
    pub max_stderr_bytes: u64,
    /// Output past this many bytes (both streams, read and dropped) stops the command:
    /// `OUTPUT_LIMIT_EXCEEDED`.
    pub max_output_bytes: u64,
    pub network: bool,
    /// Variables of baton's environment a command sees, beside PATH, HOME (the run's temp
    /// directory), TMPDIR and LANG.
    pub env_allowlist: Vec<String>,
    pub allow_shell_exec: bool,
    /// `RLIMIT_NPROC`, `RLIMIT_AS` (bytes), `RLIMIT_CPU` (seconds).
    pub max_processes: Option<u64>,
    pub max_memory_bytes: Option<u64>,
    pub max_cpu_s: Option<u64>,
    /// Refuse (`SANDBOX_UNAVAILABLE`) rather than run with a missing sandbox layer.
    pub require_sandbox: bool,
    /// Between SIGTERM and SIGKILL when a command times out.
    pub kill_grace_ms: u64,
    /// Paths relative to the user's `$HOME` a command may read; the rest of `$HOME` is
    /// unreadable (`"."` opens all of it but the known secrets).
    pub home_readable: Vec<String>,
    /// Commands may create Unix sockets (and so, before Landlock ABI 9, connect to the named
    /// sockets of the machine: a desktop session's, an SSH agent's, a container daemon's).
    pub unix_sockets: bool,
}

/// What a command may read of `$HOME` by default: toolchains and the packages they installed,
/// never configuration, histories, caches or credentials.
pub const DEFAULT_HOME_READABLE: [&str; 9] = [
    ".cargo",
    ".rustup",
    ".local/bin",
    ".local/lib",
    ".nvm",
    ".pyenv",
    ".rbenv",
    ".sdkman",
    "go",
];

pub const DEFAULT_TIMEOUT_MS: u64 = 300_000;
pub const DEFAULT_MAX_STDOUT_BYTES: u64 = 50 * 1024;
pub const DEFAULT_MAX_STDERR_BYTES: u64 = 10 * 1024;
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 16 * 1024 * 1024;

impl Default for TerminalSettings {
    fn default() -> Self {
        TerminalSettings {
            enabled: false,
            allowed_commands: None,
            allowed_roots: None,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            max_stdout_bytes: DEFAULT_MAX_STDOUT_BYTES,
            max_stderr_bytes: DEFAULT_MAX_STDERR_BYTES,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            network: false,
            env_allowlist: Vec::new(),
            allow_shell_exec: false,
            max_processes: Some(512),
            max_memory_bytes: None,
            max_cpu_s: None,
            require_sandbox: true,
            kill_grace_ms: 2000,
            home_readable: DEFAULT_HOME_READABLE
                .iter()
                .map(|s| s.to_string())
                .collect(),
            unix_sockets: false,
        }
    }
}

impl TerminalSettings {
    /// The agent can only tighten: enabled needs both (and the agent must ask for the
    /// terminal), lists intersect, limits take the minimum, switches are AND.
    pub fn merge(&self, agent: Option<&TerminalPolicy>) -> TerminalSettings {
        let Some(a) = agent else {
            return TerminalSettings {
                enabled: false,
                ..self.clone()
            };
        };
        let min = |sys: u64, agent: Option<u64>| agent.map_or(sys, |a| a.min(sys));
        TerminalSettings {
            enabled: self.enabled && a.enabled,
            allowed_commands: intersect(&self.allowed_commands, &a.allowed_commands),
            allowed_roots: narrow_roots(&self.allowed_roots, &a.allowed_roots),
            timeout_ms: min(self.timeout_ms, a.timeout_ms),
            max_stdout_bytes: min(self.max_stdout_bytes, a.max_stdout_bytes),
            max_stderr_bytes: min(self.max_stderr_bytes, a.max_stderr_bytes),
            network: self.network && a.network != Some(false),
            env_allowlist: match &a.env_allowlist {
                Some(list) => self
                    .env_allowlist
                    .iter()
                    .filter(|v| list.contains(v))
                    .cloned()
                    .collect(),
                None => self.env_allowlist.clone(),
            },
            allow_shell_exec: self.allow_shell_exec && a.allow_shell_exec != Some(false),
            ..self.clone()
        }
    }
}

fn intersect(sys: &Option<Vec<String>>, agent: &Option<Vec<String>>) -> Option<Vec<String>> {
    match (sys, agent) {
        (Some(s), Some(a)) => Some(s.iter().filter(|x| a.contains(x)).cloned().collect()),
        (Some(s), None) => Some(s.clone()),
        (None, Some(a)) => Some(a.clone()),
        (None, None) => None,
    }
}

/// The agent's roots that lie inside one of the system's (`@project/src` inside `@project`).
fn narrow_roots(sys: &Option<Vec<String>>, agent: &Option<Vec<String>>) -> Option<Vec<String>> {
    match (sys, agent) {
        (Some(s), Some(a)) => Some(
            a.iter()
                .filter(|r| s.iter().any(|root| within(r, root)))
                .cloned()
                .collect(),
        ),
        (Some(s), None) => Some(s.clone()),
        (None, Some(a)) => Some(a.clone()),
        (None, None) => None,
    }
}

/// `path` is `root` or beneath it (mount paths, compared by whole components).
pub fn within(path: &str, root: &str) -> bool {
    let path = path.trim_end_matches('/');
    let root = root.trim_end_matches('/');
    path == root
        || path
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
}

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
    pub terminal: TerminalSettings,
    /// Project-relative paths (files or folders, with what is beneath them) no tool may write:
    /// `fs.write`/`fs.apply_patch` refuse them, commands get them read-only and what a command
    /// creates there is removed. Set by a caller, never by `baton.toml` (the epic autopilot
    /// protects the project's BMAD method during its phase runs).
    pub protected: Vec<String>,
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
            terminal: TerminalSettings::default(),
            protected: Vec::new(),
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
    pub terminal: TerminalSettings,
    /// See [`SystemToolSettings::protected`]; an agent's `tools` has no say.
    pub protected: Vec<String>,
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
            terminal: system
                .terminal
                .merge(agent.and_then(|a| a.terminal.as_ref())),
            protected: system.protected.clone(),
        }
    }

    /// The policy of a run no agent narrows (a lifecycle step's task run): the operator's
    /// settings as they are. The terminal is on when `[tools.terminal]` enables it, MCP when
    /// `[mcp]` does, with the servers of `allowed_servers`, or every configured one when that
    /// list is not given.
    pub fn without_agent(
        system: &SystemToolSettings,
        configured_servers: impl IntoIterator<Item = String>,
    ) -> EffectivePolicy {
        EffectivePolicy {
            fs_enabled: system.fs_enabled,
            max_read_bytes: system.max_read_bytes,
            max_write_bytes: system.max_write_bytes,
            mcp_enabled: system.mcp_enabled,
            mcp_allowed_servers: match &system.mcp_allowed_servers {
                Some(list) => list.clone(),
                None => configured_servers.into_iter().collect(),
            },
            allow_git_writes: system.allow_git_writes,
            terminal: system.terminal.clone(),
            protected: system.protected.clone(),
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
        let t = &self.terminal;
        let terminal = if t.enabled {
            format!(
                "\n- terminal: enabled (terminal.run{}; timeoutMs<={}, network {}, commands: {}); commands run without a shell in a sandbox that can write only @project and $HOME",
                if t.allow_shell_exec {
                    " and shell.exec"
                } else {
                    ""
                },
                t.timeout_ms,
                if t.network { "on" } else { "off" },
                t.allowed_commands
                    .as_ref()
                    .map_or("any".to_string(), |c| c.join(", "))
            )
        } else {
            String::new()
        };
        format!(
            "Tool policy:\n- fs: {fs}\n- mcp: {mcp}{terminal}\nPrefer fs.apply_patch for edits. All writes must be under @project or @state.\n"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_package::model::{FsPolicy, McpPolicy};

    #[test]
    fn a_run_no_agent_narrows_gets_the_operator_settings() {
        let mut system = SystemToolSettings {
            mcp_enabled: true,
            ..Default::default()
        };
        system.terminal.enabled = true;
        let p = EffectivePolicy::without_agent(&system, ["a".to_string(), "b".to_string()]);
        assert!(p.terminal.enabled && p.mcp_enabled);
        assert_eq!(p.mcp_allowed_servers, ["a", "b"], "every configured server");
        system.mcp_allowed_servers = Some(vec!["b".into()]);
        let p = EffectivePolicy::without_agent(&system, ["a".to_string(), "b".to_string()]);
        assert_eq!(p.mcp_allowed_servers, ["b"], "the operator's list");
        // Off stays off.
        let p = EffectivePolicy::without_agent(&SystemToolSettings::default(), []);
        assert!(!p.terminal.enabled && !p.mcp_enabled);
        assert_eq!(
            p,
            EffectivePolicy::without_agent(&SystemToolSettings::default(), [])
        );
    }

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
            terminal: None,
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
            terminal: None,
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

    #[test]
    fn terminal_needs_the_operator_and_the_agent_and_only_tightens() {
        let system = SystemToolSettings {
            terminal: TerminalSettings {
                enabled: true,
                allowed_commands: Some(vec!["python3".into(), "cargo".into()]),
                timeout_ms: 60_000,
                network: false,
                env_allowlist: vec!["RUST_LOG".into(), "CI".into()],
                allow_shell_exec: false,
                ..Default::default()
            },
            ..Default::default()
        };
        let none = EffectivePolicy::merge(&system, None);
        assert!(!none.terminal.enabled, "an agent must ask for the terminal");
        let agent = ToolPolicy {
            fs: None,
            mcp: None,
            terminal: Some(TerminalPolicy {
                enabled: true,
                allowed_commands: Some(vec!["cargo".into(), "bash".into()]),
                timeout_ms: Some(600_000),
                network: Some(true),
                env_allowlist: Some(vec!["CI".into(), "OPENAI_API_KEY".into()]),
                allow_shell_exec: Some(true),
                allowed_roots: Some(vec!["@project/src".into(), "@pkg".into()]),
                ..Default::default()
            }),
        };
        let t = EffectivePolicy::merge(&system, Some(&agent)).terminal;
        assert!(t.enabled);
        assert_eq!(t.allowed_commands, Some(vec!["cargo".to_string()]));
        assert_eq!(t.timeout_ms, 60_000, "an agent cannot raise the timeout");
        assert!(!t.network, "nor turn the network on");
        assert!(!t.allow_shell_exec, "nor shell.exec");
        assert_eq!(t.env_allowlist, vec!["CI".to_string()], "nor add variables");
        let off = SystemToolSettings::default();
        assert!(!EffectivePolicy::merge(&off, Some(&agent)).terminal.enabled);
        let system_roots = SystemToolSettings {
            terminal: TerminalSettings {
                enabled: true,
                allowed_roots: Some(vec!["@project".into()]),
                ..Default::default()
            },
            ..Default::default()
        };
        let t = EffectivePolicy::merge(&system_roots, Some(&agent)).terminal;
        assert_eq!(t.allowed_roots, Some(vec!["@project/src".to_string()]));
        assert!(within("@project/src/a", "@project/src"));
        assert!(!within("@project/srcx", "@project/src"));
    }
}
