//! baton's queue worker: claims units from the PostgreSQL work queue and runs them with the
//! normal engine, under their lease.
//!
//! For each claimed run unit: the project's remote is mirrored into a cache under the worker's
//! home and checked out in a worktree at the unit's base commit, the pinned package is
//! unpacked, and the run is driven in a scratch store of its own. At every durable point of the
//! run the worker records a checkpoint (see [`checkpoint`]). A lease found lost stops the run at
//! once: nothing more is written, and [`run`] returns `LEASE_LOST`.
//!
//! A unit claimed again after its worker died goes on from its last checkpoint: the run's files
//! folded from the database, the worktree at the checkpoint's commit, then resumed as
//! `baton resume` does (no completed turn done twice).
//!
//! The `baton worker` command is a thin shell over [`run`]; submitting is [`submit`]; reading a
//! queued run back (`baton runs show|log --db`) is [`read_unit_run`].

pub mod answers;
pub mod checkpoint;
mod error;
mod git;
mod lease;
pub mod payload;
pub mod read;
pub mod retry;
mod story_unit;
pub mod submit;
mod unit;

pub use answers::{AnswerReceipt, PendingQuestion, answer_unit, pending_questions};
pub use error::{LEASE_LOST, WorkerError};
pub use payload::RunPayload;
pub use read::{ScratchRun, UnitRun, read_unit_run};

use baton_queue::{DbConfig, Queue};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    pub config: DbConfig,
    /// Its name in the queue (owner of its leases): unique per process.
    pub worker: String,
    /// The host it runs on, as the queue shows it.
    pub host: String,
    /// Caches (mirrors of remotes) and each unit's scratch folder go under it.
    pub home: PathBuf,
    /// Units run at once.
    pub concurrency: u32,
    /// Lease length; renewed every third of it.
    pub lease: Duration,
    /// The queues to take work from, in order.
    pub queues: Vec<String>,
    /// Return once no unit is ready instead of waiting for more.
    pub exit_when_idle: bool,
    /// Cancelled to stop the worker gracefully: no more claims, and each unit in flight is
    /// handed back to the queue at its run's next durable point (after the model turn in
    /// flight), so the next worker goes on without waiting for a lease to expire or redoing a
    /// turn.
    pub stop: CancellationToken,
    /// Keep each unit's folder (worktree, package, scratch store) once the unit is left,
    /// instead of removing it.
    pub keep_units: bool,
    /// The first wait before a unit whose failure may pass is tried again; it doubles with
    /// each failure in a row, up to [`retry::MAX_DELAY`].
    pub retry_base: Duration,
}

/// What a worker reports as it goes (the CLI prints these on stderr).
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerEvent {
    Started {
        worker: String,
        database: String,
    },
    Claimed {
        unit: i64,
        epoch: i64,
    },
    Resuming {
        unit: i64,
        run_id: String,
        commit: String,
    },
    /// A waiting unit answered from the database: its run goes on with the answer.
    Answering {
        unit: i64,
        run_id: String,
    },
    Completed {
        unit: i64,
        branch: String,
        commit: String,
    },
    /// A failure that may pass: the unit is queued again, claimable after `delay`.
    Retrying {
        unit: i64,
        code: String,
        message: String,
        attempt: i64,
        of: i64,
        delay: Duration,
    },
    Waiting {
        unit: i64,
    },
    /// The database connection was lost; the worker connects again once it answers.
    DatabaseLost {
        message: String,
    },
    /// Handed back to the queue as the worker stops.
    Released {
        unit: i64,
    },
    /// Folders of units that workers stopped on this home left behind were removed.
    LeftFoldersRemoved {
        count: usize,
    },
    /// The unit's folder could not be removed (the worker goes on).
    CleanFailed {
        unit: i64,
        message: String,
    },
    Failed {
        unit: i64,
        code: String,
        message: String,
    },
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

impl fmt::Display for WorkerEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkerEvent::Started { worker, database } => write!(f, "worker {worker} on {database}"),
            WorkerEvent::Claimed { unit, epoch } => {
                write!(f, "claimed unit {unit} at epoch {epoch}")
            }
            WorkerEvent::Resuming {
                unit,
                run_id,
                commit,
            } => write!(
                f,
                "unit {unit}: resuming run {run_id} from its checkpoint at {}",
                short(commit)
            ),
            WorkerEvent::Completed {
                unit,
                branch,
                commit,
            } => {
                write!(f, "unit {unit} completed: {branch} at {}", short(commit))
            }
            WorkerEvent::Waiting { unit } => write!(f, "unit {unit} waits for a person"),
            WorkerEvent::Answering { unit, run_id } => {
                write!(f, "unit {unit}: answering run {run_id} from the database")
            }
            WorkerEvent::Retrying {
                unit,
                code,
                message,
                attempt,
                of,
                delay,
            } => write!(
                f,
                "unit {unit}: {code}: {message} (failure {attempt} of {of} in a row): tried \
                 again in {:.1}s",
                delay.as_secs_f64()
            ),
            WorkerEvent::LeftFoldersRemoved { count } => write!(
                f,
                "removed {count} unit folder{} left by workers that stopped on this home",
                if *count == 1 { "" } else { "s" }
            ),
            WorkerEvent::CleanFailed { unit, message } => {
                write!(f, "warning: unit {unit}: its folder stays: {message}")
            }
            WorkerEvent::DatabaseLost { message } => {
                write!(
                    f,
                    "the database connection was lost ({message}); connecting again"
                )
            }
            WorkerEvent::Released { unit } => {
                write!(
                    f,
                    "unit {unit} handed back to the queue at its last checkpoint"
                )
            }
            WorkerEvent::Failed {
                unit,
                code,
                message,
            } => {
                write!(f, "unit {unit} failed: {code}: {message}")
            }
        }
    }
}

/// Where a worker's events go.
pub type Events = Arc<dyn Fn(&WorkerEvent) + Send + Sync>;

pub(crate) struct Ctx {
    options: WorkerOptions,
    events: Events,
    /// Git commands on the shared mirror cache, one at a time.
    git_lock: std::sync::Mutex<()>,
    /// This process's secret for unit folder names.
    folder_key: [u8; 32],
}

impl Ctx {
    fn emit(&self, event: WorkerEvent) {
        (self.events)(&event);
    }

    /// Where a claimed unit's worktree, package and scratch store go:
    /// `<home>/worker/units/<id>-<epoch>-<tag>`, the tag derived from a secret of this process,
    /// so no unit can name another's folder (and none can see the folder that holds them: the
    /// whole home is hidden from commands, see [`run`]).
    fn unit_folder(&self, lease: &baton_queue::Lease) -> PathBuf {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(self.folder_key);
        h.update(lease.id.to_le_bytes());
        h.update(lease.epoch.to_le_bytes());
        let tag = git::hex(&h.finalize()[..12]);
        self.options
            .home
            .join("worker/units")
            .join(format!("{}-{}-{tag}", lease.id, lease.epoch))
    }
}

/// A secret of this process: the kernel's random bytes, or (should they fail) the time and
/// the process id hashed.
fn process_secret() -> [u8; 32] {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut bytes = [0u8; 32];
    let random = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if random.is_err() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes = Sha256::digest(format!("{now}:{}", std::process::id())).into();
    }
    bytes
}

/// Hides the worker's home from every command this process starts (a unit's own folder stays
/// visible to it, being its writable project), and puts the commands' temporary homes there:
/// no unit reads another's work tree, logs or temporary files, nor the mirror of another
/// project, whether or not the home is under `$HOME`.
fn isolate_units(home: &std::path::Path) -> Result<(), WorkerError> {
    let tmp = home.join("worker/tmp");
    std::fs::create_dir_all(&tmp).map_err(|e| {
        WorkerError::other("WORKER_IO", format!("cannot create {}: {e}", tmp.display()))
    })?;
    baton_tools::terminal::hide_from_commands(home);
    baton_tools::terminal::set_command_temp_root(&tmp);
    Ok(())
}

/// Runs a worker until it is idle (with `exit_when_idle`) or an error stops it. A lost lease
/// returns `LEASE_LOST` at once, leaving the other slots' units to expire and be claimed again.
pub async fn run(options: WorkerOptions, events: Events) -> Result<(), WorkerError> {
    isolate_units(&options.home)?;
    let ctx = Arc::new(Ctx {
        options,
        events,
        git_lock: std::sync::Mutex::new(()),
        folder_key: process_secret(),
    });
    let queue = Queue::open(&ctx.options.config).await?;
    queue
        .register_worker(&ctx.options.worker, &ctx.options.host)
        .await?;
    ctx.emit(WorkerEvent::Started {
        worker: ctx.options.worker.clone(),
        database: queue.database().to_string(),
    });
    if !ctx.options.keep_units {
        let removed = unit::remove_left_folders(&ctx, &queue).await;
        if removed > 0 {
            ctx.emit(WorkerEvent::LeftFoldersRemoved { count: removed });
        }
    }
    let mut slots = tokio::task::JoinSet::new();
    for _ in 0..ctx.options.concurrency {
        slots.spawn(slot(ctx.clone()));
    }
    let mut first_error = None;
    while let Some(done) = slots.join_next().await {
        let error = match done {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => e,
            Err(e) => WorkerError::other("WORKER_PANICKED", e.to_string()),
        };
        if error.is_lease_lost() {
            // Nothing more is written by this process.
            slots.abort_all();
            return Err(error);
        }
        first_error.get_or_insert(error);
    }
    let _ = queue.remove_worker(&ctx.options.worker).await;
    first_error.map_or(Ok(()), Err)
}

/// Sweeps expired leases, then claims the next ready unit.
async fn claim_next(
    ctx: &Ctx,
    queue: &Queue,
    queues: &[&str],
) -> Result<Option<baton_queue::Lease>, baton_queue::QueueError> {
    let _ = queue.sweep_expired(100).await?;
    let _ = queue.worker_heartbeat(&ctx.options.worker).await;
    queue
        .claim_any(&ctx.options.worker, queues, ctx.options.lease)
        .await
}

/// How long a worker keeps trying to reach its database again before it stops with the error
/// (its service manager restarts it).
pub const RECONNECT_FOR: Duration = Duration::from_secs(300);

/// A new connection once the database answers again (waits doubling from 1 s to 30 s, for at
/// most [`RECONNECT_FOR`]); `None` when the worker is told to stop meanwhile.
async fn reconnect(
    ctx: &Ctx,
    lost: &baton_queue::QueueError,
) -> Result<Option<Queue>, WorkerError> {
    ctx.emit(WorkerEvent::DatabaseLost {
        message: lost.to_string(),
    });
    let give_up = tokio::time::Instant::now() + RECONNECT_FOR;
    let mut n = 1;
    loop {
        let wait = retry::backoff(Duration::from_secs(1), n).min(Duration::from_secs(30));
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = ctx.options.stop.cancelled() => return Ok(None),
        }
        match Queue::open(&ctx.options.config).await {
            Ok(q) => return Ok(Some(q)),
            Err(e) if retry::is_transient_queue(&e) && tokio::time::Instant::now() < give_up => {
                n += 1;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// One slot: claims and runs units one after the other. A lost database connection is
/// opened again once the database answers; the unit it held, if any, was queued again or
/// has its lease expire.
async fn slot(ctx: Arc<Ctx>) -> Result<(), WorkerError> {
    let mut queue = Queue::open(&ctx.options.config).await?;
    let queues: Vec<&str> = ctx.options.queues.iter().map(String::as_str).collect();
    loop {
        if ctx.options.stop.is_cancelled() {
            return Ok(());
        }
        let claimed = match claim_next(&ctx, &queue, &queues).await {
            Ok(c) => c,
            Err(e) if retry::is_transient_queue(&e) => match reconnect(&ctx, &e).await? {
                Some(q) => {
                    queue = q;
                    continue;
                }
                None => return Ok(()),
            },
            Err(e) => return Err(e.into()),
        };
        let Some(lease) = claimed else {
            if ctx.options.exit_when_idle {
                return Ok(());
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(500)) => {}
                () = ctx.options.stop.cancelled() => return Ok(()),
            }
            continue;
        };
        ctx.emit(WorkerEvent::Claimed {
            unit: lease.id,
            epoch: lease.epoch,
        });
        let held = lease.clone();
        let result = match held.kind {
            baton_queue::UnitKind::Story => story_unit::run_story_unit(&ctx, lease).await,
            baton_queue::UnitKind::Run => unit::run_unit(&ctx, lease).await,
        };
        if !result.as_ref().is_err_and(WorkerError::is_lease_lost)
            && let Err(e) = unit::clean(&ctx, &held)
        {
            ctx.emit(WorkerEvent::CleanFailed {
                unit: held.id,
                message: e.to_string(),
            });
        }
        let failure = match result {
            Ok(()) => continue,
            Err(e) if e.is_lease_lost() => return Err(e),
            Err(WorkerError::Queue(q)) if !retry::is_transient_queue(&q) => return Err(q.into()),
            Err(e) => retry::Failure::of(&e),
        };
        // What stopped the unit here (its remote, its package, the database, a file of the
        // worker) fails it, said in its outcome, or queues it again when it may pass; the
        // worker goes on with the next.
        match retry::settle(&ctx, &mut queue, &held, failure).await {
            Ok(()) => {}
            Err(e) if e.is_lease_lost() => return Err(e),
            // The database is gone for now: the unit's lease expires and the sweep queues it
            // again.
            Err(WorkerError::Queue(q)) if retry::is_transient_queue(&q) => {
                match reconnect(&ctx, &q).await? {
                    Some(fresh) => queue = fresh,
                    None => return Ok(()),
                }
            }
            Err(e) => return Err(e),
        }
    }
}
