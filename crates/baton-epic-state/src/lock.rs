//! One orchestrator per project: an exclusive `flock` on the implementation artifacts folder
//! itself, held for the whole invocation. Locking the folder writes nothing (a refused command
//! leaves the project as it was) and the kernel drops the lock when the holder dies, so a state
//! file left `running` by a killed process is simply resumed.
//!
//! `baton epic stop` asks the holder to pause at the next phase boundary with a request file.

use super::error::{EpicError, Result};
use baton_bmad::layout::{ArtifactFile, Artifacts};
use std::fs::TryLockError;

pub const STOP_FILE: &str = ".run-epic.stop";

/// The held lock; dropping it releases the project.
#[derive(Debug)]
pub struct ProjectLock {
    _dir: std::fs::File,
}

/// Takes the project, or says another orchestrator has it.
pub fn acquire(dir: &Artifacts, shown: &str) -> Result<ProjectLock> {
    let file = dir.lock_handle()?;
    match file.try_lock() {
        Ok(()) => Ok(ProjectLock { _dir: file }),
        Err(TryLockError::WouldBlock) => Err(EpicError::failure(
            "EPIC_BUSY",
            format!("another `baton epic` process is working on this project ({shown} is locked)"),
        )
        .hint("wait for it to finish, or ask it to pause with `baton epic stop`; `baton epic status` shows the board")),
        Err(TryLockError::Error(e)) => Err(EpicError::io("lock", dir)(e)),
    }
}

/// Whether a live orchestrator holds the project (a shared probe, released at once).
pub fn is_held(dir: &Artifacts) -> bool {
    let Ok(file) = dir.lock_handle() else {
        return false;
    };
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            false
        }
        Err(TryLockError::WouldBlock) => true,
        Err(TryLockError::Error(_)) => false,
    }
}

pub fn stop_file(dir: &Artifacts) -> ArtifactFile {
    dir.file(STOP_FILE)
}

/// Whether a stop was asked for.
pub fn stop_requested(dir: &Artifacts) -> bool {
    stop_file(dir).exists()
}

/// Asks the live orchestrator to pause at the next phase boundary.
pub fn request_stop(dir: &Artifacts) -> Result<()> {
    let at = baton_store::time::now_rfc3339();
    stop_file(dir).write(format!("{at}\n").as_bytes())
}

pub fn clear_stop(dir: &Artifacts) -> Result<()> {
    super::jsonfile::remove(&stop_file(dir))
}

/// Removes a stop request older than `started` (left by a loop that ended before it could obey);
/// one made since this process began waiting for the lock is kept, and obeyed.
pub fn clear_stale_stop(dir: &Artifacts, started: std::time::SystemTime) -> Result<()> {
    let stale = stop_file(dir).modified().is_some_and(|t| t < started);
    if stale {
        clear_stop(dir)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let project = tempfile::tempdir().unwrap();
        std::fs::create_dir(project.path().join("impl")).unwrap();
        let layout = baton_bmad::layout::resolve(project.path(), Some("impl")).unwrap();
        let dir = &layout.dir;
        assert!(!is_held(dir));
        let first = acquire(dir, "impl").unwrap();
        assert!(is_held(dir));
        assert_eq!(acquire(dir, "impl").unwrap_err().code, "EPIC_BUSY");
        drop(first);
        assert!(!is_held(dir));
        let _again = acquire(dir, "impl").unwrap();
        // Nothing was written by locking.
        assert_eq!(
            std::fs::read_dir(project.path().join("impl"))
                .unwrap()
                .count(),
            0
        );
    }
}
