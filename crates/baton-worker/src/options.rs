//! How a worker is told to run: its database, name, home, slots, queues and stop signal.

use baton_queue::DbConfig;
use std::path::PathBuf;
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
    /// each failure in a row, up to [`crate::retry::MAX_DELAY`].
    pub retry_base: Duration,
    /// The worker's own model settings (`--model`, `--base-url`, `--api`), over each unit's;
    /// with any of them a unit's recorded trace is not replayed.
    pub model: crate::model::ModelOverride,
}
