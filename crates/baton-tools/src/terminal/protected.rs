//! What a command may not create or change in the project: `baton.toml`, lifecycle sessions'
//! folder, BMAD's configuration, a new `.git` (without `allow_git_writes`), and what it leaves
//! behind beneath the protected paths (see [`crate::SystemToolSettings::protected`]). Existing
//! ones are read-only bind mounts during the call; the snapshot taken before it catches what
//! the mounts cannot: a protected path that did not exist yet (a skill folder a command
//! creates), and a kernel without mount namespaces. Anything beneath them that appeared during
//! the call is removed afterwards.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Most entries listed beneath all protected paths (a model could have made a huge tree).
const MAX_ENTRIES: usize = 20_000;
/// Deepest folder looked into beneath a protected path.
const MAX_DEPTH: usize = 12;

/// Lifecycle sessions' folder: read-only for a command (its parent cannot be moved away, see
/// baton-sandbox's pins), and a new one is removed.
pub(super) const SESSIONS_DIR: &str = ".workflow/.maestro";

/// The project's configuration file: a command sees it read-only, and a new one is removed.
pub const CONFIG_FILE: &str = "baton.toml";

/// The entries beneath the protected paths, before a command.
pub(super) struct Listing {
    roots: Vec<String>,
    seen: BTreeSet<PathBuf>,
    /// The listing stopped early: nothing is removed (it could remove what was there).
    truncated: bool,
}

impl Listing {
    pub(super) fn take(project: &Path, roots: &[String]) -> Listing {
        let mut seen = BTreeSet::new();
        let truncated = !list(project, roots, &mut seen);
        Listing {
            roots: roots.to_vec(),
            seen,
            truncated,
        }
    }

    /// Removes what appeared beneath the protected paths since [`Listing::take`]; one warning
    /// per removed path.
    pub(super) fn remove_new(&self, project: &Path) -> Vec<String> {
        if self.roots.is_empty() || self.truncated {
            return Vec::new();
        }
        let mut now = BTreeSet::new();
        list(project, &self.roots, &mut now);
        let mut removed: Vec<PathBuf> = Vec::new();
        let mut warnings = Vec::new();
        // Sorted, so a new folder comes before what is in it and goes with it.
        for path in now.difference(&self.seen) {
            if removed.iter().any(|r| path.starts_with(r)) {
                continue;
            }
            remove(path);
            let shown = path
                .strip_prefix(project)
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            warnings.push(format!(
                "@project/{shown} was created by the command and removed: it is protected for this run (the operator's files)"
            ));
            removed.push(path.clone());
        }
        warnings
    }
}

/// Adds every entry at and beneath `roots` to `out` (links not followed); false when the
/// bound was reached.
fn list(project: &Path, roots: &[String], out: &mut BTreeSet<PathBuf>) -> bool {
    let mut stack: Vec<(PathBuf, usize)> = Vec::new();
    for root in roots {
        let path = project.join(root);
        if path.symlink_metadata().is_ok() {
            out.insert(path.clone());
            stack.push((path, 0));
        }
    }
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if out.len() >= MAX_ENTRIES {
                return false;
            }
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) && depth < MAX_DEPTH {
                stack.push((path.clone(), depth + 1));
            }
            out.insert(path);
        }
    }
    true
}

/// Paths a command must not create or change: a new `baton.toml` (the configuration that
/// sets this very sandbox) and, without `allow_git_writes`, a new `.git` (a repository with
/// hooks that would run at the user's next commit) are removed after the call. Existing ones
/// are read-only bind mounts during the call.
pub(super) struct Protected {
    config_existed: bool,
    sessions_existed: bool,
    bmad_configs: Vec<PathBuf>,
    git_existed: Option<bool>,
    /// Everything beneath the protected paths (and whether each existed).
    protected: Listing,
}

impl Protected {
    pub(super) fn snapshot(
        project: &Path,
        allow_git_writes: bool,
        protected: &[String],
    ) -> Protected {
        Protected {
            config_existed: project.join(CONFIG_FILE).symlink_metadata().is_ok(),
            sessions_existed: project.join(SESSIONS_DIR).symlink_metadata().is_ok(),
            bmad_configs: bmad_configs(project),
            git_existed: (!allow_git_writes)
                .then(|| project.join(".git").symlink_metadata().is_ok()),
            protected: Listing::take(project, protected),
        }
    }

    pub(super) fn restore(&self, project: &Path) -> Vec<String> {
        let mut warnings = Vec::new();
        let config = project.join(CONFIG_FILE);
        if !self.config_existed && config.symlink_metadata().is_ok() {
            remove(&config);
            warnings.push(format!(
                "@project/{CONFIG_FILE} was created by the command and removed: baton's configuration cannot be written by tools"
            ));
        }
        // Lifecycle sessions are made by baton (`baton session start`, `ralph new`), never by a
        // command: a folder of sessions it created is removed with what it holds.
        let sessions = project.join(SESSIONS_DIR);
        if !self.sessions_existed && sessions.symlink_metadata().is_ok() {
            remove(&sessions);
            warnings.push(format!(
                "@project/{SESSIONS_DIR} was created by the command and removed: lifecycle sessions are made by baton only"
            ));
        }
        for made in bmad_configs(project) {
            if !self.bmad_configs.contains(&made) {
                remove(&made);
                let shown = made
                    .strip_prefix(project)
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                warnings.push(format!(
                    "@project/{shown} was created by the command and removed: BMAD's configuration cannot be written by tools"
                ));
            }
        }
        warnings.extend(self.protected.remove_new(project));
        let git = project.join(".git");
        if self.git_existed == Some(false) && git.symlink_metadata().is_ok() {
            remove(&git);
            warnings.push(
                "@project/.git was created by the command and removed: writes into .git are not allowed by the policy"
                    .into(),
            );
        }
        warnings
    }
}

/// BMAD's configuration files in the project: `config.*` under `_bmad/`, `.bmad/`, `bmad/`,
/// without following links, at most 6 levels and 4,096 entries deep (a model could have made a
/// huge tree there).
pub(super) fn bmad_configs(project: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut budget = 4096usize;
    let mut stack: Vec<(PathBuf, usize)> = crate::mounts::BMAD_DIRS
        .iter()
        .map(|d| (project.join(d), 0))
        .collect();
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if budget == 0 {
                return found;
            }
            budget -= 1;
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name().to_string_lossy().to_ascii_lowercase();
            if kind.is_dir() && depth < 6 {
                stack.push((entry.path(), depth + 1));
            } else if !kind.is_dir() && name.starts_with("config.") {
                found.push(entry.path());
            }
        }
    }
    found.sort();
    found
}

fn remove(path: &Path) {
    let is_dir = path.symlink_metadata().is_ok_and(|m| m.is_dir());
    let _ = if is_dir {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_appeared_beneath_a_protected_path_is_removed() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = tmp.path();
        let mk = |rel: &str| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap_or(root)).unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(p, "x").unwrap_or_else(|e| panic!("{e}"));
        };
        mk("_bmad/custom/config.toml");
        let roots = vec!["_bmad/custom".to_string(), ".claude/skills".to_string()];
        let before = Listing::take(root, &roots);
        mk("_bmad/custom/bmad-code-review.toml");
        mk(".claude/skills/bmad-code-review/SKILL.md");
        mk("src/main.rs");
        let warnings = before.remove_new(root);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(root.join("_bmad/custom/config.toml").is_file());
        assert!(!root.join("_bmad/custom/bmad-code-review.toml").exists());
        assert!(!root.join(".claude/skills").exists());
        assert!(root.join("src/main.rs").is_file());
    }
}
