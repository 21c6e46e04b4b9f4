//! Finding a project's runs from their directories, for rebuilding the index.
//!
//! Each run directory names its run (`runs/<runId>/`) and holds its metadata in `run.json`.
//! Directories made before `run.json` existed get theirs back from the old index entry when one
//! can still be read, else from their state frontmatter (`runId`, `workflowRef`,
//! `activeAgentId`, `currentNodeId`, `updatedAt`) and what the store knows:
//!
//! - `createdAt`: the time in the UUID v7 run id (to the second, as written);
//! - `phase`: `completed` when `variables.workflowStatus` is `complete`, else `idle` (no process
//!   drives it; `baton resume` continues it). A run that was waiting for an answer or had failed
//!   shows as `idle`, and its `waitingFor` (the question, or the error) is not recovered: both
//!   are in its `execution.jsonl` (`engine.waiting`, `engine.failed`);
//! - `packageId`/`packageSha256`: the one installed package that has the run's workflow; with
//!   none or several, `unknown` and an empty digest (the run then cannot be resumed until the
//!   index entry is restored, rather than risk resuming it against the wrong package).
//!
//! The metadata recovered this way is written to the run's `run.json`.
//!
//! Also here: keeping a project's index whole (rebuild when damaged or missing, fold the
//! journal, record a change), since all of it comes back to scanning the run directories.

use crate::home::StoreError;
use crate::packages::{InstalledPackage, PackageStore};
use crate::projects::Project;
use crate::run_error::RunError;
use crate::run_meta::{
    Phase, RunJsonError, RunKind, RunMetadata, is_run_id, read_run_json, state_facts, uuid_v7_time,
    write_recovered_run_json,
};
use crate::runs::{RUN_JSON, RunPaths};
use crate::runs_index::{COMPACT_AT, LoadError, Loaded, Problem, RunsIndex, StoreWarning};
use crate::time::now_secs;
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

/// What a rebuild found, per source.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReindexReport {
    /// Runs in the rebuilt index.
    pub runs: usize,
    /// Of those, read from their `run.json`.
    pub from_run_json: usize,
    /// Recovered from the previous index (run directories without a readable `run.json`).
    pub from_old_index: usize,
    /// Recovered from the state frontmatter (no `run.json`, no old index entry).
    pub from_state: usize,
    /// Entries of `runs/` that are not runs, and why; nothing is deleted.
    pub skipped: Vec<String>,
    /// Damaged index files moved aside.
    pub kept_damaged: Vec<PathBuf>,
}

pub(crate) struct Scan {
    pub runs: Vec<RunMetadata>,
    pub report: ReindexReport,
    /// Runs found in `runs/` that `known` did not have.
    pub added: usize,
}

pub(crate) struct Scanner<'a> {
    pub runs_dir: &'a Path,
    pub project_id: &'a str,
    /// `$BATON_HOME`, for the installed packages.
    pub home: Option<&'a Path>,
}

impl Scanner<'_> {
    /// Every run directory of `runs/`, with its metadata: from `known` (the index) when
    /// `trust_known`, else from `run.json` first. Nothing is deleted.
    pub fn scan(
        &self,
        known: &HashMap<String, RunMetadata>,
        trust_known: bool,
    ) -> Result<Scan, StoreError> {
        let mut scan = Scan {
            runs: Vec::new(),
            report: ReindexReport::default(),
            added: 0,
        };
        let entries = match fs::read_dir(self.runs_dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(scan),
            Err(e) => return Err(StoreError::io("list", self.runs_dir)(e)),
        };
        let mut packages: Option<Vec<InstalledPackage>> = None;
        for entry in entries {
            let entry = entry.map_err(StoreError::io("list", self.runs_dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue; // staging leftovers of an earlier baton
            }
            if !is_run_id(&name) {
                scan.report
                    .skipped
                    .push(format!("runs/{name}: not a run id"));
                continue;
            }
            if !known.contains_key(&name) {
                scan.added += 1;
            }
            if trust_known && let Some(run) = known.get(&name) {
                scan.runs.push(run.clone());
                continue;
            }
            let paths = RunPaths::new(entry.path());
            let run_json = paths.dir.join(RUN_JSON);
            let mut note = None;
            match read_run_json(&run_json) {
                Ok(Some(run)) if run.run_id == name => {
                    scan.report.from_run_json += 1;
                    scan.runs.push(run);
                    continue;
                }
                Ok(Some(run)) => note = Some(format!("its run.json names run {}", run.run_id)),
                Ok(None) => {}
                Err(RunJsonError::Damaged(e)) => {
                    note = Some(format!("its run.json is damaged: {e}"))
                }
                Err(RunJsonError::Io(e)) => return Err(e),
            }
            let recovered = if let Some(run) = known.get(&name) {
                scan.report.from_old_index += 1;
                run.clone()
            } else {
                match self.recover_from_state(&name, &paths.state_file, &mut packages) {
                    Ok(run) => {
                        scan.report.from_state += 1;
                        run
                    }
                    Err(why) => {
                        let note = note.map(|n| format!("{n}; ")).unwrap_or_default();
                        scan.report
                            .skipped
                            .push(format!("runs/{name}: {note}no readable state ({why})"));
                        continue;
                    }
                }
            };
            // Best effort: the index being written keeps the same record durably.
            let _ = write_recovered_run_json(&run_json, &recovered);
            scan.runs.push(recovered);
        }
        scan.report.runs = scan.runs.len();
        Ok(scan)
    }

    fn recover_from_state(
        &self,
        run_id: &str,
        state_file: &Path,
        packages: &mut Option<Vec<InstalledPackage>>,
    ) -> Result<RunMetadata, String> {
        let facts = state_facts(state_file)?;
        if facts.run_id != run_id {
            return Err(format!("the state names run {}", facts.run_id));
        }
        let installed = packages.get_or_insert_with(|| {
            self.home
                .and_then(|h| PackageStore::new(h).list().ok())
                .unwrap_or_default()
        });
        let mut candidates = installed
            .iter()
            .filter(|p| p.workflows.contains(&facts.workflow_ref));
        let (package_id, package_sha256) = match (candidates.next(), candidates.next()) {
            (Some(only), None) => (only.id.clone(), only.sha256.clone()),
            _ => ("unknown".to_string(), String::new()),
        };
        let created_at = uuid_v7_time(run_id)
            .or_else(|| facts.updated_at.clone())
            .unwrap_or_default();
        Ok(RunMetadata {
            run_id: facts.run_id,
            // Recovered from a workflow state file: task runs always carry their run.json.
            kind: RunKind::Workflow,
            project_id: self.project_id.to_string(),
            package_id,
            package_sha256,
            workflow_ref: facts.workflow_ref,
            active_agent_id: facts.active_agent_id,
            phase: if facts.complete {
                Phase::Completed
            } else {
                Phase::Idle
            },
            last_updated_at: facts.updated_at.unwrap_or_else(|| created_at.clone()),
            created_at,
            current_node_id: facts.current_node_id,
            waiting_for: None,
            model: None,
            context: crate::ContextPolicy::Node,
            stop_reason: None,
            usage: None,
            work_tree: None,
        })
    }
}

impl Project {
    pub(crate) fn scanner(&self) -> (PathBuf, Option<PathBuf>) {
        // `$BATON_HOME/projects/<id>` → `$BATON_HOME`, for the installed packages.
        let home = self
            .dir
            .parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf);
        (self.runs_dir(), home)
    }

    pub(crate) fn scan(
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
    pub(crate) fn has_run_dirs(&self) -> Result<bool, StoreError> {
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

    /// Loads the index, rebuilding it first if needed. Call under the exclusive lock.
    pub(crate) fn load_repairing(
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
    pub(crate) fn rebuild(
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

    /// Records a change of a run in the index, durably. Call under the exclusive lock.
    pub(crate) fn record_change(
        &self,
        index: &RunsIndex,
        run: &RunMetadata,
    ) -> Result<(), RunError> {
        self.record_change_with(index, run, true)
    }

    /// [`Self::record_change`]; `durable: false` for a change that needs only survive a kill.
    pub(crate) fn record_change_with(
        &self,
        index: &RunsIndex,
        run: &RunMetadata,
        durable: bool,
    ) -> Result<(), RunError> {
        if !index.journal_exists() {
            // An index from an earlier baton, or none yet: rebuilt first so it starts complete.
            let problem = if index.snapshot_path().exists() {
                Problem::NoJournal
            } else {
                Problem::Missing
            };
            self.rebuild(index, problem)?;
        }
        if index.append(run, durable)? > COMPACT_AT {
            // The change is durable in the journal already; a failed fold is retried at the
            // next change, so it must not fail this one (a creation would undo its run).
            let _ = self.compact(index);
        }
        Ok(())
    }

    /// Folds the journal into `runsIndex.json`, adding run directories the index missed and
    /// dropping entries whose directory is gone. Returns the number added. Call under the
    /// exclusive lock.
    pub(crate) fn compact(&self, index: &RunsIndex) -> Result<usize, RunError> {
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
}
