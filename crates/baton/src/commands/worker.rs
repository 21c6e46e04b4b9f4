//! `baton worker --db URL`: claims queued workflow runs and runs them with the normal engine.
//!
//! For each claimed unit: the project's remote is mirrored into a cache under `$BATON_HOME`
//! and checked out in a worktree at the unit's base commit, the pinned package is unpacked,
//! and the run is driven in a scratch store of its own. At every durable point of the run (the
//! engine's flush after a model turn, the end of an invocation) the worker records a
//! checkpoint: the worktree's changes as a commit pushed to `refs/baton/runs/<unit>/<epoch>`,
//! then the run's durable files in ONE fenced transaction. A lease found lost stops the run at
//! once; the worker prints `LEASE_LOST` and exits non-zero.
//!
//! A unit claimed again after its worker died goes on from its last checkpoint: the run's files
//! folded from the database, the worktree at the checkpoint's commit, then resumed as
//! `baton resume` does (no completed turn done twice). Not yet: answers from the database.

use crate::exit;
use crate::failure::Failure;
use crate::ui::{Paint, color::err};
use baton_engine::model_choice::{self, Requested};
use baton_engine::runner::{self, Settings, StartRun};
use baton_engine::{ContextPolicy, DurableFuture, DurablePoint, DurableStop, OnDurable, Outcome};
use baton_queue::{DbConfig, Lease, Queue, QueueError, UrlSource};
use baton_store::Store;
use clap::Args;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::Mutex;

#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub db: super::queue::DbArgs,
    /// Units run at once.
    #[arg(long, default_value = "1", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub concurrency: u32,
    /// Lease length in seconds; the worker renews it every third of it.
    #[arg(long = "lease-s", value_name = "S", default_value = "30", value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub lease_s: u64,
    /// The queues to take work from, in order.
    #[arg(long, value_delimiter = ',', default_value = "default")]
    pub queues: Vec<String>,
    /// Exit (0) once no unit is ready, instead of waiting for more.
    #[arg(long)]
    pub exit_when_idle: bool,
}

struct Ctx {
    config: DbConfig,
    worker: String,
    home: PathBuf,
    lease: Duration,
    queues: Vec<String>,
    exit_when_idle: bool,
    /// Git commands on the shared mirror cache, one at a time.
    git_lock: std::sync::Mutex<()>,
}

#[derive(Debug, thiserror::Error)]
enum WorkerError {
    #[error(transparent)]
    Queue(#[from] QueueError),
    #[error("{message}")]
    Other { code: &'static str, message: String },
}

impl WorkerError {
    fn other(code: &'static str, message: impl Into<String>) -> WorkerError {
        WorkerError::Other {
            code,
            message: message.into(),
        }
    }

    fn code(&self) -> &'static str {
        match self {
            WorkerError::Queue(e) => e.code(),
            WorkerError::Other { code, .. } => code,
        }
    }
}

pub fn run(args: WorkerArgs) -> anyhow::Result<u8> {
    let config = match (&args.db.db, &args.db.db_env) {
        (_, Some(name)) => DbConfig::from_env(name),
        (Some(url), None) => DbConfig::from_url(url, UrlSource::Flag),
        (None, None) => Err(QueueError::InvalidInput(
            "give the database with --db URL or --db-env NAME".into(),
        )),
    };
    let config = match config {
        Ok(c) => c,
        Err(e) => {
            return Ok(Failure::new(e.code(), e.to_string(), exit::INVALID)
                .hint(e.hint())
                .report(false));
        }
    };
    for w in config.warnings() {
        eprintln!("{} {w}", err(Paint::Warn, "warning:"));
    }
    let store = Store::open_default()?;
    let host = baton_lifecycle::ralph::claim::hostname();
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let worker = format!("{host}:{}:{:04x}", std::process::id(), nonce & 0xffff);
    let ctx = Arc::new(Ctx {
        config,
        worker,
        home: store.home().to_path_buf(),
        lease: Duration::from_secs(args.lease_s),
        queues: args.queues.clone(),
        exit_when_idle: args.exit_when_idle,
        git_lock: std::sync::Mutex::new(()),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.concurrency as usize + 1)
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        let queue = Queue::open(&ctx.config).await?;
        queue.register_worker(&ctx.worker, &host).await?;
        eprintln!("worker {} on {}", ctx.worker, queue.database());
        let mut slots = tokio::task::JoinSet::new();
        for _ in 0..args.concurrency {
            slots.spawn(slot(ctx.clone()));
        }
        let mut first_error = None;
        while let Some(done) = slots.join_next().await {
            match done {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(e) => {
                    first_error.get_or_insert(WorkerError::other("WORKER_PANICKED", e.to_string()));
                }
            }
        }
        let _ = queue.remove_worker(&ctx.worker).await;
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    });
    match result {
        Ok(()) => Ok(exit::OK),
        Err(e) => {
            eprintln!("error[{}]: {e}", e.code());
            Ok(exit::FAILURE)
        }
    }
}

/// One slot: claims and runs units one after the other.
async fn slot(ctx: Arc<Ctx>) -> Result<(), WorkerError> {
    let mut queue = Queue::open(&ctx.config).await?;
    let queues: Vec<&str> = ctx.queues.iter().map(String::as_str).collect();
    loop {
        let _ = queue.sweep_expired(100).await?;
        let _ = queue.worker_heartbeat(&ctx.worker).await;
        let Some(lease) = queue.claim_any(&ctx.worker, &queues, ctx.lease).await? else {
            if ctx.exit_when_idle {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        eprintln!("claimed unit {} at epoch {}", lease.id, lease.epoch);
        let held = lease.clone();
        let result = match run_unit(&ctx, lease).await {
            // What stopped the unit here (its remote, its package, a file of the worker) fails
            // it, said in its outcome; the worker goes on with the next.
            Err(WorkerError::Other { code, message }) if code != "LEASE_LOST" => {
                eprintln!("unit {} failed: {code}: {message}", held.id);
                queue
                    .fail(&held, &json!({"code": code, "message": message}))
                    .await
                    .map_err(WorkerError::from)
            }
            other => other,
        };
        match result {
            Ok(()) => {}
            Err(e) if e.code() == "LEASE_LOST" => {
                // Nothing more is written: say so and stop the whole worker at once.
                eprintln!("error[LEASE_LOST]: {e}");
                std::process::exit(i32::from(exit::FAILURE));
            }
            Err(e) => return Err(e),
        }
    }
}

fn git(dir: &Path, args: &[&str]) -> Result<String, WorkerError> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_AUTHOR_NAME", "baton worker")
        .env("GIT_AUTHOR_EMAIL", "worker@baton.invalid")
        .env("GIT_COMMITTER_NAME", "baton worker")
        .env("GIT_COMMITTER_EMAIL", "worker@baton.invalid")
        .output()
        .map_err(|e| WorkerError::other("WORKER_GIT_FAILED", format!("cannot run git: {e}")))?;
    if !out.status.success() {
        return Err(WorkerError::other(
            "WORKER_GIT_FAILED",
            format!(
                "git {}: {}",
                args.first().copied().unwrap_or(""),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The unit's worktree at its base commit, from a mirror of its remote cached under the home.
fn checkout(ctx: &Ctx, lease: &Lease, commit: &str, work: &Path) -> Result<PathBuf, WorkerError> {
    let _one = ctx.git_lock.lock();
    let key = hex(&Sha256::digest(lease.project_remote.as_bytes()));
    let mirror = ctx.home.join("worker/repos").join(&key[..16]);
    if mirror.join("HEAD").exists() {
        git(&mirror, &["fetch", "--quiet", "--prune", "origin"])?;
    } else {
        std::fs::create_dir_all(mirror.parent().unwrap_or(&ctx.home))
            .map_err(|e| WorkerError::other("WORKER_IO", e.to_string()))?;
        let parent = mirror.parent().unwrap_or(&ctx.home).to_path_buf();
        let target = mirror.display().to_string();
        git(
            &parent,
            &[
                "clone",
                "--quiet",
                "--mirror",
                &lease.project_remote,
                &target,
            ],
        )?;
    }
    let tree = work.join("project");
    let tree_s = tree.display().to_string();
    git(
        &mirror,
        &["worktree", "add", "--quiet", "--detach", &tree_s, commit],
    )?;
    Ok(tree)
}

/// Records checkpoints of one run under its lease.
struct Checkpoints<'a> {
    queue: Mutex<Queue>,
    lease: &'a Lease,
    store: &'a Store,
    project: &'a Path,
    tree: &'a Path,
    lost: &'a AtomicBool,
    /// What each run file held at the last checkpoint: (length, sha256).
    seen: std::sync::Mutex<BTreeMap<String, (usize, String)>>,
}

impl Checkpoints<'_> {
    fn run_ref(&self) -> String {
        format!("refs/baton/runs/{}/{}", self.lease.id, self.lease.epoch)
    }

    /// Commits the worktree's changes (if any) and pushes HEAD to the run's epoch ref.
    fn commit_and_push(&self, message: &str) -> Result<String, WorkerError> {
        let changed = !git(self.tree, &["status", "--porcelain"])?.is_empty();
        if changed {
            git(self.tree, &["add", "-A"])?;
            git(
                self.tree,
                &["commit", "--quiet", "--no-verify", "-m", message],
            )?;
        }
        let head = git(self.tree, &["rev-parse", "HEAD"])?;
        let refspec = format!("+HEAD:{}", self.run_ref());
        git(
            self.tree,
            &["push", "--quiet", &self.lease.project_remote, &refspec],
        )?;
        Ok(head)
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
            match before {
                Some((len, _)) if log && bytes.len() >= len => {
                    appends.insert(
                        rel.clone(),
                        json!({"from": len, "text": String::from_utf8_lossy(&bytes[len..])}),
                    );
                }
                _ => {
                    files.insert(
                        rel.clone(),
                        Value::String(String::from_utf8_lossy(&bytes).into_owned()),
                    );
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
                    code: "LEASE_LOST",
                    message: format!("the lease of unit {} was lost", self.lease.id),
                });
            }
            self.checkpoint(run_id, at).await.map_err(|e| {
                if e.code() == "LEASE_LOST" {
                    self.lost.store(true, Ordering::SeqCst);
                }
                DurableStop {
                    code: e.code(),
                    message: e.to_string(),
                }
            })
        })
    }
}

/// Where earlier workers' checkpoints left a run: its files and the worktree's commit.
struct Restored {
    run_id: String,
    commit: String,
    files: BTreeMap<String, Vec<u8>>,
}

/// Folds every checkpoint of the unit, oldest first (fencing orders them: an older epoch
/// cannot write after a newer one claimed): whole files replace, log lines append at the
/// length they were taken from. `None` when nothing was checkpointed.
async fn restore_point(queue: &Queue, unit: i64) -> Result<Option<Restored>, WorkerError> {
    let corrupt = |m: String| WorkerError::other("QUEUE_CHECKPOINT_INVALID", m);
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
                for (rel, text) in whole {
                    let text = text
                        .as_str()
                        .ok_or_else(|| corrupt(format!("{rel} is not text")))?;
                    files.insert(rel.clone(), text.as_bytes().to_vec());
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

/// Puts a checkpointed run into this worker's scratch store: the package installed, the run's
/// files written back (its project id made this store's).
fn restore_run(
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

/// The phase `run.json` of a restored run records.
fn restored_phase(restored: &Restored) -> Option<String> {
    let meta: Value = serde_json::from_slice(restored.files.get("run.json")?).ok()?;
    meta.get("phase").and_then(Value::as_str).map(str::to_owned)
}

/// Pushes a completed run's result to the branch that carries the epoch, then completes the
/// unit (fenced).
async fn complete(
    queue: &mut Queue,
    lease: &Lease,
    tree: &Path,
    run_id: &str,
    commit: &str,
    message: &str,
) -> Result<(), WorkerError> {
    let branch = format!("baton/unit-{}/epoch-{}", lease.id, lease.epoch);
    let refspec = format!("+{commit}:refs/heads/{branch}");
    git(tree, &["push", "--quiet", &lease.project_remote, &refspec])?;
    queue
        .complete(
            lease,
            &json!({"runId": run_id, "commit": commit, "branch": branch, "message": message}),
        )
        .await?;
    eprintln!(
        "unit {} completed: {branch} at {}",
        lease.id,
        &commit[..commit.len().min(12)]
    );
    Ok(())
}

/// Stops the heartbeat when the unit is left, whichever way.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn payload_str<'a>(payload: &'a Value, key: &str) -> Option<&'a str> {
    payload.get(key).and_then(Value::as_str)
}

async fn run_unit(ctx: &Ctx, lease: Lease) -> Result<(), WorkerError> {
    let mut queue = Queue::open(&ctx.config).await?;
    // Heartbeats every third of the lease, on a connection of their own, from the claim on
    // (a slow clone must not lose it).
    let lost = Arc::new(AtomicBool::new(false));
    let cancel = tokio_util::sync::CancellationToken::new();
    let _beat = AbortOnDrop({
        let config = ctx.config.clone();
        let mut held = lease.clone();
        let lost = lost.clone();
        let cancel = cancel.clone();
        let every = ctx.lease / 3;
        tokio::spawn(async move {
            let Ok(q) = Queue::open(&config).await else {
                return;
            };
            loop {
                tokio::time::sleep(every).await;
                let extend = held.duration;
                if let Err(e) = q.heartbeat(&mut held, extend).await
                    && e.code() == "LEASE_LOST"
                {
                    lost.store(true, Ordering::SeqCst);
                    cancel.cancel();
                    return;
                }
            }
        })
    });

    // A unit an earlier worker checkpointed goes on from its last checkpoint.
    let restored = match restore_point(&queue, lease.id).await {
        Ok(r) => r,
        Err(e) => {
            queue
                .fail(&lease, &json!({"code": e.code(), "message": e.to_string()}))
                .await?;
            eprintln!("unit {} failed: {e}", lease.id);
            return Ok(());
        }
    };
    let work = ctx
        .home
        .join("worker/units")
        .join(format!("{}-{}", lease.id, lease.epoch));
    std::fs::create_dir_all(&work).map_err(|e| WorkerError::other("WORKER_IO", e.to_string()))?;
    let start_commit = restored
        .as_ref()
        .map_or(lease.base_commit.as_str(), |r| r.commit.as_str());
    let tree = checkout(ctx, &lease, start_commit, &work)?;
    // Its worker died after the run's last checkpoint, before the unit was completed: the
    // checkpoint holds the result, and nothing is left to run.
    if let Some(r) = restored
        .as_ref()
        .filter(|r| restored_phase(r).as_deref() == Some("completed"))
    {
        let commit = git(&tree, &["rev-parse", "HEAD"])?;
        let message = "completed by an earlier worker before it stopped";
        return complete(&mut queue, &lease, &tree, &r.run_id, &commit, message).await;
    }
    let subdir = payload_str(&lease.payload, "projectSubdir").unwrap_or("");
    let project = if subdir.is_empty() {
        tree.clone()
    } else {
        tree.join(subdir)
    };
    let Some(sha) = lease.package_sha256.clone() else {
        return Err(WorkerError::other(
            "WORKER_NO_PACKAGE",
            format!("unit {} has no package", lease.id),
        ));
    };
    let Some(package) = queue.package(&sha).await? else {
        return Err(WorkerError::other(
            "WORKER_NO_PACKAGE",
            format!("package {sha} is not in the database"),
        ));
    };
    let package_path = work.join("package.bmad");
    std::fs::write(&package_path, &package.bytes)
        .map_err(|e| WorkerError::other("WORKER_IO", e.to_string()))?;
    let store = Store::new(work.join("home"));

    let payload = &lease.payload;
    let model_p = payload.get("model").cloned().unwrap_or(Value::Null);
    let requested = Requested {
        model: model_p
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_owned),
        base_url: model_p
            .get("baseUrl")
            .and_then(Value::as_str)
            .map(str::to_owned),
        replay: None,
    };
    let choice = model_choice::continuation_choice(&requested, None, || false);
    let env = |k: &str| std::env::var(k).ok();
    let outcome = async {
        let model = model_choice::load_model(&choice, &ctx.home, Some(&project), &env)
            .map_err(|e| WorkerError::other(e.code, e.message))?;
        let tools = baton_tools::ToolsConfig::load(Some(&ctx.home), Some(&project))
            .map_err(|e| WorkerError::other(e.code(), e.to_string()))?;
        let budget = payload.get("budget").cloned().unwrap_or(Value::Null);
        let caps = baton_engine::spend::BudgetConfig::load(Some(&ctx.home), Some(&project))
            .and_then(|b| {
                b.with_flags(
                    budget.get("tokens").and_then(Value::as_u64),
                    budget.get("usd").and_then(Value::as_f64),
                )
            })
            .map_err(|m| WorkerError::other(baton_engine::spend::BUDGET_CONFIG_INVALID, m))?
            .run_caps();
        let hook = Checkpoints {
            queue: Mutex::new(Queue::open(&ctx.config).await?),
            lease: &lease,
            store: &store,
            project: &project,
            tree: &tree,
            lost: &lost,
            seen: std::sync::Mutex::new(
                restored
                    .as_ref()
                    .map(|r| {
                        r.files
                            .iter()
                            .map(|(rel, bytes)| {
                                (rel.clone(), (bytes.len(), hex(&Sha256::digest(bytes))))
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
        };
        let mut settings = Settings::new(model.as_dyn());
        settings.inputs = payload
            .get("inputs")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        settings.autopilot = payload
            .get("autopilot")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        settings.budget = Some(model.budget(model_p.get("contextTokens").and_then(Value::as_u64)));
        settings.context = match model_p.get("context").and_then(Value::as_str) {
            Some("full") => Some(ContextPolicy::Full),
            Some("node") => Some(ContextPolicy::Node),
            _ => None,
        };
        settings.tools = tools;
        settings.caps = caps;
        settings.cancel = cancel.clone();
        settings.on_durable = Some(&hook);
        let variables: Map<String, Value> = payload
            .get("vars")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let start = StartRun {
            package: &package_path,
            project: &project,
            workflow: payload_str(payload, "workflow"),
            agent: payload_str(payload, "agent"),
        };
        let claimed = match &restored {
            None => runner::create(&store, start, &variables),
            Some(r) => restore_run(&store, &package_path, &project, r).and_then(|()| {
                eprintln!(
                    "unit {}: resuming run {} from its checkpoint at {}",
                    lease.id,
                    r.run_id,
                    &r.commit[..r.commit.len().min(12)]
                );
                runner::claim(&store, &r.run_id, runner::Continuation::Resume)
            }),
        }
        .map_err(|e| WorkerError::other(e.code(), e.to_string()))?;
        let finished = runner::continue_claimed(claimed, settings)
            .await
            .map_err(|e| WorkerError::other(e.code(), e.to_string()))?;
        Ok::<_, WorkerError>((finished, hook))
    }
    .await;
    if lost.load(Ordering::SeqCst) {
        return Err(WorkerError::other(
            "LEASE_LOST",
            format!(
                "the lease of unit {} at epoch {} was lost",
                lease.id, lease.epoch
            ),
        ));
    }
    let (finished, hook) = match outcome {
        Ok(o) => o,
        Err(e) if e.code() == "LEASE_LOST" => return Err(e),
        Err(e) => {
            queue
                .fail(&lease, &json!({"code": e.code(), "message": e.to_string()}))
                .await?;
            eprintln!("unit {} failed: {e}", lease.id);
            return Ok(());
        }
    };
    let run_id = finished.run.run_id.clone();
    match &finished.report.outcome {
        Outcome::Completed { message } => {
            // The result: the last checkpoint's commit on a branch that carries the epoch.
            let commit = hook.commit_and_push(&format!("baton: unit {} completed", lease.id))?;
            complete(&mut queue, &lease, &tree, &run_id, &commit, message).await?;
        }
        Outcome::Waiting { question } => {
            queue
                .wait_for_person(&lease, &json!({"question": question, "runId": run_id}))
                .await?;
            eprintln!("unit {} waits for a person", lease.id);
        }
        Outcome::Failed { code, message } => {
            queue
                .fail(
                    &lease,
                    &json!({"code": code, "message": message, "runId": run_id}),
                )
                .await?;
            eprintln!("unit {} failed: {code}: {message}", lease.id);
        }
    }
    Ok(())
}
