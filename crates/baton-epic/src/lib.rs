//! The epic autopilot (`baton epic`): BMAD's implementation phase driven story after story —
//! create-story → validate → dev → revision → code-review — with the file contract of seed 004
//! (`sprint-status.yaml`, `.run-epic-state.json`, `{story}.agent-state.json`,
//! `{story}.review.json`). The orchestrator is deterministic Rust; every phase is an ordinary
//! baton run of a package workflow, so it is resumable, audited and replayable.

pub mod board;
pub mod budget;
pub mod bundled;
pub mod config;
pub mod consent;
mod consent_ask;
mod ctx;
pub mod error;
pub mod events;
pub use baton_epic_state::{
    agent_state, findings, jsonfile, layout_record, lock, review, run_state,
};
pub use baton_worktree::{git, merge, publish, verify, worktree};
mod executor_phase;
pub mod method;
mod method_consent;
mod method_run;
mod method_verdict;
pub mod model_check;
pub mod models;
pub mod next_step;
pub mod notify;
pub mod orchestrator;
pub mod outcome;
pub mod parallel;
pub mod parallel_board;
mod parallel_merge;
mod parallel_state;
pub mod phase_run;
pub mod pipeline;
pub mod progress;
pub mod publishing;
pub mod queued;
pub mod report;
pub mod retrospective;
pub mod schedule;
pub mod specs;
pub mod status_board;
pub mod stories_mode;
pub mod story;
mod story_lookup;
pub mod tickets_mode;

pub use agent_state::{AgentState, Question};
pub use baton_bmad::Phase;
pub use board::{Board, status};
pub use error::{EpicError, ErrorKind};
pub use events::EpicEvent;
pub use models::ModelSource;
pub use orchestrator::{
    AskFn, Command, EpicOutcome, EpicReport, EpicSettings, LoopOptions, PlannedStory, execute,
    execute_parallel, execute_queued, execute_with_options, preflight,
};
pub use status_board::status_board;

use std::path::Path;

/// `baton epic stop`: asks the live orchestrator of `project` to pause at the next phase
/// boundary. Refused when none runs.
pub fn stop(project: &Path) -> error::Result<()> {
    let root = std::fs::canonicalize(project).map_err(|e| {
        EpicError::usage(
            "PROJECT_NOT_FOUND",
            format!("project {} cannot be opened: {e}", project.display()),
        )
    })?;
    let config = config::AutopilotConfig::load(&root)?;
    let layout = baton_bmad::layout::resolve(&root, config.implementation_artifacts.as_deref())?;
    if !lock::is_held(&layout.dir) {
        return Err(EpicError::failure(
            "EPIC_NOT_RUNNING",
            "no `baton epic` process is running on this project",
        )
        .hint(
            "`baton epic status` shows where the epic stands; `baton epic resume` continues it",
        ));
    }
    lock::request_stop(&layout.dir)
}
