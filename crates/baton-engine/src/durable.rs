//! The durable-point hook: where an invocation has made its writes durable, told to whoever
//! must copy them (a worker of the work queue), who may stop the invocation there.

use baton_store::Phase;

/// Where an invocation just made its writes durable (see [`OnDurable`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DurablePoint {
    /// A model turn's writes (tool files, state, `run.json`, conversation and audit lines),
    /// flushed before the next model call.
    Turn,
    /// The end of the invocation (completed, failed, stopped, waiting for a person).
    Phase(Phase),
}

/// A hook's future (boxed, so the hook can be a trait object).
pub type DurableFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), DurableStop>> + Send + 'a>>;

/// Told at every durable point of an invocation, after the driver's flush and before anything
/// else is written or sent: a worker of the work queue copies the run's durable files (and
/// the project's changes) to its database there, under its lease. An error stops the drive at
/// once with `EngineError::Stopped`: the driver writes nothing more, and the next model call
/// is not made.
pub trait OnDurable: Send + Sync {
    fn durable<'a>(&'a self, run_id: &'a str, at: DurablePoint) -> DurableFuture<'a>;
}

/// Why an [`OnDurable`] hook stopped the invocation (e.g. `LEASE_LOST`).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct DurableStop {
    pub code: &'static str,
    pub message: String,
}
