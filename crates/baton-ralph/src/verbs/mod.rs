//! One module per verb group. Each verb returns an [`Output`] (what to print, in text and as
//! JSON, and the exit code) or a [`RalphError`](super::error::RalphError); the CLI only prints.

pub mod check;
pub mod complete;
pub mod control;
pub mod decide;
pub mod insert;
pub mod ledger;
pub mod new;
pub mod next;
pub mod session;
pub mod skills;
pub mod status;

use super::error::{RalphError, Result};
use serde_json::Value;

/// What a verb prints.
#[derive(Debug, Clone)]
pub struct Output {
    pub stdout: String,
    pub stderr: String,
    pub json: Value,
    /// Print `json` (an array) as one compact JSON object per line (`skills --json`).
    pub json_lines: bool,
    pub exit: u8,
}

impl Output {
    pub fn new(json: Value) -> Output {
        Output {
            stdout: String::new(),
            stderr: String::new(),
            json,
            json_lines: false,
            exit: 0,
        }
    }

    pub fn lines(mut self) -> Output {
        self.json_lines = true;
        self
    }

    pub fn out(mut self, text: impl AsRef<str>) -> Output {
        self.stdout.push_str(text.as_ref());
        self
    }

    pub fn err(mut self, text: impl AsRef<str>) -> Output {
        self.stderr.push_str(text.as_ref());
        self
    }

    pub fn exit(mut self, code: u8) -> Output {
        self.exit = code;
        self
    }
}

/// A step index argument: digits only (maestro's `parseInt` would read `3abc` as 3). A number
/// too large for this machine is simply out of range.
pub fn parse_index(raw: &str) -> Result<Option<usize>> {
    if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(RalphError::usage(
            "INDEX_INVALID",
            format!("<index> must be a non-negative integer (got \"{raw}\")"),
        ));
    }
    Ok(raw.parse::<usize>().ok())
}

/// Index `raw` checked against a session of `len` steps.
pub fn index_in(raw: &str, len: usize) -> Result<usize> {
    match parse_index(raw)? {
        Some(i) if i < len => Ok(i),
        _ => Err(RalphError::IndexOutOfRange {
            index: raw.to_string(),
            len,
        }),
    }
}
