//! `terminal.run` and `shell.exec`: a command in the project, without a shell (unless
//! `shell.exec` is allowed), in a clean environment, inside the sandbox of `baton-sandbox`,
//! with capped output and a deadline. Results never name a host path: the project root reads
//! `@project` and the run's temporary home `$HOME`.

mod command;
mod exec;
mod git;
mod hidden;
mod project;
mod protected;

pub use git::GitSandbox;
pub use hidden::{hide_from_commands, set_command_temp_root};
pub use project::ProjectShell;

use crate::mounts::{Mount, Mounts};
use crate::policy::{EffectivePolicy, TerminalSettings};
use crate::result::{ToolError, ok};
use baton_sandbox::{Capabilities, Confinement, Limits, SandboxSpec, SpawnFailure};
use exec::ExecRequest;
pub use exec::{Ended, ExecOutput};
use serde_json::{Value, json};
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

/// Lifecycle sessions' folder: read-only for a command (its parent cannot be moved away, see
/// baton-sandbox's pins), and a new one is removed.
const SESSIONS_DIR: &str = ".workflow/.maestro";

/// The project's configuration file: a command sees it read-only, and a new one is removed.
pub const CONFIG_FILE: &str = "baton.toml";

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

/// The terminal side of one ToolHost.
pub struct Terminal {
    runtime: TerminalRuntime,
    run_id: String,
    /// The project root as given (the mounts hold its canonical form).
    project_given: PathBuf,
    /// Created on the first command; removed with the host.
    home: Option<tempfile::TempDir>,
}

/// What a call asks for, after checking.
struct Call {
    program: PathBuf,
    shown: String,
    args: Vec<OsString>,
    cwd: crate::mounts::MountPath,
    timeout_ms: u64,
    env: Vec<(String, String)>,
}

impl Terminal {
    pub fn new(run_id: &str, project: &Path) -> Terminal {
        Terminal {
            runtime: TerminalRuntime::default(),
            run_id: run_id.to_string(),
            project_given: project.to_path_buf(),
            home: None,
        }
    }

    pub fn set_runtime(&mut self, runtime: TerminalRuntime) {
        self.runtime = runtime;
    }

    pub fn runtime(&self) -> &TerminalRuntime {
        &self.runtime
    }

    /// `terminal.run` (`shell = false`) or `shell.exec`.
    pub fn run(
        &mut self,
        mounts: &Mounts,
        args: &Value,
        policy: &EffectivePolicy,
        shell: bool,
        abort: Option<&(dyn Fn() -> bool + Send + Sync)>,
    ) -> Result<Value, ToolError> {
        let t = &policy.terminal;
        let mut call = self.check(args, t, shell)?;
        let home = self.home()?;
        let home_text = home.path().to_string_lossy().into_owned();
        command::set(&mut call.env, "HOME", home_text.clone());
        command::set(&mut call.env, "TMPDIR", home_text);
        let project = mounts.host_root(Mount::Project).to_path_buf();
        let (cwd_fd, cwd_host) = command::open_cwd(mounts, &call.cwd)?;
        let program = command::resolve(&call.program, &call.shown, mounts, &cwd_host, &call.env)?;
        let output = run_confined(ConfinedRequest {
            project: &project,
            cwd: cwd_fd,
            program,
            args: call.args.clone(),
            env: call.env.clone(),
            home: home.path(),
            settings: t,
            allow_git_writes: policy.allow_git_writes,
            protected: &policy.protected,
            runtime: &self.runtime,
            timeout: Duration::from_millis(call.timeout_ms),
            output: OutputKeep::Head,
            abort,
            shown: &call.shown,
        })?;
        let applied = output.applied;
        let warnings = output.warnings;
        let output = output.exec;
        let scrub = Scrubber::new(&self.project_given, mounts, home.path());
        let stdout = scrub.text(&output.stdout);
        let stderr = scrub.text(&output.stderr);
        let mut fields = json!({
            "command": call.shown,
            "cwd": call.cwd.display(),
            "stdout": stdout,
            "stderr": stderr,
            "stdoutTruncated": output.stdout_total > output.stdout.len() as u64,
            "stderrTruncated": output.stderr_total > output.stderr.len() as u64,
            "durationMs": output.duration.as_millis() as u64,
        });
        if !t.require_sandbox {
            // The user opted out of the full sandbox: say what this command ran under.
            fields["sandbox"] = json!(applied);
        }
        if output.stdout_total > output.stdout.len() as u64 {
            fields["stdoutBytes"] = json!(output.stdout_total);
        }
        if output.stderr_total > output.stderr.len() as u64 {
            fields["stderrBytes"] = json!(output.stderr_total);
        }
        if !warnings.is_empty() {
            fields["warnings"] = json!(warnings);
        }
        match output.ended {
            Ended::Exited(code) => {
                fields["exitCode"] = json!(code);
                Ok(ok(fields))
            }
            Ended::Signaled(sig) => {
                fields["exitCode"] = Value::Null;
                fields["signal"] = json!(sig);
                Ok(ok(fields))
            }
            Ended::TimedOut => Err(ToolError::new(
                "EXEC_TIMEOUT",
                format!(
                    "{} ran longer than {} ms and was stopped (its whole process group was killed)",
                    call.shown, call.timeout_ms
                ),
            )
            .with_details(fields)),
            Ended::Aborted => Err(ToolError::new(
                "EXEC_ABORTED",
                format!("{} was stopped because the run is stopping", call.shown),
            )
            .with_details(fields)),
            Ended::OutputFlood => Err(ToolError::new(
                "OUTPUT_LIMIT_EXCEEDED",
                format!(
                    "{} wrote more than {} bytes of output and was stopped; redirect its output to a file under @project and read the part you need",
                    call.shown, t.max_output_bytes
                ),
            )
            .with_details(fields)),
        }
    }

    fn check(&self, args: &Value, t: &TerminalSettings, shell: bool) -> Result<Call, ToolError> {
        let (program, shown, argv) = if shell {
            if !t.allow_shell_exec {
                return Err(ToolError::new(
                    "TOOL_NOT_AVAILABLE",
                    "shell.exec is not allowed by the policy; use terminal.run with a command and args",
                ));
            }
            let script = args.get("script").and_then(Value::as_str).unwrap_or("");
            (
                PathBuf::from("/bin/sh"),
                "sh".to_string(),
                vec![OsString::from("-c"), OsString::from(script)],
            )
        } else {
            let command = args.get("command").and_then(Value::as_str).unwrap_or("");
            command::check_name(command)?;
            let base = Path::new(command)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if let Some(allowed) = &t.allowed_commands
                && !allowed.contains(&base)
            {
                return Err(ToolError::new(
                    "COMMAND_NOT_ALLOWED",
                    format!("'{base}' is not an allowed command"),
                )
                .with_details(json!({"allowedCommands": allowed})));
            }
            let argv = args
                .get("args")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|v| OsString::from(v.as_str().unwrap_or_default()))
                        .collect()
                })
                .unwrap_or_default();
            (PathBuf::from(command), command.to_string(), argv)
        };
        let cwd = command::parse_cwd(args.get("cwd").and_then(Value::as_str), t)?;
        let timeout_ms = args
            .get("timeoutMs")
            .and_then(Value::as_u64)
            .map_or(t.timeout_ms, |ms| ms.clamp(1, t.timeout_ms));
        let env = command::environment(args.get("env"), t, self.parent_env().as_slice())?;
        Ok(Call {
            program,
            shown,
            args: argv,
            cwd,
            timeout_ms,
            env,
        })
    }

    fn parent_env(&self) -> Vec<(String, String)> {
        parent_env(&self.runtime)
    }

    /// The run's temporary home (also TMPDIR), created on first use.
    fn home(&mut self) -> Result<HomeDir, ToolError> {
        if self.home.is_none() {
            let root = self
                .runtime
                .temp_root
                .clone()
                .unwrap_or_else(hidden::temp_root);
            let short: String = self.run_id.chars().take(8).collect();
            let dir = tempfile::Builder::new()
                .prefix(&format!("baton-run-{short}-"))
                .tempdir_in(&root)
                .map_err(|e| {
                    ToolError::new(
                        "SANDBOX_SETUP_FAILED",
                        format!(
                            "the run's temporary directory cannot be created ({})",
                            e.kind()
                        ),
                    )
                })?;
            self.home = Some(dir);
        }
        match &self.home {
            Some(d) => Ok(HomeDir(d.path().to_path_buf())),
            None => Err(ToolError::new("E_INTERNAL", "no temporary directory")),
        }
    }
}

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

fn parent_env(runtime: &TerminalRuntime) -> Vec<(String, String)> {
    match &runtime.parent_env {
        Some(e) => e.clone(),
        None => std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect(),
    }
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

struct HomeDir(PathBuf);

impl HomeDir {
    fn path(&self) -> &Path {
        &self.0
    }
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

/// Paths a command must not create or change: a new `baton.toml` (the configuration that
/// sets this very sandbox) and, without `allow_git_writes`, a new `.git` (a repository with
/// hooks that would run at the user's next commit) are removed after the call. Existing ones
/// are read-only bind mounts during the call.
struct Protected {
    config_existed: bool,
    sessions_existed: bool,
    bmad_configs: Vec<PathBuf>,
    git_existed: Option<bool>,
    /// Everything beneath the protected paths (and whether each existed).
    protected: protected::Listing,
}

impl Protected {
    fn snapshot(project: &Path, allow_git_writes: bool, protected: &[String]) -> Protected {
        Protected {
            config_existed: project.join(CONFIG_FILE).symlink_metadata().is_ok(),
            sessions_existed: project.join(SESSIONS_DIR).symlink_metadata().is_ok(),
            bmad_configs: bmad_configs(project),
            git_existed: (!allow_git_writes)
                .then(|| project.join(".git").symlink_metadata().is_ok()),
            protected: protected::Listing::take(project, protected),
        }
    }

    fn restore(&self, project: &Path) -> Vec<String> {
        let mut warnings = Vec::new();
        let config = project.join(CONFIG_FILE);
        if !self.config_existed && config.symlink_metadata().is_ok() {
            remove(&config);
            warnings.push(format!(
                "@project/{CONFIG_FILE} was created by the command and removed: baton's configuration cannot be written by tools"
            ));
        }
        // Lifecycle sessions are made by baton (`baton session start`, `ralph new`), never by a
        // command: a folder of sessions it created is removed with what it holds.
        let sessions = project.join(SESSIONS_DIR);
        if !self.sessions_existed && sessions.symlink_metadata().is_ok() {
            remove(&sessions);
            warnings.push(format!(
                "@project/{SESSIONS_DIR} was created by the command and removed: lifecycle sessions are made by baton only"
            ));
        }
        for made in bmad_configs(project) {
            if !self.bmad_configs.contains(&made) {
                remove(&made);
                let shown = made
                    .strip_prefix(project)
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                warnings.push(format!(
                    "@project/{shown} was created by the command and removed: BMAD's configuration cannot be written by tools"
                ));
            }
        }
        warnings.extend(self.protected.remove_new(project));
        let git = project.join(".git");
        if self.git_existed == Some(false) && git.symlink_metadata().is_ok() {
            remove(&git);
            warnings.push(
                "@project/.git was created by the command and removed: writes into .git are not allowed by the policy"
                    .into(),
            );
        }
        warnings
    }
}

/// BMAD's configuration files in the project: `config.*` under `_bmad/`, `.bmad/`, `bmad/`,
/// without following links, at most 6 levels and 4,096 entries deep (a model could have made a
/// huge tree there).
fn bmad_configs(project: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut budget = 4096usize;
    let mut stack: Vec<(PathBuf, usize)> = crate::mounts::BMAD_DIRS
        .iter()
        .map(|d| (project.join(d), 0))
        .collect();
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if budget == 0 {
                return found;
            }
            budget -= 1;
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name().to_string_lossy().to_ascii_lowercase();
            if kind.is_dir() && depth < 6 {
                stack.push((entry.path(), depth + 1));
            } else if !kind.is_dir() && name.starts_with("config.") {
                found.push(entry.path());
            }
        }
    }
    found.sort();
    found
}

fn remove(path: &Path) {
    let is_dir = path.symlink_metadata().is_ok_and(|m| m.is_dir());
    let _ = if is_dir {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
}

/// Replaces host paths in output by the names the model knows.
struct Scrubber {
    pairs: Vec<(String, &'static str)>,
}

impl Scrubber {
    fn new(project: &Path, mounts: &Mounts, home: &Path) -> Scrubber {
        let mut pairs: Vec<(String, &'static str)> = Vec::new();
        let mut add = |p: &Path, alias: &'static str| {
            let s = p.to_string_lossy().into_owned();
            if s.len() > 1 && !pairs.iter().any(|(x, _)| *x == s) {
                pairs.push((s, alias));
            }
        };
        add(project, "@project");
        add(mounts.host_root(Mount::Project), "@project");
        if let Ok(real) = home.canonicalize() {
            add(&real, "$HOME");
        }
        add(home, "$HOME");
        // Longest first, so a path inside another is replaced whole.
        pairs.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
        Scrubber { pairs }
    }

    fn text(&self, bytes: &[u8]) -> String {
        let mut s = String::from_utf8_lossy(bytes).into_owned();
        for (host, alias) in &self.pairs {
            if s.contains(host.as_str()) {
                s = s.replace(host.as_str(), alias);
            }
        }
        s
    }
}
