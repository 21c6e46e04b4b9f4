//! The git a worker runs: a mirror of each project's remote cached under the home, a worktree
//! per unit, checkpoint commits and pushes.
//!
//! The unit's worktree is the model's: git on it goes through `baton-git` ([`TreeGit`]:
//! nothing in the tree extends its configuration, no secret in its environment, confined
//! with only the tree and the mirror's repository folders writable, the mirror's
//! configuration and hooks checked after each command). The mirror itself no model writes:
//! fetches and pushes run there, with the network and the operator's credentials, through
//! [`remote_command`] (same configuration, a clean environment).

use crate::WorkerError;
use baton_git::hardening::remote_command;
use baton_git::{Identity, RepoDirs, TreeGit};
use baton_tools::terminal::GitSandbox;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

fn git_error(e: baton_git::GitError) -> WorkerError {
    let code = match e.code {
        baton_git::GIT_FAILED => "WORKER_GIT_FAILED",
        other => other,
    };
    WorkerError::other(code, e.message)
}

/// Runs `f` where it may block: on the worker's multi-threaded runtime the thread is handed
/// over first, so a slow git command, a lock or a retry never holds up the heartbeats of the
/// other units on that thread.
pub(crate) fn blocking<T>(f: impl FnOnce() -> T) -> T {
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi_thread {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

/// The sandbox of git on units' worktrees: the worker home's terminal settings (limits,
/// whether a missing layer is an error), no network.
fn sandbox(home: &Path) -> Result<GitSandbox, WorkerError> {
    let tools = baton_tools::ToolsConfig::load(Some(home), None)
        .map_err(|e| WorkerError::other(e.code(), e.to_string()))?;
    GitSandbox::new(
        tools.system.terminal,
        baton_tools::TerminalRuntime::default(),
    )
    .map_err(git_error)
}

/// Runs git on a unit's worktree `tree` (see the module's documentation); a non-zero exit is
/// `WORKER_GIT_FAILED`.
pub(crate) fn tree_git(home: &Path, tree: &Path, args: &[&str]) -> Result<String, WorkerError> {
    blocking(|| {
        let sandbox = sandbox(home)?;
        let git = open_tree(tree, &sandbox)?;
        git.ok(args)
            .map(|s| s.trim().to_string())
            .map_err(git_error)
    })
}

fn open_tree<'s>(tree: &Path, sandbox: &'s GitSandbox) -> Result<TreeGit<'s>, WorkerError> {
    TreeGit::open(
        tree,
        sandbox,
        None,
        Identity::Fixed {
            name: "baton worker".into(),
            email: "worker@baton.invalid".into(),
        },
    )
    .map_err(git_error)
}

/// Runs git in the mirror (or any repository no model writes); a non-zero exit is
/// `WORKER_GIT_FAILED`.
fn run_git(dir: &Path, args: &[&str]) -> Result<String, WorkerError> {
    let out = remote_command(dir)
        .args(args)
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

/// Pushes `commit` of the unit's worktree `tree` to `reference` on `remote`, from the mirror
/// the worktree hangs on (the push never looks at the tree).
pub(crate) fn push(
    tree: &Path,
    remote: &str,
    commit: &str,
    reference: &str,
) -> Result<(), WorkerError> {
    blocking(|| {
        let dirs = RepoDirs::resolve(tree).map_err(git_error)?;
        let refspec = format!("+{commit}:{reference}");
        run_git(&dirs.common_dir, &["push", "--quiet", remote, &refspec]).map(|_| ())
    })
}

/// Deletes on `remote` the refs matching `pattern` (a `git ls-remote` pattern such as
/// `refs/baton/runs/12/*`) except `keep`: the refs an earlier attempt of a unit pushed, which
/// the current attempt supersedes. Returns the refs deleted.
pub(crate) fn prune_refs(
    tree: &Path,
    remote: &str,
    pattern: &str,
    keep: &str,
) -> Result<Vec<String>, WorkerError> {
    blocking(|| {
        let dirs = RepoDirs::resolve(tree).map_err(git_error)?;
        let listed = run_git(&dirs.common_dir, &["ls-remote", remote, pattern])?;
        let old: Vec<String> = listed
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1))
            .filter(|r| *r != keep)
            .map(str::to_string)
            .collect();
        if old.is_empty() {
            return Ok(old);
        }
        let mut args = vec!["push", "--quiet", remote];
        let specs: Vec<String> = old.iter().map(|r| format!(":{r}")).collect();
        args.extend(specs.iter().map(String::as_str));
        run_git(&dirs.common_dir, &args)?;
        Ok(old)
    })
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Commits the worktree's changes (if any) with `message` and pushes the commit to
/// `reference` on `remote`; returns the commit.
pub(crate) fn commit_and_push(
    home: &Path,
    tree: &Path,
    message: &str,
    remote: &str,
    reference: &str,
) -> Result<String, WorkerError> {
    let head = blocking(|| {
        let sandbox = sandbox(home)?;
        let git = open_tree(tree, &sandbox)?;
        let ok = |args: &[&str]| git.ok(args).map_err(git_error);
        if !ok(&["status", "--porcelain"])?.trim().is_empty() {
            ok(&["add", "-A"])?;
            ok(&["commit", "--quiet", "--no-verify", "-m", message])?;
        }
        Ok::<_, WorkerError>(ok(&["rev-parse", "HEAD"])?.trim().to_string())
    })?;
    push(tree, remote, &head, reference)?;
    Ok(head)
}

/// The mirror of `remote` under `home`, held for this slot: this process's `git_lock`, then an
/// exclusive lock on `<mirror>.lock` for the other processes on the same home (a worker
/// restarted on it, or a second worker given the same home): two fetches into one mirror at
/// once fail (`cannot lock ref … is at … but expected …`), which failed the unit.
struct Mirror<'a> {
    path: PathBuf,
    _in_process: Option<std::sync::MutexGuard<'a, ()>>,
    _on_disk: std::fs::File,
}

fn lock_mirror<'a>(
    home: &Path,
    git_lock: &'a std::sync::Mutex<()>,
    remote: &str,
) -> Result<Mirror<'a>, WorkerError> {
    let io = |e: std::io::Error| WorkerError::other("WORKER_IO", e.to_string());
    let in_process = git_lock.lock().ok();
    let key = hex(&Sha256::digest(remote.as_bytes()));
    let repos = home.join("worker/repos");
    std::fs::create_dir_all(&repos).map_err(io)?;
    let on_disk = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(repos.join(format!("{}.lock", &key[..16])))
        .map_err(io)?;
    on_disk.lock().map_err(io)?;
    Ok(Mirror {
        path: repos.join(&key[..16]),
        _in_process: in_process,
        _on_disk: on_disk,
    })
}

/// How old a git lock file in a mirror must be to be taken for one a killed git left behind.
const STALE_GIT_LOCK: std::time::Duration = std::time::Duration::from_secs(120);

/// Removes the lock files (`*.lock`: refs, `packed-refs`, `config`, `shallow`) a git killed in
/// the middle of its work left in the mirror, once they are older than `age`: with them, every
/// later fetch fails. Called with the mirror locked, so no git of a live worker holds them; a
/// git of a killed worker still running past `age` is taken to be stuck.
fn remove_stale_git_locks(mirror: &Path, age: std::time::Duration) -> usize {
    let now = std::time::SystemTime::now();
    let mut removed = 0;
    let mut stack = vec![mirror.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name();
            // Objects and worktrees hold no ref locks; the walk stays small.
            if kind.is_dir() {
                if dir == mirror && (name == "objects" || name == "worktrees" || name == "hooks") {
                    continue;
                }
                stack.push(path);
            } else if kind.is_file()
                && name.to_string_lossy().ends_with(".lock")
                && entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| now.duration_since(t).is_ok_and(|d| d >= age))
                && std::fs::remove_file(&path).is_ok()
            {
                removed += 1;
            }
        }
    }
    removed
}

/// Fetches every ref of the mirror's remote. A git process of a worker killed on this home
/// may still be fetching into it (a SIGKILL does not reach the worker's children, and their
/// lock died with the worker): its ref updates make ours fail for a moment, so a failed fetch
/// is tried again, four times over about 4 s, before it fails the unit.
fn fetch(mirror: &Path) -> Result<(), WorkerError> {
    fetch_with(mirror, &mut || {})
}

/// [`fetch`], calling `after_failure` after each failed attempt (tests make the next pass).
fn fetch_with(mirror: &Path, after_failure: &mut dyn FnMut()) -> Result<(), WorkerError> {
    remove_stale_git_locks(mirror, STALE_GIT_LOCK);
    let mut waits = [250u64, 500, 1000, 2000].into_iter();
    loop {
        match run_git(mirror, &["fetch", "--quiet", "--prune", "origin"]) {
            Ok(_) => return Ok(()),
            Err(e) => match waits.next() {
                Some(ms) => {
                    after_failure();
                    std::thread::sleep(std::time::Duration::from_millis(ms));
                }
                None => return Err(e),
            },
        }
    }
}

/// Clones `remote` as the mirror at `path` (called with the mirror locked): into a folder of
/// its own, renamed into place once whole, so `path` never holds half a mirror and a clone a
/// killed worker's git still runs on this home (SIGKILL does not reach the worker's children)
/// never shares a folder with this one — two clones in one folder failed, each removing what
/// the other was writing. The folders such clones left are removed first; when one of them
/// finished in the meantime (`path` is there by the time of the rename), it is fetched
/// instead. `before_rename` runs just before the rename (tests put a mirror in place there).
fn clone_mirror(
    remote: &str,
    path: &Path,
    before_rename: &mut dyn FnMut(),
) -> Result<(), WorkerError> {
    let io = |e: std::io::Error| WorkerError::other("WORKER_IO", e.to_string());
    let (Some(repos), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(WorkerError::other(
            "WORKER_IO",
            "a mirror path without a folder",
        ));
    };
    let prefix = format!("{}.clone-", name.to_string_lossy());
    if let Ok(entries) = std::fs::read_dir(repos) {
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    }
    static CLONES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = CLONES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temp = repos.join(format!("{prefix}{}-{n}", std::process::id()));
    let temp_s = temp.display().to_string();
    // `--no-local`: a remote on this machine is read through git's transport like any other,
    // not by copying its object folder file by file — a push landing there meanwhile (other
    // workers') moves its quarantine folder away mid-copy, and the clone failed.
    let args = [
        "clone",
        "--quiet",
        "--mirror",
        "--no-local",
        remote,
        &temp_s,
    ];
    if let Err(e) = run_git(repos, &args) {
        let _ = std::fs::remove_dir_all(&temp);
        return Err(e);
    }
    before_rename();
    match std::fs::rename(&temp, path) {
        Ok(()) => Ok(()),
        Err(_) if path.join("HEAD").exists() => {
            std::fs::remove_dir_all(&temp).map_err(io)?;
            fetch(path)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&temp);
            Err(io(e))
        }
    }
}

/// A worktree of `remote` at `commit` in `work/project`, from a mirror of the remote cached
/// under `home` (git commands on the mirror run one at a time, see [`lock_mirror`]).
pub(crate) fn checkout(
    home: &Path,
    git_lock: &std::sync::Mutex<()>,
    remote: &str,
    commit: &str,
    work: &Path,
) -> Result<PathBuf, WorkerError> {
    checkout_preferring(home, git_lock, remote, None, commit, work).map(|(tree, _)| tree)
}

/// [`checkout`] at `preferred` (commit, ref) when the remote's ref holds that commit, else at
/// `commit`; says whether it was `preferred`.
pub(crate) fn checkout_preferring(
    home: &Path,
    git_lock: &std::sync::Mutex<()>,
    remote: &str,
    preferred: Option<(&str, &str)>,
    commit: &str,
    work: &Path,
) -> Result<(PathBuf, bool), WorkerError> {
    blocking(|| {
        let mirror = lock_mirror(home, git_lock, remote)?;
        if mirror.path.join("HEAD").exists() {
            fetch(&mirror.path)?;
        } else {
            clone_mirror(remote, &mirror.path, &mut || {})?;
        }
        // The mirror's refs are the remote's (fetched with `--prune`).
        let held = preferred
            .filter(|(c, r)| run_git(&mirror.path, &["merge-base", "--is-ancestor", c, r]).is_ok());
        let at = held.map_or(commit, |(c, _)| c);
        let tree = work.join("project");
        let tree_s = tree.display().to_string();
        run_git(
            &mirror.path,
            &["worktree", "add", "--quiet", "--detach", &tree_s, at],
        )?;
        Ok((tree, held.is_some()))
    })
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
        blocking(|| {
            let mirror = lock_mirror(home, git_lock, remote)?;
            let tree_s = tree.display().to_string();
            // A mirror gone with its cache: the folder alone goes.
            if mirror.path.join("HEAD").exists() {
                // Twice: a worktree holding a nested repository is removed too.
                run_git(
                    &mirror.path,
                    &["worktree", "remove", "--force", "--force", &tree_s],
                )?;
            }
            Ok::<_, WorkerError>(())
        })?;
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_lock_file_a_killed_git_left_in_the_mirror_is_removed_once_old_enough() {
        let tmp = tempfile::tempdir().unwrap();
        let (remote, work) = remote_with_refs(tmp.path(), 1);
        let mirror = tmp.path().join("mirror");
        sh(
            tmp.path(),
            &[
                "clone",
                "-q",
                "--mirror",
                remote.to_str().unwrap(),
                mirror.to_str().unwrap(),
            ],
        );
        move_refs(&remote, &work, 1);
        // A git killed while it updated the ref leaves its lock: every fetch fails on it.
        let lock = mirror.join("refs/baton/runs/0/1.lock");
        std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
        std::fs::write(&lock, "").unwrap();
        let e = run_git(&mirror, &["fetch", "--quiet", "origin"]).unwrap_err();
        assert!(e.to_string().contains(".lock"), "{e}");
        // A fresh one may belong to a git still at work: it stays.
        assert_eq!(remove_stale_git_locks(&mirror, STALE_GIT_LOCK), 0);
        assert!(lock.exists());
        // Old enough, it goes, and the fetch goes through.
        assert_eq!(
            remove_stale_git_locks(&mirror, std::time::Duration::ZERO),
            1
        );
        assert!(!lock.exists());
        sh(&mirror, &["fetch", "--quiet", "origin"]);
        assert_eq!(
            sh(&mirror, &["rev-parse", "refs/baton/runs/0/1"]),
            sh(&work, &["rev-parse", "HEAD"])
        );
    }

    /// Runs git for a test; it must succeed.
    fn sh(dir: &Path, args: &[&str]) -> String {
        let out = remote_command(dir)
            .args(args)
            .env("GIT_AUTHOR_NAME", "test")
            .env("GIT_AUTHOR_EMAIL", "test@baton.invalid")
            .env("GIT_COMMITTER_NAME", "test")
            .env("GIT_COMMITTER_EMAIL", "test@baton.invalid")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A bare remote with a commit on `main` and `refs` more refs; returns (remote, work clone).
    fn remote_with_refs(root: &Path, refs: usize) -> (PathBuf, PathBuf) {
        let remote = root.join("remote.git");
        let work = root.join("work");
        sh(root, &["init", "-q", "--bare", remote.to_str().unwrap()]);
        sh(root, &["init", "-q", "-b", "main", work.to_str().unwrap()]);
        sh(&work, &["commit", "-q", "--allow-empty", "-m", "start"]);
        sh(&work, &["push", "-q", remote.to_str().unwrap(), "main"]);
        move_refs(&remote, &work, refs);
        (remote, work)
    }

    /// A new commit pushed to each of `refs/baton/runs/<i>/1`.
    fn move_refs(remote: &Path, work: &Path, refs: usize) {
        sh(work, &["commit", "-q", "--allow-empty", "-m", "more"]);
        let specs: Vec<String> = (0..refs)
            .map(|i| format!("+HEAD:refs/baton/runs/{i}/1"))
            .collect();
        let mut args = vec!["push", "-q", remote.to_str().unwrap()];
        args.extend(specs.iter().map(String::as_str));
        sh(work, &args);
    }

    #[test]
    fn the_mirror_is_locked_on_disk_for_other_processes_while_a_slot_holds_it() {
        let tmp = tempfile::tempdir().unwrap();
        let (remote, _) = remote_with_refs(tmp.path(), 1);
        let remote = remote.to_str().unwrap();
        let one_process = std::sync::Mutex::new(());
        let held = lock_mirror(tmp.path(), &one_process, remote).unwrap();
        let lock_file = held.path.with_extension("lock");
        // What another process on the same home would open.
        let other = std::fs::File::open(&lock_file).unwrap();
        assert!(matches!(
            other.try_lock(),
            Err(std::fs::TryLockError::WouldBlock)
        ));
        drop(held);
        other.try_lock().unwrap();
    }

    #[test]
    fn two_workers_on_one_home_check_out_at_once_without_failing() {
        let tmp = tempfile::tempdir().unwrap();
        let (remote, work) = remote_with_refs(tmp.path(), 30);
        let remote_s = remote.to_str().unwrap().to_string();
        let home = tmp.path().join("home");
        let base = sh(&work, &["rev-parse", "HEAD"]);
        checkout(
            &home,
            &std::sync::Mutex::new(()),
            &remote_s,
            &base,
            &tmp.path().join("first"),
        )
        .unwrap();
        for round in 0..3 {
            // Every ref moved since the mirror's last fetch: two fetches at once into it
            // update the same refs (unlocked, one of them failed with `cannot lock ref`).
            move_refs(&remote, &work, 30);
            std::thread::scope(|s| {
                for worker in 0..2 {
                    let (home, remote_s, base) = (&home, &remote_s, &base);
                    let unit = tmp.path().join(format!("unit-{round}-{worker}"));
                    // Each its own process-wide lock, as two processes have.
                    s.spawn(move || {
                        checkout(home, &std::sync::Mutex::new(()), remote_s, base, &unit)
                            .unwrap_or_else(|e| panic!("round {round}, worker {worker}: {e}"));
                    });
                }
            });
        }
    }

    #[test]
    fn a_clone_beside_a_push_or_a_killed_workers_clone_is_no_failure() {
        let tmp = tempfile::tempdir().unwrap();
        let (remote, work) = remote_with_refs(tmp.path(), 2);
        let remote_s = remote.to_str().unwrap();
        let repos = tmp.path().join("home/worker/repos");
        let mirror = repos.join("m");
        // What a push still being received leaves in the remote's objects (its quarantine
        // folder, here with a link, which a copy of the folder refuses).
        let quarantine = remote.join("objects/tmp_objdir-incoming-x/4f");
        std::fs::create_dir_all(&quarantine).unwrap();
        std::os::unix::fs::symlink("/nonexistent", quarantine.join("zz")).unwrap();
        // Half a clone a killed worker's git left (its process gone or still writing).
        let abandoned = repos.join("m.clone-999999-0/objects/4f");
        std::fs::create_dir_all(&abandoned).unwrap();
        std::fs::write(abandoned.join("partial"), "x").unwrap();
        // That worker's git finishes its own clone while this one runs: this one gives way.
        let mut theirs = || {
            sh(
                tmp.path(),
                &[
                    "clone",
                    "-q",
                    "--mirror",
                    "--no-local",
                    remote_s,
                    mirror.to_str().unwrap(),
                ],
            );
            move_refs(&remote, &work, 2);
        };
        clone_mirror(remote_s, &mirror, &mut theirs).unwrap();
        let left: Vec<String> = std::fs::read_dir(&repos)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, ["m"], "no clone folder left beside the mirror");
        // The mirror in place was fetched: it holds the refs as they are now.
        assert_eq!(
            sh(&mirror, &["rev-parse", "refs/baton/runs/1/1"]),
            sh(&work, &["rev-parse", "HEAD"])
        );
        // Alone, the clone lands in place whole.
        std::fs::remove_dir_all(&mirror).unwrap();
        clone_mirror(remote_s, &mirror, &mut || {}).unwrap();
        sh(&mirror, &["fsck", "--no-progress"]);
    }

    #[test]
    fn a_fetch_that_fails_for_a_moment_is_tried_again() {
        let tmp = tempfile::tempdir().unwrap();
        let (remote, work) = remote_with_refs(tmp.path(), 1);
        let remote_s = remote.to_str().unwrap();
        let home = tmp.path().join("home");
        let lock = std::sync::Mutex::new(());
        let base = sh(&work, &["rev-parse", "HEAD"]);
        checkout(&home, &lock, remote_s, &base, &tmp.path().join("a")).unwrap();
        move_refs(&remote, &work, 1);
        // A fresh ref lock, as a git of a killed worker still fetching holds: the first fetch
        // fails on it; it is gone by the next attempt.
        let mirror = lock_mirror(&home, &lock, remote_s).unwrap().path;
        let ref_lock = mirror.join("refs/baton/runs/0/1.lock");
        std::fs::create_dir_all(ref_lock.parent().unwrap()).unwrap();
        std::fs::write(&ref_lock, "").unwrap();
        let mut failures = 0;
        fetch_with(&mirror, &mut || {
            failures += 1;
            let _ = std::fs::remove_file(&ref_lock);
        })
        .unwrap();
        assert_eq!(failures, 1, "the first fetch was refused");
        assert_eq!(
            sh(&mirror, &["rev-parse", "refs/baton/runs/0/1"]),
            sh(&work, &["rev-parse", "HEAD"])
        );
    }
}
