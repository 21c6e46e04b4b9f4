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
//! folded from the database, the worktree at the checkpoint's commit (or at the last commit the
//! remote held, with the files the checkpoint carried written back), then resumed as
//! `baton resume` does (no completed turn done twice).
//!
//! The `baton worker` command is a thin shell over [`run`]; submitting is [`submit`]; reading a
//! queued run back (`baton runs show|log --db`) is [`read_unit_run`].

pub mod answers;
pub mod checkpoint;
mod ctx;
mod error;
mod event;
mod git;
mod index_file;
mod lease;
mod model;
mod notify;
mod objects;
mod options;
pub mod payload;
mod pusher;
pub mod read;
pub mod retry;
mod story_unit;
pub mod submit;
mod tree_commit;
#[cfg(test)]
mod tree_tests;
mod unit;

pub use answers::{AnswerReceipt, PendingQuestion, answer_unit, pending_questions};
pub use error::{LEASE_LOST, WorkerError};
pub use event::{Events, WorkerEvent};
pub use model::ModelOverride;
pub use options::WorkerOptions;
pub use payload::RunPayload;
pub use read::{ScratchRun, UnitRun, read_unit_run};

use baton_queue::Queue;
use ctx::Ctx;
use std::sync::Arc;
use std::time::Duration;

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
    let ctx = Arc::new(Ctx::new(options, events));
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
    let _ = queue.worker_stopped(&ctx.options.worker).await;
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
