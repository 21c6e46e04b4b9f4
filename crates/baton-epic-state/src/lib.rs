//! The files of the epic autopilot (seed 004's contract) and the data the board reads from
//! them, below the loop: `.run-epic-state.json` ([`run_state`]), `{story}.agent-state.json`
//! with its questions ([`agent_state`]), `{story}.review.json` ([`review`]) — each read with an
//! error naming the file and field ([`jsonfile`]) and written durably — the artifacts folder a
//! project's epics work in ([`layout_record`]), one orchestrator per project ([`lock`]), and
//! what `sprint-status.yaml` holds that a board cannot show ([`findings`]).

pub mod agent_state;
pub mod error;
pub mod findings;
pub mod jsonfile;
pub mod layout_record;
pub mod lock;
pub mod review;
pub mod run_state;
