//! Trust nothing: after dev and revision, the `[autopilot.verify]` commands run in the project
//! (`sh -c`), confined exactly like the model's own `terminal.run` — they run code the model
//! wrote — with the project's `[tools.terminal]` settings: writes only in the project and a
//! temporary `$HOME`, no store, no secrets, no network unless allowed, no descriptor of baton's,
//! a clean environment, and the whole process group killed at the end (a daemon it started
//! dies with it). Each has a timeout; only the tail of the output is kept, so a command that
//! prints forever costs bounded memory.

use baton_tools::terminal::{Ended, ProjectShell};
use baton_tools::{TerminalRuntime, TerminalSettings};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Bytes of output kept per command (the tail sent back to the developer).
pub const TAIL_BYTES: usize = 4000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Passed,
    /// Exit status other than 0 (`None`: killed by a signal).
    Failed(Option<i32>),
    TimedOut,
    /// It wrote more than `[tools.terminal] max_output_bytes` and was stopped.
    OutputLimit(u64),
    /// The command could not be started.
    NotStarted(String),
    /// The sandbox cannot be applied here: no verify command runs unconfined.
    Refused {
        code: &'static str,
        message: String,
        hint: String,
    },
    /// The orchestrator was asked to stop; the command was killed.
    Cancelled,
}

#[derive(Debug, Clone)]
pub struct CommandResult {
    pub command: String,
    pub verdict: Verdict,
    /// The last [`TAIL_BYTES`] of stdout and stderr, interleaved as written.
    pub tail: String,
    pub duration: Duration,
}

impl CommandResult {
    pub fn passed(&self) -> bool {
        self.verdict == Verdict::Passed
    }

    /// What the developer is told.
    pub fn report(&self) -> String {
        let what = match &self.verdict {
            Verdict::Passed => "passed".to_string(),
            Verdict::Failed(Some(c)) => format!("failed with exit code {c}"),
            Verdict::Failed(None) => "was killed by a signal".to_string(),
            Verdict::TimedOut => "timed out and was killed".to_string(),
            Verdict::OutputLimit(n) => {
                format!("wrote more than {n} bytes of output and was stopped")
            }
            Verdict::NotStarted(e) => format!("could not start: {e}"),
            Verdict::Refused { message, .. } => format!("was not run: {message}"),
            Verdict::Cancelled => "was stopped".to_string(),
        };
        format!(
            "`{}` {what} after {} ms. Last output:\n{}",
            self.command,
            self.duration.as_millis(),
            self.tail
        )
    }
}

/// Where verify commands run: one project, its `[tools.terminal]` settings, and what no
/// command may read (the store).
pub struct Sandbox {
    shell: ProjectShell,
    max_output: u64,
}

impl Sandbox {
    pub fn new(
        project: &Path,
        settings: &TerminalSettings,
        allow_git_writes: bool,
        runtime: TerminalRuntime,
    ) -> std::result::Result<Sandbox, (String, String)> {
        let shell = ProjectShell::new(project, settings.clone(), allow_git_writes, runtime)
            .map_err(|e| (e.code.to_string(), e.message))?;
        Ok(Sandbox {
            shell,
            max_output: settings.max_output_bytes,
        })
    }
}

/// Runs one command in the sandbox's project with `timeout`.
pub fn run(
    command: &str,
    sandbox: &Sandbox,
    timeout: Duration,
    cancel: &CancellationToken,
) -> CommandResult {
    let started = Instant::now();
    let finish = |verdict, tail: String| CommandResult {
        command: command.to_string(),
        verdict,
        tail,
        duration: started.elapsed(),
    };
    let abort = || cancel.is_cancelled();
    let out = match sandbox
        .shell
        .shell(command, timeout, TAIL_BYTES, Some(&abort))
    {
        Ok(out) => out.exec,
        Err(e) => {
            let hint = e
                .details
                .as_ref()
                .and_then(|d| d.get("hint"))
                .and_then(|h| h.as_str())
                .unwrap_or("run `baton doctor`")
                .to_string();
            let verdict = match e.code {
                "SANDBOX_UNAVAILABLE" => Verdict::Refused {
                    code: "SANDBOX_UNAVAILABLE",
                    message: e.message,
                    hint,
                },
                "SANDBOX_SETUP_FAILED" => Verdict::Refused {
                    code: "SANDBOX_SETUP_FAILED",
                    message: e.message,
                    hint,
                },
                _ => Verdict::NotStarted(e.message),
            };
            return finish(verdict, String::new());
        }
    };
    let verdict = match out.ended {
        Ended::Exited(0) => Verdict::Passed,
        Ended::Exited(c) => Verdict::Failed(Some(c)),
        Ended::Signaled(_) => Verdict::Failed(None),
        Ended::TimedOut => Verdict::TimedOut,
        Ended::Aborted => Verdict::Cancelled,
        Ended::OutputFlood => Verdict::OutputLimit(sandbox.max_output),
    };
    finish(verdict, String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs every command in order; stops at the first that does not pass.
pub fn run_all(
    commands: &[String],
    sandbox: &Sandbox,
    timeout: Duration,
    cancel: &CancellationToken,
    mut on_result: impl FnMut(&CommandResult),
) -> Option<CommandResult> {
    for c in commands {
        let result = run(c, sandbox, timeout, cancel);
        on_result(&result);
        if !result.passed() {
            return Some(result);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn go(command: &str, timeout_ms: u64) -> CommandResult {
        let dir = tempfile::tempdir().unwrap();
        let settings = TerminalSettings {
            kill_grace_ms: 200,
            ..TerminalSettings::default()
        };
        let sandbox =
            Sandbox::new(dir.path(), &settings, false, TerminalRuntime::default()).unwrap();
        run(
            command,
            &sandbox,
            Duration::from_millis(timeout_ms),
            &CancellationToken::new(),
        )
    }

    fn confined_here() -> bool {
        let caps = baton_sandbox::capabilities();
        caps.landlock_abi.is_some()
            && caps.seccomp
            && caps.namespaces != baton_sandbox::NamespaceMode::Unavailable
    }

    #[test]
    fn passes_fails_and_keeps_only_the_tail() {
        if !confined_here() {
            assert!(matches!(go("true", 5000).verdict, Verdict::Refused { .. }));
            return;
        }
        assert!(go("true", 5000).passed());
        let r = go(
            "echo start; yes line | head -c 100000; echo; echo THE-END >&2; exit 3",
            10_000,
        );
        assert_eq!(r.verdict, Verdict::Failed(Some(3)));
        assert!(r.tail.len() <= TAIL_BYTES);
        assert!(r.tail.contains("THE-END"));
        assert!(!r.tail.contains("start"));
    }

    #[test]
    fn a_command_past_its_timeout_is_killed_with_its_children() {
        if !confined_here() {
            return;
        }
        let started = Instant::now();
        let r = go("sleep 30 & sleep 30; echo never", 300);
        assert_eq!(r.verdict, Verdict::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(!r.tail.contains("never"));
    }
}
