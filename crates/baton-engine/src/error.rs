//! Why an invocation stopped short, and the code of a run stopped on request.

use crate::durable::DurableStop;
use baton_store::RunError;

/// The code of a run stopped on request (cancellation, Ctrl-C, SIGTERM).
pub const ABORTED: &str = "ENGINE_ABORTED";

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Run(#[from] RunError),
    #[error("cannot read the run state: {0}")]
    State(String),
    /// The [`OnDurable`](crate::durable::OnDurable) hook stopped the invocation; nothing more was written or sent.
    #[error(transparent)]
    Stopped(DurableStop),
}
