//! One driver per run: the process that runs, resumes, answers or chats with a run holds an
//! exclusive lock on `runs/<runId>/driver.lock` for the whole invocation.
//!
//! The lock is `flock`-style (`File::lock`), so the kernel drops it when the holder dies: a lock
//! left by a killed process is simply free, and a run whose lock is free while its phase says
//! `running` was interrupted. The file's content names the holder, for the `RUN_BUSY` message;
//! it is informational only, the lock decides.

use crate::home::StoreError;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const FILE_NAME: &str = "driver.lock";

/// Probes (`runs list` asking whether a run is live) hold a shared lock for a moment; a driver
/// that meets one retries this long before calling the run busy.
const ACQUIRE_PATIENCE: Duration = Duration::from_millis(500);
const ACQUIRE_STEP: Duration = Duration::from_millis(20);

/// Who drives a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Holder {
    pub pid: u32,
    /// What the holder is doing, e.g. `baton resume`.
    pub command: String,
    pub since: String,
}

#[derive(Debug, thiserror::Error)]
pub enum DriverLockError {
    #[error("run {run_id} is being driven by another process ({})", describe(holder.as_ref()))]
    Busy {
        run_id: String,
        holder: Option<Holder>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn describe(holder: Option<&Holder>) -> String {
    match holder {
        Some(h) => format!("pid {}, {}, since {}", h.pid, h.command, h.since),
        None => "holder unknown".into(),
    }
}

impl DriverLockError {
    pub fn code(&self) -> &'static str {
        match self {
            DriverLockError::Busy { .. } => "RUN_BUSY",
            DriverLockError::Store(_) => "STORE_IO_FAILED",
        }
    }

    pub fn hint(&self) -> Option<String> {
        match self {
            DriverLockError::Busy { .. } => Some(
                "wait for that process to finish (or stop it); `baton runs log <RUN> --follow` shows what it does".into(),
            ),
            DriverLockError::Store(_) => None,
        }
    }
}

/// The held lock; dropping it releases the run.
#[derive(Debug)]
pub struct DriverLock {
    file: File,
    path: PathBuf,
}

impl DriverLock {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for DriverLock {
    fn drop(&mut self) {
        // The holder note is left as is: the lock, not the note, says whether a run is live.
        let _ = self.file.unlock();
    }
}

fn open(path: &Path) -> Result<File, StoreError> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .map_err(StoreError::io("open", path))
}

fn read_holder(file: &mut File) -> Option<Holder> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.take(4096).read_to_string(&mut text).ok()?;
    serde_json::from_str(&text).ok()
}

/// Takes the run's driver lock, or says who holds it.
pub fn acquire(run_dir: &Path, run_id: &str, command: &str) -> Result<DriverLock, DriverLockError> {
    let path = run_dir.join(FILE_NAME);
    let mut file = open(&path)?;
    let mut waited = Duration::ZERO;
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(TryLockError::WouldBlock) if waited < ACQUIRE_PATIENCE => {
                std::thread::sleep(ACQUIRE_STEP);
                waited += ACQUIRE_STEP;
            }
            Err(TryLockError::WouldBlock) => {
                return Err(DriverLockError::Busy {
                    run_id: run_id.to_string(),
                    holder: read_holder(&mut file),
                });
            }
            Err(TryLockError::Error(e)) => return Err(StoreError::io("lock", &path)(e).into()),
        }
    }
    let holder = Holder {
        pid: std::process::id(),
        command: command.to_string(),
        since: crate::time::now_rfc3339(),
    };
    let note = serde_json::to_vec(&holder).unwrap_or_default();
    // Best effort: the note only feeds a message.
    let _ = file
        .set_len(0)
        .and_then(|_| file.seek(SeekFrom::Start(0)))
        .and_then(|_| file.write_all(&note));
    Ok(DriverLock { file, path })
}

/// The live driver of a run, if any. Never blocks and never disturbs a driver for more than a
/// moment (a shared probe lock, released at once).
pub fn live_holder(run_dir: &Path) -> Result<Option<Holder>, StoreError> {
    let path = run_dir.join(FILE_NAME);
    let mut file = match File::open(&path) {
        Ok(f) => f,
        // Never driven (or made before driver locks existed): nobody holds it.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io("open", &path)(e)),
    };
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            Ok(None)
        }
        Err(TryLockError::WouldBlock) => Ok(Some(read_holder(&mut file).unwrap_or(Holder {
            pid: 0,
            command: "unknown".into(),
            since: String::new(),
        }))),
        Err(TryLockError::Error(e)) => Err(StoreError::io("lock", &path)(e)),
    }
}

/// Who drove last, from the note every driver leaves (live or gone); `None` when nobody ever
/// drove or the note cannot be read.
pub fn last_holder(run_dir: &Path) -> Option<Holder> {
    let mut file = File::open(run_dir.join(FILE_NAME)).ok()?;
    read_holder(&mut file)
}

/// A run whose phase says `running` but that no live process drives: it was killed (or its
/// machine stopped) mid-invocation, and `baton resume` continues it.
pub fn is_interrupted(project: &crate::Project, run: &crate::RunMetadata) -> bool {
    run.phase == crate::Phase::Running
        && live_holder(&project.run_paths(&run.run_id).dir).is_ok_and(|h| h.is_none())
}

/// Whether some process drives the run right now.
pub fn is_driven(project: &crate::Project, run_id: &str) -> bool {
    live_holder(&project.run_paths(run_id).dir).is_ok_and(|h| h.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_driver_is_refused_and_the_lock_frees_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(live_holder(dir.path()).unwrap(), None);
        let first = acquire(dir.path(), "r1", "baton resume").unwrap();
        let holder = live_holder(dir.path()).unwrap().unwrap();
        assert_eq!(holder.pid, std::process::id());
        assert_eq!(holder.command, "baton resume");
        match acquire(dir.path(), "r1", "baton answer") {
            Err(e @ DriverLockError::Busy { .. }) => {
                assert_eq!(e.code(), "RUN_BUSY");
                assert!(e.to_string().contains("baton resume"), "{e}");
            }
            other => panic!("{other:?}"),
        }
        drop(first);
        assert_eq!(live_holder(dir.path()).unwrap(), None);
        let again = acquire(dir.path(), "r1", "baton answer").unwrap();
        assert_eq!(
            live_holder(dir.path()).unwrap().unwrap().command,
            "baton answer"
        );
        drop(again);
    }

    /// The holder note is only informational: garbage or a huge file in it still gives a
    /// clear `RUN_BUSY`, and never an error or a long read.
    #[test]
    fn a_damaged_holder_note_still_says_busy() {
        let dir = tempfile::tempdir().unwrap();
        let held = acquire(dir.path(), "r1", "baton resume").unwrap();
        std::fs::write(dir.path().join(FILE_NAME), vec![b'{'; 1 << 20]).unwrap();
        match acquire(dir.path(), "r1", "baton answer") {
            Err(DriverLockError::Busy { holder: None, .. }) => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(live_holder(dir.path()).unwrap().unwrap().command, "unknown");
        drop(held);
    }
}
