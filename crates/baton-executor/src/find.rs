//! Finding a CLI and asking its version (for `baton doctor` and `baton executors check`).

use crate::ExecutorKind;
use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long `--version` may take (Node CLIs start in about half a second).
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(15);
/// Most of `--version`'s output kept.
const MAX_VERSION_BYTES: u64 = 4096;

#[derive(Debug, thiserror::Error)]
pub enum FindError {
    #[error("{kind} is baton's own loop, not a CLI")]
    NotACli { kind: ExecutorKind },
    #[error("{command} not found{where_}")]
    NotFound { command: String, where_: String },
    #[error("{program}: could not run it: {source}")]
    Spawn {
        program: PathBuf,
        source: std::io::Error,
    },
    #[error("{program} --version gave no answer within {}s", timeout.as_secs())]
    Timeout { program: PathBuf, timeout: Duration },
    #[error("{program} --version failed ({status}): {output}")]
    Failed {
        program: PathBuf,
        status: String,
        output: String,
    },
}

impl FindError {
    pub fn code(&self) -> &'static str {
        match self {
            FindError::NotACli { .. } | FindError::NotFound { .. } => "EXECUTOR_NOT_FOUND",
            _ => "EXECUTOR_BROKEN",
        }
    }

    pub fn hint(&self) -> String {
        match self {
            FindError::NotACli { .. } => "choose claude-code, codex or opencode".into(),
            FindError::NotFound { .. } => {
                "install the CLI (see docs/executors.md) or set [executors.<name>] command to its path".into()
            }
            _ => "reinstall the CLI, or check that it runs by hand with --version".into(),
        }
    }
}

/// The program of `kind`: `command` when configured (a path, or a name looked up on `PATH`),
/// else the CLI's usual name on `PATH`.
pub fn locate(kind: ExecutorKind, command: Option<&Path>) -> Result<PathBuf, FindError> {
    let default = kind.default_command().ok_or(FindError::NotACli { kind })?;
    let command = command.unwrap_or(Path::new(default));
    if command.components().count() > 1 || command.is_absolute() {
        return if is_executable(command) {
            Ok(command.to_path_buf())
        } else {
            Err(FindError::NotFound {
                command: command.display().to_string(),
                where_: " (or not executable)".into(),
            })
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    on_path(command.as_os_str(), &path).ok_or_else(|| FindError::NotFound {
        command: command.display().to_string(),
        where_: " on PATH".into(),
    })
}

/// `name` in the first directory of `path` (a `PATH` value) holding it executable.
pub fn on_path(name: &OsStr, path: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

pub(crate) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The first line `program --version` prints (e.g. `2.1.332 (Claude Code)`), run with an
/// empty environment but `PATH` and a throwaway `HOME`, killed after `timeout`.
pub fn version(kind: ExecutorKind, program: &Path, timeout: Duration) -> Result<String, FindError> {
    let args = kind
        .adapter()
        .ok_or(FindError::NotACli { kind })?
        .version_args();
    let home = scratch_home();
    let spawn_error = |source| FindError::Spawn {
        program: program.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(&home).map_err(spawn_error)?;
    let result = run_version(program, &args, &home, timeout);
    let _ = std::fs::remove_dir_all(&home);
    result
}

fn run_version(
    program: &Path,
    args: &[std::ffi::OsString],
    home: &Path,
    timeout: Duration,
) -> Result<String, FindError> {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("LANG", "C.UTF-8")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd.spawn().map_err(|source| FindError::Spawn {
        program: program.to_path_buf(),
        source,
    })?;
    let pid = child.id();
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let (tx, rx) = mpsc::channel();
    // The reading and the wait happen on a thread so the timeout can stop waiting for them.
    std::thread::spawn(move || {
        let mut out = bounded(stdout);
        let err = bounded(stderr);
        let status = child.wait();
        if out.trim().is_empty() {
            out = err;
        }
        let _ = tx.send((status, out));
    });
    let (status, output) = match rx.recv_timeout(timeout) {
        Ok(got) => got,
        Err(_) => {
            crate::group::kill(pid);
            return Err(FindError::Timeout {
                program: program.to_path_buf(),
                timeout,
            });
        }
    };
    let status = status.map_err(|source| FindError::Spawn {
        program: program.to_path_buf(),
        source,
    })?;
    let first = output.lines().map(str::trim).find(|l| !l.is_empty());
    match first {
        Some(line) if status.success() => Ok(line.to_string()),
        _ => Err(FindError::Failed {
            program: program.to_path_buf(),
            status: status.to_string(),
            output: output.trim().chars().take(500).collect(),
        }),
    }
}

/// Up to [`MAX_VERSION_BYTES`] of a pipe, the rest drained so the CLI never blocks on it.
fn bounded(pipe: Option<impl Read>) -> String {
    let Some(pipe) = pipe else {
        return String::new();
    };
    let mut kept = Vec::new();
    let mut pipe = pipe;
    let _ = (&mut pipe).take(MAX_VERSION_BYTES).read_to_end(&mut kept);
    let _ = std::io::copy(&mut pipe, &mut std::io::sink());
    String::from_utf8_lossy(&kept).into_owned()
}

fn scratch_home() -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    std::env::temp_dir().join(format!(
        "baton-executor-version-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        path
    }

    #[test]
    fn a_configured_path_or_a_name_on_path_is_found_and_a_missing_one_is_named() {
        let dir = tempfile::tempdir().expect("dir");
        let claude = script(dir.path(), "claude", "echo 1");
        assert_eq!(
            on_path(OsStr::new("claude"), dir.path().as_os_str()),
            Some(claude.clone())
        );
        assert_eq!(on_path(OsStr::new("codex"), dir.path().as_os_str()), None);
        assert_eq!(
            locate(ExecutorKind::ClaudeCode, Some(&claude)).expect("found"),
            claude
        );
        let missing = dir.path().join("nope");
        let e = locate(ExecutorKind::Codex, Some(&missing)).expect_err("missing");
        assert_eq!(e.code(), "EXECUTOR_NOT_FOUND");
        assert!(e.to_string().contains("nope"), "{e}");
        assert!(matches!(
            locate(ExecutorKind::Baton, None),
            Err(FindError::NotACli { .. })
        ));
    }

    #[test]
    fn the_version_is_the_first_line_and_a_hanging_or_failing_cli_is_an_error() {
        let dir = tempfile::tempdir().expect("dir");
        let good = script(
            dir.path(),
            "good",
            "echo; echo '2.1.332 (Claude Code)'; echo more",
        );
        assert_eq!(
            version(ExecutorKind::ClaudeCode, &good, VERSION_TIMEOUT).expect("version"),
            "2.1.332 (Claude Code)"
        );
        let bad = script(dir.path(), "bad", "echo 'cannot find module' >&2; exit 3");
        let e = version(ExecutorKind::ClaudeCode, &bad, VERSION_TIMEOUT).expect_err("bad");
        assert_eq!(e.code(), "EXECUTOR_BROKEN");
        assert!(e.to_string().contains("cannot find module"), "{e}");
        // A child that keeps the pipe open must not hold the answer past the timeout.
        let hang = script(dir.path(), "hang", "sleep 300 & wait");
        let started = std::time::Instant::now();
        let e =
            version(ExecutorKind::ClaudeCode, &hang, Duration::from_millis(300)).expect_err("hang");
        assert!(matches!(e, FindError::Timeout { .. }), "{e}");
        assert!(started.elapsed() < Duration::from_secs(30));
        let flood = script(dir.path(), "flood", "yes 2.0 | head -c 10000000");
        assert_eq!(
            version(ExecutorKind::ClaudeCode, &flood, VERSION_TIMEOUT).expect("flood"),
            "2.0"
        );
    }
}
