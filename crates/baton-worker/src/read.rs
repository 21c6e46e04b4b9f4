//! Reading a queued run from the database: the unit, and the run as its checkpoints left it,
//! put back into a scratch store of its own so that `baton runs show|log --db` read it with the
//! same code as a local run.
//!
//! The scratch store lives in a temporary folder removed when the [`UnitRun`] is dropped. Its
//! paths are this machine's and mean nothing to a reader: callers show the unit's project (its
//! remote, base commit and folder) instead.

use crate::WorkerError;
use crate::checkpoint::{Restored, restore_files, restore_point};
use crate::payload::RunPayload;
use baton_engine::inspect::{self, RunView};
use baton_queue::{DbConfig, Queue, Unit};
use baton_store::Store;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// A unit and, once a worker checkpointed it, its run.
#[derive(Debug)]
pub struct UnitRun {
    pub unit: Unit,
    /// `None`: no worker has checkpointed the unit yet (queued and never started, or stopped
    /// before its first durable point).
    pub run: Option<ScratchRun>,
}

/// A checkpointed run put back into a scratch store.
#[derive(Debug)]
pub struct ScratchRun {
    pub run_id: String,
    /// The worktree's commit at the last checkpoint (on the unit's epoch ref).
    pub commit: String,
    /// The scratch store holding the run (its package installed when the database has it).
    pub store: Store,
    /// Why the package could not be installed, when it could not (the view then says the
    /// package is missing, as for a local run whose package is gone).
    pub package_note: Option<String>,
    /// The project's id as shown: derived from the unit's remote and folder (see
    /// [`unit_project_id`]), not from the scratch folder, so it is the same on every read.
    pub project_id: String,
    _dir: tempfile::TempDir,
}

/// A queued project's id: the first 16 hex digits of sha256 of its remote and its folder in
/// the repository, the same for every unit of that project and on every read.
pub fn unit_project_id(remote: &str, subdir: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("{remote}\n{subdir}").as_bytes());
    crate::git::hex(&digest)[..16].to_string()
}

impl ScratchRun {
    /// What `baton runs show` reports of the run.
    pub fn view(&self) -> Result<RunView, WorkerError> {
        let (project, run) = self
            .store
            .find_run(&self.run_id)
            .map_err(|e| WorkerError::other(e.code(), e.to_string()))?;
        let mut view = inspect::view(&self.store, project, run);
        view.run.project_id.clone_from(&self.project_id);
        Ok(view)
    }

    /// The run's audit log (`state/logs/execution.jsonl` of its folder) in the scratch store.
    pub fn execution_log(&self) -> Result<PathBuf, WorkerError> {
        let (project, run) = self
            .store
            .find_run(&self.run_id)
            .map_err(|e| WorkerError::other(e.code(), e.to_string()))?;
        Ok(project.run_paths(&run.run_id).execution_log)
    }
}

impl UnitRun {
    /// Where the unit's project comes from: its remote, base commit and folder in the
    /// repository, as submitted.
    pub fn project_text(&self) -> String {
        let u = &self.unit;
        let subdir = RunPayload::from_value(&u.payload)
            .map(|p| p.project_subdir)
            .unwrap_or_default();
        let mut text = format!(
            "{} at {}",
            redact_remote(&u.project_remote),
            short(&u.base_commit)
        );
        if !subdir.is_empty() {
            text.push_str(&format!(" (folder {subdir})"));
        }
        text
    }

    /// The result branch of a completed unit, and its commit.
    pub fn result(&self) -> Option<(&str, &str)> {
        let o = self.unit.outcome.as_ref()?;
        Some((
            o.get("branch").and_then(Value::as_str)?,
            o.get("commit").and_then(Value::as_str).unwrap_or(""),
        ))
    }

    /// `baton runs show <UNIT> --db … --json`: `{unit, checkpoint, run}`; `run` is what
    /// `baton runs show --json` prints of a local run without its scratch `projectRoot`, or
    /// `null` before the first checkpoint.
    pub fn to_json(&self) -> Result<Value, WorkerError> {
        let (run, checkpoint) = match &self.run {
            None => (Value::Null, Value::Null),
            Some(r) => {
                let mut v = r.view()?.to_json();
                if let Some(o) = v.as_object_mut() {
                    o.remove("projectRoot");
                }
                (v, json!({"runId": r.run_id, "commit": r.commit}))
            }
        };
        let mut unit = json!(self.unit);
        unit["projectRemote"] = json!(redact_remote(&self.unit.project_remote));
        Ok(json!({"unit": unit, "checkpoint": checkpoint, "run": run}))
    }
}

/// A remote URL without the password it may carry (`https://user:TOKEN@host/…` →
/// `https://user@host/…`); other remotes as they are.
pub fn redact_remote(remote: &str) -> String {
    let Some((scheme, rest)) = remote.split_once("://") else {
        return remote.to_string();
    };
    let end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) if userinfo.contains(':') => {
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{scheme}://{user}@{host}{path}")
        }
        _ => remote.to_string(),
    }
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

/// Reads a unit and folds its checkpoints into a scratch store (`QUEUE_UNIT_NOT_FOUND` for an
/// unknown id; `QUEUE_CHECKPOINT_INVALID` when its checkpoints cannot be folded).
pub async fn read_unit_run(config: &DbConfig, unit: i64) -> Result<UnitRun, WorkerError> {
    let queue = Queue::open(config).await?;
    let found = queue.unit(unit).await?;
    let Some(restored) = restore_point(&queue, unit).await? else {
        return Ok(UnitRun {
            unit: found,
            run: None,
        });
    };
    let package = match found.package_sha256.as_deref() {
        Some(sha) => queue.package(sha).await?,
        None => None,
    };
    let subdir = RunPayload::from_value(&found.payload)
        .map(|p| p.project_subdir)
        .unwrap_or_default();
    let project_id = unit_project_id(&found.project_remote, &subdir);
    let run = scratch(
        &restored,
        package.as_ref().map(|p| p.bytes.as_slice()),
        project_id,
    )?;
    Ok(UnitRun {
        unit: found,
        run: Some(run),
    })
}

/// The run's files written into a new scratch store, the package installed when given.
fn scratch(
    restored: &Restored,
    package: Option<&[u8]>,
    project_id: String,
) -> Result<ScratchRun, WorkerError> {
    let io = |e: String| WorkerError::other("WORKER_IO", e);
    let dir = tempfile::Builder::new()
        .prefix("baton-unit-")
        .tempdir()
        .map_err(|e| io(format!("a scratch folder: {e}")))?;
    let home = dir.path().join("home");
    let project = dir.path().join("project");
    for d in [&home, &project] {
        std::fs::create_dir_all(d).map_err(|e| io(e.to_string()))?;
    }
    let store = Store::new(&home);
    let package_note = match package {
        None => Some("the unit's package is not in the database".to_string()),
        Some(bytes) => install(&store, dir.path(), bytes).err(),
    };
    restore_files(&store, &project, restored)
        .map_err(|e| WorkerError::other(e.code(), e.to_string()))?;
    Ok(ScratchRun {
        run_id: restored.run_id.clone(),
        commit: restored.commit.clone(),
        store,
        package_note,
        project_id,
        _dir: dir,
    })
}

fn install(store: &Store, dir: &Path, bytes: &[u8]) -> Result<(), String> {
    let path = dir.join("package.bmad");
    std::fs::write(&path, bytes).map_err(|e| e.to_string())?;
    let package = baton_package::Package::load(&path).map_err(|e| e.to_string())?;
    store
        .packages()
        .install(&package, "the queue's database")
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::redact_remote;

    #[test]
    fn a_queued_projects_id_depends_on_its_remote_and_folder_only() {
        let a = super::unit_project_id("/srv/git/app.git", "");
        assert_eq!(a, super::unit_project_id("/srv/git/app.git", ""));
        assert_eq!(a.len(), 16);
        assert_ne!(a, super::unit_project_id("/srv/git/app.git", "web"));
        assert_ne!(a, super::unit_project_id("/srv/git/other.git", ""));
    }

    #[test]
    fn a_remotes_password_is_never_shown() {
        assert_eq!(
            redact_remote("https://ci:s3cret@git.example/team/app.git"),
            "https://ci@git.example/team/app.git"
        );
        assert_eq!(
            redact_remote("git@git.example:team/app.git"),
            "git@git.example:team/app.git"
        );
        assert_eq!(redact_remote("/srv/git/app.git"), "/srv/git/app.git");
        assert_eq!(
            redact_remote("ssh://git@git.example/app.git"),
            "ssh://git@git.example/app.git"
        );
    }
}
