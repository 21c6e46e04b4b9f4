//! The repository's own configuration, hooks and `info/` (exclude, attributes) decide what the
//! person's next plain `git` runs: baton's git must leave them as they were. They are read
//! before each command and compared after it; a change is undone and reported.

use crate::error::{GIT_FAILED, GIT_PROTECTED_CHANGED, GitError};
use crate::repo::RepoDirs;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Entries kept of the protected folders; a repository with more is refused.
const MAX_ENTRIES: usize = 2048;
/// A file larger than this is kept as its size and time only, unread (its change is reported,
/// and the file removed if it is new, but cannot be put back).
const MAX_KEPT: u64 = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    File {
        bytes: Vec<u8>,
        mode: u32,
    },
    /// Not read: its size, time and mode stand for it.
    Large {
        len: u64,
        modified: Option<std::time::SystemTime>,
        mode: u32,
    },
    Dir {
        mode: u32,
    },
    Link(PathBuf),
}

/// What the protected paths of a repository held.
#[derive(Debug, Clone)]
pub struct Snapshot {
    roots: Vec<PathBuf>,
    entries: BTreeMap<PathBuf, Entry>,
}

/// The paths of `dirs` no git of baton's may change (existing or not).
pub fn protected_paths(dirs: &RepoDirs) -> Vec<PathBuf> {
    let mut paths = vec![
        dirs.common_dir.join("config"),
        dirs.common_dir.join("config.worktree"),
        dirs.common_dir.join("hooks"),
        dirs.common_dir.join("info"),
    ];
    if dirs.git_dir != dirs.common_dir {
        paths.push(dirs.git_dir.join("config.worktree"));
    }
    paths
}

fn read_entry(path: &Path) -> Option<Entry> {
    let meta = path.symlink_metadata().ok()?;
    let mode = meta.permissions().mode() & 0o7777;
    if meta.file_type().is_symlink() {
        return std::fs::read_link(path).ok().map(Entry::Link);
    }
    if meta.is_dir() {
        return Some(Entry::Dir { mode });
    }
    // Only regular files within the limit are read: a FIFO would block, a huge (or sparse)
    // file would be read whole.
    if !meta.is_file() || meta.len() > MAX_KEPT {
        return Some(Entry::Large {
            len: meta.len(),
            modified: meta.modified().ok(),
            mode: mode | if meta.is_file() { 0 } else { 0o100000 },
        });
    }
    let bytes = std::fs::read(path).ok()?;
    Some(Entry::File { bytes, mode })
}

fn walk(roots: &[PathBuf]) -> Result<BTreeMap<PathBuf, Entry>, GitError> {
    let mut entries = BTreeMap::new();
    let mut stack: Vec<PathBuf> = roots.to_vec();
    while let Some(path) = stack.pop() {
        let Some(entry) = read_entry(&path) else {
            continue;
        };
        if matches!(entry, Entry::Dir { .. })
            && let Ok(children) = std::fs::read_dir(&path)
        {
            stack.extend(children.flatten().map(|c| c.path()));
        }
        entries.insert(path, entry);
        if entries.len() > MAX_ENTRIES {
            return Err(GitError::new(
                GIT_FAILED,
                format!(
                    "the repository's hooks and info folders hold more than {MAX_ENTRIES} entries"
                ),
            )
            .hint("remove what is not needed there; baton checks each of them around its git commands"));
        }
    }
    Ok(entries)
}

impl Snapshot {
    pub fn take(dirs: &RepoDirs) -> Result<Snapshot, GitError> {
        let roots = protected_paths(dirs);
        let entries = walk(&roots)?;
        Ok(Snapshot { roots, entries })
    }

    /// Compares the protected paths with the snapshot and puts back what changed: a new entry
    /// removed, a changed or removed file written again. `Err(GIT_PROTECTED_CHANGED)` names
    /// what changed.
    pub fn verify_and_undo(&self) -> Result<(), GitError> {
        let now = walk(&self.roots).unwrap_or_default();
        let mut changed: Vec<String> = Vec::new();
        let mut not_undone: Vec<String> = Vec::new();
        // New entries, deepest first.
        for (path, _) in now.iter().rev() {
            if !self.entries.contains_key(path) {
                changed.push(path.display().to_string());
                if remove(path).is_err() {
                    not_undone.push(path.display().to_string());
                }
            }
        }
        // Changed or removed ones, parents first.
        for (path, was) in &self.entries {
            let is = now.get(path);
            if is == Some(was) {
                continue;
            }
            changed.push(path.display().to_string());
            if is.is_some() && !matches!(was, Entry::Dir { .. }) {
                let _ = remove(path);
            }
            if put_back(path, was).is_err() {
                not_undone.push(path.display().to_string());
            }
        }
        if changed.is_empty() {
            return Ok(());
        }
        changed.sort();
        changed.dedup();
        let mut message = format!(
            "git changed the repository's protected files, which decide what the next git command runs: {}",
            changed.join(", ")
        );
        if not_undone.is_empty() {
            message.push_str("; the change was undone");
        } else {
            message.push_str(&format!(
                "; these could not be put back: {}",
                not_undone.join(", ")
            ));
        }
        Err(GitError::new(GIT_PROTECTED_CHANGED, message).hint(
            "something in the work tree made git write there (look for nested repositories and their configuration); check `git config --list --show-origin` and .git/hooks before running git yourself",
        ))
    }
}

fn remove(path: &Path) -> std::io::Result<()> {
    let meta = path.symlink_metadata()?;
    if meta.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    }
}

fn put_back(path: &Path, was: &Entry) -> std::io::Result<()> {
    match was {
        Entry::Dir { mode } => {
            if !path.is_dir() {
                std::fs::create_dir_all(path)?;
            }
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(*mode))
        }
        Entry::File { bytes, mode } => {
            std::fs::write(path, bytes)?;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(*mode))
        }
        Entry::Link(target) => std::os::unix::fs::symlink(target, path),
        Entry::Large { .. } => Err(std::io::Error::other("too large to keep")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn repo(root: &Path) -> RepoDirs {
        let git = root.join(".git");
        std::fs::create_dir_all(git.join("hooks")).unwrap();
        std::fs::create_dir_all(git.join("info")).unwrap();
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(git.join("config"), "[core]\n\tbare = false\n").unwrap();
        std::fs::write(git.join("hooks/pre-commit.sample"), "#!/bin/sh\n").unwrap();
        std::fs::write(git.join("info/exclude"), "# exclude\n").unwrap();
        RepoDirs::resolve(root).unwrap()
    }

    #[test]
    fn nothing_changed_is_fine() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs = repo(tmp.path());
        Snapshot::take(&dirs).unwrap().verify_and_undo().unwrap();
    }

    #[test]
    fn a_planted_hook_a_config_line_and_a_removed_file_are_undone_and_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs = repo(tmp.path());
        let git = &dirs.git_dir;
        let config_before = std::fs::read(git.join("config")).unwrap();
        let snap = Snapshot::take(&dirs).unwrap();
        std::fs::write(git.join("hooks/pre-commit"), "#!/bin/sh\ncurl evil\n").unwrap();
        std::fs::set_permissions(
            git.join("hooks/pre-commit"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::fs::write(
            git.join("config"),
            "[core]\n\tbare = false\n\tfsmonitor = ./evil\n",
        )
        .unwrap();
        std::fs::remove_file(git.join("info/exclude")).unwrap();
        std::fs::create_dir_all(git.join("hooks/more/deep")).unwrap();
        std::fs::write(git.join("config.worktree"), "[core]\nhooksPath=/x\n").unwrap();
        let e = snap.verify_and_undo().unwrap_err();
        assert_eq!(e.code, GIT_PROTECTED_CHANGED);
        for name in ["pre-commit", "config", "exclude", "more", "config.worktree"] {
            assert!(e.message.contains(name), "{name}: {e}");
        }
        assert!(e.message.contains("undone"), "{e}");
        assert!(!git.join("hooks/pre-commit").exists());
        assert!(!git.join("hooks/more").exists());
        assert!(!git.join("config.worktree").exists());
        assert_eq!(std::fs::read(git.join("config")).unwrap(), config_before);
        assert_eq!(
            std::fs::read_to_string(git.join("info/exclude")).unwrap(),
            "# exclude\n"
        );
        // And the next check finds everything as it was.
        snap.verify_and_undo().unwrap();
    }

    #[test]
    fn a_huge_sparse_hook_and_a_fifo_are_never_read_and_a_change_to_them_is_seen() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs = repo(tmp.path());
        let huge = dirs.git_dir.join("hooks/huge");
        std::fs::File::create(&huge)
            .unwrap()
            .set_len(8 << 30)
            .unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(dirs.git_dir.join("info/fifo"))
            .status()
            .unwrap();
        assert!(made.success());
        // Reading either would take minutes or block forever.
        let snap = Snapshot::take(&dirs).unwrap();
        snap.verify_and_undo().unwrap();
        std::fs::File::options()
            .write(true)
            .open(&huge)
            .unwrap()
            .set_len(9 << 30)
            .unwrap();
        let e = snap.verify_and_undo().unwrap_err();
        assert!(
            e.message.contains("huge") && e.message.contains("could not be put back"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_hooks_folder_created_with_a_hook_is_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs = repo(tmp.path());
        std::fs::remove_dir_all(dirs.git_dir.join("hooks")).unwrap();
        let snap = Snapshot::take(&dirs).unwrap();
        std::fs::create_dir_all(dirs.git_dir.join("hooks")).unwrap();
        std::fs::write(dirs.git_dir.join("hooks/post-checkout"), "x").unwrap();
        assert_eq!(
            snap.verify_and_undo().unwrap_err().code,
            GIT_PROTECTED_CHANGED
        );
        assert!(!dirs.git_dir.join("hooks").exists());
    }
}
