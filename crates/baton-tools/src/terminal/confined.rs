//! One command in the project's sandbox: what it may read and write (the secrets, the
//! protected files), its environment and working directory, and how it ended.

use super::command;
use super::exec::{self, ExecOutput, ExecRequest};
use super::hidden;
use super::protected::{CONFIG_FILE, Protected, SESSIONS_DIR, bmad_configs};
use super::runtime::{TerminalRuntime, parent_env};
use crate::policy::{EffectivePolicy, TerminalSettings};
use crate::result::ToolError;
use baton_sandbox::{Capabilities, Confinement, Limits, SandboxSpec, SpawnFailure};
use serde_json::json;
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Files beneath `$HOME` no command may read, whoever runs baton: `$HOME` as a whole is
/// denied except `[tools.terminal] home_readable`, and these stay denied even when that list
/// opens more (or all of it, with `"."`).
const HOME_SECRETS: [&str; 24] = [
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".psql_history",
    ".mysql_history",
    ".config/openai",
    ".config/anthropic",
    ".ssh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".config/baton",
    ".local/share/baton",
    ".gnupg",
    ".netrc",
    ".git-credentials",
    ".docker",
    ".kube",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".password-store",
];
/// System files with secrets.
const SYSTEM_SECRETS: [&str; 3] = ["/etc/shadow", "/etc/gshadow", "/etc/ssh"];

/// What to keep of a command's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKeep {
    /// stdout and stderr apart, the first `max_stdout_bytes` / `max_stderr_bytes` of each.
    Head,
    /// Both interleaved in stdout as written, the last `n` bytes.
    MergedTail(usize),
}

/// One command baton starts in a project, for the model (`terminal.run`) or on its behalf (an
/// orchestrator's verify command): [`run_confined`] runs it in the sandbox the project's
/// `[tools.terminal]` settings describe.
pub struct ConfinedRequest<'a> {
    /// The project root, canonical: the command may write beneath it (and `home`), except
    /// `baton.toml`, `.workflow/.maestro/` and, without `allow_git_writes`, `.git`.
    pub project: &'a Path,
    /// The working directory, opened through the project capability.
    pub cwd: OwnedFd,
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// The whole environment (nothing of baton's own is added).
    pub env: Vec<(String, String)>,
    /// The command's `$HOME` and `$TMPDIR`, writable.
    pub home: &'a Path,
    /// Network, limits, readable parts of the user's home, Unix sockets, output caps,
    /// whether a missing layer is an error.
    pub settings: &'a TerminalSettings,
    pub allow_git_writes: bool,
    /// Project-relative paths the command may not change (see
    /// [`crate::SystemToolSettings::protected`]): read-only, and what it creates there removed.
    pub protected: &'a [String],
    pub runtime: &'a TerminalRuntime,
    pub timeout: Duration,
    pub output: OutputKeep,
    pub abort: Option<&'a (dyn Fn() -> bool + Send + Sync)>,
    /// How the command is named in errors.
    pub shown: &'a str,
}

/// How a confined command ended.
#[derive(Debug)]
pub struct ConfinedOutput {
    pub exec: ExecOutput,
    /// The layers applied, `layer:how`.
    pub applied: Vec<String>,
    /// Protected paths the command created and that were removed.
    pub warnings: Vec<String>,
}

/// Runs one command in the project, confined like every command baton starts there: Landlock
/// (writes in the project and `home` only; no store, no secrets, no `$HOME` but its
/// toolchains), seccomp (its process group, no Unix sockets unless allowed), namespaces (no
/// network unless allowed, protected paths read-only), rlimits, descriptors above 2 closed,
/// the environment given and nothing else, output capped, a deadline, and the whole process
/// group killed at the end. A new `baton.toml` (or `.git`) it made is removed.
pub fn run_confined(req: ConfinedRequest<'_>) -> Result<ConfinedOutput, ToolError> {
    let t = req.settings;
    let caps = match &req.runtime.capabilities {
        Some(c) => c.clone(),
        None => baton_sandbox::capabilities().clone(),
    };
    let protected = req.protected;
    let before = Protected::snapshot(req.project, req.allow_git_writes, protected);
    let mut spec = spec(req.runtime, req.project, req.home, t, req.allow_git_writes);
    spec.read_only
        .extend(protected.iter().map(|p| req.project.join(p)));
    let confinement = Confinement::prepare(&spec, &caps).map_err(|e| {
        ToolError::new(e.code(), e.to_string()).with_details(json!({"hint": e.hint()}))
    })?;
    let applied: Vec<String> = confinement
        .applied()
        .iter()
        .map(|(layer, how)| format!("{}:{how}", layer.as_str()))
        .collect();
    let (max_stdout, max_stderr, merge, tail) = match req.output {
        OutputKeep::Head => (
            usize::try_from(t.max_stdout_bytes).unwrap_or(usize::MAX),
            usize::try_from(t.max_stderr_bytes).unwrap_or(usize::MAX),
            false,
            false,
        ),
        OutputKeep::MergedTail(n) => (n, n, true, true),
    };
    let output = exec::run(ExecRequest {
        program: req.program,
        args: req.args,
        env: req.env,
        cwd: req.cwd,
        confinement,
        timeout: req.timeout,
        max_stdout,
        max_stderr,
        max_total: t.max_output_bytes,
        kill_grace: Duration::from_millis(t.kill_grace_ms),
        abort: req.abort,
        merge_stderr: merge,
        keep_tail: tail,
    })
    .map_err(|e| spawn_error(&e, req.shown))?;
    let warnings = before.restore(req.project);
    Ok(ConfinedOutput {
        exec: output,
        applied,
        warnings,
    })
}

/// A command's environment when baton starts it on its own (no arguments from a model): PATH,
/// LANG and `[tools.terminal] env_allowlist` from baton's environment, `HOME` and `TMPDIR` =
/// `home`.
pub fn base_environment(
    settings: &TerminalSettings,
    runtime: &TerminalRuntime,
    home: &Path,
) -> Vec<(String, String)> {
    let parent = parent_env(runtime);
    let mut env = command::environment(None, settings, &parent).unwrap_or_default();
    let home = home.to_string_lossy().into_owned();
    command::set(&mut env, "HOME", home.clone());
    command::set(&mut env, "TMPDIR", home);
    env
}

/// Opens `project` as a working directory (the root itself: nothing to resolve beneath it).
pub fn open_project_dir(project: &Path) -> Result<OwnedFd, ToolError> {
    std::fs::File::open(project)
        .map(OwnedFd::from)
        .map_err(|e| {
            ToolError::new(
                "CWD_NOT_ALLOWED",
                format!("the project cannot be the working directory ({})", e.kind()),
            )
        })
}

/// What a command of this run may touch.
fn spec(
    runtime: &TerminalRuntime,
    project: &Path,
    home: &Path,
    t: &TerminalSettings,
    allow_git_writes: bool,
) -> SandboxSpec {
    let mut denied: Vec<PathBuf> = runtime.read_denied.clone();
    denied.extend(runtime.store_home.clone());
    denied.extend(hidden::hidden());
    let user_home = runtime
        .user_home
        .clone()
        .or_else(|| std::env::var_os("HOME").map(PathBuf::from))
        .filter(|h| h.is_absolute() && h.parent().is_some());
    let mut allowed = Vec::new();
    if let Some(h) = user_home {
        denied.extend(HOME_SECRETS.iter().map(|s| h.join(s)));
        if !t.home_readable.iter().any(|r| r == ".") {
            allowed.extend(t.home_readable.iter().map(|r| h.join(r)));
            denied.push(h);
        }
    }
    denied.extend(SYSTEM_SECRETS.iter().map(PathBuf::from));
    // Lifecycle sessions' own files: only the orchestrator writes them (see
    // `MountPath::is_in_session_files`).
    let mut read_only = vec![project.join(CONFIG_FILE), project.join(SESSIONS_DIR)];
    // BMAD's configuration locates the orchestrators' files (see `MountPath::is_bmad_config`).
    read_only.extend(bmad_configs(project));
    if !allow_git_writes {
        read_only.push(project.join(".git"));
    }
    read_only.extend(runtime.read_only.iter().cloned());
    let mut writable = vec![project.to_path_buf(), home.to_path_buf()];
    writable.extend(runtime.extra_writable.iter().cloned());
    SandboxSpec {
        writable,
        read_denied: denied,
        read_allowed: allowed,
        read_only,
        network: t.network,
        unix_sockets: t.unix_sockets,
        join_network: None,
        limits: Limits {
            processes: t.max_processes,
            address_space: t.max_memory_bytes,
            cpu_seconds: t.max_cpu_s,
        },
        enforce: t.require_sandbox,
    }
}

/// Whether a command in `project` would run under `policy` here, and with which layers
/// (`baton doctor`). Nothing is started.
pub fn readiness(
    project: &Path,
    policy: &EffectivePolicy,
    runtime: &TerminalRuntime,
    caps: &Capabilities,
) -> Result<Vec<String>, baton_sandbox::SandboxError> {
    let home = tempfile::tempdir().map_err(|e| {
        baton_sandbox::SandboxError::Setup(format!("no temporary directory ({})", e.kind()))
    })?;
    let project = project.canonicalize().map_err(|e| {
        baton_sandbox::SandboxError::Setup(format!("the project is missing ({})", e.kind()))
    })?;
    let spec = spec(
        runtime,
        &project,
        home.path(),
        &policy.terminal,
        policy.allow_git_writes,
    );
    let confinement = Confinement::prepare(&spec, caps)?;
    Ok(confinement
        .applied()
        .iter()
        .map(|(layer, how)| format!("{}:{how}", layer.as_str()))
        .collect())
}

fn spawn_error(e: &std::io::Error, shown: &str) -> ToolError {
    match Confinement::spawn_failure(e) {
        SpawnFailure::Setup { step, errno } => ToolError::new(
            "SANDBOX_SETUP_FAILED",
            format!(
                "the sandbox could not be applied ({step}: errno {errno}); {shown} did not run"
            ),
        )
        .with_details(json!({"step": step, "errno": errno, "hint": "run `baton doctor`"})),
        SpawnFailure::Exec(kind) => ToolError::new(
            "COMMAND_NOT_FOUND",
            format!(
                "{shown} cannot be started ({kind}): it is missing, not executable, or not readable in the sandbox"
            ),
        ),
    }
}
