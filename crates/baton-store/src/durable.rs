//! Durable file writes: a reader sees the old file or the new one, never a mix, and a
//! completed write survives a power cut.

use crate::home::StoreError;
use std::cell::Cell;
use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

thread_local! {
    static FLUSHES: Cell<u64> = const { Cell::new(0) };
}

/// Device flushes this thread has waited for in the store (an fsync; fsyncs run in parallel
/// count once): what a tick costs on a disk, so tests can bound it.
pub fn flushes_on_this_thread() -> u64 {
    FLUSHES.with(Cell::get)
}

/// Counts one device flush a writer outside the store waits for (the tools' files).
pub fn count_flush() {
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

/// Writes made durable together. A model turn's writes (the tools' files, the state, the audit
/// and conversation lines, `run.json`) are renamed into place or appended without an fsync and
/// registered here; one [`Group::flush`] before the next model call fsyncs them all in
/// parallel: one device flush per turn instead of one or two per write. Until then a killed
/// process loses none of them (the page cache survives it); a power cut may lose the turn,
/// which a resume redoes. Clones share the same pending set.
#[derive(Debug, Clone, Default)]
pub struct Group(Arc<Mutex<Pending>>);

#[derive(Debug, Default)]
struct Pending {
    paths: BTreeSet<PathBuf>,
    handles: Vec<File>,
    /// Hard links to a file's last durable version (see [`Group::replace_keeping`]), removed
    /// once the flush made the new version durable.
    copies: BTreeSet<PathBuf>,
}

impl Group {
    pub fn new() -> Group {
        Group::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut Pending) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// A file or directory to fsync at the next flush.
    pub fn add_path(&self, path: &Path) {
        self.with(|p| p.paths.insert(path.to_path_buf()));
    }

    /// An open file or directory (opened through a capability, not a path) to fsync at the
    /// next flush.
    pub fn add_handle(&self, file: File) {
        self.with(|p| p.handles.push(file));
    }

    pub fn is_empty(&self) -> bool {
        self.with(|p| p.paths.is_empty() && p.handles.is_empty())
    }

    /// [`replace`] of a file that must stay *old or new* even after a power cut, which a
    /// rename without an fsync does not promise on every file system (the new name may
    /// reach the disk before the new content). The first replacement since the last flush
    /// first hard-links the current, durable version to `copy`: a reader that finds the file
    /// unreadable after a power cut reads `copy` instead. The flush removes the link.
    pub fn replace_keeping(
        &self,
        path: &Path,
        copy: &Path,
        bytes: &[u8],
    ) -> Result<(), StoreError> {
        let first = !self.with(|p| p.copies.contains(copy));
        if first && path.exists() {
            match fs::remove_file(copy) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io("remove", copy)(e)),
            }
            fs::hard_link(path, copy).map_err(StoreError::io("link", copy))?;
            self.with(|p| p.copies.insert(copy.to_path_buf()));
        }
        replace(path, bytes)?;
        self.add_path(path);
        self.add_path(&parent_of(path));
        Ok(())
    }

    /// Takes what is pending: paths and handles.
    fn take(&self) -> (Vec<PathBuf>, Vec<File>, Vec<PathBuf>) {
        self.with(|p| {
            (
                std::mem::take(&mut p.paths).into_iter().collect(),
                std::mem::take(&mut p.handles),
                std::mem::take(&mut p.copies).into_iter().collect(),
            )
        })
    }

    /// fsyncs everything pending, in parallel: one device flush (none when nothing is
    /// pending). On an error what was pending is dropped; the caller fails the step.
    pub fn flush(&self) -> Result<(), StoreError> {
        if self.is_empty() {
            return Ok(());
        }
        count_flush();
        self.sync_pending(Vec::new())
    }

    /// Opens the pending paths and fsyncs them with the handles and `more`, in parallel,
    /// without counting (the caller counts its one flush), then removes the copies.
    fn sync_pending(&self, mut more: Vec<(PathBuf, File)>) -> Result<(), StoreError> {
        let (paths, handles, copies) = self.take();
        for path in paths {
            match File::open(&path) {
                Ok(f) => more.push((path, f)),
                // Gone since (a temporary file's parent removed): nothing left to sync.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io("open", &path)(e)),
            }
        }
        more.extend(
            handles
                .into_iter()
                .map(|h| (PathBuf::from("(a project file)"), h)),
        );
        sync_files(more)?;
        for copy in copies {
            let _ = fs::remove_file(copy);
        }
        Ok(())
    }
}

/// fsyncs open files in parallel.
fn sync_files(files: Vec<(PathBuf, File)>) -> Result<(), StoreError> {
    if let [(path, one)] = files.as_slice() {
        return one.sync_all().map_err(StoreError::io("sync", path));
    }
    std::thread::scope(|s| {
        let jobs: Vec<_> = files
            .iter()
            .map(|(p, f)| s.spawn(move || f.sync_all().map_err(StoreError::io("sync", p))))
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

/// [`atomic_write_with`] whose one flush also makes `group`'s pending writes durable: the end
/// of an invocation, whose records must all be on disk once `path` says it ended.
pub fn atomic_write_with_group(
    path: &Path,
    bytes: &[u8],
    also: &[&Path],
    group: &Group,
) -> Result<(), StoreError> {
    for p in also {
        group.add_path(p);
    }
    let dir = parent_of(path);
    let tmp = temp_sibling(path);
    let result = (|| {
        let mut file = File::create(&tmp).map_err(StoreError::io("create", &tmp))?;
        file.write_all(bytes)
            .map_err(StoreError::io("write", &tmp))?;
        count_flush();
        group.sync_pending(vec![(tmp.clone(), file)])?;
        fs::rename(&tmp, path).map_err(StoreError::io("rename into", path))
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
        return result;
    }
    sync_dir(&dir)
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
    fn a_group_flushes_once_and_keeps_the_durable_version_until_then() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.md");
        let copy = dir.path().join("state.md.durable");
        atomic_write(&path, b"v1").unwrap();
        let group = Group::new();
        assert!(group.is_empty());
        let before = flushes_on_this_thread();
        group.replace_keeping(&path, &copy, b"v2").unwrap();
        group.replace_keeping(&path, &copy, b"v3").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"v3");
        assert_eq!(fs::read(&copy).unwrap(), b"v1", "the last durable version");
        let log = dir.path().join("log");
        fs::write(&log, b"x").unwrap();
        group.add_path(&log);
        group.add_handle(File::open(dir.path()).unwrap());
        assert_eq!(flushes_on_this_thread(), before, "nothing flushed yet");
        group.flush().unwrap();
        assert_eq!(flushes_on_this_thread(), before + 1);
        assert!(!copy.exists(), "the flush removes the copy");
        assert!(group.is_empty());
        group.flush().unwrap();
        assert_eq!(
            flushes_on_this_thread(),
            before + 1,
            "an empty group costs nothing"
        );
        // The end of an invocation: the group rides along with the temp file's flush.
        group.replace_keeping(&path, &copy, b"v4").unwrap();
        let meta = dir.path().join("run.json");
        atomic_write_with_group(&meta, b"{}", &[&log], &group).unwrap();
        assert_eq!(
            flushes_on_this_thread(),
            before + 3,
            "one for all, one for the folder"
        );
        assert!(!copy.exists());
        assert_eq!(fs::read(&meta).unwrap(), b"{}");
    }

    #[test]
    fn failure_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no/such/dir/a.json");
        assert!(atomic_write(&missing, b"x").is_err());
    }
}
