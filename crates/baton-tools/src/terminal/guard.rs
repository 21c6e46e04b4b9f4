//! The project's protected files around a program baton starts but does not run through its
//! own tools (a coding-agent CLI): the same paths `terminal.run` keeps — `baton.toml`, the
//! lifecycle sessions' folder, BMAD's configuration, `.git` without `allow_git_writes`, and the
//! caller's protected paths (the epic's BMAD method) — read-only while it runs, and what it
//! created among them removed after.

use super::protected::{CONFIG_FILE, Protected, SESSIONS_DIR, bmad_configs};
use std::path::{Path, PathBuf};

pub struct ProjectGuard {
    project: PathBuf,
    before: Protected,
    read_only: Vec<PathBuf>,
}

impl ProjectGuard {
    /// Notes what exists now beneath the protected paths of `project`.
    pub fn take(project: &Path, allow_git_writes: bool, protected: &[String]) -> ProjectGuard {
        let mut read_only = vec![project.join(CONFIG_FILE), project.join(SESSIONS_DIR)];
        read_only.extend(bmad_configs(project));
        if !allow_git_writes {
            read_only.push(project.join(".git"));
        }
        read_only.extend(protected.iter().map(|p| project.join(p)));
        ProjectGuard {
            project: project.to_path_buf(),
            before: Protected::snapshot(project, allow_git_writes, protected),
            read_only,
        }
    }

    /// The paths to mount read-only while the program runs (those that exist).
    pub fn read_only(&self) -> Vec<PathBuf> {
        self.read_only
            .iter()
            .filter(|p| p.symlink_metadata().is_ok())
            .cloned()
            .collect()
    }

    /// Removes what the program created among the protected paths; one warning per path.
    pub fn restore(&self) -> Vec<String> {
        self.before.restore(&self.project)
    }
}
