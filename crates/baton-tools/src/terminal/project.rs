//! Commands an orchestrator starts in a project on a model's behalf (the epic's verify
//! commands): the same sandbox as `terminal.run`, through [`run_confined`], with the project's
//! `[tools.terminal]` settings, whether or not the terminal tool is enabled for agents.

use super::confined::{
    ConfinedOutput, ConfinedRequest, OutputKeep, base_environment, open_project_dir, run_confined,
};
use super::runtime::TerminalRuntime;
use crate::policy::TerminalSettings;
use crate::result::ToolError;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where `program` is in the `PATH` of `env`.
pub(super) fn find_in_path(program: &str, env: &[(String, String)]) -> Result<PathBuf, ToolError> {
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str())
        .unwrap_or("/usr/bin:/bin");
    path.split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(program))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .ok_or_else(|| {
            ToolError::new(
                "COMMAND_NOT_FOUND",
                format!("{program}: command not found in PATH"),
            )
        })
}

/// Runs commands in one project, each confined; they share a temporary `$HOME`, removed with
/// this value.
pub struct ProjectShell {
    project: PathBuf,
    settings: TerminalSettings,
    allow_git_writes: bool,
    runtime: TerminalRuntime,
    home: tempfile::TempDir,
}

impl ProjectShell {
    /// `runtime.store_home` should name baton's store: a command never reads it.
    pub fn new(
        project: &Path,
        settings: TerminalSettings,
        allow_git_writes: bool,
        runtime: TerminalRuntime,
    ) -> Result<ProjectShell, ToolError> {
        let project = project.canonicalize().map_err(|e| {
            ToolError::new(
                "CWD_NOT_ALLOWED",
                format!("the project cannot be opened ({})", e.kind()),
            )
        })?;
        let home =
            super::hidden::temp_home(runtime.temp_root.as_deref(), "baton-cmd-").map_err(|e| {
                ToolError::new(
                    "SANDBOX_SETUP_FAILED",
                    format!("a temporary directory cannot be created ({})", e.kind()),
                )
            })?;
        Ok(ProjectShell {
            project,
            settings,
            allow_git_writes,
            runtime,
            home,
        })
    }

    /// `program args…` in the project root (`program` looked up in the command's `PATH`),
    /// with `extra_env` added; stdout and stderr apart, each kept up to the settings' caps.
    pub fn run(
        &self,
        program: &str,
        args: &[&str],
        extra_env: &[(&str, String)],
        timeout: Duration,
    ) -> Result<ConfinedOutput, ToolError> {
        let mut env = base_environment(&self.settings, &self.runtime, self.home.path());
        for (k, v) in extra_env {
            super::command::set(&mut env, k, v.clone());
        }
        let found = find_in_path(program, &env)?;
        run_confined(ConfinedRequest {
            project: &self.project,
            cwd: open_project_dir(&self.project)?,
            program: found,
            args: args.iter().map(OsString::from).collect(),
            env,
            home: self.home.path(),
            settings: &self.settings,
            allow_git_writes: self.allow_git_writes,
            protected: &self.runtime.protected,
            runtime: &self.runtime,
            timeout,
            output: OutputKeep::Head,
            abort: None,
            shown: program,
        })
    }

    /// `sh -c script` in the project root; the last `tail` bytes of stdout and stderr kept,
    /// interleaved.
    pub fn shell(
        &self,
        script: &str,
        timeout: Duration,
        tail: usize,
        abort: Option<&(dyn Fn() -> bool + Send + Sync)>,
    ) -> Result<ConfinedOutput, ToolError> {
        run_confined(ConfinedRequest {
            project: &self.project,
            cwd: open_project_dir(&self.project)?,
            program: PathBuf::from("/bin/sh"),
            args: vec![OsString::from("-c"), OsString::from(script)],
            env: base_environment(&self.settings, &self.runtime, self.home.path()),
            home: self.home.path(),
            settings: &self.settings,
            allow_git_writes: self.allow_git_writes,
            protected: &self.runtime.protected,
            runtime: &self.runtime,
            timeout,
            output: OutputKeep::MergedTail(tail),
            abort,
            shown: script,
        })
    }
}
