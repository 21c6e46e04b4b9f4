//! Garbage collection of interrupted run creations. It removes half-built hidden directories
//! and nothing else: a run directory is never removed, and a complete one the index missed (a
//! creation killed between its rename and its index write) is added to the index.
//!
//! A creation builds its run in `staging/.<runId>.tmp-*` and leaves `staging/<runId>.pending`
//! until the index has the run, so the next creation finds such a run without listing `runs/`.

use crate::home::StoreError;
use crate::projects::Project;
use crate::run_error::RunError;
use crate::run_meta::{RunJsonError, is_run_id, read_run_json};
use crate::runs_index::Problem;
use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// Half-built runs older than this are removed (a creation in progress is never that old).
pub(crate) const STALE_AFTER: Duration = Duration::from_secs(600);
/// A `.pending` marker older than this belongs to a creation that was killed after its run
/// directory was renamed into place; the run is then added to the index.
pub(crate) const PENDING_AFTER: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GarbageReport {
    /// Half-built (hidden) run directories removed.
    pub staging_removed: usize,
    /// Complete run directories that were missing from the index, now added to it.
    pub unindexed_added: usize,
}

impl Project {
    /// Removes what killed run creations left behind, and only that: hidden half-built run
    /// directories (in `staging/`, and in `runs/` from earlier versions) older than `min_age`.
    /// A complete run directory missing from the index (a kill between its rename and the
    /// index write) is added to the index. Run directories are never removed.
    pub fn collect_garbage(&self, min_age: Duration) -> Result<GarbageReport, RunError> {
        let mut report = GarbageReport {
            staging_removed: self.clean_staging(min_age, None)?,
            unindexed_added: 0,
        };
        report.staging_removed += remove_old_hidden_dirs(&self.runs_dir(), min_age)?;
        let index = self.index();
        let _exclusive = index.lock(true)?;
        if index.journal_exists() && index.snapshot_path().exists() {
            report.unindexed_added = self.compact(&index)?;
        } else if self.has_run_dirs()? {
            let problem = if index.snapshot_path().exists() {
                Problem::NoJournal
            } else {
                Problem::Missing
            };
            // Everything found is added; count what the old index did not have.
            let before = index.salvage().len();
            let (rebuilt, _) = self.rebuild(&index, problem)?;
            report.unindexed_added = rebuilt.runs.saturating_sub(before);
        }
        Ok(report)
    }

    /// Cleans `staging/`: half-built runs older than `min_age` are removed. `.pending` markers
    /// are resolved when `pending_after` is given (the run they name is recorded in the index
    /// if its directory is in place) and dropped otherwise (the caller then scans `runs/`).
    pub(crate) fn clean_staging(
        &self,
        min_age: Duration,
        pending_after: Option<Duration>,
    ) -> Result<usize, RunError> {
        let dir = self.staging_dir();
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(StoreError::io("list", &dir)(e).into()),
        };
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let age = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| SystemTime::now().duration_since(t).ok())
                .unwrap_or_default();
            if name.starts_with('.') {
                if age >= min_age && fs::remove_dir_all(entry.path()).is_ok() {
                    removed += 1;
                }
                continue;
            }
            let Some(run_id) = name.strip_suffix(".pending") else {
                continue;
            };
            match pending_after {
                Some(after) if age < after => {}
                // A marker that names no run is dropped.
                Some(_) if !is_run_id(run_id) => {
                    let _ = fs::remove_file(entry.path());
                }
                Some(_) => {
                    if self.index_existing(run_id).is_ok() {
                        let _ = fs::remove_file(entry.path());
                    }
                }
                None => {
                    let _ = fs::remove_file(entry.path());
                }
            }
        }
        Ok(removed)
    }

    /// Records a run directory that is in place in the index, from its `run.json` (an upsert:
    /// harmless if the index had it already).
    fn index_existing(&self, run_id: &str) -> Result<(), RunError> {
        let index = self.index();
        let _exclusive = index.lock(true)?;
        match read_run_json(&self.run_paths(run_id).metadata_file()) {
            Ok(Some(run)) if run.run_id == run_id => self.record_change(&index, &run),
            Ok(_) | Err(RunJsonError::Damaged(_)) => Ok(()),
            Err(RunJsonError::Io(e)) => Err(e.into()),
        }
    }
}

/// Hidden directories of `dir` older than `min_age` (staging leftovers of earlier versions).
fn remove_old_hidden_dirs(dir: &Path, min_age: Duration) -> Result<usize, RunError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(StoreError::io("list", dir)(e).into()),
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let old_enough = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_some_and(|age| age >= min_age);
        if old_enough && entry.path().is_dir() && fs::remove_dir_all(entry.path()).is_ok() {
            removed += 1;
        }
    }
    Ok(removed)
}
