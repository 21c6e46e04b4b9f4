//! baton's work queue on PostgreSQL: units of work (runs and stories) that workers on any
//! number of machines claim with `FOR UPDATE SKIP LOCKED`, hold with a lease they renew by
//! heartbeat, and write under a fencing epoch checked in the same transaction as every write,
//! so a worker whose lease was taken over writes nothing (`LEASE_LOST`).
//!
//! - [`DbConfig`]: the database URL and its password (URL, `PGPASSWORD`, `~/.pgpass`), TLS
//!   with rustls, and the URL without its password for every message.
//! - [`init`]: creates or upgrades the schema (embedded, versioned migrations; idempotent).
//! - [`Queue`]: submit, claim, heartbeat, the expiry sweep, fenced writes, complete, fail,
//!   waiting for a person, answer, cancel, status.
//!
//! The file store stays baton's default; nothing here is used without a queue URL.

mod connect;
mod epic;
mod error;
mod hold;
pub mod local;
mod pinned;
mod queue;
mod retry;
mod schema;
pub mod source;
mod status;

pub use connect::{DEFAULT_CONNECT_TIMEOUT, DbConfig, Environment, ProcessEnv, pgpass_lookup};
pub use epic::{EpicHolder, EpicLease, StoryUnit, epic_lease_key};
pub use error::{PasswordSource, QueueError, UrlSource};
pub use pinned::{Package, StoredTrace, package_digest};
pub use queue::{
    CLAIM_SQL, DEFAULT_QUEUE, Expired, FENCE_SQL, FENCED_APPEND_SQL, Fenced, HEARTBEAT_SQL, Lease,
    MAX_JSON_BYTES, NewUnit, NewWrite, Queue, Unit, UnitKind, UnitState, WriteRecord,
};
pub use retry::MAX_RETRY_DELAY;
pub use schema::{AppliedMigration, InitReport, MIGRATIONS, SCHEMA_VERSION};
pub use status::{
    Counts, FailedUnit, LeasedUnit, QueueCounts, RetryingUnit, Status, StoppedWorker, WaitingUnit,
    WorkerInfo,
};

/// Creates the queue's schema in the database, or brings it to this baton's version. Safe to
/// run again and from several machines at once.
pub async fn init(config: &DbConfig) -> Result<InitReport, QueueError> {
    let mut client = config.connect().await?;
    schema::init(&mut client, &config.redacted()).await
}
