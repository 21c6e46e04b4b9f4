//! Checkpoints of a leased run and the way back from them.
//!
//! At every durable point of a run (the engine's flush after a model turn, the end of an
//! invocation) the worktree's changes are committed (in this process, see `tree_commit`), then
//! the run's changed files are written in ONE fenced transaction: whole files, the new lines of
//! the append-only logs, and the worktree's files that differ from the last commit the remote
//! holds (`tree`: that commit, `base`, and the changed files). The commit is pushed to the
//! run's epoch ref in the background; the record never names a base the remote does not hold,
//! so a takeover finds every file the run's history says it wrote: on the remote, or carried
//! by the record itself. Where the changes are too large to carry, the checkpoint waits for
//! the push and carries none. A unit claimed again folds those writes back, oldest first.
//!
//! A file's content travels as a JSON string when it is UTF-8, else as `{"base64": …}`, so a
//! binary file a run keeps under its state comes back byte for byte.

use crate::WorkerError;
use crate::git::hex;
use crate::objects::{from_hex, to_hex};
use crate::pusher::Pusher;
use crate::tree_commit::{Changes, TreeCommitter};
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
    /// the first checkpoint whose base this attempt pushed, which supersedes them).
    pub pruned: AtomicBool,
    /// The worktree's commits.
    pub commits: std::sync::Mutex<TreeCommitter>,
    /// Their pushes to the epoch ref.
    pub pusher: Pusher,
    /// The commit the worktree was checked out at (on the remote).
    pub start: String,
}

/// At most this many bytes of the worktree's files ride in one checkpoint record; past them
/// the checkpoint waits for its push instead.
pub(crate) const CARRY_BYTES: usize = 256 * 1024;

/// Past this many bytes to carry, the commit is pushed without waiting for the pusher's pace,
/// so the records of the turns that follow carry less (and rarely have to wait for a push).
pub(crate) const PUSH_SOON_BYTES: usize = 64 * 1024;

/// A checkpoint's worktree: its commit, the last commit the remote holds, and the files that
/// differ between the two.
#[derive(Debug, Clone)]
pub(crate) struct TreeRecord {
    pub commit: String,
    pub base: String,
    pub changes: Changes,
}

impl TreeRecord {
    pub fn to_json(&self) -> Value {
        let changes: Map<String, Value> = self
            .changes
            .iter()
            .map(|(path, change)| {
                let v = match change {
                    None => Value::Null,
                    Some((mode, bytes)) => {
                        json!({"mode": format!("{mode:o}"), "content": encode(bytes)})
                    }
                };
                (path.clone(), v)
            })
            .collect();
        json!({"base": self.base, "changes": changes})
    }

    /// The record a checkpoint holds (`commit` and its `tree`); a record older than `tree`
    /// names its commit alone, which was on the remote.
    pub fn from_json(commit: &str, tree: Option<&Value>) -> Result<TreeRecord, String> {
        let Some(tree) = tree else {
            return Ok(TreeRecord {
                commit: commit.to_string(),
                base: commit.to_string(),
                changes: Changes::new(),
            });
        };
        let base = tree
            .get("base")
            .and_then(Value::as_str)
            .ok_or("a tree without its base")?;
        let mut changes = Changes::new();
        if let Some(map) = tree.get("changes").and_then(Value::as_object) {
            for (path, v) in map {
                let change = match v {
                    Value::Null => None,
                    v => {
                        let mode = v
                            .get("mode")
                            .and_then(Value::as_str)
                            .and_then(|m| u32::from_str_radix(m, 8).ok())
                            .ok_or_else(|| format!("{path}: no mode"))?;
                        let bytes = decode(v.get("content").unwrap_or(&Value::Null))
                            .map_err(|e| format!("{path}: {e}"))?;
                        Some((mode, bytes))
                    }
                };
                changes.insert(path.clone(), change);
            }
        }
        Ok(TreeRecord {
            commit: commit.to_string(),
            base: base.to_string(),
            changes,
        })
    }
}

impl Checkpoints<'_> {
    pub fn run_ref(&self) -> String {
        format!("refs/baton/runs/{}/{}", self.lease.id, self.lease.epoch)
    }

    fn record_tree(&self, message: &str) -> Result<TreeRecord, WorkerError> {
        let mut commits = self
            .commits
            .lock()
            .map_err(|_| WorkerError::other("WORKER_IO", "checkpoint state poisoned"))?;
        record_tree(&mut commits, &self.pusher, &self.start, message)
    }

    /// The run's last commit, once no push of it is under way (a completed run's result).
    pub fn final_commit(&self, message: &str) -> Result<String, WorkerError> {
        let record = crate::git::blocking(|| self.record_tree(message))?;
        crate::git::blocking(|| self.pusher.settle());
        Ok(record.commit)
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
            let log = rel.starts_with("state/logs/") && rel.ends_with(".jsonl");
            let before = seen.get(&rel).cloned();
            // An append-only log that grew: only its new bytes are read (a log is the file
            // that grows every turn; reading and hashing it whole made each turn cost more
            // than the last).
            if log && let Some((len, _)) = before {
                match appended_since(&dir.join(&rel), len)
                    .map_err(|e| WorkerError::other("WORKER_IO", format!("{rel}: {e}")))?
                {
                    Tail::Same => continue,
                    Tail::Text(text) => {
                        let grown = len + text.len();
                        appends.insert(rel.clone(), json!({"from": len, "text": text}));
                        // A log's hash is not kept: its length says what was sent.
                        seen.insert(rel, (grown, String::new()));
                        continue;
                    }
                    Tail::Rewritten => {}
                }
            }
            let bytes = std::fs::read(dir.join(&rel))
                .map_err(|e| WorkerError::other("WORKER_IO", format!("{rel}: {e}")))?;
            let sha = hex(&Sha256::digest(&bytes));
            if before.as_ref().is_some_and(|(_, s)| *s == sha) {
                continue;
            }
            files.insert(rel.clone(), encode(&bytes));
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
        let tree = crate::git::blocking(|| {
            self.record_tree(&format!("baton checkpoint: unit {} {point}", self.lease.id))
        })?;
        let mut body = self.changed_files(run_id)?;
        body["point"] = json!(point);
        body["commit"] = json!(tree.commit);
        body["ref"] = json!(self.run_ref());
        body["tree"] = tree.to_json();
        // One round trip: the lease checked and the record written in one statement.
        self.queue
            .lock()
            .await
            .append_fenced(self.lease, "checkpoint", &body)
            .await?;
        // The earlier attempts' refs may hold this record's base until it is one this attempt
        // pushed.
        let ours = self.pusher.confirmed().is_some_and(|c| c == tree.base);
        if ours && !self.pruned.swap(true, Ordering::SeqCst) {
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

/// Commits the worktree's changes (if any) and says what the remote lacks of it. The base is
/// a commit the remote holds: `start`, or the last one `pusher` pushed. The commit is pushed in
/// the background (at the pusher's pace, sooner past `PUSH_SOON_BYTES`), unless the changes
/// are too large to carry: then this waits for the push, and the commit is the base.
pub(crate) fn record_tree(
    commits: &mut TreeCommitter,
    pusher: &Pusher,
    start: &str,
    message: &str,
) -> Result<TreeRecord, WorkerError> {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (head, _) = commits
        .commit(message, seconds)
        .map_err(|e| WorkerError::other("WORKER_IO", format!("checkpoint commit: {e}")))?;
    let commit = to_hex(&head);
    let base = pusher.confirmed().unwrap_or_else(|| start.to_string());
    let carried = from_hex(&base)
        .and_then(|b| commits.changes_since(&b))
        .filter(|c| carried_bytes(c) <= CARRY_BYTES);
    let record = match carried {
        Some(changes) => {
            if !changes.is_empty() {
                pusher.want(&commit, carried_bytes(&changes) > PUSH_SOON_BYTES)?;
            }
            TreeRecord {
                commit,
                base,
                changes,
            }
        }
        None => {
            pusher.wait_for(&commit)?;
            TreeRecord {
                base: commit.clone(),
                commit,
                changes: Changes::new(),
            }
        }
    };
    if let Some(b) = from_hex(&record.base) {
        commits.forget_before(&b);
    }
    Ok(record)
}

fn carried_bytes(changes: &Changes) -> usize {
    changes
        .iter()
        .map(|(p, c)| p.len() + c.as_ref().map_or(0, |(_, b)| b.len()))
        .sum()
}

/// What an append-only log holds past the `len` bytes already sent.
#[derive(Debug, PartialEq, Eq)]
enum Tail {
    /// Nothing more.
    Same,
    /// These bytes were appended.
    Text(String),
    /// Shorter than `len`, or its new bytes are not text: the whole file is sent again.
    Rewritten,
}

fn appended_since(path: &Path, len: usize) -> std::io::Result<Tail> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path)?;
    let size = file.metadata()?.len();
    let len64 = len as u64;
    if size < len64 {
        return Ok(Tail::Rewritten);
    }
    if size == len64 {
        return Ok(Tail::Same);
    }
    file.seek(SeekFrom::Start(len64))?;
    let mut tail = Vec::with_capacity((size - len64) as usize);
    file.read_to_end(&mut tail)?;
    Ok(String::from_utf8(tail).map_or(Tail::Rewritten, Tail::Text))
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
    /// The last commit the remote holds of the worktree, and the files that differ from it
    /// (the worktree at `commit` is `base` with them written).
    pub(crate) tree: TreeRecord,
    /// The ref the checkpoint's commit was pushed to.
    pub reference: String,
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
    let mut last: Option<(String, TreeRecord, String)> = None;
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
                (Some(r), Some(c)) => {
                    let tree = TreeRecord::from_json(c, body.get("tree"))
                        .map_err(|e| corrupt(format!("checkpoint {}: {e}", w.seq)))?;
                    let reference = body.get("ref").and_then(Value::as_str).unwrap_or("");
                    last = Some((r.to_string(), tree, reference.to_string()));
                }
                _ => {
                    return Err(corrupt(format!(
                        "checkpoint {} has no run or commit",
                        w.seq
                    )));
                }
            }
        }
    }
    Ok(last.map(|(run_id, tree, reference)| Restored {
        run_id,
        commit: tree.commit.clone(),
        tree,
        reference,
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

    #[test]
    fn only_what_a_log_gained_is_read_and_a_rewritten_log_is_sent_whole() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("conversation.jsonl");
        std::fs::write(&log, "{\"a\":1}\n").unwrap();
        assert_eq!(appended_since(&log, 8).unwrap(), Tail::Same);
        std::fs::write(&log, "{\"a\":1}\n{\"b\":\"é\"}\n").unwrap();
        assert_eq!(
            appended_since(&log, 8).unwrap(),
            Tail::Text("{\"b\":\"é\"}\n".into())
        );
        // Cut inside a character, or shorter than what was sent: the whole file again.
        assert_eq!(appended_since(&log, 15).unwrap(), Tail::Rewritten);
        std::fs::write(&log, "{}\n").unwrap();
        assert_eq!(appended_since(&log, 8).unwrap(), Tail::Rewritten);
    }
}
