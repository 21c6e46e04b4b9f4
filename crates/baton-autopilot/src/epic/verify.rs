//! Trust nothing: after dev and revision, the `[autopilot.verify]` commands run in the project
//! (`sh -c`, in their own process group, stdin closed, API keys removed from the environment),
//! each with a timeout after which the whole group is killed. Only the tail of the output is
//! kept, so a command that prints forever costs bounded memory.

use std::collections::VecDeque;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Bytes of output kept per command (the tail sent back to the developer).
pub const TAIL_BYTES: usize = 4000;
const POLL: Duration = Duration::from_millis(10);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Passed,
    /// Exit status other than 0 (`None`: killed by a signal).
    Failed(Option<i32>),
    TimedOut,
    /// The command could not be started.
    NotStarted(String),
    /// The orchestrator was asked to stop; the command was killed.
    Cancelled,
}

#[derive(Debug, Clone)]
pub struct CommandResult {
    pub command: String,
    pub verdict: Verdict,
    /// The last [`TAIL_BYTES`] of stdout and stderr, interleaved as read.
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
            Verdict::NotStarted(e) => format!("could not start: {e}"),
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

#[derive(Default)]
struct Tail {
    bytes: VecDeque<u8>,
}

impl Tail {
    fn push(&mut self, chunk: &[u8]) {
        self.bytes.extend(chunk);
        let extra = self.bytes.len().saturating_sub(TAIL_BYTES);
        self.bytes.drain(..extra);
    }
}

fn pump(
    mut from: impl Read + Send + 'static,
    into: Arc<Mutex<Tail>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            if let Ok(mut t) = into.lock() {
                t.push(&buf[..n]);
            }
        }
    })
}

/// Environment variables a verify command does not get: its output goes to the model.
fn is_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.contains("API_KEY") || upper.ends_with("_SECRET")
}

/// Runs one command in `dir` with `timeout`.
pub fn run(
    command: &str,
    dir: &Path,
    timeout: Duration,
    cancel: &CancellationToken,
) -> CommandResult {
    use std::os::unix::process::CommandExt;
    let started = Instant::now();
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    for (name, _) in std::env::vars_os() {
        if is_secret(&name.to_string_lossy()) {
            cmd.env_remove(&name);
        }
    }
    let finish = |verdict, tail: String| CommandResult {
        command: command.to_string(),
        verdict,
        tail,
        duration: started.elapsed(),
    };
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return finish(Verdict::NotStarted(e.to_string()), String::new()),
    };
    let tail = Arc::new(Mutex::new(Tail::default()));
    let mut pumps = Vec::new();
    if let Some(out) = child.stdout.take() {
        pumps.push(pump(out, tail.clone()));
    }
    if let Some(err) = child.stderr.take() {
        pumps.push(pump(err, tail.clone()));
    }
    let pgid = child.id();
    let verdict = loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                break if status.success() {
                    Verdict::Passed
                } else {
                    Verdict::Failed(status.code())
                };
            }
            Ok(None) => {}
            Err(e) => break Verdict::NotStarted(e.to_string()),
        }
        if cancel.is_cancelled() {
            baton_sandbox::kill_group(pgid, baton_sandbox::Signal::Kill);
            let _ = child.wait();
            break Verdict::Cancelled;
        }
        if started.elapsed() >= timeout {
            baton_sandbox::kill_group(pgid, baton_sandbox::Signal::Kill);
            let _ = child.wait();
            break Verdict::TimedOut;
        }
        std::thread::sleep(POLL);
    };
    // Whatever the shell left running still holds the pipes: it goes with the group.
    baton_sandbox::kill_group(pgid, baton_sandbox::Signal::Kill);
    for p in pumps {
        let _ = p.join();
    }
    let text = tail
        .lock()
        .map(|t| {
            let bytes: Vec<u8> = t.bytes.iter().copied().collect();
            String::from_utf8_lossy(&bytes).into_owned()
        })
        .unwrap_or_default();
    finish(verdict, text)
}

/// Runs every command in order; stops at the first that does not pass.
pub fn run_all(
    commands: &[String],
    dir: &Path,
    timeout: Duration,
    cancel: &CancellationToken,
    mut on_result: impl FnMut(&CommandResult),
) -> Option<CommandResult> {
    for c in commands {
        let result = run(c, dir, timeout, cancel);
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
        run(
            command,
            dir.path(),
            Duration::from_millis(timeout_ms),
            &CancellationToken::new(),
        )
    }

    #[test]
    fn passes_fails_and_keeps_only_the_tail() {
        assert!(go("true", 5000).passed());
        let r = go(
            "echo start; yes line | head -c 100000; echo; echo THE-END; exit 3",
            10_000,
        );
        assert_eq!(r.verdict, Verdict::Failed(Some(3)));
        assert!(r.tail.len() <= TAIL_BYTES);
        assert!(r.tail.contains("THE-END"));
        assert!(!r.tail.contains("start"));
    }

    #[test]
    fn a_command_past_its_timeout_is_killed_with_its_children() {
        let started = Instant::now();
        let r = go("sleep 30 & sleep 30; echo never", 300);
        assert_eq!(r.verdict, Verdict::TimedOut);
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(!r.tail.contains("never"));
    }

    #[test]
    fn api_keys_are_not_passed_on() {
        assert!(is_secret("OPENAI_API_KEY"));
        assert!(is_secret("my_api_key"));
        assert!(is_secret("CLIENT_SECRET"));
        assert!(!is_secret("PATH"));
    }
}
