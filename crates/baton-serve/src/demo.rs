//! The demo runs the server starts (`POST /api/runs {"replay": "demo"}`): where their copies of
//! the sample project live and how many are kept, and the record that lets a restarted server
//! continue one from the bundled recording.
//!
//! - A demo started without a project gets a fresh copy of the sample project in
//!   `$BATON_HOME/demo-projects/taskboard-<ms>-<random>/`, a project of its own.
//! - Each demo run leaves `$BATON_HOME/serve/demo-runs/<runId>.json` (which recording it
//!   replays, by digest). A server that did not start the run rebuilds the replay from the
//!   bundled recording and moves it past what the run's conversation log shows done, as
//!   `baton resume --replay` does.
//! - After each demo start, copies whose runs are all complete are removed beyond the newest
//!   [`KEEP_COMPLETED`]; a copy with a run that is not complete is never removed.

use crate::api::ApiError;
use baton_engine::bundled_demo;
use baton_llm::{ReplayModel, Trace};
use baton_package::digest::sha256_hex;
use baton_store::durable::atomic_write;
use baton_store::{Phase, Project, Store};
use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Copies of completed demo runs kept (the newest).
pub const KEEP_COMPLETED: usize = 20;
/// A copy no run uses yet is left alone this long: a start may be between its copy and its run.
pub const ORPHAN_AFTER: Duration = Duration::from_secs(3600);
/// A record is a few hundred bytes; anything larger is not one.
const RECORD_MAX: u64 = 4096;

#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Record {
    run_id: String,
    /// sha256 of the recording the run replays.
    trace_sha256: String,
}

/// A fresh copy of the sample project in the store's `demo-projects/`.
pub fn new_copy(store: &Store) -> io::Result<PathBuf> {
    let parent = store.demo_projects_dir();
    fs::create_dir_all(&parent)?;
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mut random = [0u8; 4];
    getrandom::fill(&mut random).map_err(|e| io::Error::other(e.to_string()))?;
    let random: String = random.iter().map(|b| format!("{b:02x}")).collect();
    // Time first: names sort by age, so the newest are found without reading the copies.
    let dir = parent.join(format!("taskboard-{ms:013}-{random}"));
    fs::create_dir(&dir)?;
    let fresh = FreshCopy::new(dir.clone());
    bundled_demo::write_files(&dir, bundled_demo::PROJECT)?;
    fresh.kept();
    Ok(dir)
}

/// A copy made for a start that may still fail: removed when dropped, unless [`kept`] says the
/// run now exists and uses it.
///
/// [`kept`]: FreshCopy::kept
pub struct FreshCopy(Option<PathBuf>);

impl FreshCopy {
    pub fn new(dir: PathBuf) -> FreshCopy {
        FreshCopy(Some(dir))
    }

    pub fn kept(mut self) {
        self.0 = None;
    }
}

impl Drop for FreshCopy {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            let _ = fs::remove_dir_all(dir);
        }
    }
}

fn records_dir(store: &Store) -> PathBuf {
    store.home().join("serve").join("demo-runs")
}

/// Notes that `run_id` replays the bundled recording (durably: it must outlive the server).
pub fn remember(store: &Store, run_id: &str) -> io::Result<()> {
    let dir = records_dir(store);
    fs::create_dir_all(&dir)?;
    let record = Record {
        run_id: run_id.to_string(),
        trace_sha256: sha256_hex(bundled_demo::TRACE.as_bytes()),
    };
    let bytes = serde_json::to_vec_pretty(&record).map_err(io::Error::other)?;
    atomic_write(&dir.join(format!("{run_id}.json")), &bytes).map_err(io::Error::other)
}

/// The replay of a demo run this server did not start (or no longer remembers), positioned
/// where the run stands; `None` when the run is not a demo run.
pub fn restore_replay(store: &Store, run_id: &str) -> Result<Option<ReplayModel>, ApiError> {
    let path = records_dir(store).join(format!("{run_id}.json"));
    let Some(record) = read_record(&path, run_id)? else {
        return Ok(None);
    };
    if record.trace_sha256 != sha256_hex(bundled_demo::TRACE.as_bytes()) {
        return Err(ApiError::new(
            axum::http::StatusCode::CONFLICT,
            "DEMO_TRACE_CHANGED",
            format!(
                "demo run {run_id} replays a recording this version of baton does not hold"
            ),
        )
        .hint("answer with {\"text\": …, \"model\": \"<model>\"} or {\"replay\": \"<trace of the rest of the run>\"}"));
    }
    let trace = Trace::parse(bundled_demo::TRACE)
        .map_err(|e| ApiError::internal(e.code(), e.to_string()))?;
    let replay = ReplayModel::new(trace).with_source(bundled_demo::TRACE_SOURCE);
    let (project, _) = store.find_run(run_id).map_err(|e| ApiError::from(&e))?;
    let log = project.run_paths(run_id).conversation_log;
    let restored = baton_engine::conversation::restore(&log).map_err(|e| {
        ApiError::internal(
            "DEMO_RESTORE_FAILED",
            format!("cannot read the conversation of demo run {run_id}: {e}"),
        )
    })?;
    // As a resumed replay: past the model answers and the user inputs the run already used.
    replay.fast_forward(restored.complete_turns, restored.answers);
    Ok(Some(replay))
}

fn read_record(path: &Path, run_id: &str) -> Result<Option<Record>, ApiError> {
    // Named inside the store, as the hint says where to look.
    let damaged = |why: String| {
        ApiError::internal(
            "DEMO_RECORD_INVALID",
            format!("the demo record serve/demo-runs/{run_id}.json of the store is damaged: {why}"),
        )
        .hint("remove the file to answer the run with a model instead")
    };
    let bytes = match fs::metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(damaged(e.to_string())),
        Ok(m) if m.len() > RECORD_MAX => {
            return Err(damaged(format!("larger than {RECORD_MAX} bytes")));
        }
        Ok(_) => fs::read(path).map_err(|e| damaged(e.to_string()))?,
    };
    let record: Record = serde_json::from_slice(&bytes).map_err(|e| damaged(e.to_string()))?;
    if record.run_id != run_id {
        return Err(damaged(format!("it names run {}", record.run_id)));
    }
    Ok(Some(record))
}

/// What [`prune`] removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    pub copies: usize,
    pub records: usize,
}

/// Removes the copies of completed demo runs beyond the newest `keep`, copies no run uses that
/// are older than `orphan_after`, and the records of runs that are complete or gone. A copy
/// with a run that is not complete stays, however old. Best effort: what cannot be removed
/// now is tried again by the next call.
pub fn prune(store: &Store, keep: usize, orphan_after: Duration) -> io::Result<Pruned> {
    let mut pruned = Pruned::default();
    let projects: HashMap<PathBuf, Project> = store
        .projects()
        .map_err(io::Error::other)?
        .projects
        .into_iter()
        .map(|p| (p.root().to_path_buf(), p))
        .collect();
    let mut completed: Vec<(String, PathBuf)> = Vec::new();
    let entries = match fs::read_dir(store.demo_projects_dir()) {
        Ok(e) => e.collect::<Vec<_>>(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    for entry in entries.into_iter().flatten() {
        // Only directories (a link is nothing the server made).
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let runs = fs::canonicalize(&path)
            .ok()
            .and_then(|real| projects.get(&real))
            .map(|p| p.runs(None).map(|l| l.runs))
            .transpose()
            .map_err(io::Error::other)?
            .unwrap_or_default();
        if runs.is_empty() {
            let age = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok());
            if age.is_some_and(|a| a >= orphan_after) && fs::remove_dir_all(&path).is_ok() {
                pruned.copies += 1;
            }
        } else if runs.iter().all(|r| r.phase == Phase::Completed) {
            completed.push((name, path));
        }
    }
    completed.sort_by(|a, b| b.0.cmp(&a.0));
    for (_, path) in completed.into_iter().skip(keep) {
        if fs::remove_dir_all(&path).is_ok() {
            pruned.copies += 1;
        }
    }
    pruned.records = prune_records(store)?;
    Ok(pruned)
}

fn prune_records(store: &Store) -> io::Result<usize> {
    let entries = match fs::read_dir(records_dir(store)) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(run_id) = name.strip_suffix(".json") else {
            continue;
        };
        let done = match store.find_run(run_id) {
            Ok((_, run)) => run.phase == Phase::Completed,
            Err(e) => e.code() == "RUN_NOT_FOUND",
        };
        if done && fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_engine::runner::{self, StartRun};

    fn demo_run(store: &Store, package: &Path, project: &Path, phase: Phase) -> String {
        let claimed = runner::create(
            store,
            StartRun::new(package, project),
            &serde_json::Map::new(),
        )
        .unwrap();
        let id = claimed.run().run_id.clone();
        drop(claimed);
        let (p, _) = store.find_run(&id).unwrap();
        p.set_phase(&id, phase, None).unwrap();
        remember(store, &id).unwrap();
        id
    }

    /// The newest completed copies are kept, older ones removed; a copy whose run is not
    /// complete stays however old; an unused copy goes only once it is old; records of
    /// complete runs go, others stay.
    #[test]
    fn completed_copies_beyond_the_newest_are_removed_and_nothing_else() {
        let home = tempfile::tempdir().unwrap();
        let store = Store::new(home.path());
        let package = tempfile::tempdir().unwrap();
        bundled_demo::write_files(package.path(), bundled_demo::PACKAGE).unwrap();
        let copy = || {
            let dir = new_copy(&store).unwrap();
            // Names carry the millisecond: keep them apart.
            std::thread::sleep(Duration::from_millis(2));
            dir
        };
        let waiting_old = copy();
        let waiting = demo_run(&store, package.path(), &waiting_old, Phase::WaitingUser);
        let done: Vec<(PathBuf, String)> = (0..3)
            .map(|_| {
                let dir = copy();
                let id = demo_run(&store, package.path(), &dir, Phase::Completed);
                (dir, id)
            })
            .collect();
        let unused = copy();
        assert!(unused.starts_with(home.path().join("demo-projects")));
        assert!(unused.join("artifacts/PRD.md").is_file());

        let pruned = prune(&store, 1, ORPHAN_AFTER).unwrap();
        assert_eq!(
            pruned,
            Pruned {
                copies: 2,
                records: 3
            }
        );
        assert!(!done[0].0.exists() && !done[1].0.exists());
        assert!(done[2].0.is_dir(), "the newest completed copy is kept");
        assert!(
            waiting_old.is_dir(),
            "a run that is not complete keeps its copy"
        );
        assert!(
            unused.is_dir(),
            "a fresh unused copy may be a start in progress"
        );
        let records = records_dir(&store);
        assert!(records.join(format!("{waiting}.json")).is_file());
        for (_, id) in &done {
            assert!(!records.join(format!("{id}.json")).exists());
        }
        // The runs are still listed; only their copies went.
        assert_eq!(store.runs(None).unwrap().rows.len(), 4);

        let pruned = prune(&store, 1, Duration::ZERO).unwrap();
        assert_eq!(pruned.copies, 1, "the unused copy, now old enough");
        assert!(!unused.exists() && waiting_old.is_dir() && done[2].0.is_dir());
    }

    /// A record that is not one, or is another run's, is refused with its name, not trusted.
    #[test]
    fn a_damaged_or_foreign_record_is_refused_with_its_name() {
        let home = tempfile::tempdir().unwrap();
        let store = Store::new(home.path());
        assert!(restore_replay(&store, "r1").unwrap().is_none());
        fs::create_dir_all(records_dir(&store)).unwrap();
        fs::write(records_dir(&store).join("r1.json"), b"{\"runId\": 1}").unwrap();
        let e = restore_replay(&store, "r1").err().unwrap();
        assert_eq!(e.code, "DEMO_RECORD_INVALID");
        assert!(e.message.contains("r1.json"), "{}", e.message);
        let other = Record {
            run_id: "r1".into(),
            trace_sha256: "0".repeat(64),
        };
        fs::write(
            records_dir(&store).join("r1.json"),
            serde_json::to_vec(&other).unwrap(),
        )
        .unwrap();
        let e = restore_replay(&store, "r1").err().unwrap();
        assert_eq!(e.code, "DEMO_TRACE_CHANGED");
        // A record copied from another run's is not this run's.
        fs::copy(
            records_dir(&store).join("r1.json"),
            records_dir(&store).join("r2.json"),
        )
        .unwrap();
        let e = restore_replay(&store, "r2").err().unwrap();
        assert_eq!(e.code, "DEMO_RECORD_INVALID");
        assert!(e.message.contains("names run r1"), "{}", e.message);
    }
}
