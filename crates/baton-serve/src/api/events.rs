//! `GET /api/runs/{id}/events`: a run's audit log (or its conversation) as Server-Sent Events,
//! one event per line, `id:` = the line number (1-based), so a reconnecting browser sends
//! `Last-Event-ID` and gets only the lines after it. The file is followed by a short poll
//! (new lines are out within ~`AppState::poll`), and `run` events tell when the run's phase
//! or node changes.
//!
//! Bounded: a line is at most [`MAX_LINE`] bytes (a longer one becomes a `damaged` event),
//! a read takes at most [`CHUNK`] bytes, and at most [`QUEUE`] events wait for a slow client.
//! The stream ends when the client goes, when the server stops, or when the file shrinks. At
//! most `MAX_STREAMS` streams are open at once (`SSE_LIMIT`, 503).

use super::blocking::blocking;
use super::error::ApiError;
use crate::state::{AppState, MAX_STREAMS};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use baton_engine::inspect;
use baton_store::Project;
use futures_util::stream::Stream;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::io::SeekFrom;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::mpsc;

/// The longest line sent; longer ones are reported, not sent.
pub const MAX_LINE: usize = 1024 * 1024;
/// Bytes read per look at the file.
pub const CHUNK: usize = 64 * 1024;
/// Events waiting for a slow client, at most.
pub const QUEUE: usize = 64;
/// How often the run's metadata is looked at for `run` events.
const RUN_EVERY: Duration = Duration::from_millis(250);

#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventsParams {
    /// `execution` (the audit log, default) or `conversation`.
    pub log: Option<String>,
}

pub async fn events(
    State(state): State<AppState>,
    Path(id): Path<String>,
    params: Result<Query<EventsParams>, axum::extract::rejection::QueryRejection>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let Query(params) =
        params.map_err(|e| ApiError::bad_request("QUERY_INVALID", e.body_text()))?;
    let conversation = match params.log.as_deref() {
        None | Some("execution") => false,
        Some("conversation") => true,
        Some(other) => {
            return Err(ApiError::bad_request(
                "QUERY_INVALID",
                format!("unknown log {other:?}; execution or conversation"),
            ));
        }
    };
    // A Last-Event-ID that is not a line number starts from the beginning.
    let after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    let permit = state.streams.clone().try_acquire_owned().map_err(|_| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "SSE_LIMIT",
            format!("{MAX_STREAMS} event streams are open already"),
        )
        .hint("close other tabs of this server, then reload")
    })?;
    let store = state.store.clone();
    let (project, run_id) = blocking(state.blocking.clone(), move || {
        let (project, run) = store.find_run(&id).map_err(|e| ApiError::from(&e))?;
        Ok((project, run.run_id))
    })
    .await?;
    let paths = project.run_paths(&run_id);
    let file = if conversation {
        paths.conversation_log
    } else {
        paths.execution_log
    };
    let (tx, rx) = mpsc::channel(QUEUE);
    let follower = Follower {
        file,
        after,
        tx,
        project,
        run_id,
        poll: state.poll,
        bound: state.blocking.clone(),
    };
    let shutdown = state.shutdown.clone();
    tokio::spawn(async move {
        // Held while the stream lives.
        let _permit = permit;
        tokio::select! {
            () = follower.run() => {}
            () = shutdown.cancelled() => {}
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|event| (Ok(event), rx))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

struct Follower {
    file: PathBuf,
    /// Lines up to this number were seen already.
    after: u64,
    tx: mpsc::Sender<Event>,
    project: Project,
    run_id: String,
    poll: Duration,
    /// The server's bound on blocking calls: a stream's run reads take a permit too.
    bound: crate::bounded::Bounded,
}

/// Where the reading stands.
#[derive(Default)]
struct Cursor {
    offset: u64,
    line: u64,
    /// The start of a line whose end has not been written yet.
    partial: Vec<u8>,
    /// The current line is over the limit: its bytes are dropped until its end.
    too_long: bool,
}

impl Follower {
    async fn run(self) {
        let mut cursor = Cursor::default();
        let mut last_run: Option<Value> = None;
        let mut run_checked = Instant::now() - RUN_EVERY;
        let mut buf = vec![0u8; CHUNK];
        loop {
            if self.tx.is_closed() {
                return;
            }
            if run_checked.elapsed() >= RUN_EVERY {
                run_checked = Instant::now();
                if let Some(run) = self.run_event().await
                    && last_run.as_ref() != Some(&run)
                {
                    let event = Event::default().event("run").data(run.to_string());
                    last_run = Some(run);
                    if self.tx.send(event).await.is_err() {
                        return;
                    }
                }
            }
            let read = match self.read(&mut cursor, &mut buf).await {
                Ok(n) => n,
                Err(Stop) => return,
            };
            if read < CHUNK {
                tokio::time::sleep(self.poll).await;
            }
        }
    }

    /// The run as `runs show` reports it, reduced to what changes while it runs.
    async fn run_event(&self) -> Option<Value> {
        let (project, id) = (self.project.clone(), self.run_id.clone());
        self.bound
            .run(move || {
                let run = project.get_run(&id).ok()?;
                let json = inspect::run_json(&project, &run);
                Some(json!({
                    "runId": json["runId"],
                    "phase": json["phase"],
                    "interrupted": json.get("interrupted").cloned().unwrap_or(Value::Bool(false)),
                    // Whether a process holds the driver lock: the page says "Live." only then.
                    "driven": baton_store::driver_lock::is_driven(&project, &id),
                    "currentNodeId": json["currentNodeId"],
                    "waitingFor": json["waitingFor"],
                    "lastUpdatedAt": json["lastUpdatedAt"],
                }))
            })
            .await
            .ok()
            .flatten()
    }

    /// Reads what was appended since the last look and sends its complete lines. Returns the
    /// bytes read.
    async fn read(&self, cursor: &mut Cursor, buf: &mut [u8]) -> Result<usize, Stop> {
        let mut file = match tokio::fs::File::open(&self.file).await {
            Ok(f) => f,
            // Not written yet: the run has not logged anything.
            Err(_) => return Ok(0),
        };
        let len = file.metadata().await.map(|m| m.len()).unwrap_or(0);
        if len < cursor.offset {
            // The log is append-only; a shorter file was replaced: the line numbers the
            // client holds mean nothing any more.
            let _ = self
                .tx
                .send(
                    Event::default()
                        .event("reset")
                        .data("{\"reason\":\"the log file shrank\"}"),
                )
                .await;
            return Err(Stop);
        }
        if len == cursor.offset {
            return Ok(0);
        }
        if file.seek(SeekFrom::Start(cursor.offset)).await.is_err() {
            return Ok(0);
        }
        let n = file.read(buf).await.unwrap_or(0);
        cursor.offset += n as u64;
        let mut rest = &buf[..n];
        while let Some(end) = rest.iter().position(|b| *b == b'\n') {
            let piece = &rest[..end];
            rest = &rest[end + 1..];
            cursor.line += 1;
            let event = if cursor.too_long || cursor.partial.len() + piece.len() > MAX_LINE {
                damaged(cursor.line, format!("the line is over {MAX_LINE} bytes"))
            } else {
                cursor.partial.extend_from_slice(piece);
                record(cursor.line, &cursor.partial)
            };
            cursor.partial.clear();
            cursor.too_long = false;
            if cursor.line > self.after && self.tx.send(event).await.is_err() {
                return Err(Stop);
            }
        }
        if cursor.too_long || cursor.partial.len() + rest.len() > MAX_LINE {
            cursor.partial.clear();
            cursor.too_long = true;
        } else {
            cursor.partial.extend_from_slice(rest);
        }
        Ok(n)
    }
}

/// The client went, or the stream cannot go on.
struct Stop;

/// A line as a `record` event: the JSON value written again on one line (so nothing in it can
/// break the event framing), or a `damaged` event when it is not JSON.
fn record(line: u64, bytes: &[u8]) -> Event {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    match serde_json::from_str::<Value>(text) {
        Ok(value) => Event::default()
            .id(line.to_string())
            .event("record")
            .data(value.to_string()),
        Err(e) => damaged(line, format!("not JSON: {e}")),
    }
}

fn damaged(line: u64, why: String) -> Event {
    Event::default()
        .id(line.to_string())
        .event("damaged")
        .data(json!({"line": line, "error": why}).to_string())
}
