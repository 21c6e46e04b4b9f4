//! How a command reports that it could not do its job: `error[CODE]: message` and a hint on
//! stderr, or, with `--json`, `{"error": {"code", "message", "hint"}}` on stdout so a script
//! always gets JSON.

use crate::exit;
use baton_engine::runner::RunnerError;
use baton_store::{DriverLockError, RunError, StoreError};
use serde_json::json;

#[derive(Debug)]
pub struct Failure {
    pub code: String,
    pub message: String,
    pub hint: Option<String>,
    pub exit: u8,
}

impl Failure {
    pub fn new(code: impl Into<String>, message: impl Into<String>, exit: u8) -> Failure {
        Failure {
            code: code.into(),
            message: message.into(),
            hint: None,
            exit,
        }
    }

    pub fn hint(mut self, hint: Option<String>) -> Failure {
        self.hint = hint;
        self
    }

    /// Prints the failure and returns the exit code.
    pub fn report(&self, as_json: bool) -> u8 {
        if as_json {
            let body =
                json!({"error": {"code": self.code, "message": self.message, "hint": self.hint}});
            outln!(
                "{}",
                serde_json::to_string_pretty(&body).unwrap_or_else(|_| body.to_string())
            );
        } else {
            // A message can quote what a model or a file said: its escapes are shown, not sent.
            use crate::ui::{Paint, color::err, visible, visible_line};
            let head = err(Paint::Bad, &format!("error[{}]", visible_line(&self.code)));
            eprintln!("{head}: {}", visible(&self.message));
            if let Some(h) = &self.hint {
                eprintln!("  {} {}", err(Paint::Hint, "help:"), visible(h));
            }
        }
        self.exit
    }

    /// The best description of any error a command returns: known error types keep their
    /// code and hint; anything else is reported with its cause chain, each cause once.
    pub fn from_anyhow(e: &anyhow::Error) -> Failure {
        if let Some(e) = e.downcast_ref::<RunnerError>() {
            return Failure::from(e);
        }
        if let Some(e) = e.downcast_ref::<RunError>() {
            return Failure::from(e);
        }
        if let Some(e) = e.downcast_ref::<DriverLockError>() {
            return Failure::new(e.code(), e.to_string(), exit::FAILURE).hint(e.hint());
        }
        if let Some(e) = e.downcast_ref::<StoreError>() {
            return Failure::new("STORE_IO_FAILED", e.to_string(), exit::FAILURE);
        }
        Failure::new("FAILED", chain(e), exit::FAILURE)
    }
}

/// Whether the error is a write to a closed pipe.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// `outer: cause: cause`, skipping a cause whose text the previous message already contains
/// (error types that print their source would otherwise repeat the OS error).
pub fn chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

impl From<&RunError> for Failure {
    fn from(e: &RunError) -> Failure {
        let exit = if matches!(e, RunError::Store(_)) {
            exit::FAILURE
        } else {
            exit::INVALID
        };
        Failure::new(e.code(), e.to_string(), exit).hint(e.hint())
    }
}

impl From<&RunnerError> for Failure {
    fn from(e: &RunnerError) -> Failure {
        let exit = if e.is_usage() {
            exit::INVALID
        } else {
            exit::FAILURE
        };
        Failure::new(e.code(), e.to_string(), exit).hint(e.hint())
    }
}
