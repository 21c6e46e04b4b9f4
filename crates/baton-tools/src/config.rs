//! Tool settings from `baton.toml`: `$BATON_HOME/config.toml`, then the project's
//! `baton.toml` (a key in the project file wins). Tables: `[tools.fs]`, `[tools.terminal]`,
//! `[mcp]` and `[mcp.servers.<id>]`; other tables (`[llm]`…) belong to other crates.
//!
//! The model cannot change these files: `fs.write` refuses `@project/baton.toml`, and
//! `terminal.run` sees it read-only (the store, where the other file lives, not at all).

use crate::mcp::{McpConfig, McpServerConfig};
use crate::policy::{SystemToolSettings, TerminalSettings};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The tool configuration of one project.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolsConfig {
    pub system: SystemToolSettings,
    pub mcp: McpConfig,
    /// The files that were read, in order.
    pub sources: Vec<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
#[error("{file}: {message}")]
pub struct ConfigError {
    pub file: PathBuf,
    pub message: String,
}

impl ConfigError {
    pub fn code(&self) -> &'static str {
        "TOOLS_CONFIG_INVALID"
    }

    pub fn hint(&self) -> String {
        "fix the [tools.*] or [mcp] tables of this file (see docs/tools.md)".into()
    }
}

#[derive(Debug, Default, Deserialize)]
struct FileDoc {
    tools: Option<ToolsTable>,
    mcp: Option<McpTable>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolsTable {
    fs: Option<FsTable>,
    terminal: Option<TerminalTable>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FsTable {
    enabled: Option<bool>,
    max_read_bytes: Option<u64>,
    max_write_bytes: Option<u64>,
    allow_git_writes: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TerminalTable {
    enabled: Option<bool>,
    allowed_commands: Option<Vec<String>>,
    allowed_roots: Option<Vec<String>>,
    timeout_ms: Option<u64>,
    max_stdout_bytes: Option<u64>,
    max_stderr_bytes: Option<u64>,
    max_output_bytes: Option<u64>,
    network: Option<bool>,
    env_allowlist: Option<Vec<String>>,
    allow_shell_exec: Option<bool>,
    max_processes: Option<u64>,
    max_memory_bytes: Option<u64>,
    max_cpu_s: Option<u64>,
    require_sandbox: Option<bool>,
    kill_grace_ms: Option<u64>,
    home_readable: Option<Vec<String>>,
    unix_sockets: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct McpTable {
    enabled: Option<bool>,
    allowed_servers: Option<Vec<String>>,
    call_timeout_ms: Option<u64>,
    start_timeout_ms: Option<u64>,
    #[serde(default)]
    servers: BTreeMap<String, ServerTable>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerTable {
    command: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
}

/// Longest timeout a setting may ask for: one day.
const MAX_MS: u64 = 86_400_000;

impl ToolsConfig {
    /// Reads `home/config.toml` then `project/baton.toml`; a missing file is no error.
    pub fn load(home: Option<&Path>, project: Option<&Path>) -> Result<ToolsConfig, ConfigError> {
        let mut config = ToolsConfig::default();
        let files = [
            home.map(|h| h.join("config.toml")),
            project.map(|p| p.join("baton.toml")),
        ];
        for file in files.into_iter().flatten() {
            let text = match std::fs::read_to_string(&file) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(ConfigError {
                        file,
                        message: format!("cannot read it ({})", e.kind()),
                    });
                }
            };
            config.apply(&text).map_err(|message| ConfigError {
                file: file.clone(),
                message,
            })?;
            config.sources.push(file);
        }
        Ok(config)
    }

    /// Applies one file's text over the current values.
    pub fn apply(&mut self, text: &str) -> Result<(), String> {
        let doc: FileDoc = toml::from_str(text).map_err(|e| e.to_string())?;
        if let Some(tools) = doc.tools {
            if let Some(fs) = tools.fs {
                self.apply_fs(fs)?;
            }
            if let Some(t) = tools.terminal {
                apply_terminal(&mut self.system.terminal, t)?;
            }
        }
        if let Some(mcp) = doc.mcp {
            self.apply_mcp(mcp)?;
        }
        Ok(())
    }

    fn apply_fs(&mut self, fs: FsTable) -> Result<(), String> {
        let s = &mut self.system;
        set(&mut s.fs_enabled, fs.enabled);
        set(
            &mut s.max_read_bytes,
            positive("tools.fs.max_read_bytes", fs.max_read_bytes)?,
        );
        set(
            &mut s.max_write_bytes,
            positive("tools.fs.max_write_bytes", fs.max_write_bytes)?,
        );
        set(&mut s.allow_git_writes, fs.allow_git_writes);
        Ok(())
    }

    fn apply_mcp(&mut self, mcp: McpTable) -> Result<(), String> {
        set(&mut self.system.mcp_enabled, mcp.enabled);
        if let Some(list) = mcp.allowed_servers {
            self.system.mcp_allowed_servers = Some(list);
        }
        if let Some(ms) = millis("mcp.call_timeout_ms", mcp.call_timeout_ms)? {
            self.mcp.call_timeout = Duration::from_millis(ms);
        }
        if let Some(ms) = millis("mcp.start_timeout_ms", mcp.start_timeout_ms)? {
            self.mcp.start_timeout = Duration::from_millis(ms);
        }
        for (id, server) in mcp.servers {
            if !valid_server_id(&id) {
                return Err(format!(
                    "mcp.servers.{id}: a server id is letters, digits and '-' (at most 32), without '__'"
                ));
            }
            if server.command.trim().is_empty() {
                return Err(format!("mcp.servers.{id}.command is empty"));
            }
            self.mcp.servers.insert(
                id,
                McpServerConfig {
                    command: server.command,
                    args: server.args,
                    env: server.env,
                    cwd: server.cwd,
                },
            );
        }
        Ok(())
    }
}

fn apply_terminal(t: &mut TerminalSettings, table: TerminalTable) -> Result<(), String> {
    set(&mut t.enabled, table.enabled);
    if let Some(c) = table.allowed_commands {
        t.allowed_commands = Some(c);
    }
    if let Some(r) = table.allowed_roots {
        if let Some(bad) = r.iter().find(|r| !crate::policy::within(r, "@project")) {
            return Err(format!(
                "tools.terminal.allowed_roots: '{bad}' is not under @project"
            ));
        }
        t.allowed_roots = Some(r);
    }
    set(
        &mut t.timeout_ms,
        millis("tools.terminal.timeout_ms", table.timeout_ms)?,
    );
    set(
        &mut t.max_stdout_bytes,
        positive("tools.terminal.max_stdout_bytes", table.max_stdout_bytes)?,
    );
    set(
        &mut t.max_stderr_bytes,
        positive("tools.terminal.max_stderr_bytes", table.max_stderr_bytes)?,
    );
    set(
        &mut t.max_output_bytes,
        positive("tools.terminal.max_output_bytes", table.max_output_bytes)?,
    );
    set(&mut t.network, table.network);
    if let Some(v) = table.env_allowlist {
        t.env_allowlist = v;
    }
    set(&mut t.allow_shell_exec, table.allow_shell_exec);
    if let Some(v) = positive("tools.terminal.max_processes", table.max_processes)? {
        t.max_processes = Some(v);
    }
    if let Some(v) = positive("tools.terminal.max_memory_bytes", table.max_memory_bytes)? {
        t.max_memory_bytes = Some(v);
    }
    if let Some(v) = positive("tools.terminal.max_cpu_s", table.max_cpu_s)? {
        t.max_cpu_s = Some(v);
    }
    set(&mut t.require_sandbox, table.require_sandbox);
    set(
        &mut t.kill_grace_ms,
        millis("tools.terminal.kill_grace_ms", table.kill_grace_ms)?,
    );
    if let Some(list) = table.home_readable {
        if let Some(bad) = list.iter().find(|p| !home_relative(p)) {
            return Err(format!(
                "tools.terminal.home_readable: '{bad}' is not a path inside $HOME (relative, without '..'; \".\" for all of it)"
            ));
        }
        t.home_readable = list;
    }
    set(&mut t.unix_sockets, table.unix_sockets);
    Ok(())
}

/// `.cargo`, `.local/bin`, `.`: relative, no `..`, no `~`.
fn home_relative(p: &str) -> bool {
    let path = Path::new(p);
    !p.is_empty()
        && !p.starts_with('~')
        && !p.contains('\0')
        && path.components().all(|c| {
            matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        })
}

fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *slot = v;
    }
}

fn positive(key: &str, v: Option<u64>) -> Result<Option<u64>, String> {
    match v {
        Some(0) => Err(format!("{key} must be at least 1")),
        other => Ok(other),
    }
}

fn millis(key: &str, v: Option<u64>) -> Result<Option<u64>, String> {
    match positive(key, v)? {
        Some(ms) if ms > MAX_MS => Err(format!("{key} is more than a day ({ms} ms)")),
        other => Ok(other),
    }
}

/// Ids become part of tool names (`mcp__<id>__<tool>`), so they stay short and plain.
pub fn valid_server_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 32
        && !id.contains("__")
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_file_wins_key_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let project = dir.path().join("project");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(
            home.join("config.toml"),
            "[llm]\nmodel = \"x\"\n[tools.terminal]\nenabled = true\ntimeout_ms = 1000\n[mcp.servers.files]\ncommand = \"srv\"\nargs = [\"-v\"]\n",
        )
        .unwrap();
        std::fs::write(
            project.join("baton.toml"),
            "[tools.terminal]\nnetwork = true\nenv_allowlist = [\"CI\"]\n[mcp]\nenabled = true\nallowed_servers = [\"files\"]\n",
        )
        .unwrap();
        let c = ToolsConfig::load(Some(&home), Some(&project)).unwrap();
        let t = &c.system.terminal;
        assert!(t.enabled && t.network);
        assert_eq!(t.timeout_ms, 1000);
        assert_eq!(t.env_allowlist, vec!["CI".to_string()]);
        assert!(c.system.mcp_enabled);
        assert_eq!(c.mcp.servers["files"].args, vec!["-v".to_string()]);
        assert_eq!(c.sources.len(), 2);
    }

    #[test]
    fn mistakes_are_reported_with_the_file() {
        let mut c = ToolsConfig::default();
        assert!(
            c.apply("[tools.terminal]\ntimeout = 5\n").is_err(),
            "unknown key"
        );
        assert!(c.apply("[tools.terminal]\ntimeout_ms = 0\n").is_err());
        assert!(
            c.apply("[mcp.servers.\"a__b\"]\ncommand = \"x\"\n")
                .is_err()
        );
        assert!(c.apply("[mcp.servers.a]\ncommand = \" \"\n").is_err());
        assert!(
            c.apply("[tools.terminal]\nallowed_roots = [\"@pkg\"]\n")
                .is_err()
        );
        for bad in ["/etc", "../x", "~/.ssh", ".cargo/../.ssh", ""] {
            let text = format!("[tools.terminal]\nhome_readable = [\"{bad}\"]\n");
            assert!(c.apply(&text).is_err(), "{bad}");
        }
        c.apply("[tools.terminal]\nhome_readable = [\".\", \".cache/pip\"]\nunix_sockets = true\n")
            .unwrap();
        assert_eq!(c.system.terminal.home_readable, [".", ".cache/pip"]);
        assert!(c.system.terminal.unix_sockets);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("baton.toml"), "[tools\n").unwrap();
        let e = ToolsConfig::load(None, Some(dir.path())).unwrap_err();
        assert_eq!(e.code(), "TOOLS_CONFIG_INVALID");
        assert!(e.file.ends_with("baton.toml"));
    }
}
