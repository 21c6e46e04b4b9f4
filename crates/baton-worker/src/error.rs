use baton_queue::QueueError;

/// Why a worker, or one unit it held, stopped.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error(transparent)]
    Queue(#[from] QueueError),
    #[error("{message}")]
    Other { code: &'static str, message: String },
}

impl WorkerError {
    pub fn other(code: &'static str, message: impl Into<String>) -> WorkerError {
        WorkerError::Other {
            code,
            message: message.into(),
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            WorkerError::Queue(e) => e.code(),
            WorkerError::Other { code, .. } => code,
        }
    }

    pub fn hint(&self) -> Option<String> {
        match self {
            WorkerError::Queue(e) => e.hint(),
            WorkerError::Other { .. } => None,
        }
    }

    /// The lease was taken over: nothing more may be written.
    pub fn is_lease_lost(&self) -> bool {
        self.code() == LEASE_LOST
    }
}

pub const LEASE_LOST: &str = "LEASE_LOST";
