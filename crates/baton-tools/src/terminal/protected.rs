//! What a command may not leave behind beneath the protected paths (see
//! [`crate::SystemToolSettings::protected`]). Existing ones are read-only bind mounts during the
//! call; this listing catches what the mounts cannot: a protected path that did not exist yet
//! (a skill folder a command creates), and a kernel without mount namespaces. Anything beneath
//! them that appeared during the call is removed afterwards.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Most entries listed beneath all protected paths (a model could have made a huge tree).
const MAX_ENTRIES: usize = 20_000;
/// Deepest folder looked into beneath a protected path.
const MAX_DEPTH: usize = 12;

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
            super::remove(path);
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
