//! `terminal.run` and `shell.exec` as the ToolHost calls them: the model's arguments checked,
//! the command run confined in the run's temporary home, host paths scrubbed from its output.

use super::command;
use super::confined::{ConfinedRequest, OutputKeep, run_confined};
use super::exec::Ended;
use super::hidden;
use super::runtime::{TerminalRuntime, parent_env};
use crate::mounts::{Mount, Mounts};
use crate::policy::{EffectivePolicy, TerminalSettings};
use crate::result::{ToolError, ok};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

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

struct HomeDir(PathBuf);

impl HomeDir {
    fn path(&self) -> &Path {
        &self.0
    }
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
