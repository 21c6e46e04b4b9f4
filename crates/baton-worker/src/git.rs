//! The git a worker runs: a mirror of each project's remote cached under the home, a worktree
//! per unit, checkpoint commits and pushes.

use crate::WorkerError;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs git in `dir`. On the worker's multi-threaded runtime the call is marked as blocking, so
/// a slow fetch or push never holds up the heartbeats of the other units on that thread.
pub(crate) fn git(dir: &Path, args: &[&str]) -> Result<String, WorkerError> {
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi_thread {
        tokio::task::block_in_place(|| run_git(dir, args))
    } else {
        run_git(dir, args)
    }
}

fn run_git(dir: &Path, args: &[&str]) -> Result<String, WorkerError> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", "baton worker")
        .env("GIT_AUTHOR_EMAIL", "worker@baton.invalid")
        .env("GIT_COMMITTER_NAME", "baton worker")
        .env("GIT_COMMITTER_EMAIL", "worker@baton.invalid")
        .output()
        .map_err(|e| WorkerError::other("WORKER_GIT_FAILED", format!("cannot run git: {e}")))?;
    if !out.status.success() {
        return Err(WorkerError::other(
            "WORKER_GIT_FAILED",
            format!(
                "git {}: {}",
                args.first().copied().unwrap_or(""),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A worktree of `remote` at `commit` in `work/project`, from a mirror of the remote cached
/// under `home` (git commands on the shared mirror run one at a time under `git_lock`).
pub(crate) fn checkout(
    home: &Path,
    git_lock: &std::sync::Mutex<()>,
    remote: &str,
    commit: &str,
    work: &Path,
) -> Result<PathBuf, WorkerError> {
    let _one = git_lock.lock();
    let key = hex(&Sha256::digest(remote.as_bytes()));
    let repos = home.join("worker/repos");
    let mirror = repos.join(&key[..16]);
    if mirror.join("HEAD").exists() {
        git(&mirror, &["fetch", "--quiet", "--prune", "origin"])?;
    } else {
        std::fs::create_dir_all(&repos)
            .map_err(|e| WorkerError::other("WORKER_IO", e.to_string()))?;
        let target = mirror.display().to_string();
        git(&repos, &["clone", "--quiet", "--mirror", remote, &target])?;
    }
    let tree = work.join("project");
    let tree_s = tree.display().to_string();
    git(
        &mirror,
        &["worktree", "add", "--quiet", "--detach", &tree_s, commit],
    )?;
    Ok(tree)
}

/// Removes a unit's worktree (made by [`checkout`]) from the mirror of `remote`, then its whole
/// folder: the checkpoints and the result are on the remote and in the database.
pub(crate) fn remove_unit_folder(
    home: &Path,
    git_lock: &std::sync::Mutex<()>,
    remote: &str,
    work: &Path,
) -> Result<(), WorkerError> {
    let tree = work.join("project");
    if tree.exists() {
        let _one = git_lock.lock();
        let key = hex(&Sha256::digest(remote.as_bytes()));
        let mirror = home.join("worker/repos").join(&key[..16]);
        let tree_s = tree.display().to_string();
        // A mirror gone with its cache: the folder alone goes.
        if mirror.join("HEAD").exists() {
            git(&mirror, &["worktree", "remove", "--force", &tree_s])?;
        }
    }
    match std::fs::remove_dir_all(work) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(WorkerError::other(
            "WORKER_IO",
            format!("cannot remove {}: {e}", work.display()),
        )),
    }
}
