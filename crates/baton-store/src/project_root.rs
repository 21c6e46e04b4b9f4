//! Which folder is the project when a command is run without `--project`: the current folder
//! or the nearest folder above it that holds `_bmad/`, `baton.toml` or `.git`, as git finds
//! its repository from a subfolder.

use std::path::{Path, PathBuf};

/// What marks a project's root, in the order they are named.
pub const MARKERS: [&str; 3] = ["_bmad", "baton.toml", ".git"];

/// The project a command works on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectRoot {
    /// The folder to use: `given` itself, or the folder found above it.
    pub path: PathBuf,
    /// The marker that chose it (`None`: none was found, `given` is used as it is).
    pub marker: Option<&'static str>,
    /// The project is a folder above `given`.
    pub above: bool,
}

impl ProjectRoot {
    /// A line for people when the project is not the folder they are in.
    pub fn note(&self) -> Option<String> {
        let marker = self.marker?;
        self.above.then(|| {
            let shown = if marker == "_bmad" { "_bmad/" } else { marker };
            format!(
                "using the project at {} (it holds {shown}; the current folder is below it; --project DIR chooses another)",
                self.path.display()
            )
        })
    }
}

/// The folder holding a marker nearest to `given` (itself first, then each parent). `given`
/// stays as it is when it holds a marker itself or no folder above it does.
pub fn find(given: &Path) -> ProjectRoot {
    let unchanged = |marker| ProjectRoot {
        path: given.to_path_buf(),
        marker,
        above: false,
    };
    if let Some(marker) = marker_in(given) {
        return unchanged(Some(marker));
    }
    let Ok(absolute) = std::path::absolute(given) else {
        return unchanged(None);
    };
    for dir in absolute.ancestors().skip(1) {
        if let Some(marker) = marker_in(dir) {
            return ProjectRoot {
                path: dir.to_path_buf(),
                marker: Some(marker),
                above: true,
            };
        }
    }
    unchanged(None)
}

fn marker_in(dir: &Path) -> Option<&'static str> {
    MARKERS.into_iter().find(|m| {
        let at = dir.join(m);
        match *m {
            "_bmad" => at.is_dir(),
            "baton.toml" => at.is_file(),
            // A worktree's or submodule's `.git` is a file.
            _ => at.exists(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn a_subfolder_finds_the_nearest_marked_folder_above_it() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("repo");
        fs::create_dir_all(root.join(".git")).unwrap();
        let app = root.join("apps/web");
        fs::create_dir_all(app.join("_bmad")).unwrap();
        let deep = app.join("src/components");
        fs::create_dir_all(&deep).unwrap();

        let found = find(&deep);
        assert_eq!(found.path, app);
        assert_eq!(found.marker, Some("_bmad"));
        assert!(found.above);
        assert!(found.note().unwrap().contains(&app.display().to_string()));

        // Outside the BMAD project, the repository.
        let docs = root.join("docs");
        fs::create_dir_all(&docs).unwrap();
        assert_eq!(find(&docs).path, root);
        assert_eq!(find(&docs).marker, Some(".git"));
    }

    #[test]
    fn a_marked_folder_or_an_unmarked_tree_is_used_as_given() {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("p");
        fs::create_dir_all(&project).unwrap();
        fs::write(project.join("baton.toml"), "").unwrap();
        let found = find(&project);
        assert_eq!(found.path, project);
        assert!(!found.above);
        assert!(found.note().is_none());

        let loose = tmp.path().join("loose/sub");
        fs::create_dir_all(&loose).unwrap();
        let found = find(&loose);
        assert_eq!(found.path, loose);
        assert_eq!(found.marker, None);
        assert!(found.note().is_none());
    }
}
