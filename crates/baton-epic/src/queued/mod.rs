//! `baton epic run <EPIC> --queue URL [--parallel N]`: the epic's stories run on queue workers.
//!
//! The orchestrator stays one process in the user's project ([`orchestrate`]): the single
//! writer of `sprint-status.yaml` and of the epic's state, holding the epic's lease in the
//! database. Instead of driving a story in a local worktree it submits a `story` unit (the
//! epic's branch pushed first, the story's starting files in the payload) and keeps at most N
//! of them in flight. A worker claims the unit, checks the project out at its base commit and
//! drives the story's phases with the ordinary story loop ([`worker`]), checkpointing after
//! every phase (a commit on the unit's epoch ref and the story's progress files, in one fenced
//! write). An approved story's branch, pushed to a ref that carries the epoch, is fetched by the
//! orchestrator and merged onto the epic's branch as local parallel mode merges it.
//!
//! What the orchestrator keeps, `.baton-epic-queue.json` in the artifacts folder: the epic's
//! branch, the session its units carry, the database (its URL without a password, or the name
//! of the environment variable holding it), the model by name and endpoint, the stories started
//! with their current unit, and the approved stories waiting to merge.

pub(crate) mod orchestrate;
pub mod payload;
mod state;
pub mod worker;

pub use crate::ctx::StepHook;
pub use payload::{StoryModel, StoryPayload};
pub use state::{QueuedState, Remembered};

use super::error::{EpicError, Result};
use baton_bmad::layout::Layout;
use std::path::Path;
use std::time::Duration;

/// The kind of a story unit's checkpoint write.
pub const STORY_CHECKPOINT: &str = "story-checkpoint";
/// An epic's lease is held by another orchestrator.
pub const EPIC_QUEUE_LEASE_HELD: &str = "EPIC_QUEUE_LEASE_HELD";
/// The epic's lease was taken over while this orchestrator ran.
pub const EPIC_QUEUE_LEASE_LOST: &str = "EPIC_QUEUE_LEASE_LOST";

/// Where the stories go and how the orchestrator holds the epic.
#[derive(Debug, Clone)]
pub struct QueueTarget {
    pub config: baton_queue::DbConfig,
    /// How a resume finds the database again: the URL without its password (the password
    /// comes from `PGPASSWORD` or the password file), or the variable that holds it.
    pub url: Option<String>,
    pub db_env: Option<String>,
    /// The model the phases run with, by name and endpoint (never a key).
    pub model: StoryModel,
    /// Stories in flight remembered from the run being resumed (`--parallel` wins).
    pub slots: Option<u32>,
    /// This process, as the lease names it, and where it runs.
    pub owner: String,
    pub host: String,
    /// The epic lease's length (renewed every third of it).
    pub lease: Duration,
    /// How often the units are looked at.
    pub poll: Duration,
}

/// Refuses to run locally an epic whose stories are on the queue (its units are in flight).
pub fn refuse_local(layout: &Layout, epic_id: &str) -> Result<()> {
    match QueuedState::load(&layout.dir)? {
        Some(s) if s.epic_id == epic_id && (!s.started.is_empty() || !s.queue.is_empty()) => {
            Err(EpicError::usage(
                "EPIC_QUEUED",
                format!("{epic_id} runs on the queue: its stories are in flight on workers"),
            )
            .hint("go on with `baton epic resume` (it remembers --queue and --parallel)"))
        }
        _ => Ok(()),
    }
}

/// What a queued epic of `project` remembers for `baton epic resume` (`None`: it runs here).
pub fn remembered(project: &Path) -> Option<Remembered> {
    let root = std::fs::canonicalize(project).ok()?;
    let config = super::config::AutopilotConfig::load(&root).ok()?;
    let layout =
        baton_bmad::layout::resolve(&root, config.implementation_artifacts.as_deref()).ok()?;
    let st = QueuedState::load(&layout.dir).ok()??;
    let progress = super::progress::Progress::load(&layout.dir, &layout.rel).ok()?;
    // Only the epic the project works on now.
    if progress.is_some_and(|p| p.epic_id != st.epic_id) {
        return None;
    }
    Some(st.remembered())
}
