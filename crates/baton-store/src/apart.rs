//! The store and a project never overlap. A store inside the project puts a run's own state
//! (`state/workflow.md`, its logs) under the model's `@project` mount, where the transition
//! guard never sees it change; a project inside the store lets the model write the store. Every
//! entry point that pairs a project with the store ([`crate::Store::project`], and the CLI
//! before any work) refuses both.

use crate::run_error::RunError;
use std::path::{Component, Path, PathBuf};

/// The store's directory of demo copies: a copy directly inside it is the one project allowed
/// inside the store (its mount is the copy alone).
pub(crate) const DEMO_PROJECTS: &str = "demo-projects";

/// Refuses a store (`home`) and a project (`project`, any spelling) that overlap, either way.
/// A project that does not exist yet is not refused here (registering it fails later).
pub fn check(home: &Path, project: &Path) -> Result<(), RunError> {
    let Ok(project_real) = std::fs::canonicalize(project) else {
        return Ok(());
    };
    for home in spellings(home) {
        let store_inside_project = home.starts_with(&project_real);
        let demo_copy = project_real.parent() == Some(&home.join(DEMO_PROJECTS));
        let project_inside_store = project_real.starts_with(&home) && !demo_copy;
        if store_inside_project || project_inside_store {
            return Err(RunError::StoreOverlap {
                store: home,
                project: project_real,
                store_inside_project,
            });
        }
    }
    Ok(())
}

/// The store's path as given (made absolute, `..` folded) and as the file system resolves it
/// (its longest existing ancestor canonicalized): a symlink in either path cannot hide an
/// overlap, and a store not created yet is still placed.
fn spellings(home: &Path) -> Vec<PathBuf> {
    let lexical = normalize(&std::path::absolute(home).unwrap_or_else(|_| home.to_path_buf()));
    let mut out = vec![lexical.clone()];
    let mut existing = lexical.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            let mut real = real;
            for part in rest.iter().rev() {
                real.push(part);
            }
            if real != lexical {
                out.push(real);
            }
            break;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => break,
        }
    }
    out
}

fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn code(home: &Path, project: &Path) -> Option<&'static str> {
        check(home, project).err().map(|e| e.code())
    }

    #[test]
    fn a_store_inside_the_project_is_refused_even_before_it_exists() {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("p");
        fs::create_dir_all(&project).unwrap();
        for home in [
            project.join(".baton"),
            project.join("deep/not/yet/made"),
            project.clone(),
            tmp.path().join("elsewhere/../p/.store"),
        ] {
            assert_eq!(
                code(&home, &project),
                Some("STORE_PROJECT_OVERLAP"),
                "{}",
                home.display()
            );
        }
        // `--project ~` with the default store under ~/.local/share.
        assert_eq!(
            code(&tmp.path().join(".local/share/baton"), tmp.path()),
            Some("STORE_PROJECT_OVERLAP")
        );
    }

    #[test]
    fn a_link_cannot_hide_the_overlap() {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("p");
        fs::create_dir_all(project.join("store")).unwrap();
        std::os::unix::fs::symlink(project.join("store"), tmp.path().join("link")).unwrap();
        assert_eq!(
            code(&tmp.path().join("link"), &project),
            Some("STORE_PROJECT_OVERLAP")
        );
        std::os::unix::fs::symlink(&project, tmp.path().join("plink")).unwrap();
        assert_eq!(
            code(&project.join("store"), &tmp.path().join("plink")),
            Some("STORE_PROJECT_OVERLAP")
        );
    }

    #[test]
    fn siblings_and_demo_copies_are_apart() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let project = tmp.path().join("project");
        let copy = home.join(DEMO_PROJECTS).join("copy");
        fs::create_dir_all(&project).unwrap();
        fs::create_dir_all(&copy).unwrap();
        // A prefix of the name is not a parent.
        fs::create_dir_all(tmp.path().join("home2")).unwrap();
        assert_eq!(code(&home, &project), None);
        assert_eq!(code(&home, &copy), None);
        assert_eq!(code(&home, &tmp.path().join("home2")), None);
        assert_eq!(code(&home, &home), Some("STORE_PROJECT_OVERLAP"));
        assert_eq!(
            code(&home, &home.join(DEMO_PROJECTS)),
            Some("STORE_PROJECT_OVERLAP")
        );
    }
}
