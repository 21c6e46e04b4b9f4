//! Runs: creation (seed 001), their metadata (`run.json` and the project's index), phases,
//! lookup, garbage collection of interrupted creations, and package pinning.
//!
//! ```text
//! projects/<projectId>/runsIndex.json            the index (module runs_index)
//! projects/<projectId>/runsIndex.journal.jsonl   changes since runsIndex.json was written
//! projects/<projectId>/staging/.<runId>.tmp-*    runs being built; <runId>.pending markers
//! projects/<projectId>/runs/<runId>/run.json     the run's own metadata
//! ```

use crate::durable::{sync_dir, temp_sibling};
use crate::home::StoreError;
use crate::packages::InstalledPackage;
use crate::projects::{Project, Store};
use crate::reindex::{ReindexReport, Scanner};
use crate::run_meta::{
    RunJsonError, bound_waiting_for, encode, is_run_id, read_run_json, uuid_v7_time, write_run_json,
};
use crate::runs_index::{COMPACT_AT, LoadError, Loaded, Problem, RunsIndex, StoreWarning};
use crate::state::StateDoc;
use crate::state_file::StateFile;
use crate::time::{now_rfc3339, now_secs};
use baton_package::Package;
use baton_package::schema::{self, SchemaKind};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

pub use crate::run_meta::{Phase, RunMetadata};

/// A run's own metadata file, in its directory.
pub(crate) const RUN_JSON: &str = "run.json";
/// Half-built runs older than this are removed (a creation in progress is never that old).
const STALE_AFTER: Duration = Duration::from_secs(600);
/// A `.pending` marker older than this belongs to a creation that was killed after its run
/// directory was renamed into place; the run is then added to the index.
const PENDING_AFTER: Duration = Duration::from_secs(30);
/// At most this many candidates are named by `RUN_ID_AMBIGUOUS`.
const AMBIGUOUS_SHOWN: usize = 10;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GarbageReport {
    /// Half-built (hidden) run directories removed.
    pub staging_removed: usize,
    /// Complete run directories that were missing from the index, now added to it.
    pub unindexed_added: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("project root {} is not usable: {reason}", path.display())]
    ProjectRootInvalid { path: PathBuf, reason: String },
    #[error("project.json of {} is damaged: {reason}", dir.display())]
    ProjectRecordInvalid { dir: PathBuf, reason: String },
    #[error("{message}")]
    Workflow {
        code: &'static str,
        message: String,
        hint: Option<String>,
    },
    #[error("the package given is not the installed package {id}")]
    PackageMismatch { id: String },
    #[error("package {id} is not installed")]
    PackageNotFound { id: String },
    #[error(
        "installed package {id} changed since the run started (expected sha256 {expected}, found {actual})"
    )]
    PackageChanged {
        id: String,
        expected: String,
        actual: String,
    },
    #[error("cannot initialize the run state: {0}")]
    StateInit(String),
    #[error("{} is damaged: {reason}", path.display())]
    IndexInvalid { path: PathBuf, reason: String },
    #[error("no run matches '{query}'{}", unsearched_note(unsearched))]
    RunNotFound {
        query: String,
        /// Projects that could not be searched, and why.
        unsearched: Vec<String>,
    },
    #[error("'{query}' matches {} runs: {}", matches.len(), name_some(matches))]
    RunAmbiguous { query: String, matches: Vec<String> },
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn unsearched_note(unsearched: &[String]) -> String {
    if unsearched.is_empty() {
        String::new()
    } else {
        format!(" (not searched: {})", unsearched.join("; "))
    }
}

fn name_some(ids: &[String]) -> String {
    let shown = ids[..ids.len().min(AMBIGUOUS_SHOWN)].join(", ");
    match ids.len().saturating_sub(AMBIGUOUS_SHOWN) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

impl RunError {
    pub fn code(&self) -> &'static str {
        match self {
            RunError::ProjectRootInvalid { .. } => "PROJECT_ROOT_INVALID",
            RunError::ProjectRecordInvalid { .. } => "PROJECT_RECORD_INVALID",
            RunError::Workflow { code, .. } => code,
            RunError::PackageMismatch { .. } => "PACKAGE_MISMATCH",
            RunError::PackageNotFound { .. } => "PACKAGE_NOT_FOUND",
            RunError::PackageChanged { .. } => "RUN_PACKAGE_CHANGED",
            RunError::StateInit(_) => "STATE_INIT_FAILED",
            RunError::IndexInvalid { .. } => "RUNS_INDEX_INVALID",
            RunError::RunNotFound { .. } => "RUN_NOT_FOUND",
            RunError::RunAmbiguous { .. } => "RUN_ID_AMBIGUOUS",
            RunError::Store(_) => "STORE_IO_FAILED",
        }
    }

    pub fn hint(&self) -> Option<String> {
        match self {
            RunError::Workflow { hint, .. } => hint.clone(),
            RunError::ProjectRecordInvalid { dir, .. } => Some(format!(
                "restore it from a backup, or remove it: the next `baton run --project <DIR>` on that project registers it again (its runs in {} are kept)",
                dir.join("runs").display()
            )),
            RunError::PackageChanged { .. } => Some(
                "installed packages are read-only; reinstall the original package or start a new run".into(),
            ),
            RunError::IndexInvalid { .. } => {
                Some("`baton runs reindex` rebuilds the index from the run directories".into())
            }
            RunError::RunNotFound { .. } => Some("`baton runs list` shows the runs".into()),
            RunError::RunAmbiguous { .. } => Some("type more characters of the run id".into()),
            _ => None,
        }
    }
}

/// Runs of one project, newest first, and what the reading had to repair.
#[derive(Debug, Clone, Default)]
pub struct RunListing {
    pub runs: Vec<RunMetadata>,
    /// A limit left older runs out.
    pub more: bool,
    pub warnings: Vec<StoreWarning>,
}

/// The files of one run.
#[derive(Debug, Clone)]
pub struct RunPaths {
    pub dir: PathBuf,
    /// Mounted as `@state`.
    pub state_dir: PathBuf,
    pub state_file: PathBuf,
    pub execution_log: PathBuf,
    pub conversation_log: PathBuf,
    /// Held while the state is read-modified-written, and by whoever drives the run.
    pub lock: PathBuf,
}

impl RunPaths {
    pub(crate) fn new(dir: PathBuf) -> RunPaths {
        let state_dir = dir.join("state");
        RunPaths {
            state_file: state_dir.join("workflow.md"),
            execution_log: state_dir.join("logs/execution.jsonl"),
            conversation_log: state_dir.join("logs/conversation.jsonl"),
            lock: dir.join("run.lock"),
            state_dir,
            dir,
        }
    }

    /// `run.json`: the run's metadata, the source the index is rebuilt from.
    pub fn metadata_file(&self) -> PathBuf {
        self.dir.join(RUN_JSON)
    }
}

/// What a new run is made of.
pub struct NewRun<'a> {
    pub package: &'a Package,
    pub installed: &'a InstalledPackage,
    pub workflow_ref: Option<&'a str>,
    pub agent_id: &'a str,
}

pub(crate) fn unique_match<T>(
    query: &str,
    mut found: Vec<(T, RunMetadata)>,
    unsearched: Vec<String>,
) -> Result<(T, RunMetadata), RunError> {
    match found.len() {
        0 => Err(RunError::RunNotFound {
            query: query.to_string(),
            unsearched,
        }),
        1 => Ok(found.remove(0)),
        _ => Err(RunError::RunAmbiguous {
            query: query.to_string(),
            matches: found.into_iter().map(|(_, r)| r.run_id).collect(),
        }),
    }
}

impl Project {
    pub fn id(&self) -> &str {
        &self.record.project_id
    }

    pub fn root(&self) -> &Path {
        &self.record.root
    }

    fn index(&self) -> RunsIndex {
        RunsIndex::new(&self.dir)
    }

    fn runs_dir(&self) -> PathBuf {
        self.dir.join("runs")
    }

    fn staging_dir(&self) -> PathBuf {
        self.dir.join("staging")
    }

    pub fn run_paths(&self, run_id: &str) -> RunPaths {
        RunPaths::new(self.runs_dir().join(run_id))
    }

    pub fn state_file(&self, run_id: &str) -> StateFile {
        let paths = self.run_paths(run_id);
        StateFile::new(paths.state_file, paths.lock)
    }

    fn scanner(&self) -> (PathBuf, Option<PathBuf>) {
        // `$BATON_HOME/projects/<id>` → `$BATON_HOME`, for the installed packages.
        let home = self
            .dir
            .parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf);
        (self.runs_dir(), home)
    }

    fn scan(
        &self,
        known: &HashMap<String, RunMetadata>,
        trust_known: bool,
    ) -> Result<crate::reindex::Scan, StoreError> {
        let (runs_dir, home) = self.scanner();
        Scanner {
            runs_dir: &runs_dir,
            project_id: self.id(),
            home: home.as_deref(),
        }
        .scan(known, trust_known)
    }

    /// Whether `runs/` holds any run directory (to tell "no runs yet" from "index lost").
    fn has_run_dirs(&self) -> Result<bool, StoreError> {
        let dir = self.runs_dir();
        match fs::read_dir(&dir) {
            Ok(mut entries) => {
                Ok(entries.any(|e| e.is_ok_and(|e| is_run_id(&e.file_name().to_string_lossy()))))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(StoreError::io("list", &dir)(e)),
        }
    }

    /// Writes an empty index for a project that has neither an index nor runs (a project
    /// registered again after its project.json was lost keeps what it has).
    pub(crate) fn init_index(&self) -> Result<(), RunError> {
        let index = self.index();
        let _exclusive = index.lock(true)?;
        if !index.snapshot_path().exists() && !index.journal_exists() && !self.has_run_dirs()? {
            index.write(Vec::new())?;
        }
        Ok(())
    }

    /// Runs of this project, newest first.
    pub fn list_runs(&self) -> Result<Vec<RunMetadata>, RunError> {
        Ok(self.runs(None)?.runs)
    }

    /// The newest `limit` runs (all with `None`), newest first. A damaged or missing index is
    /// rebuilt from the run directories, and a warning says so.
    pub fn runs(&self, limit: Option<usize>) -> Result<RunListing, RunError> {
        let index = self.index();
        {
            let _shared = index.lock(false)?;
            match index.load(limit) {
                Ok(loaded) => return Ok(listing(loaded, Vec::new())),
                Err(LoadError::Io(e)) => return Err(e.into()),
                Err(LoadError::Problem(Problem::Missing)) if !self.has_run_dirs()? => {
                    return Ok(RunListing::default());
                }
                Err(LoadError::Problem(_)) => {}
            }
        }
        let _exclusive = index.lock(true)?;
        let (loaded, warnings) = self.load_repairing(&index, limit)?;
        Ok(listing(loaded, warnings))
    }

    /// Loads the index, rebuilding it first if needed. Call under the exclusive lock.
    fn load_repairing(
        &self,
        index: &RunsIndex,
        limit: Option<usize>,
    ) -> Result<(Loaded, Vec<StoreWarning>), RunError> {
        let problem = match index.load(limit) {
            Ok(loaded) => return Ok((loaded, Vec::new())),
            Err(LoadError::Io(e)) => return Err(e.into()),
            Err(LoadError::Problem(Problem::Missing)) if !self.has_run_dirs()? => {
                return Ok((Loaded::default(), Vec::new()));
            }
            Err(LoadError::Problem(p)) => p,
        };
        let (_, warning) = self.rebuild(index, problem)?;
        match index.load(limit) {
            Ok(loaded) => Ok((loaded, warning.into_iter().collect())),
            Err(LoadError::Io(e)) => Err(e.into()),
            Err(LoadError::Problem(p)) => Err(RunError::IndexInvalid {
                path: index.snapshot_path(),
                reason: format!("still unreadable after a rebuild: {p:?}"),
            }),
        }
    }

    /// Rebuilds the index from the run directories, with what the old index still says for
    /// runs that have no `run.json`. Damaged index files are moved aside, not deleted. Call
    /// under the exclusive lock.
    fn rebuild(
        &self,
        index: &RunsIndex,
        problem: Problem,
    ) -> Result<(ReindexReport, Option<StoreWarning>), RunError> {
        let problem = match problem {
            // An index from an earlier baton: its snapshot must at least parse.
            Problem::NoJournal => match fs::read(index.snapshot_path())
                .map(|b| serde_json::from_slice::<Vec<RunMetadata>>(&b).map(|_| ()))
            {
                Ok(Err(e)) => Problem::Damaged(format!("{}: {e}", crate::runs_index::SNAPSHOT)),
                _ => Problem::NoJournal,
            },
            other => other,
        };
        let known = index.salvage();
        let kept = match problem {
            Problem::Damaged(_) => index.keep_damaged(now_secs()),
            _ => Vec::new(),
        };
        let scan = self.scan(&known, false)?;
        let mut report = scan.report;
        report.kept_damaged = kept;
        index.write(scan.runs)?;
        let root = self.root().display();
        let count = report.runs;
        let warning = match problem {
            Problem::NoJournal | Problem::Requested => None,
            Problem::Missing => Some(format!(
                "the runs index of {root} was missing; rebuilt it from {count} run directories"
            )),
            Problem::Damaged(reason) => {
                let kept = report
                    .kept_damaged
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ");
                Some(format!(
                    "the runs index of {root} was damaged ({reason}); rebuilt it from {count} run directories (damaged files kept as {kept})"
                ))
            }
        }
        .map(|message| StoreWarning {
            code: "RUNS_INDEX_REBUILT",
            message,
        });
        Ok((report, warning))
    }

    /// Rebuilds this project's index from its run directories (`baton runs reindex`).
    pub fn reindex(&self) -> Result<(ReindexReport, Vec<StoreWarning>), RunError> {
        let index = self.index();
        let _exclusive = index.lock(true)?;
        let problem = match index.load(None) {
            Ok(_) => Problem::Requested,
            Err(LoadError::Io(e)) => return Err(e.into()),
            Err(LoadError::Problem(p)) => p,
        };
        let (report, warning) = self.rebuild(&index, problem)?;
        Ok((report, warning.into_iter().collect()))
    }

    /// Records a change of a run in the index. Call under the exclusive lock.
    fn record_change(&self, index: &RunsIndex, run: &RunMetadata) -> Result<(), RunError> {
        if !index.journal_exists() {
            // An index from an earlier baton, or none yet: rebuilt first so it starts complete.
            let problem = if index.snapshot_path().exists() {
                Problem::NoJournal
            } else {
                Problem::Missing
            };
            self.rebuild(index, problem)?;
        }
        if index.append(run)? > COMPACT_AT {
            // The change is durable in the journal already; a failed fold is retried at the
            // next change, so it must not fail this one (a creation would undo its run).
            let _ = self.compact(index);
        }
        Ok(())
    }

    /// Folds the journal into `runsIndex.json`, adding run directories the index missed and
    /// dropping entries whose directory is gone. Returns the number added. Call under the
    /// exclusive lock.
    fn compact(&self, index: &RunsIndex) -> Result<usize, RunError> {
        let known: HashMap<String, RunMetadata> = match index.load(None) {
            Ok(loaded) => loaded
                .runs
                .into_iter()
                .map(|r| (r.run_id.clone(), r))
                .collect(),
            Err(LoadError::Io(e)) => return Err(e.into()),
            Err(LoadError::Problem(p)) => {
                let (report, _) = self.rebuild(index, p)?;
                return Ok(report.runs);
            }
        };
        let scan = self.scan(&known, true)?;
        index.write(scan.runs)?;
        Ok(scan.added)
    }

    /// A run by id or unique id prefix.
    pub fn get_run(&self, query: &str) -> Result<RunMetadata, RunError> {
        if let Some(run) = self.read_own_metadata(query) {
            return Ok(run);
        }
        let runs = self.list_runs()?;
        let found = match runs.iter().find(|r| r.run_id == query) {
            Some(exact) => vec![((), exact.clone())],
            None => runs
                .into_iter()
                .filter(|r| r.run_id.starts_with(query))
                .map(|r| ((), r))
                .collect(),
        };
        let (_, run) = unique_match(query, found, Vec::new())?;
        Ok(self.read_own_metadata(&run.run_id).unwrap_or(run))
    }

    /// A run's `run.json`, when `id` is a run id and the file is readable and names that run.
    pub(crate) fn read_own_metadata(&self, id: &str) -> Option<RunMetadata> {
        if !is_run_id(id) {
            return None;
        }
        match read_run_json(&self.run_paths(id).metadata_file()) {
            Ok(Some(run)) if run.run_id == id => Some(run),
            _ => None,
        }
    }

    /// Changes a run's metadata: `run.json`, then the index. Identity fields (`runId`,
    /// `projectId`, `createdAt`) cannot change; long texts in `waitingFor` are cut. A change of
    /// nothing but `lastUpdatedAt` writes nothing.
    pub fn update_run(
        &self,
        run_id: &str,
        f: impl FnOnce(&mut RunMetadata),
    ) -> Result<RunMetadata, RunError> {
        let not_found = || RunError::RunNotFound {
            query: run_id.to_string(),
            unsearched: Vec::new(),
        };
        if !is_run_id(run_id) {
            return Err(not_found());
        }
        let index = self.index();
        let _exclusive = index.lock(true)?;
        let paths = self.run_paths(run_id);
        let current = match self.read_own_metadata(run_id) {
            Some(run) => run,
            // A run made before run.json existed (or whose run.json is damaged).
            None => self
                .load_repairing(&index, None)?
                .0
                .runs
                .into_iter()
                .find(|r| r.run_id == run_id)
                .ok_or_else(not_found)?,
        };
        let mut next = current.clone();
        f(&mut next);
        next.run_id.clone_from(&current.run_id);
        next.project_id.clone_from(&current.project_id);
        next.created_at.clone_from(&current.created_at);
        bound_waiting_for(&mut next.waiting_for);
        if next.same_content(&current) && paths.metadata_file().exists() {
            return Ok(current);
        }
        next.last_updated_at = now_rfc3339();
        write_run_json(&paths.metadata_file(), &next)?;
        self.record_change(&index, &next)?;
        Ok(next)
    }

    pub fn set_phase(
        &self,
        run_id: &str,
        phase: Phase,
        waiting_for: Option<Value>,
    ) -> Result<RunMetadata, RunError> {
        self.update_run(run_id, |r| {
            r.phase = phase;
            r.waiting_for = waiting_for;
        })
    }

    /// Creates a run as seed 001 describes. The run directory, `run.json` included, is built
    /// under a hidden name in `staging/` and renamed into `runs/`, then the index records it; if
    /// that fails the directory is removed, so no caller ever sees half a run.
    pub fn create_run(&self, new: NewRun<'_>) -> Result<RunMetadata, RunError> {
        self.create_run_with_variables(new, &Map::new())
    }

    /// [`Project::create_run`] with `variables` set in the new state (`baton run --var`, the
    /// epic autopilot's phase inputs). `workflowStatus` is the engine's to set and is refused.
    pub fn create_run_with_variables(
        &self,
        new: NewRun<'_>,
        variables: &Map<String, Value>,
    ) -> Result<RunMetadata, RunError> {
        check_variables(variables)?;
        if new.installed.sha256 != new.package.content_sha256() {
            return Err(RunError::PackageMismatch {
                id: new.installed.id.clone(),
            });
        }
        let workflow = new
            .package
            .resolve_workflow(new.workflow_ref)
            .map_err(|d| RunError::Workflow {
                code: d.code.as_str(),
                message: d.message,
                hint: d.hint,
            })?;
        if new.package.agent(new.agent_id).is_none() {
            let known: Vec<&str> = new.package.agents().iter().map(|a| a.id.as_str()).collect();
            return Err(RunError::Workflow {
                code: "AGENT_NOT_FOUND",
                message: format!(
                    "agent '{}' is not defined in package {}",
                    new.agent_id,
                    new.package.name()
                ),
                hint: Some(format!("use one of: {}", known.join(", "))),
            });
        }

        self.clean_staging(STALE_AFTER, Some(PENDING_AFTER))?;
        let run_id = uuid::Uuid::now_v7().to_string();
        // The time the id carries, so a rebuild from the directory alone finds the same.
        let now = uuid_v7_time(&run_id).unwrap_or_else(now_rfc3339);
        let state_text = initial_state(
            &workflow.state_template,
            &run_id,
            new.agent_id,
            &workflow.id,
            &now,
            variables,
        )?;
        let meta = RunMetadata {
            run_id: run_id.clone(),
            project_id: self.id().to_string(),
            package_id: new.installed.id.clone(),
            package_sha256: new.installed.sha256.clone(),
            workflow_ref: workflow.id.clone(),
            active_agent_id: new.agent_id.to_string(),
            // Nothing has run yet; the engine moves it to running.
            phase: Phase::Idle,
            created_at: now.clone(),
            last_updated_at: now,
            current_node_id: Some(workflow.graph.entry_node_id().to_string()),
            waiting_for: None,
        };

        let artifacts = self.root().join("artifacts");
        fs::create_dir_all(&artifacts).map_err(StoreError::io("create", &artifacts))?;

        let staging_root = self.staging_dir();
        fs::create_dir_all(&staging_root).map_err(StoreError::io("create", &staging_root))?;
        let staging = temp_sibling(&staging_root.join(&run_id));
        if let Err(e) = write_run_dir(&staging, &state_text, &meta) {
            let _ = fs::remove_dir_all(&staging);
            return Err(e);
        }
        // Says "this run may be in runs/ but not yet in the index" until the index has it.
        let marker = staging_root.join(format!("{run_id}.pending"));
        let _ = File::create(&marker);
        let final_dir = self.runs_dir().join(&run_id);
        let placed = fs::rename(&staging, &final_dir)
            .map_err(|e| StoreError::io("create run", &final_dir)(e))
            .and_then(|()| sync_dir(&self.runs_dir()));
        if let Err(e) = placed {
            let _ = fs::remove_dir_all(&staging);
            let _ = fs::remove_file(&marker);
            return Err(e.into());
        }
        let index = self.index();
        let indexed = index
            .lock(true)
            .map_err(RunError::from)
            .and_then(|_exclusive| self.record_change(&index, &meta));
        if let Err(e) = indexed {
            let _ = fs::remove_dir_all(&final_dir);
            let _ = fs::remove_file(&marker);
            return Err(e);
        }
        let _ = fs::remove_file(&marker);
        Ok(meta)
    }

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
    fn clean_staging(
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

    /// Loads the package a run is pinned to, refusing one whose content changed.
    pub fn pinned_package(
        &self,
        store: &Store,
        run: &RunMetadata,
    ) -> Result<(Package, InstalledPackage), RunError> {
        let installed = store
            .packages()
            .find(&run.package_id)?
            .into_iter()
            .find(|p| p.id == run.package_id)
            .ok_or_else(|| RunError::PackageNotFound {
                id: run.package_id.clone(),
            })?;
        let package = Package::load(&installed.path).map_err(|e| RunError::PackageChanged {
            id: run.package_id.clone(),
            expected: run.package_sha256.clone(),
            actual: format!("an invalid package ({e})"),
        })?;
        if package.content_sha256() != run.package_sha256 {
            return Err(RunError::PackageChanged {
                id: run.package_id.clone(),
                expected: run.package_sha256.clone(),
                actual: package.content_sha256().to_string(),
            });
        }
        Ok((package, installed))
    }
}

fn listing(loaded: Loaded, warnings: Vec<StoreWarning>) -> RunListing {
    RunListing {
        runs: loaded.runs,
        more: loaded.more,
        warnings,
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

/// Variables a run may be created with: named, and not the completion flag (a run created
/// `complete` would skip its whole graph).
fn check_variables(variables: &Map<String, Value>) -> Result<(), RunError> {
    let bad = |message: String| RunError::Workflow {
        code: "RUN_VARIABLE_INVALID",
        message,
        hint: Some("pass variables as --var KEY=VALUE with a non-empty KEY".into()),
    };
    for key in variables.keys() {
        if key.trim().is_empty() {
            return Err(bad("a run variable has an empty name".into()));
        }
        if key == "workflowStatus" {
            return Err(bad(
                "variable workflowStatus cannot be set at creation: only the run completes itself"
                    .into(),
            ));
        }
    }
    Ok(())
}

/// The selected workflow's `workflow.md` with the run fields forced, the progress reset and
/// the creation variables set.
fn initial_state(
    template: &str,
    run_id: &str,
    agent: &str,
    workflow_ref: &str,
    now: &str,
    variables: &Map<String, Value>,
) -> Result<String, RunError> {
    let mut doc = StateDoc::parse(template).map_err(|e| RunError::StateInit(e.to_string()))?;
    let fields = doc.fields_mut();
    for (key, value) in [
        ("runId", Value::from(run_id)),
        ("activeAgentId", Value::from(agent)),
        ("workflowRef", Value::from(workflow_ref)),
        ("updatedAt", Value::from(now)),
        ("currentNodeId", Value::from("")),
        ("stepsCompleted", Value::Array(Vec::new())),
        ("variables", Value::Object(variables.clone())),
        ("decisionLog", Value::Array(Vec::new())),
        ("artifacts", Value::Array(Vec::new())),
    ] {
        fields.insert(key.to_string(), value);
    }
    let issues = schema::validate(SchemaKind::WorkflowFrontmatter, &doc.to_value());
    if let Some(first) = issues.first() {
        return Err(RunError::StateInit(first.message.clone()));
    }
    doc.render().map_err(|e| RunError::StateInit(e.to_string()))
}

/// Writes every file of a new run, then makes them durable. The fsyncs run in parallel: each
/// costs a device flush (about 4 ms on the reference machine), and they are independent.
fn write_run_dir(dir: &Path, state_text: &str, meta: &RunMetadata) -> Result<(), RunError> {
    let paths = RunPaths::new(dir.to_path_buf());
    let logs = paths
        .execution_log
        .parent()
        .unwrap_or(&paths.state_dir)
        .to_path_buf();
    fs::create_dir_all(&logs).map_err(StoreError::io("create", &logs))?;
    File::create(&paths.state_file)
        .and_then(|mut f| f.write_all(state_text.as_bytes()))
        .map_err(StoreError::io("write", &paths.state_file))?;
    File::create(&paths.execution_log).map_err(StoreError::io("create", &paths.execution_log))?;
    let run_json = paths.metadata_file();
    fs::write(&run_json, encode(meta, &run_json)?).map_err(StoreError::io("write", &run_json))?;
    sync_paths(&[
        &paths.state_file,
        &run_json,
        &logs,
        &paths.state_dir,
        &paths.dir,
    ])?;
    Ok(())
}

/// fsync of files and directories, all at once.
fn sync_paths(paths: &[&Path]) -> Result<(), StoreError> {
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
                Err(StoreError::io("sync", "run directory")(
                    std::io::Error::other("fsync thread panicked"),
                ))
            })
        })
    })
}
