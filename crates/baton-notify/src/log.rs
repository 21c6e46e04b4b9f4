//! The delivery log: one JSON line per try and per event that never got one (dropped from a
//! full queue, abandoned at exit), appended and synced to `<store>/notify/deliveries.jsonl`.
//! It names a webhook by its place and host only, never its URL's path or its secret.

use crate::error::NotifyError;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

pub const FILE: &str = "deliveries.jsonl";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The endpoint answered 2xx.
    Delivered,
    /// This try failed; another follows.
    Retry,
    /// The last try failed: the event is not delivered.
    Failed,
    /// The queue was full: the event was never tried.
    Dropped,
    /// The process ended before the event was delivered (its grace period ran out).
    Abandoned,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub at: String,
    pub delivery: String,
    pub event: String,
    pub project: String,
    /// `#<place> <scheme>://<host>`.
    pub webhook: String,
    pub attempt: u32,
    pub outcome: Outcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub millis: u64,
}

/// The log of the store at `home`.
pub fn path(home: &Path) -> PathBuf {
    home.join("notify").join(FILE)
}

/// Appends one entry (one `write` of a whole line, then synced: another process appending at
/// the same time cannot interleave it).
pub fn append(home: &Path, entry: &Entry) -> Result<(), NotifyError> {
    let file = path(home);
    let fail = |e: std::io::Error| NotifyError::Log {
        message: format!("{} cannot be written: {e}", file.display()),
    };
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    let mut line = serde_json::to_string(entry).map_err(|e| NotifyError::Log {
        message: e.to_string(),
    })?;
    line.push('\n');
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&file)
        .map_err(fail)?;
    f.write_all(line.as_bytes()).map_err(fail)?;
    f.sync_data().map_err(fail)
}

/// Every entry, oldest first. A line a crash cut short is skipped.
pub fn read(home: &Path) -> Result<Vec<Entry>, NotifyError> {
    let file = path(home);
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(NotifyError::Log {
                message: format!("{} cannot be read: {e}", file.display()),
            });
        }
    };
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn entry(attempt: u32, outcome: Outcome) -> Entry {
        Entry {
            at: "2026-11-29T13:00:00Z".into(),
            delivery: "d1".into(),
            event: "question".into(),
            project: "taskboard".into(),
            webhook: "#1 http://127.0.0.1:9".into(),
            attempt,
            outcome,
            status: Some(503),
            error: None,
            millis: 3,
        }
    }

    #[test]
    fn entries_are_appended_and_read_back_in_order() {
        let home = tempfile::tempdir().unwrap();
        assert!(read(home.path()).unwrap().is_empty());
        append(home.path(), &entry(1, Outcome::Retry)).unwrap();
        append(home.path(), &entry(2, Outcome::Delivered)).unwrap();
        // A line cut short by a crash does not hide the others.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(path(home.path()))
            .unwrap();
        f.write_all(b"{\"at\":\"2026").unwrap();
        let got = read(home.path()).unwrap();
        assert_eq!(
            got,
            vec![entry(1, Outcome::Retry), entry(2, Outcome::Delivered)]
        );
        let text = std::fs::read_to_string(path(home.path())).unwrap();
        assert!(
            text.starts_with("{\"at\":\"2026-11-29T13:00:00Z\",\"delivery\":\"d1\""),
            "{text}"
        );
        assert!(text.contains("\"outcome\":\"retry\""), "{text}");
    }
}
