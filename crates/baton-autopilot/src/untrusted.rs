//! Files a model could have made or replaced (everything in the project, and the command files
//! it can edit), read and written by the orchestrators without trusting them.
//!
//! Reading: the open is non-blocking (a FIFO without a writer would hang baton), the type is
//! checked on the opened handle (a FIFO, socket or device is refused, whatever was there at a
//! previous check), and at most `limit` bytes are read (a sparse 8 GB file is refused by its
//! size before any byte is read). Through a [`cap_std::fs::Dir`], the path is resolved beneath
//! the directory by the kernel (`openat2(RESOLVE_BENEATH)` on Linux): `..` and symlinks leading
//! out fail at the open, as for the tools' mounts. Writing: a temporary sibling, fsync, rename,
//! fsync of the directory, all through the same handle, so a write never lands outside it.

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(target_os = "linux")]
const O_NONBLOCK: i32 = 0o4000;
#[cfg(not(target_os = "linux"))]
const O_NONBLOCK: i32 = 0x0004;
#[cfg(target_os = "linux")]
const O_NOFOLLOW: i32 = 0o400000;
#[cfg(not(target_os = "linux"))]
const O_NOFOLLOW: i32 = 0x0100;

/// Size limits, per kind of file: far above what a real file needs, far below what hurts.
pub mod limit {
    /// `sprint-status.yaml`, `status.json`, a progress record.
    pub const STATUS: u64 = 4 << 20;
    /// `.run-epic-state.json`, `{story}.agent-state.json`, `{story}.review.json`.
    pub const SMALL_JSON: u64 = 1 << 20;
    /// Configuration: `baton.toml`, `_bmad/**/config.yaml`, `skill-config.json`.
    pub const CONFIG: u64 = 1 << 20;
    /// A command file, a skill, a file named by `required_reading`.
    pub const PROMPT_FILE: u64 = 1 << 20;
}

/// Bounded counts of items in files the orchestrators read.
pub mod count {
    /// Questions in one agent-state file.
    pub const QUESTIONS: usize = 1_000;
    /// Steps of a run-epic state or of a session.
    pub const STEPS: usize = 10_000;
    /// Findings a check reports.
    pub const FINDINGS: usize = 1_000;
}

#[derive(Debug, thiserror::Error)]
pub enum UntrustedError {
    #[error("is not a regular file (it is a {0}); only baton and the tools make these files")]
    NotRegular(&'static str),
    #[error("is {size} bytes, over the limit of {limit}")]
    TooLarge { size: u64, limit: u64 },
    #[error("resolves outside its folder (through a symlink or `..`)")]
    Outside,
    #[error("{0}")]
    Io(#[from] io::Error),
}

impl UntrustedError {
    pub fn code(&self) -> &'static str {
        match self {
            UntrustedError::NotRegular(_) => "FILE_NOT_REGULAR",
            UntrustedError::TooLarge { .. } => "FILE_TOO_LARGE",
            UntrustedError::Outside => "PATH_OUTSIDE_PROJECT",
            UntrustedError::Io(_) => "FILE_IO_FAILED",
        }
    }

    fn from_open(e: io::Error) -> UntrustedError {
        match e.raw_os_error() {
            // EXDEV: RESOLVE_BENEATH refused to leave the directory; ELOOP: a symlink where
            // none may be followed.
            Some(18) | Some(40) | Some(62) => UntrustedError::Outside,
            _ if e.kind() == io::ErrorKind::PermissionDenied
                && e.to_string().contains("outside") =>
            {
                UntrustedError::Outside
            }
            _ => UntrustedError::Io(e),
        }
    }
}

fn kind_name(ft: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if ft.is_dir() {
        "directory"
    } else if ft.is_fifo() {
        "FIFO"
    } else if ft.is_socket() {
        "socket"
    } else if ft.is_char_device() || ft.is_block_device() {
        "device"
    } else {
        "special file"
    }
}

/// Reads a whole file through `file`, which was opened non-blocking: checks it is regular and
/// at most `limit` bytes, then reads no more than that.
fn read_opened(file: std::fs::File, limit: u64) -> Result<Vec<u8>, UntrustedError> {
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(UntrustedError::NotRegular(kind_name(&meta.file_type())));
    }
    if meta.len() > limit {
        return Err(UntrustedError::TooLarge {
            size: meta.len(),
            limit,
        });
    }
    let mut out = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    // The file may grow after the check: never read past the limit.
    file.take(limit.saturating_add(1)).read_to_end(&mut out)?;
    if out.len() as u64 > limit {
        return Err(UntrustedError::TooLarge {
            size: out.len() as u64,
            limit,
        });
    }
    Ok(out)
}

/// `rel` read beneath `dir`; `None` when it does not exist.
pub fn read_in(dir: &Dir, rel: &Path, limit: u64) -> Result<Option<Vec<u8>>, UntrustedError> {
    let mut options = OpenOptions::new();
    options.read(true).custom_flags(O_NONBLOCK);
    let file = match dir.open_with(rel, &options) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(UntrustedError::from_open(e)),
    };
    read_opened(file.into_std(), limit).map(Some)
}

/// Opens `path` for reading without waiting: a FIFO without a writer opens at once (and is
/// then refused by its type) instead of blocking baton. The caller checks the type and size
/// on the returned handle (or uses [`read_path`]).
pub fn open_nonblocking(path: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open(path)
}

/// `options` made non-blocking (a FIFO opens at once, or fails with ENXIO for a writer),
/// for files opened read-write; the caller checks the type on the handle.
pub fn nonblocking(options: &mut std::fs::OpenOptions) -> &mut std::fs::OpenOptions {
    use std::os::unix::fs::OpenOptionsExt as _;
    options.custom_flags(O_NONBLOCK)
}

/// Fails unless `file` is a regular file.
pub fn check_regular(file: &std::fs::File) -> Result<(), UntrustedError> {
    let meta = file.metadata()?;
    if meta.is_file() {
        Ok(())
    } else {
        Err(UntrustedError::NotRegular(kind_name(&meta.file_type())))
    }
}

/// A file outside any capability (a command file in the user's home, the bundled skills, a
/// session's files): the same checks as [`read_in`].
pub fn read_path(path: &Path, limit: u64) -> Result<Option<Vec<u8>>, UntrustedError> {
    let file = match open_nonblocking(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(UntrustedError::from_open(e)),
    };
    read_opened(file, limit).map(Some)
}

/// A lock file: opened (created when missing) for reading and writing, never through a
/// symlink (one pointing out of the project would be created or truncated there), and only
/// when it is a regular file.
pub fn open_lock_file(path: &Path) -> Result<std::fs::File, UntrustedError> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .custom_flags(O_NONBLOCK | O_NOFOLLOW)
        .open(path)
        .map_err(UntrustedError::from_open)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(UntrustedError::NotRegular(kind_name(&meta.file_type())));
    }
    Ok(file)
}

/// `read_path` as UTF-8 text (lossy: a prompt file with a stray byte is still a prompt).
pub fn read_text(path: &Path, limit: u64) -> Result<Option<String>, UntrustedError> {
    Ok(read_path(path, limit)?.map(|b| String::from_utf8_lossy(&b).into_owned()))
}

/// What is at `rel` beneath `dir`, without following a final symlink.
pub fn kind_in(dir: &Dir, rel: &Path) -> io::Result<Option<cap_std::fs::Metadata>> {
    match dir.symlink_metadata(rel) {
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// fsync of a directory needs a read descriptor (cap-std's directory handles are `O_PATH`).
fn sync_dir(dir: &Dir) -> io::Result<()> {
    let mut options = OpenOptions::new();
    options.read(true);
    dir.open_with(".", &options)?.sync_all()
}

/// `name` (a file directly in `dir`) replaced by `bytes` durably: a temporary sibling, fsync,
/// rename over the target (a symlink there is replaced, never followed), fsync of `dir`.
pub fn write_in(dir: &Dir, name: &str, bytes: &[u8]) -> Result<(), UntrustedError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    if name.contains('/') || name.is_empty() || name == "." || name == ".." {
        return Err(UntrustedError::Outside);
    }
    let tmp = format!(
        ".{name}.tmp-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let result = (|| {
        let mut options = OpenOptions::new();
        options
            .write(true)
            .create_new(true)
            .custom_flags(O_NOFOLLOW);
        let mut f = dir.open_with(&tmp, &options)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        dir.rename(&tmp, dir, name)?;
        sync_dir(dir)
    })();
    if let Err(e) = result {
        let _ = dir.remove_file(&tmp);
        return Err(UntrustedError::from_open(e));
    }
    Ok(())
}

/// `name` removed from `dir` (a missing file is fine), durably.
pub fn remove_in(dir: &Dir, name: &str) -> Result<(), UntrustedError> {
    match dir.remove_file(name) {
        Ok(()) => Ok(sync_dir(dir)?),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(UntrustedError::from_open(e)),
    }
}

/// The folder itself as an ordinary descriptor (for `flock`; cap-std's handles are `O_PATH`).
pub fn open_self(dir: &Dir) -> io::Result<std::fs::File> {
    let mut options = OpenOptions::new();
    options.read(true);
    Ok(dir.open_with(".", &options)?.into_std())
}

/// The project root as a capability.
pub fn open_root(root: &Path) -> io::Result<Dir> {
    Dir::open_ambient_dir(root, cap_std::ambient_authority())
}

/// `rel` (a folder beneath `root`) as a capability; `Ok(None)` when it does not exist. A
/// symlink leading out of `root` is refused.
pub fn open_dir_in(root: &Dir, rel: &Path) -> Result<Option<Dir>, UntrustedError> {
    if rel.as_os_str().is_empty() {
        return root.try_clone().map(Some).map_err(UntrustedError::Io);
    }
    match root.open_dir(rel) {
        Ok(d) => Ok(Some(d)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) if e.raw_os_error() == Some(20) => Err(UntrustedError::NotRegular("file")),
        Err(e) => Err(UntrustedError::from_open(e)),
    }
}

/// The device and inode of a handle: whether two opens reached the same folder.
pub fn identity(dir: &Dir) -> io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = open_self(dir)?.metadata()?;
    Ok((meta.dev(), meta.ino()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn mkfifo(path: &Path) {
        let status = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success());
    }

    #[test]
    fn a_fifo_a_huge_file_and_a_link_out_are_refused_at_once() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(tmp.path().join("secret"), "s").unwrap();
        mkfifo(&root.join("fifo"));
        let big = std::fs::File::create(root.join("big")).unwrap();
        big.set_len(8 << 30).unwrap();
        symlink(tmp.path().join("secret"), root.join("out")).unwrap();
        std::fs::write(root.join("ok"), "fine").unwrap();
        let dir = open_root(&root).unwrap();
        let code = |rel: &str| read_in(&dir, Path::new(rel), 1 << 20).unwrap_err().code();
        assert_eq!(code("fifo"), "FILE_NOT_REGULAR");
        assert_eq!(code("big"), "FILE_TOO_LARGE");
        assert_eq!(code("out"), "PATH_OUTSIDE_PROJECT");
        assert_eq!(code("../secret"), "PATH_OUTSIDE_PROJECT");
        assert_eq!(
            read_in(&dir, Path::new("ok"), 10).unwrap().unwrap(),
            b"fine"
        );
        assert!(read_in(&dir, Path::new("none"), 10).unwrap().is_none());
        assert_eq!(
            read_path(&root.join("fifo"), 10).unwrap_err().code(),
            "FILE_NOT_REGULAR"
        );
        mkfifo(&root.join("fifo.lock"));
        assert_eq!(
            open_lock_file(&root.join("fifo.lock")).unwrap_err().code(),
            "FILE_NOT_REGULAR"
        );
        symlink(tmp.path().join("made"), root.join("link.lock")).unwrap();
        assert_eq!(
            open_lock_file(&root.join("link.lock")).unwrap_err().code(),
            "PATH_OUTSIDE_PROJECT"
        );
        assert!(!tmp.path().join("made").exists());
    }

    #[test]
    fn writes_replace_a_link_and_never_follow_it_out() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(tmp.path().join("outside")).unwrap();
        symlink(tmp.path().join("outside/x"), root.join("x")).unwrap();
        symlink(tmp.path().join("outside"), root.join("linked")).unwrap();
        let dir = open_root(&root).unwrap();
        write_in(&dir, "x", b"mine").unwrap();
        assert!(!tmp.path().join("outside/x").exists());
        assert_eq!(std::fs::read(root.join("x")).unwrap(), b"mine");
        assert_eq!(
            open_dir_in(&dir, Path::new("linked")).unwrap_err().code(),
            "PATH_OUTSIDE_PROJECT"
        );
        let sub = open_dir_in(&dir, Path::new("sub")).unwrap().unwrap();
        write_in(&sub, "y", b"1").unwrap();
        assert!(root.join("sub/y").is_file());
        assert!(write_in(&sub, "../z", b"1").is_err());
    }
}
