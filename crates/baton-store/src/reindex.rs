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

use crate::home::StoreError;
use crate::packages::{InstalledPackage, PackageStore};
use crate::run_meta::{
    Phase, RunJsonError, RunMetadata, is_run_id, read_run_json, state_facts, uuid_v7_time,
    write_recovered_run_json,
};
use crate::runs::{RUN_JSON, RunPaths};
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
        })
    }
}
