//! Runs: creation (seed 001), the project's `runsIndex.json`, phases and package pinning.

use crate::durable::{atomic_write, sync_dir, temp_sibling};
use crate::home::StoreError;
use crate::jsonl::JsonlWriter;
use crate::packages::InstalledPackage;
use crate::projects::{Project, Store};
use crate::state::StateDoc;
use crate::state_file::StateFile;
use crate::time::now_rfc3339;
use baton_package::Package;
use baton_package::schema::{self, SchemaKind};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Leftovers of an interrupted run creation older than this are removed.
const STALE_AFTER: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GarbageReport {
    pub staging_removed: usize,
    pub unindexed_removed: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    Idle,
    Running,
    WaitingUser,
    Completed,
    Failed,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Running => "running",
            Phase::WaitingUser => "waiting-user",
            Phase::Completed => "completed",
            Phase::Failed => "failed",
        }
    }
}

/// One entry of `runsIndex.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunMetadata {
    pub run_id: String,
    pub project_id: String,
    pub package_id: String,
    pub package_sha256: String,
    pub workflow_ref: String,
    pub active_agent_id: String,
    pub phase: Phase,
    pub created_at: String,
    pub last_updated_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_node_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<Value>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("project root {} is not usable: {reason}", path.display())]
    ProjectRootInvalid { path: PathBuf, reason: String },
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
    #[error("no run matches '{0}'")]
    RunNotFound(String),
    #[error("'{query}' matches {} runs: {}", matches.len(), matches.join(", "))]
    RunAmbiguous { query: String, matches: Vec<String> },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl RunError {
    pub fn code(&self) -> &'static str {
        match self {
            RunError::ProjectRootInvalid { .. } => "PROJECT_ROOT_INVALID",
            RunError::Workflow { code, .. } => code,
            RunError::PackageMismatch { .. } => "PACKAGE_MISMATCH",
            RunError::PackageNotFound { .. } => "PACKAGE_NOT_FOUND",
            RunError::PackageChanged { .. } => "RUN_PACKAGE_CHANGED",
            RunError::StateInit(_) => "STATE_INIT_FAILED",
            RunError::IndexInvalid { .. } => "RUNS_INDEX_INVALID",
            RunError::RunNotFound(_) => "RUN_NOT_FOUND",
            RunError::RunAmbiguous { .. } => "RUN_ID_AMBIGUOUS",
            RunError::Store(_) => "STORE_IO_FAILED",
        }
    }

    pub fn hint(&self) -> Option<String> {
        match self {
            RunError::Workflow { hint, .. } => hint.clone(),
            RunError::PackageChanged { .. } => Some(
                "installed packages are read-only; reinstall the original package or start a new run".into(),
            ),
            RunError::IndexInvalid { .. } => Some(
                "the file was changed outside baton; restore it from a backup, or move it away to start a fresh index".into(),
            ),
            RunError::RunNotFound(_) => Some("`baton runs list` shows the runs".into()),
            RunError::RunAmbiguous { .. } => Some("type more characters of the run id".into()),
            _ => None,
        }
    }
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
    fn new(dir: PathBuf) -> RunPaths {
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
}

/// What a new run is made of.
pub struct NewRun<'a> {
    pub package: &'a Package,
    pub installed: &'a InstalledPackage,
    pub workflow_ref: Option<&'a str>,
    pub agent_id: &'a str,
}

struct IndexLock(File);

impl Drop for IndexLock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

pub(crate) fn unique_match<T>(
    query: &str,
    mut found: Vec<(T, RunMetadata)>,
) -> Result<(T, RunMetadata), RunError> {
    match found.len() {
        0 => Err(RunError::RunNotFound(query.to_string())),
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

    fn index_path(&self) -> PathBuf {
        self.dir.join("runsIndex.json")
    }

    fn runs_dir(&self) -> PathBuf {
        self.dir.join("runs")
    }

    pub fn run_paths(&self, run_id: &str) -> RunPaths {
        RunPaths::new(self.runs_dir().join(run_id))
    }

    pub fn state_file(&self, run_id: &str) -> StateFile {
        let paths = self.run_paths(run_id);
        StateFile::new(paths.state_file, paths.lock)
    }

    fn lock_index(&self) -> Result<IndexLock, RunError> {
        let path = self.dir.join("runsIndex.lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(StoreError::io("open", &path))?;
        file.lock().map_err(StoreError::io("lock", &path))?;
        Ok(IndexLock(file))
    }

    fn read_index(&self) -> Result<Vec<RunMetadata>, RunError> {
        let path = self.index_path();
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StoreError::io("read", &path)(e).into()),
        };
        serde_json::from_slice(&bytes).map_err(|e| RunError::IndexInvalid {
            path,
            reason: e.to_string(),
        })
    }

    /// One run per line: readable, and diffs of the index stay small.
    fn write_index(&self, runs: &[RunMetadata]) -> Result<(), RunError> {
        let mut out = Vec::with_capacity(runs.len() * 360 + 4);
        out.extend_from_slice(b"[\n");
        for (i, run) in runs.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(b",\n");
            }
            serde_json::to_writer(&mut out, run).map_err(|e| StoreError::Io {
                action: "encode",
                path: self.index_path(),
                source: std::io::Error::other(e),
            })?;
        }
        out.extend_from_slice(b"\n]\n");
        atomic_write(&self.index_path(), &out)?;
        Ok(())
    }

    /// Read-modify-write of the index under its lock.
    fn update_index<T>(
        &self,
        f: impl FnOnce(&mut Vec<RunMetadata>) -> Result<T, RunError>,
    ) -> Result<T, RunError> {
        let _lock = self.lock_index()?;
        let mut runs = self.read_index()?;
        let out = f(&mut runs)?;
        self.write_index(&runs)?;
        Ok(out)
    }

    /// Runs of this project, newest first.
    pub fn list_runs(&self) -> Result<Vec<RunMetadata>, RunError> {
        let mut runs = self.read_index()?;
        runs.sort_by(|a, b| (&b.created_at, &b.run_id).cmp(&(&a.created_at, &a.run_id)));
        Ok(runs)
    }

    /// A run by id or unique id prefix.
    pub fn get_run(&self, query: &str) -> Result<RunMetadata, RunError> {
        let runs = self.read_index()?;
        if let Some(exact) = runs.iter().find(|r| r.run_id == query) {
            return Ok(exact.clone());
        }
        let found = runs
            .into_iter()
            .filter(|r| r.run_id.starts_with(query))
            .map(|r| ((), r))
            .collect();
        unique_match(query, found).map(|(_, r)| r)
    }

    /// Changes a run's index entry under the lock; `lastUpdatedAt` is set.
    pub fn update_run(
        &self,
        run_id: &str,
        f: impl FnOnce(&mut RunMetadata),
    ) -> Result<RunMetadata, RunError> {
        self.update_index(|runs| {
            let run = runs
                .iter_mut()
                .find(|r| r.run_id == run_id)
                .ok_or_else(|| RunError::RunNotFound(run_id.to_string()))?;
            f(run);
            run.last_updated_at = now_rfc3339();
            Ok(run.clone())
        })
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

    /// Creates a run as seed 001 describes. The run directory is built under a hidden name and
    /// renamed into place, then the index entry is appended; if that fails the directory is
    /// removed, so no caller ever sees half a run.
    pub fn create_run(&self, new: NewRun<'_>) -> Result<RunMetadata, RunError> {
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

        self.collect_garbage(STALE_AFTER)?;
        let run_id = uuid::Uuid::now_v7().to_string();
        let now = now_rfc3339();
        let state_text = initial_state(
            &workflow.state_template,
            &run_id,
            new.agent_id,
            &workflow.id,
            &now,
        )?;

        let artifacts = self.root().join("artifacts");
        fs::create_dir_all(&artifacts).map_err(StoreError::io("create", &artifacts))?;

        let final_dir = self.runs_dir().join(&run_id);
        let staging = temp_sibling(&final_dir);
        if let Err(e) = write_run_dir(&staging, &state_text) {
            let _ = fs::remove_dir_all(&staging);
            return Err(e);
        }
        fs::rename(&staging, &final_dir).map_err(|e| {
            let _ = fs::remove_dir_all(&staging);
            StoreError::io("create run", &final_dir)(e)
        })?;
        sync_dir(&self.runs_dir())?;

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
        let appended = self.update_index(|runs| {
            runs.push(meta.clone());
            Ok(())
        });
        if let Err(e) = appended {
            let _ = fs::remove_dir_all(&final_dir);
            return Err(e);
        }
        Ok(meta)
    }

    /// Removes what killed run creations left behind: hidden staging directories, and run
    /// directories that never made it into the index. Only entries older than `min_age` are
    /// touched, so a creation in progress in another process is never disturbed.
    pub fn collect_garbage(&self, min_age: Duration) -> Result<GarbageReport, RunError> {
        let _lock = self.lock_index()?;
        let indexed: HashSet<String> = self.read_index()?.into_iter().map(|r| r.run_id).collect();
        let mut report = GarbageReport::default();
        let runs_dir = self.runs_dir();
        let entries = match fs::read_dir(&runs_dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(report),
            Err(e) => return Err(StoreError::io("list", &runs_dir)(e).into()),
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let staging = name.starts_with('.');
            if !staging && indexed.contains(&name) {
                continue;
            }
            let old_enough = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| SystemTime::now().duration_since(t).ok())
                .is_some_and(|age| age >= min_age);
            if old_enough && fs::remove_dir_all(entry.path()).is_ok() {
                if staging {
                    report.staging_removed += 1;
                } else {
                    report.unindexed_removed += 1;
                }
            }
        }
        Ok(report)
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

/// The selected workflow's `workflow.md` with the run fields forced and the progress reset.
fn initial_state(
    template: &str,
    run_id: &str,
    agent: &str,
    workflow_ref: &str,
    now: &str,
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
        ("variables", Value::Object(Map::new())),
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

fn write_run_dir(dir: &Path, state_text: &str) -> Result<(), RunError> {
    let paths = RunPaths::new(dir.to_path_buf());
    let logs = paths
        .execution_log
        .parent()
        .unwrap_or(&paths.state_dir)
        .to_path_buf();
    fs::create_dir_all(&logs).map_err(StoreError::io("create", &logs))?;
    let mut state =
        File::create(&paths.state_file).map_err(StoreError::io("create", &paths.state_file))?;
    state
        .write_all(state_text.as_bytes())
        .and_then(|_| state.sync_all())
        .map_err(StoreError::io("write", &paths.state_file))?;
    JsonlWriter::open(&paths.execution_log)?;
    File::open(&paths.execution_log)
        .and_then(|f| f.sync_all())
        .map_err(StoreError::io("sync", &paths.execution_log))?;
    for d in [&logs, &paths.state_dir, &paths.dir] {
        sync_dir(d)?;
    }
    Ok(())
}
