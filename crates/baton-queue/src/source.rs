//! Where a queued unit's project comes from: a git remote and a commit a worker can fetch. Shared
//! by everything that submits (a workflow run, an epic's stories): the project must be in a git
//! repository with a remote that answers, and the commit to start from must be on it.

use crate::error::QueueError;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The project is not inside a git repository (or has no commit).
pub const QUEUE_PROJECT_NOT_GIT: &str = "QUEUE_PROJECT_NOT_GIT";
/// The project's repository has no remote a worker could fetch it from.
pub const QUEUE_NO_REMOTE: &str = "QUEUE_NO_REMOTE";
/// The remote did not answer `git ls-remote`.
pub const QUEUE_REMOTE_UNREACHABLE: &str = "QUEUE_REMOTE_UNREACHABLE";
/// The commit to start from is on no branch or tag of the remote.
pub const QUEUE_COMMIT_NOT_PUSHED: &str = "QUEUE_COMMIT_NOT_PUSHED";

/// How long the remote may take to list its refs.
const LS_REMOTE_TIMEOUT: Duration = Duration::from_secs(30);

/// Why work cannot be submitted.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct SubmitError {
    pub code: &'static str,
    pub message: String,
    pub hint: Option<String>,
    /// The user's input is at fault (as opposed to the machine or the database).
    pub invalid: bool,
}

impl SubmitError {
    fn invalid(code: &'static str, message: String, hint: &str) -> SubmitError {
        SubmitError {
            code,
            message,
            hint: Some(hint.to_string()),
            invalid: true,
        }
    }
}

impl From<QueueError> for SubmitError {
    fn from(e: QueueError) -> SubmitError {
        let invalid = matches!(
            e,
            QueueError::UrlInvalid { .. }
                | QueueError::EnvMissing { .. }
                | QueueError::InvalidInput(_)
        );
        SubmitError {
            code: e.code(),
            message: e.to_string(),
            hint: e.hint(),
            invalid,
        }
    }
}

/// Where a queued unit's project comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectSource {
    /// The remote's URL (a local path made absolute).
    pub remote: String,
    /// The remote's name in the project's repository.
    pub remote_name: String,
    /// The commit the unit starts from (HEAD).
    pub base_commit: String,
    /// The project directory inside the repository ("" for its root), with `/`.
    pub subdir: String,
    /// Whether the working tree has changes that do not travel.
    pub dirty: bool,
}

/// git on the person's repository (where a model's nested repository may sit): baton-git's
/// configuration (no fsmonitor, hooks or nested repository entered) and a clean environment.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = baton_git::hardening::remote_command(dir)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Reads the project's git remote and base commit, and checks that a worker could fetch that
/// commit from the remote; or says why the project cannot travel.
pub fn project_source(project: &Path) -> Result<ProjectSource, SubmitError> {
    let source = project_remote(project)?;
    check_pushed(
        project,
        &source.remote_name,
        &source.remote,
        &source.base_commit,
    )?;
    Ok(source)
}

/// [`project_source`] without the check that the base commit is on the remote (for a caller
/// that pushes it first, then checks with [`check_pushed`]).
pub fn project_remote(project: &Path) -> Result<ProjectSource, SubmitError> {
    let shown = project.display();
    let not_git = |what: String| {
        SubmitError::invalid(
            QUEUE_PROJECT_NOT_GIT,
            what,
            "a queued unit's project travels as a git remote and a commit: run `git init`, commit the project, add a remote (`git remote add origin URL`) and push, or run it here without --queue",
        )
    };
    let Some(top) = git(project, &["rev-parse", "--show-toplevel"]) else {
        return Err(not_git(format!("{shown} is not in a git repository")));
    };
    let Some(base_commit) = git(project, &["rev-parse", "--verify", "HEAD^{commit}"]) else {
        return Err(not_git(format!(
            "the git repository of {shown} has no commit yet"
        )));
    };
    let remotes = git(project, &["remote"]).unwrap_or_default();
    let names: Vec<&str> = remotes.lines().filter(|l| !l.is_empty()).collect();
    let remote_name = if names.contains(&"origin") {
        "origin"
    } else if let Some(first) = names.first() {
        first
    } else {
        return Err(SubmitError::invalid(
            QUEUE_NO_REMOTE,
            format!("the git repository of {shown} has no remote, so no worker could fetch it"),
            "add one the workers can reach (`git remote add origin URL`; a path to a bare repository works on one machine or a shared disk) and push the commit to start from",
        ));
    };
    let url = git(project, &["remote", "get-url", remote_name]).unwrap_or_default();
    let remote = absolute_remote(&url, Path::new(&top));
    let canonical_project = std::fs::canonicalize(project).unwrap_or(project.to_path_buf());
    let canonical_top = std::fs::canonicalize(&top).unwrap_or(PathBuf::from(&top));
    let subdir = canonical_project
        .strip_prefix(&canonical_top)
        .map(|p| {
            p.components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/")
        })
        .unwrap_or_default();
    let dirty = git(project, &["status", "--porcelain", "--untracked-files=no"])
        .is_some_and(|s| !s.is_empty());
    Ok(ProjectSource {
        remote,
        remote_name: remote_name.to_string(),
        base_commit,
        subdir,
        dirty,
    })
}

/// The remote answers, and one of its refs holds `commit` (as far as this repository knows
/// the refs' history): otherwise every worker would fail on it later.
pub fn check_pushed(
    project: &Path,
    remote_name: &str,
    remote: &str,
    commit: &str,
) -> Result<(), SubmitError> {
    let refs = ls_remote(project, remote).map_err(|why| {
        SubmitError::invalid(
            QUEUE_REMOTE_UNREACHABLE,
            format!("the remote {remote_name} ({remote}) did not answer: {why}"),
            "the workers fetch the project from this remote: check its URL (`git remote -v`) and that this machine can reach it (`git ls-remote`)",
        )
    })?;
    let pushed = refs.iter().any(|sha| {
        sha == commit || git(project, &["merge-base", "--is-ancestor", commit, sha]).is_some()
    });
    if pushed {
        return Ok(());
    }
    let short = &commit[..commit.len().min(12)];
    Err(SubmitError::invalid(
        QUEUE_COMMIT_NOT_PUSHED,
        format!(
            "commit {short} is on no branch of the remote {remote_name}, so no worker could fetch it"
        ),
        &format!("push it first: `git push {remote_name} HEAD` (or to a branch of your choice)"),
    ))
}

/// The commits the remote's refs point at, within [`LS_REMOTE_TIMEOUT`].
fn ls_remote(project: &Path, remote: &str) -> Result<Vec<String>, String> {
    let mut child = baton_git::hardening::remote_command(project)
        .args(["ls-remote", "--quiet", remote])
        .env("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run git: {e}"))?;
    // Both pipes read on threads, so a chatty remote cannot fill one and stall.
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > LS_REMOTE_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("no answer in {} s", LS_REMOTE_TIMEOUT.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e.to_string()),
        }
    };
    let out = out.join().unwrap_or_default();
    let err = err.join().unwrap_or_default();
    if !status.success() {
        let why = err.trim();
        return Err(if why.is_empty() {
            format!("git ls-remote exited with {status}")
        } else {
            why.lines().last().unwrap_or(why).to_string()
        });
    }
    Ok(out
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect())
}

fn drain<R: std::io::Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_string(&mut text);
        }
        text
    })
}

/// A remote that is a relative local path is made absolute (git reads it against the
/// repository's top); URLs and absolute paths are kept as they are.
fn absolute_remote(url: &str, top: &Path) -> String {
    let looks_local = !url.contains("://") && !url.contains(':') && !url.is_empty();
    if looks_local && Path::new(url).is_relative() {
        let joined = top.join(url);
        return std::fs::canonicalize(&joined)
            .unwrap_or(joined)
            .display()
            .to_string();
    }
    url.to_string()
}
