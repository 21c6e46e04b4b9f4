//! `--project DIR` (default: the current folder). Without it, the project is the current folder
//! or the nearest folder above it holding `_bmad/`, `baton.toml` or `.git`
//! (`baton_store::project_root`), said on stderr when it is above.

use std::path::{Path, PathBuf};

/// The folder a command works on: `given` when the person named one, else the project found
/// from the current folder upward.
pub fn root(given: &Path) -> PathBuf {
    if given != Path::new(".") {
        return given.to_path_buf();
    }
    let found = baton_store::project_root::find(given);
    if let Some(note) = found.note() {
        eprintln!("note: {}", crate::ui::visible(&note));
    }
    found.path
}

/// The project's folder as scripts read it in `--json` (absolute).
pub fn shown(project: &Path) -> String {
    std::path::absolute(project)
        .unwrap_or_else(|_| project.to_path_buf())
        .display()
        .to_string()
}
