//! Where a work tree's repository is, read once by baton (never asked of git, which would
//! look where the tree says): `.git` as a folder, or a `gitdir:` file (a linked worktree),
//! and its common folder.

use crate::error::{GIT_NOT_A_REPOSITORY, GitError};
use std::io::Read;
use std::path::{Path, PathBuf};

/// A `.git` file or `commondir` file longer than this is not git's.
const POINTER_MAX: u64 = 4096;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoDirs {
    /// The work tree, canonical.
    pub work_tree: PathBuf,
    /// The repository folder of this work tree (`.git`, or `<common>/worktrees/<name>`).
    pub git_dir: PathBuf,
    /// Where objects, refs and the configuration are (the same as `git_dir` but for a linked
    /// worktree).
    pub common_dir: PathBuf,
    /// The folder git was asked about (the project), where its commands start: pathspecs are
    /// relative to it. The work tree or a folder of it.
    pub start: PathBuf,
}

fn not_repo(message: String) -> GitError {
    GitError::new(GIT_NOT_A_REPOSITORY, message)
        .hint("baton's git runs on the work tree's own repository, found from its .git entry")
}

fn read_pointer(path: &Path) -> Result<String, GitError> {
    let file = std::fs::File::open(path)
        .map_err(|e| not_repo(format!("{} cannot be read ({})", path.display(), e.kind())))?;
    let mut text = String::new();
    file.take(POINTER_MAX + 1)
        .read_to_string(&mut text)
        .map_err(|e| not_repo(format!("{} cannot be read ({})", path.display(), e.kind())))?;
    if text.len() as u64 > POINTER_MAX {
        return Err(not_repo(format!("{} is too large", path.display())));
    }
    Ok(text.trim_end_matches(['\n', '\r']).to_string())
}

fn canonical_dir(path: &Path, what: &str) -> Result<PathBuf, GitError> {
    let dir = path.canonicalize().map_err(|e| {
        not_repo(format!(
            "{what} {} is missing ({})",
            path.display(),
            e.kind()
        ))
    })?;
    if !dir.is_dir() {
        return Err(not_repo(format!(
            "{what} {} is not a folder",
            dir.display()
        )));
    }
    Ok(dir)
}

impl RepoDirs {
    /// The repository of the folder `start`: the nearest `.git` entry at `start` or above it,
    /// as git finds it (a project may be a folder of its repository). Only the folders from
    /// `start` up are looked at, never beneath it, so a repository nested in the tree is never
    /// taken for the project's; `start`'s own `.git` is one a model cannot make (the tools
    /// refuse it, and one a command made is removed). A link as `.git` is refused: a tree could
    /// point it anywhere.
    pub fn resolve(start: &Path) -> Result<RepoDirs, GitError> {
        let start = canonical_dir(start, "the work tree")?;
        let Some(work_tree) = start
            .ancestors()
            .find(|a| a.join(".git").symlink_metadata().is_ok())
            .map(Path::to_path_buf)
        else {
            return Err(not_repo(format!(
                "{} is not in a git work tree (no .git in it or above it)",
                start.display()
            )));
        };
        let dot = work_tree.join(".git");
        let meta = dot
            .symlink_metadata()
            .map_err(|e| not_repo(format!("{} cannot be read ({})", dot.display(), e.kind())))?;
        let git_dir = if meta.is_dir() {
            canonical_dir(&dot, "the repository")?
        } else if meta.is_file() {
            let text = read_pointer(&dot)?;
            let Some(target) = text.strip_prefix("gitdir: ") else {
                return Err(not_repo(format!("{} is not a gitdir file", dot.display())));
            };
            canonical_dir(&work_tree.join(target), "the repository")?
        } else {
            return Err(not_repo(format!(
                "{} is neither a folder nor a gitdir file",
                dot.display()
            )));
        };
        let common = git_dir.join("commondir");
        let common_dir = if common.is_file() {
            let text = read_pointer(&common)?;
            canonical_dir(&git_dir.join(text), "the common repository")?
        } else {
            git_dir.clone()
        };
        if !git_dir.join("HEAD").is_file() {
            return Err(not_repo(format!("{} has no HEAD", git_dir.display())));
        }
        Ok(RepoDirs {
            work_tree,
            git_dir,
            common_dir,
            start,
        })
    }

    /// Whether `path` (absolute, normalized) is inside one of the repository folders.
    pub fn in_repository(&self, path: &Path) -> bool {
        path.starts_with(&self.git_dir) || path.starts_with(&self.common_dir)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn init(dir: &Path) {
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        std::fs::write(dir.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    }

    #[test]
    fn a_folder_a_worktree_file_and_a_folder_inside_a_repository() {
        let tmp = tempfile::tempdir().unwrap();
        let main = tmp.path().join("main");
        init(&main);
        let dirs = RepoDirs::resolve(&main).unwrap();
        assert_eq!(dirs.git_dir, dirs.common_dir);
        // A linked worktree: `.git` names its folder in the main repository.
        let admin = main.join(".git/worktrees/w");
        std::fs::create_dir_all(&admin).unwrap();
        std::fs::write(admin.join("HEAD"), "0000\n").unwrap();
        std::fs::write(admin.join("commondir"), "../..\n").unwrap();
        let wt = tmp.path().join("w");
        std::fs::create_dir_all(&wt).unwrap();
        std::fs::write(wt.join(".git"), format!("gitdir: {}\n", admin.display())).unwrap();
        let dirs = RepoDirs::resolve(&wt).unwrap();
        assert_eq!(dirs.git_dir, admin.canonicalize().unwrap());
        assert_eq!(dirs.common_dir, main.join(".git").canonicalize().unwrap());
        // A folder of the repository: its repository, commands starting there.
        std::fs::create_dir_all(main.join("sub")).unwrap();
        let dirs = RepoDirs::resolve(&main.join("sub")).unwrap();
        assert_eq!(dirs.work_tree, main.canonicalize().unwrap());
        assert_eq!(dirs.start, main.join("sub").canonicalize().unwrap());
        // Nothing above: not a repository.
        let alone = tempfile::tempdir().unwrap();
        assert_eq!(
            RepoDirs::resolve(alone.path()).unwrap_err().code,
            GIT_NOT_A_REPOSITORY
        );
        // A `.git` file too large to be git's, and a FIFO as `.git`: refused, not read whole or
        // waited on.
        let big = tmp.path().join("big");
        std::fs::create_dir_all(&big).unwrap();
        std::fs::write(big.join(".git"), format!("gitdir: {}\n", "x".repeat(8192))).unwrap();
        assert!(
            RepoDirs::resolve(&big)
                .unwrap_err()
                .message
                .contains("too large")
        );
        let fifo = tmp.path().join("fifo");
        std::fs::create_dir_all(&fifo).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(fifo.join(".git"))
            .status()
            .unwrap();
        assert!(made.success());
        assert!(RepoDirs::resolve(&fifo).is_err());
        // A link as `.git` is not followed.
        let linked = tmp.path().join("linked");
        std::fs::create_dir_all(&linked).unwrap();
        std::os::unix::fs::symlink(main.join(".git"), linked.join(".git")).unwrap();
        assert!(RepoDirs::resolve(&linked).is_err());
    }
}
