//! The record of a run's exchanges: one JSON line each, appended and synced as each ends, and
//! read back to serve a replay.

use crate::error::GatewayError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What replaces the operator's key or the per-run token wherever one would be written.
pub const REDACTED: &str = "<redacted>";

/// One request and its answer, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    /// The order the requests arrived in (not the order their answers ended).
    pub seq: u64,
    pub method: String,
    /// Path and query, as the client sent them.
    pub path: String,
    /// The API's own headers (version, betas, content type); never any credential.
    #[serde(default)]
    pub request_headers: BTreeMap<String, String>,
    /// The body sent upstream: JSON, or a string when it was not JSON, null when empty.
    #[serde(default)]
    pub request: Value,
    pub status: u16,
    #[serde(default)]
    pub response_headers: BTreeMap<String, String>,
    /// The answer's body as the client got it (server-sent events or JSON).
    pub response: String,
    /// The answer was longer than the record keeps; `response` is its beginning.
    #[serde(default, skip_serializing_if = "is_false")]
    pub response_truncated: bool,
    /// The answer was not UTF-8; `response` holds it with the bad bytes replaced.
    #[serde(default, skip_serializing_if = "is_false")]
    pub response_lossy: bool,
    /// The answer did not end: the upstream broke it off or the client hung up.
    #[serde(default, skip_serializing_if = "is_false")]
    pub cut: bool,
    pub millis: u64,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Exchange {
    /// The path without its query.
    pub fn route_path(&self) -> &str {
        self.path.split('?').next().unwrap_or_default()
    }

    pub fn model(&self) -> Option<&str> {
        self.request.get("model").and_then(Value::as_str)
    }
}

/// The record being written.
#[derive(Debug, Clone)]
pub struct Recorder {
    path: PathBuf,
    file: Arc<Mutex<std::fs::File>>,
    /// Strings that must never be written (the operator's key, the per-run token).
    secrets: Arc<Vec<String>>,
}

impl Recorder {
    pub fn open(path: &Path, secrets: Vec<String>) -> Result<Recorder, GatewayError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| GatewayError::RecordWrite {
                path: path.display().to_string(),
                source,
            })?;
        Ok(Recorder {
            path: path.to_path_buf(),
            file: Arc::new(Mutex::new(file)),
            secrets: Arc::new(secrets.into_iter().filter(|s| !s.is_empty()).collect()),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `exchange` as one line and syncs it, so a killed run keeps every exchange that
    /// ended before.
    pub fn append(&self, exchange: &Exchange) -> std::io::Result<()> {
        let mut line = serde_json::to_string(exchange).map_err(std::io::Error::other)?;
        for secret in self.secrets.iter() {
            if line.contains(secret.as_str()) {
                line = line.replace(secret.as_str(), REDACTED);
            }
        }
        line.push('\n');
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        // One write of the whole line: appends from several answers never interleave.
        file.write_all(line.as_bytes())?;
        file.sync_data()
    }
}

/// Why a replay has no answer for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Miss {
    /// Every recorded exchange of this method and path was served.
    Exhausted,
    /// The record holds no such request (another path, or another model).
    Mismatch,
}

impl Miss {
    pub fn code(self) -> &'static str {
        match self {
            Miss::Exhausted => "REPLAY_EXHAUSTED",
            Miss::Mismatch => "REPLAY_MISMATCH",
        }
    }
}

/// A record being replayed.
#[derive(Debug)]
pub struct Replay {
    exchanges: Vec<Exchange>,
    served: Vec<bool>,
}

impl Replay {
    pub fn load(path: &Path) -> Result<Replay, GatewayError> {
        let fail = |message: String| GatewayError::Record {
            path: path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
        let mut exchanges = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let exchange: Exchange = serde_json::from_str(line)
                .map_err(|e| fail(format!("line {} is not an exchange: {e}", i + 1)))?;
            exchanges.push(exchange);
        }
        exchanges.sort_by_key(|e| e.seq);
        let served = vec![false; exchanges.len()];
        Ok(Replay { exchanges, served })
    }

    /// The next exchange recorded for `method` on `path` (no query) asking `model`.
    pub fn next(
        &mut self,
        method: &str,
        path: &str,
        model: Option<&str>,
    ) -> Result<Exchange, Miss> {
        let same_route = |e: &Exchange| e.method == method && e.route_path() == path;
        let found = self
            .exchanges
            .iter()
            .zip(&self.served)
            .position(|(e, served)| !served && same_route(e) && e.model() == model);
        if let Some(i) = found {
            self.served[i] = true;
            return Ok(self.exchanges[i].clone());
        }
        let pending = self
            .exchanges
            .iter()
            .zip(&self.served)
            .any(|(e, served)| !served && same_route(e));
        if !pending && self.exchanges.iter().any(same_route) {
            Err(Miss::Exhausted)
        } else {
            Err(Miss::Mismatch)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn exchange(seq: u64, path: &str, model: &str) -> Exchange {
        Exchange {
            seq,
            method: "POST".into(),
            path: path.into(),
            request_headers: BTreeMap::new(),
            request: json!({"model": model}),
            status: 200,
            response_headers: BTreeMap::new(),
            response: format!("answer {seq}"),
            response_truncated: false,
            response_lossy: false,
            cut: false,
            millis: 1,
        }
    }

    #[test]
    fn replay_serves_in_arrival_order_per_route_and_model() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let rec = Recorder::open(&path, vec!["sk-secret".into()]).unwrap();
        // Answers ended out of order; the record is replayed in arrival order.
        for e in [
            exchange(2, "/v1/messages?beta=true", "big"),
            exchange(1, "/v1/messages?beta=true", "small"),
            exchange(0, "/v1/messages", "big"),
        ] {
            rec.append(&e).unwrap();
        }
        let mut r = Replay::load(&path).unwrap();
        let m = |r: &mut Replay, model| r.next("POST", "/v1/messages", Some(model)).map(|e| e.seq);
        assert_eq!(m(&mut r, "small"), Ok(1));
        assert_eq!(m(&mut r, "big"), Ok(0));
        assert_eq!(m(&mut r, "small"), Err(Miss::Mismatch));
        assert_eq!(m(&mut r, "big"), Ok(2));
        assert_eq!(m(&mut r, "big"), Err(Miss::Exhausted));
        assert_eq!(
            r.next("GET", "/v1/models", None).map(|e| e.seq),
            Err(Miss::Mismatch)
        );
    }

    #[test]
    fn secrets_are_never_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let rec = Recorder::open(&path, vec!["sk-secret".into(), "tok".into()]).unwrap();
        let mut e = exchange(0, "/v1/messages", "m");
        e.response = "the key was sk-secret and the token tok".into();
        rec.append(&e).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains("sk-secret") && !text.contains("tok "),
            "{text}"
        );
        assert!(text.contains(REDACTED));
    }
}
