//! Every way reading a project's BMAD files (and the epic autopilot built on them) refuses or
//! fails: a stable code, a message that names the file and field at fault, and a hint. One type
//! for both layers: the epic re-exports it as `BmadError`, so a BMAD error reaches the user with
//! its code and location unchanged.

use baton_autopilot::untrusted::UntrustedError;
use std::path::Path;

/// Whether the error is a mistake in what was asked (or in the files given), or a failure
/// while doing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad arguments, configuration or input files: nothing was written (exit code 2).
    Usage,
    /// Something failed while working (exit code 1).
    Failure,
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct BmadError {
    pub code: &'static str,
    pub message: String,
    pub hint: Option<String>,
    pub kind: ErrorKind,
}

pub type Result<T, E = BmadError> = std::result::Result<T, E>;

impl BmadError {
    pub fn usage(code: &'static str, message: impl Into<String>) -> BmadError {
        BmadError {
            code,
            message: message.into(),
            hint: None,
            kind: ErrorKind::Usage,
        }
    }

    pub fn failure(code: &'static str, message: impl Into<String>) -> BmadError {
        BmadError {
            code,
            message: message.into(),
            hint: None,
            kind: ErrorKind::Failure,
        }
    }

    pub fn hint(mut self, hint: impl Into<String>) -> BmadError {
        self.hint = Some(hint.into());
        self
    }

    pub fn is_usage(&self) -> bool {
        self.kind == ErrorKind::Usage
    }

    /// An I/O failure on `path`.
    pub fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> BmadError {
        let shown = path.display().to_string();
        move |e| BmadError::failure("EPIC_IO_FAILED", format!("cannot {action} {shown}: {e}"))
    }

    /// A file the autopilot reads is not what the contract says: `file` is shown as given
    /// (project-relative), `field` is a JSON pointer or a YAML key path.
    pub fn invalid_file(
        code: &'static str,
        file: &str,
        field: Option<&str>,
        problem: impl std::fmt::Display,
    ) -> BmadError {
        let message = match field {
            Some(f) if !f.is_empty() => format!("{file}: field {f}: {problem}"),
            _ => format!("{file}: {problem}"),
        };
        BmadError::usage(code, message)
    }
}

impl From<baton_store::StoreError> for BmadError {
    fn from(e: baton_store::StoreError) -> BmadError {
        BmadError::failure("EPIC_IO_FAILED", e.to_string())
    }
}

/// A file the orchestrator will not read or write (a FIFO, too large, a link out), located.
pub fn refused(shown: &str, e: &UntrustedError) -> BmadError {
    let error = match e {
        UntrustedError::Io(_) => BmadError::failure(e.code(), format!("{shown}: {e}")),
        _ => BmadError::usage(e.code(), format!("{shown}: {e}")),
    };
    error.hint("a phase's model (or a command it ran) may have replaced it: remove or restore the file, then run the command again")
}
