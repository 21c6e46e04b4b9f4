//! File primitives over a mount handle: open a regular file, atomic write, directory sync.

use crate::mounts::{MountPath, Mounts, io_error};
use crate::result::ToolError;
use baton_store::durable::Group;
use cap_std::fs::{Dir, File, OpenOptions, OpenOptionsExt};
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(target_os = "linux")]
const O_NONBLOCK: i32 = 0o4000;
#[cfg(not(target_os = "linux"))]
const O_NONBLOCK: i32 = 0x0004;

/// Opens an existing regular file for reading. FIFOs, sockets and devices are refused: opening
/// is non-blocking (a FIFO without a writer would hang the run) and the type is checked on the
/// opened handle, so a swap after a check cannot slip through.
pub fn open_regular(mounts: &Mounts, path: &MountPath) -> Result<(File, u64), ToolError> {
    let dir = mounts.dir(path.mount);
    let mut options = OpenOptions::new();
    options.read(true).custom_flags(O_NONBLOCK);
    let file = dir
        .open_with(path.rel_path(), &options)
        .map_err(|e| io_error(path, &e))?;
    let meta = file.metadata().map_err(|e| io_error(path, &e))?;
    if meta.is_dir() {
        return Err(ToolError::new(
            "EISDIR",
            format!("Is a directory: {} (use fs.list)", path.display()),
        ));
    }
    if !meta.is_file() {
        return Err(ToolError::sandbox(format!(
            "Path not allowed: {} is not a regular file",
            path.display()
        )));
    }
    Ok((file, meta.len()))
}

/// Reads a whole regular file, refusing files larger than `cap`.
pub fn read_all(mounts: &Mounts, path: &MountPath, cap: u64) -> Result<Vec<u8>, ToolError> {
    let (file, size) = open_regular(mounts, path)?;
    if size > cap {
        return Err(ToolError::new(
            "E_READ_LIMIT",
            format!(
                "{} is {size} bytes, over the limit of {cap}",
                path.display()
            ),
        ));
    }
    let mut out = Vec::with_capacity(size as usize);
    file.take(cap + 1)
        .read_to_end(&mut out)
        .map_err(|e| io_error(path, &e))?;
    Ok(out)
}

/// What is at `path` without following a final symlink.
pub fn kind(mounts: &Mounts, path: &MountPath) -> Result<Option<cap_std::fs::Metadata>, ToolError> {
    match mounts.dir(path.mount).symlink_metadata(path.rel_path()) {
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(path, &e)),
    }
}

/// fsync of a directory needs a read descriptor (cap-std's directory handles are `O_PATH`).
fn open_dir(dir: &Dir, rel: &str) -> io::Result<cap_std::fs::File> {
    let mut options = OpenOptions::new();
    options.read(true);
    dir.open_with(
        if rel.is_empty() {
            Path::new(".")
        } else {
            Path::new(rel)
        },
        &options,
    )
}

fn sync_dir(dir: &Dir, rel: &str) -> io::Result<()> {
    open_dir(dir, rel)?.sync_all()
}

/// Writes `bytes` atomically: a temp sibling, fsync, rename over the target, fsync the directory.
/// Parents are created. All through the mount handle.
pub fn atomic_write(mounts: &Mounts, path: &MountPath, bytes: &[u8]) -> Result<(), ToolError> {
    atomic_write_grouped(mounts, path, bytes, None)
}

/// [`atomic_write`] in a model turn whose writes `group` makes durable together: a new file is
/// renamed into place without an fsync (a kill keeps it; a power cut before the group's flush
/// may lose the turn, which a resume redoes), and the file and its directory, opened through
/// the mount, join the group. A file that exists is still fsynced before the rename, so a
/// power cut leaves it old or new, never empty; only its directory waits for the group.
pub fn atomic_write_grouped(
    mounts: &Mounts,
    path: &MountPath,
    bytes: &[u8],
    group: Option<&Group>,
) -> Result<(), ToolError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = mounts.dir(path.mount);
    let parent = path.parent_rel();
    if !parent.is_empty() {
        dir.create_dir_all(parent).map_err(|e| io_error(path, &e))?;
    }
    let tmp_name = format!(
        ".{}.tmp-{}-{}",
        path.file_name(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let tmp = if parent.is_empty() {
        tmp_name
    } else {
        format!("{parent}/{tmp_name}")
    };
    let replacing = dir.symlink_metadata(path.rel_path()).is_ok();
    let result = (|| {
        let mut f = dir.create(&tmp)?;
        f.write_all(bytes)?;
        let Some(group) = group else {
            f.sync_all()?;
            dir.rename(&tmp, dir, path.rel_path())?;
            return sync_dir(dir, parent);
        };
        if replacing {
            baton_store::durable::count_flush();
            f.sync_all()?;
        }
        dir.rename(&tmp, dir, path.rel_path())?;
        group.add_handle(f.into_std());
        group.add_handle(open_dir(dir, parent)?.into_std());
        Ok(())
    })();
    if let Err(e) = result {
        let _ = dir.remove_file(&tmp);
        return Err(io_error(path, &e));
    }
    Ok(())
}
