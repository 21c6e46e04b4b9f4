//! What the loop reports while it goes, for a terminal or a log.

use baton_bmad::phase::Phase;
use baton_engine::EngineEvent;

#[derive(Debug, Clone, PartialEq)]
pub enum EpicEvent {
    /// A story is taken up: `index` of `total` stories of the epic (1-based).
    Story {
        index: usize,
        total: usize,
        key: String,
    },
    /// A phase run starts or continues.
    Phase {
        story: String,
        phase: Phase,
        run_id: String,
        review_cycle: u32,
        attempt: u32,
        resumed: bool,
    },
    /// A phase run ended: `completed`, `waiting`, `failed` or `stopped`.
    PhaseEnded {
        story: String,
        phase: Phase,
        run_id: String,
        result: String,
    },
    /// A phase run's question was answered (by the recording, or a person at the terminal).
    Answered {
        story: String,
        question: String,
        answer: String,
    },
    /// A verify command finished.
    Verify {
        command: String,
        passed: bool,
        millis: u128,
    },
    /// A status written to `sprint-status.yaml`.
    Status { key: String, status: String },
    /// Something a person should know that is not a failure.
    Note(String),
    /// What the phase run's engine does.
    Engine(EngineEvent),
}
