//! What a worker reports as it goes, and where those reports go.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// What a worker reports as it goes (the CLI prints these on stderr).
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerEvent {
    Started {
        worker: String,
        database: String,
    },
    Claimed {
        unit: i64,
        epoch: i64,
    },
    Resuming {
        unit: i64,
        run_id: String,
        commit: String,
    },
    /// A waiting unit answered from the database: its run goes on with the answer.
    Answering {
        unit: i64,
        run_id: String,
    },
    Completed {
        unit: i64,
        branch: String,
        commit: String,
    },
    /// A failure that may pass: the unit is queued again, claimable after `delay`.
    Retrying {
        unit: i64,
        code: String,
        message: String,
        attempt: i64,
        of: i64,
        delay: Duration,
    },
    Waiting {
        unit: i64,
    },
    /// The database connection was lost; the worker connects again once it answers.
    DatabaseLost {
        message: String,
    },
    /// Handed back to the queue as the worker stops.
    Released {
        unit: i64,
    },
    /// Folders of units that workers stopped on this home left behind were removed.
    LeftFoldersRemoved {
        count: usize,
    },
    /// The project's webhooks could not be used for a unit's end (the unit's end stands).
    NotifyRefused {
        unit: i64,
        message: String,
    },
    /// The unit's folder could not be removed (the worker goes on).
    CleanFailed {
        unit: i64,
        message: String,
    },
    Failed {
        unit: i64,
        code: String,
        message: String,
    },
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

impl fmt::Display for WorkerEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkerEvent::Started { worker, database } => write!(f, "worker {worker} on {database}"),
            WorkerEvent::Claimed { unit, epoch } => {
                write!(f, "claimed unit {unit} at epoch {epoch}")
            }
            WorkerEvent::Resuming {
                unit,
                run_id,
                commit,
            } => write!(
                f,
                "unit {unit}: resuming run {run_id} from its checkpoint at {}",
                short(commit)
            ),
            WorkerEvent::Completed {
                unit,
                branch,
                commit,
            } => {
                write!(f, "unit {unit} completed: {branch} at {}", short(commit))
            }
            WorkerEvent::Waiting { unit } => write!(f, "unit {unit} waits for a person"),
            WorkerEvent::Answering { unit, run_id } => {
                write!(f, "unit {unit}: answering run {run_id} from the database")
            }
            WorkerEvent::Retrying {
                unit,
                code,
                message,
                attempt,
                of,
                delay,
            } => write!(
                f,
                "unit {unit}: {code}: {message} (failure {attempt} of {of} in a row): tried \
                 again in {:.1}s",
                delay.as_secs_f64()
            ),
            WorkerEvent::LeftFoldersRemoved { count } => write!(
                f,
                "removed {count} unit folder{} left by workers that stopped on this home",
                if *count == 1 { "" } else { "s" }
            ),
            WorkerEvent::CleanFailed { unit, message } => {
                write!(f, "warning: unit {unit}: its folder stays: {message}")
            }
            WorkerEvent::NotifyRefused { unit, message } => {
                write!(f, "warning: unit {unit}: no webhook sent: {message}")
            }
            WorkerEvent::DatabaseLost { message } => {
                write!(
                    f,
                    "the database connection was lost ({message}); connecting again"
                )
            }
            WorkerEvent::Released { unit } => {
                write!(
                    f,
                    "unit {unit} handed back to the queue at its last checkpoint"
                )
            }
            WorkerEvent::Failed {
                unit,
                code,
                message,
            } => {
                write!(f, "unit {unit} failed: {code}: {message}")
            }
        }
    }
}

/// Where a worker's events go.
pub type Events = Arc<dyn Fn(&WorkerEvent) + Send + Sync>;
