//! The package argument of `run`, `agent`, `validate`, `graph` (and `--queue`): a path when one
//! exists, else an installed package by name (`baton_store::package_lookup`).

use crate::exit;
use crate::failure::Failure;
use std::path::{Path, PathBuf};

/// The path to load for the package `given` names; a note on stderr when the name chose among
/// several installed packages.
pub fn locate(given: &Path) -> Result<PathBuf, Failure> {
    let home = baton_store::resolve_home()
        .map_err(|e| Failure::new("STORE_NO_HOME", e.to_string(), exit::INVALID))?;
    match baton_store::package_lookup::locate(&home, given) {
        Ok(found) => {
            if let Some(note) = found.note() {
                eprintln!("note: {}", crate::ui::visible(&note));
            }
            Ok(found.path)
        }
        Err(e) => Err(Failure::new(e.code(), e.to_string(), exit::INVALID).hint(Some(e.hint()))),
    }
}
