//! Durable file writes: a reader sees the old file or the new one, never a mix, and a
//! completed write survives a power cut.

use crate::home::StoreError;
use std::cell::Cell;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

thread_local! {
    static FLUSHES: Cell<u64> = const { Cell::new(0) };
}

/// Device flushes this thread has waited for in the store (an fsync; fsyncs run in parallel
/// count once): what a tick costs on a disk, so tests can bound it.
pub fn flushes_on_this_thread() -> u64 {
    FLUSHES.with(Cell::get)
}

pub(crate) fn count_flush() {
    FLUSHES.with(|c| c.set(c.get() + 1));
}

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
    count_flush();
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(StoreError::io("sync directory", dir))
}

/// Writes `bytes` to `path` atomically: temp file in the same directory, fsync, rename, fsync
/// the directory. On error the temp file is removed and `path` is untouched.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    atomic_write_with(path, bytes, &[])
}

/// [`atomic_write`] that also makes `also` durable before the rename: their fsyncs run in
/// parallel with the temp file's, so the device flushes once for all of them (a file's
/// records that must not be lost when `path` says they were made).
pub fn atomic_write_with(path: &Path, bytes: &[u8], also: &[&Path]) -> Result<(), StoreError> {
    let dir = parent_of(path);
    let tmp = temp_sibling(path);
    let result = (|| {
        let mut file = File::create(&tmp).map_err(StoreError::io("create", &tmp))?;
        file.write_all(bytes)
            .map_err(StoreError::io("write", &tmp))?;
        if also.is_empty() {
            count_flush();
            file.sync_all().map_err(StoreError::io("sync", &tmp))?;
        } else {
            let mut all: Vec<&Path> = vec![&tmp];
            all.extend_from_slice(also);
            sync_all(&all)?;
        }
        fs::rename(&tmp, path).map_err(StoreError::io("rename into", path))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
        return result;
    }
    sync_dir(&dir)
}

/// Writes `bytes` to `path` atomically but without fsync: temp file, then rename. A killed
/// process leaves the old file or the new one (the page cache survives it); a power cut may
/// leave the old file, or on some file systems an empty one, so use it only for files whose
/// readers validate what they read and can do without the newest content.
pub fn replace(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let tmp = temp_sibling(path);
    let result = fs::write(&tmp, bytes)
        .map_err(StoreError::io("write", &tmp))
        .and_then(|()| fs::rename(&tmp, path).map_err(StoreError::io("rename into", path)));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// fsync of files and directories, all at once: each fsync costs a device flush, and flushes
/// that overlap are merged by the file system's journal.
pub fn sync_all(paths: &[&Path]) -> Result<(), StoreError> {
    count_flush();
    if let [one] = paths {
        return File::open(one)
            .and_then(|f| f.sync_all())
            .map_err(StoreError::io("sync", *one));
    }
    std::thread::scope(|s| {
        let jobs: Vec<_> = paths
            .iter()
            .map(|p| {
                s.spawn(move || {
                    File::open(p)
                        .and_then(|f| f.sync_all())
                        .map_err(StoreError::io("sync", *p))
                })
            })
            .collect();
        jobs.into_iter().try_for_each(|j| {
            j.join().unwrap_or_else(|_| {
                Err(StoreError::io("sync", "files")(std::io::Error::other(
                    "fsync thread panicked",
                )))
            })
        })
    })
}

fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
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
    fn replace_and_write_with_leave_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        let log = dir.path().join("log");
        fs::write(&log, b"x").unwrap();
        replace(&path, b"one").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"one");
        atomic_write_with(&path, b"two", &[&log]).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2);
        // A file to sync that is gone fails the write and keeps the old content.
        let missing = dir.path().join("missing");
        assert!(atomic_write_with(&path, b"three", &[&missing]).is_err());
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn failure_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no/such/dir/a.json");
        assert!(atomic_write(&missing, b"x").is_err());
    }
}
