//! Runs: creation (seed 001), lookup, metadata changes (`run.json`, then the index) and
//! package pinning. Keeping the index whole is in `reindex`, cleaning up after interrupted
//! creations in `run_gc`, the index files in `runs_index`, creating task runs in `task_run`.
//!
//! ```text
//! projects/<projectId>/runsIndex.json            the index (module runs_index)
//! projects/<projectId>/runsIndex.journal.jsonl   changes since runsIndex.json was written
//! projects/<projectId>/staging/.<runId>.tmp-*    runs being built; <runId>.pending markers
//! projects/<projectId>/runs/<runId>/run.json     the run's own metadata
//! ```

use crate::durable::{
    Group, atomic_write_with, atomic_write_with_group, replace, sync_all, sync_dir, temp_sibling,
};
use crate::home::StoreError;
use crate::packages::InstalledPackage;
use crate::projects::{Project, Store};
use crate::run_error::unique_match;
use crate::run_gc::{PENDING_AFTER, STALE_AFTER};
use crate::run_meta::{bound_waiting_for, encode, is_run_id, read_run_json, uuid_v7_time};
use crate::runs_index::{LoadError, Loaded, Problem, RunsIndex, StoreWarning};
use crate::state::StateDoc;
use crate::state_file::StateFile;
use crate::time::now_rfc3339;
use baton_package::Package;
use baton_package::schema::{self, SchemaKind};
use serde_json::{Map, Value};
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

pub use crate::run_error::RunError;
pub use crate::run_meta::{Phase, RunKind, RunMetadata};

/// A run's own metadata file, in its directory.
pub(crate) const RUN_JSON: &str = "run.json";

/// Runs of one project, newest first, and what the reading had to repair.
#[derive(Debug, Clone, Default)]
pub struct RunListing {
    pub runs: Vec<RunMetadata>,
    /// A limit left older runs out.
    pub more: bool,
    pub warnings: Vec<StoreWarning>,
}

/// What a change of a run's metadata must survive.
#[derive(Debug, Clone, Copy)]
pub enum Durability<'a> {
    /// A power cut: `run.json` and the index record are fsynced before the call returns, and
    /// so are these files (fsynced with `run.json`'s temp file, before its rename): the
    /// records a reader must find once the metadata says the change happened.
    PowerCut(&'a [&'a Path]),
    /// Only a killed process: written with a rename and an `O_APPEND` line, not fsynced. For a
    /// change a power cut may undo because nothing relies on it (a run set `running` is driven
    /// by nobody after a power cut, which `idle` says as well).
    Kill,
    /// [`Durability::Kill`] now, and durable at the group's next flush (with the rest of a
    /// model turn): a change made in the middle of a turn, such as the current node.
    Group(&'a Group),
    /// [`Durability::PowerCut`] whose one flush also makes the group's pending writes durable:
    /// the end of an invocation, whose records must all be on disk once it says it ended.
    PowerCutWith(&'a [&'a Path], &'a Group),
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

impl Project {
    pub fn id(&self) -> &str {
        &self.record.project_id
    }

    pub fn root(&self) -> &Path {
        &self.record.root
    }

    /// The folder runs created through this handle mount as `@project`: the work tree it was
    /// opened in ([`crate::Store::project_in_work_tree`]), else the project's root.
    pub fn mount(&self) -> &Path {
        self.work_tree.as_deref().unwrap_or(&self.record.root)
    }

    /// The folder `run` mounts as `@project`: its work tree (a git worktree of the project),
    /// else the project's root.
    pub fn mount_of<'a>(&'a self, run: &'a RunMetadata) -> &'a Path {
        run.work_tree.as_deref().unwrap_or(&self.record.root)
    }

    pub(crate) fn index(&self) -> RunsIndex {
        RunsIndex::new(&self.dir)
    }

    pub(crate) fn runs_dir(&self) -> PathBuf {
        self.dir.join("runs")
    }

    pub(crate) fn staging_dir(&self) -> PathBuf {
        self.dir.join("staging")
    }

    pub fn run_paths(&self, run_id: &str) -> RunPaths {
        RunPaths::new(self.runs_dir().join(run_id))
    }

    pub fn state_file(&self, run_id: &str) -> StateFile {
        let paths = self.run_paths(run_id);
        StateFile::new(paths.state_file, paths.lock)
    }

    /// Runs of this project, newest first.
    pub fn list_runs(&self) -> Result<Vec<RunMetadata>, RunError> {
        Ok(self.runs(None)?.runs)
    }

    /// The newest `limit` runs (all with `None`), newest first. A damaged or missing index is
    /// rebuilt from the run directories, and a warning says so.
    pub fn runs(&self, limit: Option<usize>) -> Result<RunListing, RunError> {
        let index = self.index();
        let read = {
            let _shared = index.lock(false)?;
            index.read(limit)
        };
        match read.and_then(|raw| raw.parse(limit)) {
            Ok(loaded) => return Ok(listing(loaded, Vec::new())),
            Err(LoadError::Io(e)) => return Err(e.into()),
            Err(LoadError::Problem(Problem::Missing)) if !self.has_run_dirs()? => {
                return Ok(RunListing::default());
            }
            Err(LoadError::Problem(_)) => {}
        }
        let _exclusive = index.lock(true)?;
        let (loaded, warnings) = self.load_repairing(&index, limit)?;
        Ok(listing(loaded, warnings))
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

    /// Changes a run's metadata: `run.json`, then the index, both durably. Identity fields
    /// (`runId`, `projectId`, `createdAt`) cannot change; long texts in `waitingFor` are cut. A
    /// change of nothing but `lastUpdatedAt` writes nothing.
    pub fn update_run(
        &self,
        run_id: &str,
        f: impl FnOnce(&mut RunMetadata),
    ) -> Result<RunMetadata, RunError> {
        self.update_run_with(run_id, Durability::PowerCut(&[]), f)
    }

    /// [`Project::update_run`] written as `durability` says.
    pub fn update_run_with(
        &self,
        run_id: &str,
        durability: Durability<'_>,
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
            // Nothing to write, but the caller's records must still be durable on return.
            match durability {
                Durability::PowerCut(also) if !also.is_empty() => sync_all(also)?,
                Durability::PowerCutWith(also, group) => {
                    for p in also {
                        group.add_path(p);
                    }
                    group.flush()?;
                }
                _ => {}
            }
            return Ok(current);
        }
        next.last_updated_at = now_rfc3339();
        let file = paths.metadata_file();
        match durability {
            Durability::PowerCut(also) => {
                atomic_write_with(&file, &encode(&next, &file)?, also)?;
                self.record_change(&index, &next)?;
            }
            Durability::Kill => {
                replace(&file, &encode(&next, &file)?)?;
                self.record_change_with(&index, &next, false)?;
            }
            Durability::Group(group) => {
                replace(&file, &encode(&next, &file)?)?;
                self.record_change_with(&index, &next, false)?;
                group.add_path(&file);
                group.add_path(&paths.dir);
                group.add_path(&index.journal_path());
            }
            Durability::PowerCutWith(also, group) => {
                atomic_write_with_group(&file, &encode(&next, &file)?, also, group)?;
                self.record_change(&index, &next)?;
            }
        }
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
            kind: RunKind::Workflow,
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
            model: None,
            context: crate::ContextPolicy::Node,
            stop_reason: None,
            usage: None,
            work_tree: self.work_tree.clone(),
        };

        let artifacts = self.mount().join("artifacts");
        fs::create_dir_all(&artifacts).map_err(StoreError::io("create", &artifacts))?;
        self.place_new_run(&meta, Some(&state_text), None)?;
        Ok(meta)
    }

    /// Builds a new run's directory in `staging/`, renames it into `runs/` and records it in
    /// the index; on failure nothing of it is left. `state_text: None` writes no state file
    /// (a task run has no workflow state).
    /// `first_log`: the conversation log the run starts with (a task run's prompt), so the run
    /// never exists without it.
    pub(crate) fn place_new_run(
        &self,
        meta: &RunMetadata,
        state_text: Option<&str>,
        first_log: Option<&[u8]>,
    ) -> Result<(), RunError> {
        let run_id = &meta.run_id;
        let staging_root = self.staging_dir();
        fs::create_dir_all(&staging_root).map_err(StoreError::io("create", &staging_root))?;
        let staging = temp_sibling(&staging_root.join(run_id));
        if let Err(e) = write_run_dir(&staging, state_text, first_log, meta) {
            let _ = fs::remove_dir_all(&staging);
            return Err(e);
        }
        // Says "this run may be in runs/ but not yet in the index" until the index has it.
        let marker = staging_root.join(format!("{run_id}.pending"));
        let _ = File::create(&marker);
        let final_dir = self.runs_dir().join(run_id);
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
            .and_then(|_exclusive| self.record_change(&index, meta));
        if let Err(e) = indexed {
            let _ = fs::remove_dir_all(&final_dir);
            let _ = fs::remove_file(&marker);
            return Err(e);
        }
        let _ = fs::remove_file(&marker);
        Ok(())
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
fn write_run_dir(
    dir: &Path,
    state_text: Option<&str>,
    first_log: Option<&[u8]>,
    meta: &RunMetadata,
) -> Result<(), RunError> {
    let paths = RunPaths::new(dir.to_path_buf());
    let logs = paths
        .execution_log
        .parent()
        .unwrap_or(&paths.state_dir)
        .to_path_buf();
    fs::create_dir_all(&logs).map_err(StoreError::io("create", &logs))?;
    if let Some(text) = state_text {
        File::create(&paths.state_file)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .map_err(StoreError::io("write", &paths.state_file))?;
    }
    File::create(&paths.execution_log).map_err(StoreError::io("create", &paths.execution_log))?;
    if let Some(bytes) = first_log {
        fs::write(&paths.conversation_log, bytes)
            .map_err(StoreError::io("write", &paths.conversation_log))?;
    }
    let run_json = paths.metadata_file();
    fs::write(&run_json, encode(meta, &run_json)?).map_err(StoreError::io("write", &run_json))?;
    let mut durable: Vec<&Path> = vec![&run_json, &logs, &paths.state_dir, &paths.dir];
    if state_text.is_some() {
        durable.push(&paths.state_file);
    }
    if first_log.is_some() {
        durable.push(&paths.conversation_log);
    }
    sync_all(&durable)?;
    Ok(())
}
