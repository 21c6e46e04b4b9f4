//! What every kind of unit does with its lease while it runs: renew it, and say it was lost.

use crate::WorkerError;
use crate::ctx::Ctx;
use crate::error::LEASE_LOST;
use baton_queue::{Lease, Queue};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio_util::sync::CancellationToken;

/// Stops a task (the heartbeat) when the unit is left, whichever way.
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Heartbeats every third of the lease, on a connection of its own, from the claim on (a slow
/// clone must not lose it). A lease found lost sets `lost` and cancels the unit's work.
pub(crate) fn heartbeat(
    ctx: &Ctx,
    lease: &Lease,
    lost: Arc<AtomicBool>,
    cancel: CancellationToken,
) -> AbortOnDrop {
    let config = ctx.options.config.clone();
    let mut held = lease.clone();
    let every = ctx.options.lease / 3;
    AbortOnDrop(tokio::spawn(async move {
        // A connection lost (the database restarted, the network cut) is opened again at the
        // next beat: the lease outlives a short outage.
        let mut q = Queue::open(&config).await.ok();
        loop {
            tokio::time::sleep(every).await;
            if q.is_none() {
                q = Queue::open(&config).await.ok();
            }
            let Some(conn) = q.as_ref() else { continue };
            let extend = held.duration;
            match conn.heartbeat(&mut held, extend).await {
                Ok(()) => {}
                Err(e) if e.code() == LEASE_LOST => {
                    lost.store(true, Ordering::SeqCst);
                    cancel.cancel();
                    return;
                }
                Err(_) => q = None,
            }
        }
    }))
}

/// The error a unit whose lease was taken over ends with.
pub(crate) fn lease_lost(lease: &Lease) -> WorkerError {
    WorkerError::other(
        LEASE_LOST,
        format!(
            "the lease of unit {} at epoch {} was lost",
            lease.id, lease.epoch
        ),
    )
}
