//! The state every handler (API and pages) shares: the store, the token, the `Host` rule,
//! the shutdown signal, the background jobs and the bounds on streams and blocking calls.

use crate::bounded::Bounded;
use crate::hosts::HostRule;
use crate::jobs::Jobs;
use crate::token::Token;
use baton_queue::DbConfig;
use baton_store::Store;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What every handler (API and pages) gets. Cheap to clone: everything is shared.
#[derive(Clone)]
pub struct AppState {
    /// The baton store (`BATON_HOME`): runs, projects, packages. Its calls block on files:
    /// call them through [`AppState::blocking`].
    pub store: Store,
    /// The server's secret. Pages put it in `<meta name="baton-token" content="…">` so their
    /// script can send `Authorization: Bearer …` on POST (the cookie alone is refused there);
    /// another site's page cannot read it.
    pub token: Token,
    /// The `Host` (and `Origin`) values this server answers to.
    pub hosts: Arc<HostRule>,
    /// Cancelled when the server stops: SSE streams end and background runs stop between
    /// steps (they stay resumable).
    pub shutdown: CancellationToken,
    /// Runs and epics the server drives in the background.
    pub jobs: Jobs,
    /// How often an SSE stream looks for new lines in the file it follows.
    pub poll: Duration,
    /// Event streams open at once, at most ([`MAX_STREAMS`]): each holds a task and a
    /// bounded queue, so the server's memory stays bounded however many tabs are open.
    pub streams: Arc<tokio::sync::Semaphore>,
    /// The permit and deadline of every handler's blocking call (store, orchestrator, files).
    pub blocking: Bounded,
    /// The work queue's database (`baton serve --db`): the queue page and `/api/queue`.
    pub queue: Option<DbConfig>,
    /// The directory `baton serve` was started in: the epic board and the sessions page open
    /// on its project first when none is chosen.
    pub start_dir: Option<PathBuf>,
}

/// Event streams (SSE) open at once, at most; one more is refused with 503.
pub const MAX_STREAMS: usize = 256;
