//! Changing a session safely: an exclusive lock on `status.json.lock` (`File::lock`, released by
//! the kernel when the holder dies), a re-read under the lock, an optional compare-and-swap on
//! `revision`, and a durable write (unique temp file, fsync, rename, fsync of the directory).
//!
//! The file keeps maestro's format: `JSON.stringify(data, null, 2)`, no trailing newline.

use super::context::Context;
use super::discovery::{self, Pick};
use super::error::{RalphError, Result};
use super::handle::Target;
use super::session::{STATUS_FILE, Session};
use serde_json::{Map, Value, json};
use std::fs::{self, File, TryLockError};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const LOCK_FILE: &str = "status.json.lock";

/// The held session lock; dropping it releases the session.
#[derive(Debug)]
pub struct SessionLock {
    _file: File,
}

impl SessionLock {
    /// Waits up to `timeout` for the lock (polling: a stopped holder must not hang us forever).
    pub fn acquire(dir: &Path, session: &str, timeout: Duration) -> Result<SessionLock> {
        let path = dir.join(LOCK_FILE);
        // A lock file replaced by a link (to outside the project) or a FIFO is refused.
        let file =
            baton_autopilot::untrusted::open_lock_file(&path).map_err(|e| RalphError::Failed {
                code: e.code(),
                message: format!("{}: {e}", path.display()),
            })?;
        let start = Instant::now();
        let mut pause = Duration::from_micros(200);
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(SessionLock { _file: file }),
                Err(TryLockError::WouldBlock) => {}
                Err(TryLockError::Error(e)) => return Err(RalphError::io("lock", &path)(e)),
            }
            if start.elapsed() >= timeout {
                return Err(RalphError::Busy {
                    session: session.to_string(),
                    waited_ms: start.elapsed().as_millis() as u64,
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(5));
        }
    }
}

/// maestro's serialization: 2-space indentation, no trailing newline.
pub fn to_bytes(doc: &Map<String, Value>) -> Vec<u8> {
    // Serializing a map of JSON values cannot fail; fall back to compact output regardless.
    serde_json::to_vec_pretty(doc)
        .unwrap_or_else(|_| Value::Object(doc.clone()).to_string().into_bytes())
}

/// Bumps `revision` and writes the session durably. The caller holds the lock.
pub fn write(session: &mut Session) -> Result<()> {
    write_syncing(session, &[])
}

/// [`write`] that first makes `first` durable too, fsynced together with status.json's temp
/// file (one device flush) and before its rename.
fn write_syncing(session: &mut Session, first: &[PathBuf]) -> Result<()> {
    let next = session
        .revision()
        .checked_add(1)
        .ok_or_else(|| RalphError::Usage {
            code: "REVISION_OVERFLOW",
            message: format!(
                "status.json's revision is {}, the largest there is: it was not written by ralph",
                session.revision()
            ),
        })?;
    session.set("revision", json!(next));
    remove_stale_temps(&session.dir);
    let first: Vec<&Path> = first.iter().map(PathBuf::as_path).collect();
    baton_store::durable::atomic_write_with(
        &session.status_path(),
        &to_bytes(&session.doc),
        &first,
    )?;
    Ok(())
}

/// Temp files of writers killed mid-write. Writers hold the lock while their temp file exists,
/// so under the lock any such file is garbage.
fn remove_stale_temps(dir: &Path) {
    let prefix = format!(".{STATUS_FILE}.tmp-");
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = fs::remove_file(e.path());
            }
        }
    }
}

/// What a mutating verb decided: its result, and whether the session must be written.
pub struct Change<T> {
    pub value: T,
    pub write: bool,
    /// Files the verb wrote that must be on the disk before status.json says what they
    /// record (a decision line).
    sync_first: Vec<PathBuf>,
}

impl<T> Change<T> {
    pub fn write(value: T) -> Self {
        Change {
            value,
            write: true,
            sync_first: Vec::new(),
        }
    }
    pub fn keep(value: T) -> Self {
        Change {
            value,
            write: false,
            sync_first: Vec::new(),
        }
    }
    /// Also fsyncs `paths`, with status.json's temp file and before its rename.
    pub fn syncing(mut self, paths: Vec<PathBuf>) -> Self {
        self.sync_first.extend(paths);
        self
    }
}

/// Finds the session (or re-reads the one found), locks it, re-reads it, checks
/// `expect_revision`, lets `f` change it and writes it when `f` asks to. Nothing is written
/// when `f` fails.
pub fn transact<'a, T>(
    ctx: &Context,
    session: impl Into<Target<'a>>,
    expect_revision: Option<u64>,
    f: impl FnOnce(&mut Session) -> Result<Change<T>>,
) -> Result<(T, Session)> {
    // Refuse a damaged file before touching the folder (not even a lock file is created).
    let found = session.into().load(ctx, Pick::Active)?;
    let lock = SessionLock::acquire(&found.dir, &found.id, ctx.lock_timeout)?;
    let mut current = discovery::load(&found.id, &found.dir).into_session()?;
    if let Some(expected) = expect_revision
        && current.revision() != expected
    {
        return Err(RalphError::RevisionMismatch {
            expected,
            found: current.revision(),
        });
    }
    let change = f(&mut current)?;
    if change.write {
        write_syncing(&mut current, &change.sync_first)?;
    }
    drop(lock);
    Ok((change.value, current))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialization_matches_json_stringify_with_two_spaces() {
        let doc: Map<String, Value> = serde_json::from_str(
            r#"{"b": 1, "a": [], "c": {}, "d": [1, {"x": null}], "e": "ü/\"q\""}"#,
        )
        .unwrap();
        let text = String::from_utf8(to_bytes(&doc)).unwrap();
        assert_eq!(
            text,
            "{\n  \"b\": 1,\n  \"a\": [],\n  \"c\": {},\n  \"d\": [\n    1,\n    {\n      \"x\": null\n    }\n  ],\n  \"e\": \"ü/\\\"q\\\"\"\n}"
        );
    }

    #[test]
    fn the_lock_is_exclusive_and_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let held = SessionLock::acquire(dir.path(), "s", Duration::from_secs(1)).unwrap();
        let err = SessionLock::acquire(dir.path(), "s", Duration::from_millis(30)).unwrap_err();
        assert_eq!(err.code(), "SESSION_BUSY");
        drop(held);
        SessionLock::acquire(dir.path(), "s", Duration::from_millis(30)).unwrap();
    }
}
