//! Checkpoints of a leased run and the way back from them.
//!
//! At every durable point of a run (the engine's flush after a model turn, the end of an
//! invocation) the worktree's changes are committed and pushed to the run's epoch ref, then the
//! run's changed files are written in ONE fenced transaction: whole files, and the new lines of
//! the append-only logs. A unit claimed again folds those writes back, oldest first.
//!
//! A file's content travels as a JSON string when it is UTF-8, else as `{"base64": …}`, so a
//! binary file a run keeps under its state comes back byte for byte.

use crate::WorkerError;
use crate::git::hex;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use baton_engine::runner;
use baton_engine::{DurableFuture, DurablePoint, DurableStop, OnDurable};
use baton_queue::{Lease, Queue};
use baton_store::Store;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Mutex;

/// The worker stopped the run at a checkpoint to hand the unit back.
pub const WORKER_STOPPING: &str = "WORKER_STOPPING";

/// A checkpoint's records could not be folded back.
pub const QUEUE_CHECKPOINT_INVALID: &str = "QUEUE_CHECKPOINT_INVALID";

/// A file's bytes as a checkpoint carries them.
pub fn encode(bytes: &[u8]) -> Value {
    match std::str::from_utf8(bytes) {
        Ok(text) => Value::String(text.to_string()),
        Err(_) => json!({ "base64": BASE64.encode(bytes) }),
    }
}

/// The bytes [`encode`] made, or why they cannot be read back.
pub fn decode(value: &Value) -> Result<Vec<u8>, String> {
    match value {
        Value::String(text) => Ok(text.as_bytes().to_vec()),
        Value::Object(o) => match o.get("base64").and_then(Value::as_str) {
            Some(b) if o.len() == 1 => BASE64.decode(b).map_err(|e| format!("base64: {e}")),
            _ => Err("neither text nor {\"base64\": …}".into()),
        },
        _ => Err("neither text nor {\"base64\": …}".into()),
    }
}

/// Records checkpoints of one run under its lease.
pub(crate) struct Checkpoints<'a> {
    /// The worker's home (its terminal settings confine git on the worktree).
    pub home: &'a Path,
    pub queue: Mutex<Queue>,
    pub lease: &'a Lease,
    pub store: &'a Store,
    pub project: &'a Path,
    pub tree: &'a Path,
    pub lost: &'a AtomicBool,
    /// The worker is stopping: the run stops at its next turn's durable point.
    pub stop: &'a tokio_util::sync::CancellationToken,
    /// What each run file held at the last checkpoint: (length, sha256).
    pub seen: std::sync::Mutex<BTreeMap<String, (usize, String)>>,
    /// The refs of the unit's earlier attempts were removed from the remote (done once, after
    /// this attempt's first checkpoint, which supersedes them).
    pub pruned: AtomicBool,
}

impl Checkpoints<'_> {
    pub fn run_ref(&self) -> String {
        format!("refs/baton/runs/{}/{}", self.lease.id, self.lease.epoch)
    }

    /// Commits the worktree's changes (if any) and pushes HEAD to the run's epoch ref.
    pub fn commit_and_push(&self, message: &str) -> Result<String, WorkerError> {
        crate::git::commit_and_push(
            self.home,
            self.tree,
            message,
            &self.lease.project_remote,
            &self.run_ref(),
        )
    }

    /// The run's files that changed since the last checkpoint: whole files, and the new lines
    /// of the append-only logs.
    fn changed_files(&self, run_id: &str) -> Result<Value, WorkerError> {
        let project = self
            .store
            .project(self.project)
            .map_err(|e| WorkerError::other("WORKER_IO", e.to_string()))?;
        let dir = project.run_paths(run_id).dir;
        let mut seen = self
            .seen
            .lock()
            .map_err(|_| WorkerError::other("WORKER_IO", "checkpoint state poisoned"))?;
        let mut files = Map::new();
        let mut appends = Map::new();
        for rel in files_under(&dir) {
            if rel == "run.lock" {
                continue;
            }
            let bytes = std::fs::read(dir.join(&rel))
                .map_err(|e| WorkerError::other("WORKER_IO", format!("{rel}: {e}")))?;
            let sha = hex(&Sha256::digest(&bytes));
            let before = seen.get(&rel).cloned();
            if before.as_ref().is_some_and(|(_, s)| *s == sha) {
                continue;
            }
            let log = rel.starts_with("state/logs/") && rel.ends_with(".jsonl");
            let appended = match before {
                Some((len, _)) if log && bytes.len() >= len => std::str::from_utf8(&bytes[len..])
                    .ok()
                    .map(|text| json!({"from": len, "text": text})),
                _ => None,
            };
            match appended {
                Some(a) => {
                    appends.insert(rel.clone(), a);
                }
                None => {
                    files.insert(rel.clone(), encode(&bytes));
                }
            }
            seen.insert(rel, (bytes.len(), sha));
        }
        Ok(json!({"runId": run_id, "files": files, "appends": appends}))
    }

    async fn checkpoint(&self, run_id: &str, at: DurablePoint) -> Result<(), WorkerError> {
        let point = match at {
            DurablePoint::Turn => "turn".to_string(),
            DurablePoint::Phase(p) => format!(
                "phase:{}",
                serde_json::to_value(p)
                    .unwrap_or_default()
                    .as_str()
                    .unwrap_or("?")
            ),
        };
        let commit =
            self.commit_and_push(&format!("baton checkpoint: unit {} {point}", self.lease.id))?;
        let mut body = self.changed_files(run_id)?;
        body["point"] = json!(point);
        body["commit"] = json!(commit);
        body["ref"] = json!(self.run_ref());
        let mut queue = self.queue.lock().await;
        let fenced = queue.fenced(self.lease).await?;
        fenced.append("checkpoint", &body).await?;
        fenced.commit().await?;
        if !self.pruned.swap(true, Ordering::SeqCst) {
            // Housekeeping: a ref that cannot be removed now stays, as before; the run goes on.
            let _ = crate::git::prune_refs(
                self.tree,
                &self.lease.project_remote,
                &format!("refs/baton/runs/{}/*", self.lease.id),
                &self.run_ref(),
            );
        }
        Ok(())
    }
}

fn files_under(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
            } else if let Ok(rel) = path.strip_prefix(root) {
                let rel: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                out.push(rel.join("/"));
            }
        }
    }
    out.sort();
    out
}

impl OnDurable for Checkpoints<'_> {
    fn durable<'a>(&'a self, run_id: &'a str, at: DurablePoint) -> DurableFuture<'a> {
        Box::pin(async move {
            if self.lost.load(Ordering::SeqCst) {
                return Err(DurableStop {
                    code: crate::error::LEASE_LOST,
                    message: format!("the lease of unit {} was lost", self.lease.id),
                });
            }
            self.checkpoint(run_id, at).await.map_err(|e| {
                if e.is_lease_lost() {
                    self.lost.store(true, Ordering::SeqCst);
                }
                DurableStop {
                    code: e.code(),
                    message: e.to_string(),
                }
            })?;
            if at == DurablePoint::Turn && self.stop.is_cancelled() {
                return Err(DurableStop {
                    code: WORKER_STOPPING,
                    message: format!(
                        "the worker is stopping: unit {} is handed back at this checkpoint",
                        self.lease.id
                    ),
                });
            }
            Ok(())
        })
    }
}

/// Where earlier workers' checkpoints left a run: its files and the worktree's commit.
#[derive(Debug, Clone)]
pub struct Restored {
    pub run_id: String,
    pub commit: String,
    /// The run's files, by path relative to the run's folder.
    pub files: BTreeMap<String, Vec<u8>>,
}

impl Restored {
    /// The phase `run.json` records.
    pub fn phase(&self) -> Option<String> {
        let meta: Value = serde_json::from_slice(self.files.get("run.json")?).ok()?;
        meta.get("phase").and_then(Value::as_str).map(str::to_owned)
    }

    /// (length, sha256) of each file, as the next checkpoint compares them.
    pub(crate) fn seen(&self) -> BTreeMap<String, (usize, String)> {
        self.files
            .iter()
            .map(|(rel, bytes)| (rel.clone(), (bytes.len(), hex(&Sha256::digest(bytes)))))
            .collect()
    }
}

/// Folds every checkpoint of the unit, oldest first (fencing orders them: an older epoch
/// cannot write after a newer one claimed): whole files replace, log lines append at the
/// length they were taken from. `None` when nothing was checkpointed.
pub async fn restore_point(queue: &Queue, unit: i64) -> Result<Option<Restored>, WorkerError> {
    let corrupt = |m: String| WorkerError::other(QUEUE_CHECKPOINT_INVALID, m);
    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut last: Option<(String, String)> = None;
    let mut after = 0;
    loop {
        let page = queue.writes(unit, after, 200).await?;
        let Some(end) = page.last().map(|w| w.seq) else {
            break;
        };
        after = end;
        for w in page.iter().filter(|w| w.kind == "checkpoint") {
            let body = &w.body;
            if let Some(whole) = body.get("files").and_then(Value::as_object) {
                for (rel, content) in whole {
                    let bytes = decode(content)
                        .map_err(|e| corrupt(format!("checkpoint {}: file {rel}: {e}", w.seq)))?;
                    files.insert(rel.clone(), bytes);
                }
            }
            if let Some(appends) = body.get("appends").and_then(Value::as_object) {
                for (rel, a) in appends {
                    let from = a.get("from").and_then(Value::as_u64).unwrap_or(0) as usize;
                    let text = a.get("text").and_then(Value::as_str).unwrap_or("");
                    let entry = files.entry(rel.clone()).or_default();
                    if entry.len() < from {
                        return Err(corrupt(format!(
                            "checkpoint {} appends to {rel} at {from}, past its {} bytes",
                            w.seq,
                            entry.len()
                        )));
                    }
                    entry.truncate(from);
                    entry.extend_from_slice(text.as_bytes());
                }
            }
            let run_id = body.get("runId").and_then(Value::as_str);
            let commit = body.get("commit").and_then(Value::as_str);
            match (run_id, commit) {
                (Some(r), Some(c)) => last = Some((r.to_string(), c.to_string())),
                _ => {
                    return Err(corrupt(format!(
                        "checkpoint {} has no run or commit",
                        w.seq
                    )));
                }
            }
        }
    }
    Ok(last.map(|(run_id, commit)| Restored {
        run_id,
        commit,
        files,
    }))
}

/// Puts a checkpointed run into a scratch store: the package installed, the run's files
/// written back (its project id made this store's).
pub(crate) fn restore_run(
    store: &Store,
    package_path: &Path,
    project_root: &Path,
    restored: &Restored,
) -> Result<(), runner::RunnerError> {
    let io = |e: String| runner::RunnerError::Io(e);
    let package = baton_package::Package::load(package_path)
        .map_err(|e| io(format!("the pinned package: {e}")))?;
    store
        .packages()
        .install(&package, &package_path.display().to_string())
        .map_err(|e| io(e.to_string()))?;
    restore_files(store, project_root, restored)
}

/// Writes a checkpointed run's files into `store` under the project at `project_root` (its
/// project id made this store's). A path that would leave the run's folder is refused.
pub(crate) fn restore_files(
    store: &Store,
    project_root: &Path,
    restored: &Restored,
) -> Result<(), runner::RunnerError> {
    let io = |e: String| runner::RunnerError::Io(e);
    let project = store.project(project_root)?;
    let dir = project.run_paths(&restored.run_id).dir;
    for (rel, bytes) in &restored.files {
        if rel.split('/').any(|part| part == ".." || part.is_empty()) {
            return Err(io(format!("a checkpointed file has an unsafe path: {rel}")));
        }
        let mut bytes = bytes.clone();
        if rel == "run.json" {
            let mut meta: Value =
                serde_json::from_slice(&bytes).map_err(|e| io(format!("run.json: {e}")))?;
            meta["projectId"] = json!(project.record.project_id);
            bytes = serde_json::to_vec_pretty(&meta).map_err(|e| io(e.to_string()))?;
        }
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io(e.to_string()))?;
        }
        baton_store::durable::atomic_write(&path, &bytes).map_err(|e| io(e.to_string()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn binary_files_travel_byte_for_byte_and_text_stays_readable() {
        let binary = [0u8, 159, 146, 150, 255, b'\n'];
        let v = encode(&binary);
        assert!(v.get("base64").is_some(), "{v}");
        assert_eq!(decode(&v).unwrap(), binary);
        let text = "état: ok\n".as_bytes();
        assert_eq!(encode(text), Value::String("état: ok\n".into()));
        assert_eq!(decode(&encode(text)).unwrap(), text);
        assert!(decode(&json!(3)).is_err());
        assert!(decode(&json!({"base64": "%%%"})).is_err());
        assert!(decode(&json!({"base64": "AA==", "more": 1})).is_err());
    }
}
