use baton_queue::QueueError;

/// Why a worker, or one unit it held, stopped.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error(transparent)]
    Queue(#[from] QueueError),
    #[error("{message}")]
    Other { code: &'static str, message: String },
    /// A request refused before anything was changed, with what to do instead.
    #[error("{message}")]
    Refused {
        code: &'static str,
        message: String,
        hint: String,
    },
}

impl WorkerError {
    pub fn other(code: &'static str, message: impl Into<String>) -> WorkerError {
        WorkerError::Other {
            code,
            message: message.into(),
        }
    }

    pub fn refused(
        code: &'static str,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> WorkerError {
        WorkerError::Refused {
            code,
            message: message.into(),
            hint: hint.into(),
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            WorkerError::Queue(e) => e.code(),
            WorkerError::Other { code, .. } | WorkerError::Refused { code, .. } => code,
        }
    }

    pub fn hint(&self) -> Option<String> {
        match self {
            WorkerError::Queue(e) => e.hint(),
            WorkerError::Other { .. } => None,
            WorkerError::Refused { hint, .. } => Some(hint.clone()),
        }
    }

    /// The lease was taken over: nothing more may be written.
    pub fn is_lease_lost(&self) -> bool {
        self.code() == LEASE_LOST
    }
}

pub const LEASE_LOST: &str = "LEASE_LOST";
