//! What no command this process starts may see, whatever runtime a caller gives it: a worker
//! hides its whole home (mirrors of every project, other units' folders, its store) from every
//! unit, and puts the commands' temporary homes there too, so no unit reads another's.
//! Process-wide on purpose: one forgotten runtime would open the worker's home again.

use std::path::{Path, PathBuf};
use std::sync::RwLock;

static HIDDEN: RwLock<Vec<PathBuf>> = RwLock::new(Vec::new());
static TEMP_ROOT: RwLock<Option<PathBuf>> = RwLock::new(None);

/// Hides `path` from every command this process starts from now on (a command still sees what
/// is beneath its own writable folders). Only ever grows.
pub fn hide_from_commands(path: &Path) {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    if let Ok(mut hidden) = HIDDEN.write()
        && !hidden.contains(&path)
    {
        hidden.push(path);
    }
}

/// Where commands' temporary homes go when their runtime names no place (default: the
/// system's temporary directory, where other processes' commands could read them).
pub fn set_command_temp_root(path: &Path) {
    if let Ok(mut root) = TEMP_ROOT.write() {
        *root = Some(path.to_path_buf());
    }
}

pub(super) fn hidden() -> Vec<PathBuf> {
    HIDDEN.read().map(|h| h.clone()).unwrap_or_default()
}

pub(super) fn temp_root() -> PathBuf {
    TEMP_ROOT
        .read()
        .ok()
        .and_then(|r| r.clone())
        .filter(|p| p.is_dir())
        .unwrap_or_else(std::env::temp_dir)
}

/// A temporary home for commands, `prefix…`, under the runtime's `temp_root` or
/// [`temp_root`]; removed with the value.
pub(super) fn temp_home(
    runtime_root: Option<&Path>,
    prefix: &str,
) -> std::io::Result<tempfile::TempDir> {
    let root = runtime_root.map_or_else(temp_root, Path::to_path_buf);
    tempfile::Builder::new().prefix(prefix).tempdir_in(root)
}
