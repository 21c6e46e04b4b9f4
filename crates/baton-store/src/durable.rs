//! Durable file writes: a reader sees the old file or the new one, never a mix, and a
//! completed write survives a power cut.

use crate::home::StoreError;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A name for a temporary sibling of `path`, unique within this process and across processes.
pub fn temp_sibling(path: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp-{}-{n}", std::process::id()))
}

/// fsync a directory so a rename or a new entry in it is durable.
pub fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(StoreError::io("sync directory", dir))
}

/// Writes `bytes` to `path` atomically: temp file in the same directory, fsync, rename, fsync
/// the directory. On error the temp file is removed and `path` is untouched.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = temp_sibling(path);
    let result = (|| {
        let mut file = File::create(&tmp).map_err(StoreError::io("create", &tmp))?;
        file.write_all(bytes)
            .map_err(StoreError::io("write", &tmp))?;
        file.sync_all().map_err(StoreError::io("sync", &tmp))?;
        fs::rename(&tmp, path).map_err(StoreError::io("rename into", path))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
        return result;
    }
    sync_dir(&dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_content_and_leaves_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        atomic_write(&path, b"one").unwrap();
        atomic_write(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn failure_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no/such/dir/a.json");
        assert!(atomic_write(&missing, b"x").is_err());
    }
}
