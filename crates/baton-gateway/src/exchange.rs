//! One request through the gateway: authenticated, routed, bounded, admitted by the meter,
//! then forwarded (live) or answered from the record (replay); its answer streamed back as it
//! comes, read for usage, settled and recorded.

use crate::auth;
use crate::config::Limits;
use crate::meter::{Admission, Meter, Refusal, Settled};
use crate::record::{Exchange, Recorder, Replay};
use crate::request::{self, Prepared};
use crate::scrub::Scrub;
use crate::tap::Tap;
use crate::upstream;
use crate::wire::{ErrorKind, Route, Wire};
use bytes::Bytes;
use futures_util::StreamExt;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderName, HeaderValue};
use hyper::{HeaderMap, Request, Response, StatusCode};
use serde_json::Value;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use tokio::sync::{Mutex, mpsc, watch};
use tokio_util::task::TaskTracker;

pub type Body = BoxBody<Bytes, std::io::Error>;

/// Chunks of an answer in flight between the upstream and the client: enough to keep the
/// stream moving, few enough that a client that stops reading stops the upstream.
const IN_FLIGHT: usize = 16;

/// Where answers come from.
pub enum Source {
    Live {
        client: reqwest::Client,
        base_url: String,
        api_key: String,
        recorder: Option<Recorder>,
    },
    Replay(Mutex<Replay>),
}

/// What every request of one gateway shares.
pub struct Shared {
    pub wire: Wire,
    pub token: String,
    pub meter: Option<Arc<dyn Meter>>,
    pub cap: Option<u64>,
    pub limits: Limits,
    pub source: Source,
    pub refusal: watch::Sender<Option<Refusal>>,
    pub exchanges: AtomicU64,
    pub seq: AtomicU64,
    pub record_failures: AtomicU64,
    /// Answers still streaming, settling or being recorded.
    pub answers: TaskTracker,
}

/// A request that passed the gateway's checks, about to be answered.
struct Admitted {
    seq: u64,
    method: String,
    path: String,
    route: Route,
    prepared: Prepared,
    started: Instant,
}

pub async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    Ok(answer(&shared, req).await)
}

async fn answer(shared: &Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let started = Instant::now();
    let wire = shared.wire;
    let method = req.method().as_str().to_string();
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    // hyper's read buffer bounds the head only roughly (a read may overshoot it).
    if head_size(&req) > shared.limits.max_request_head {
        return error(
            wire,
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ErrorKind::TooLarge,
            "the request's headers are larger than the gateway's limit",
        );
    }
    if !auth::presents(req.headers(), &shared.token) {
        return error(
            wire,
            StatusCode::UNAUTHORIZED,
            ErrorKind::Authentication,
            "invalid x-api-key: this gateway accepts only its run's token",
        );
    }
    let Some(route) = wire.route(&method, req.uri().path()) else {
        return error(
            wire,
            StatusCode::NOT_FOUND,
            ErrorKind::NotFound,
            &format!(
                "{method} {} is not served by this gateway",
                req.uri().path()
            ),
        );
    };
    let max = shared.limits.max_request_body;
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return too_large(wire, max);
    }
    let headers = req.headers().clone();
    let body = match Limited::new(req.into_body(), max).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => return too_large(wire, max),
        Err(_) => {
            return error(
                wire,
                StatusCode::BAD_REQUEST,
                ErrorKind::InvalidRequest,
                "the request body could not be read",
            );
        }
    };
    let prepared = match route {
        Route::Generate => request::prepare(wire, body, shared.cap),
        // Not a model call: sent as it came.
        Route::CountTokens | Route::Models => request::prepare(wire, body, None),
    };
    if route == Route::Generate
        && let Some(meter) = &shared.meter
    {
        let admission = Admission {
            wire,
            path: path.clone(),
            model: prepared.model.clone(),
            prompt_tokens: prepared.prompt_tokens,
            max_output_tokens: prepared.max_output_tokens,
        };
        if let Err(refusal) = meter.admit(&admission) {
            let message = format!("{}: {}", refusal.code, refusal.message);
            shared.refusal.send_replace(Some(refusal));
            // A 400 is the one error the CLIs do not retry at once.
            return error(
                wire,
                StatusCode::BAD_REQUEST,
                ErrorKind::InvalidRequest,
                &message,
            );
        }
    }
    let admitted = Admitted {
        seq: shared.seq.fetch_add(1, Ordering::SeqCst),
        method,
        path,
        route,
        prepared,
        started,
    };
    match &shared.source {
        Source::Live {
            client,
            base_url,
            api_key,
            recorder,
        } => {
            let live = Live {
                client,
                base_url,
                api_key,
                recorder: recorder.clone(),
            };
            forward(shared, live, admitted, &headers).await
        }
        Source::Replay(replay) => replay_one(shared, replay, admitted).await,
    }
}

struct Live<'a> {
    client: &'a reqwest::Client,
    base_url: &'a str,
    api_key: &'a str,
    recorder: Option<Recorder>,
}

async fn forward(
    shared: &Arc<Shared>,
    live: Live<'_>,
    admitted: Admitted,
    headers: &HeaderMap,
) -> Response<Body> {
    let wire = shared.wire;
    let url = upstream::url(live.base_url, &admitted.path);
    let out_headers = upstream::request_headers(wire, headers, live.api_key);
    let method =
        reqwest::Method::from_bytes(admitted.method.as_bytes()).unwrap_or(reqwest::Method::POST);
    let mut request = live.client.request(method, url).headers(out_headers);
    if !admitted.prepared.body.is_empty() {
        request = request.body(admitted.prepared.body.clone());
    }
    if admitted.route == Route::Generate {
        shared.exchanges.fetch_add(1, Ordering::SeqCst);
    }
    let response = match request.send().await {
        Ok(r) => r,
        Err(e) => {
            settle(shared, &admitted, 502, Default::default());
            // Without the URL: the upstream's address is not the CLI's business.
            let message = format!("the upstream could not be reached: {}", e.without_url());
            return error(wire, StatusCode::BAD_GATEWAY, ErrorKind::Upstream, &message);
        }
    };
    let status = response.status().as_u16();
    let stream = is_stream(response.headers());
    let back_headers = upstream::response_headers(response.headers());
    let recorded_headers = upstream::recorded_response(response.headers());
    let exchange = Exchange {
        seq: admitted.seq,
        method: admitted.method.clone(),
        path: admitted.path.clone(),
        request_headers: upstream::recorded_request(headers),
        request: recorded_body(&admitted.prepared.body),
        status,
        response_headers: recorded_headers,
        response: String::new(),
        response_truncated: false,
        response_lossy: false,
        cut: false,
        millis: 0,
    };
    let (tx, rx) = mpsc::channel(IN_FLIGHT);
    let pump = Pump {
        shared: shared.clone(),
        tap: Tap::new(wire, stream, shared.limits.max_event),
        scrub: Scrub::new(live.api_key),
        recorder: live.recorder,
        exchange,
        admitted,
        kept: Vec::new(),
    };
    shared.answers.spawn(pump.run(response, tx));
    respond(status, back_headers, channel_body(rx))
}

/// Carries one live answer from the upstream to the client, then settles and records it.
struct Pump {
    shared: Arc<Shared>,
    tap: Tap,
    scrub: Scrub,
    recorder: Option<Recorder>,
    exchange: Exchange,
    admitted: Admitted,
    /// The beginning of the answer, for the record.
    kept: Vec<u8>,
}

type Chunk = Result<Bytes, std::io::Error>;

impl Pump {
    async fn run(mut self, response: reqwest::Response, tx: mpsc::Sender<Chunk>) {
        let mut upstream = response.bytes_stream();
        let mut cut = false;
        loop {
            let next = tokio::select! {
                next = upstream.next() => next,
                // The client hung up: the upstream connection is dropped with `upstream`.
                () = tx.closed() => { cut = true; break; }
            };
            match next {
                None => break,
                Some(Ok(chunk)) => {
                    let out = self.scrub.push(chunk);
                    if !self.pass(out, &tx).await {
                        cut = true;
                        break;
                    }
                }
                Some(Err(e)) => {
                    cut = true;
                    // An error frame makes hyper abort the connection: the client sees a
                    // broken answer, never a clean short one.
                    let _ = tx.send(Err(std::io::Error::other(e.without_url()))).await;
                    break;
                }
            }
        }
        drop(upstream);
        if !cut {
            let rest = std::mem::replace(&mut self.scrub, Scrub::new("")).finish();
            cut = !self.pass(rest, &tx).await;
        }
        drop(tx);
        self.finish(cut).await;
    }

    /// Reads `out` and sends it to the client; false when the client is gone.
    async fn pass(&mut self, out: Bytes, tx: &mpsc::Sender<Chunk>) -> bool {
        if out.is_empty() {
            return true;
        }
        self.tap.push(&out);
        let room = self
            .shared
            .limits
            .max_recorded_response
            .saturating_sub(self.kept.len());
        if out.len() > room {
            self.exchange.response_truncated = true;
        }
        self.kept.extend_from_slice(&out[..out.len().min(room)]);
        tx.send(Ok(out)).await.is_ok()
    }

    async fn finish(self, cut: bool) {
        let Pump {
            shared,
            tap,
            recorder,
            mut exchange,
            admitted,
            kept,
            ..
        } = self;
        let read = tap.finish();
        settle(&shared, &admitted, exchange.status, read);
        let Some(recorder) = recorder else { return };
        let (text, lossy) = text_of(kept);
        exchange.response = text;
        exchange.response_lossy = lossy;
        exchange.cut = cut;
        exchange.millis = millis(admitted.started);
        let appended = tokio::task::spawn_blocking(move || recorder.append(&exchange)).await;
        if !matches!(appended, Ok(Ok(()))) {
            shared.record_failures.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Tells the meter what a model request cost.
fn settle(shared: &Shared, admitted: &Admitted, status: u16, read: crate::tap::Read) {
    if admitted.route != Route::Generate {
        return;
    }
    if let Some(meter) = &shared.meter {
        meter.settle(&Settled {
            wire: shared.wire,
            path: admitted.path.clone(),
            model: admitted.prepared.model.clone(),
            status,
            reported: read.reported,
            counted_prompt: admitted.prepared.prompt_tokens,
            counted_completion: read.counted_completion,
            millis: millis(admitted.started),
        });
    }
}

/// Answers from the record: the next exchange of the same route, streamed as recorded.
async fn replay_one(
    shared: &Arc<Shared>,
    replay: &Mutex<Replay>,
    admitted: Admitted,
) -> Response<Body> {
    let wire = shared.wire;
    let route_path = admitted
        .path
        .split('?')
        .next()
        .unwrap_or_default()
        .to_string();
    let next = replay.lock().await.next(
        &admitted.method,
        &route_path,
        admitted.prepared.model.as_deref(),
    );
    let recorded = match next {
        Ok(e) => e,
        Err(miss) => {
            let message = format!(
                "{}: the record holds no further answer to {} {route_path}{}",
                miss.code(),
                admitted.method,
                admitted
                    .prepared
                    .model
                    .as_deref()
                    .map(|m| format!(" for model {m}"))
                    .unwrap_or_default()
            );
            return error(
                wire,
                StatusCode::INTERNAL_SERVER_ERROR,
                ErrorKind::Replay,
                &message,
            );
        }
    };
    if admitted.route == Route::Generate {
        shared.exchanges.fetch_add(1, Ordering::SeqCst);
    }
    let stream = recorded
        .response_headers
        .get("content-type")
        .is_some_and(|t| t.starts_with("text/event-stream"));
    let mut tap = Tap::new(wire, stream, shared.limits.max_event);
    tap.push(recorded.response.as_bytes());
    settle(shared, &admitted, recorded.status, tap.finish());
    let mut headers = HeaderMap::new();
    for (k, v) in &recorded.response_headers {
        if let (Ok(k), Ok(v)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            headers.insert(k, v);
        }
    }
    // Event by event, as it came; a recorded answer that was cut is cut again.
    let mut chunks: Vec<Chunk> = split_events(&recorded.response)
        .into_iter()
        .map(|s| Ok(Bytes::from(s.to_string())))
        .collect();
    if recorded.cut {
        chunks.push(Err(std::io::Error::other("the recorded answer was cut")));
    }
    let body = StreamBody::new(futures_util::stream::iter(
        chunks.into_iter().map(|c| c.map(Frame::data)),
    ));
    respond(recorded.status, headers, BodyExt::boxed(body))
}

/// `text` cut after each blank line (the end of a server-sent event).
fn split_events(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("\n\n") {
        out.push(&rest[..i + 2]);
        rest = &rest[i + 2..];
    }
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// The size of a request's line and headers, as sent.
fn head_size(req: &Request<Incoming>) -> usize {
    let line = req.method().as_str().len() + req.uri().to_string().len() + 12;
    req.headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum::<usize>()
        + line
}

fn millis(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

fn is_stream(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.trim_start().starts_with("text/event-stream"))
}

/// A request body as recorded: JSON when it is, else text, null when empty.
fn recorded_body(body: &Bytes) -> Value {
    if body.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()))
}

/// Bytes as text, and whether any had to be replaced. A record cut mid-character loses the
/// broken end, not the whole answer.
fn text_of(bytes: Vec<u8>) -> (String, bool) {
    match String::from_utf8(bytes) {
        Ok(s) => (s, false),
        Err(e) => {
            let utf8 = e.utf8_error();
            let bytes = e.into_bytes();
            if utf8.error_len().is_none() {
                // Only the end is a character cut short (by the record's limit).
                let valid = utf8.valid_up_to();
                (String::from_utf8_lossy(&bytes[..valid]).into_owned(), false)
            } else {
                (String::from_utf8_lossy(&bytes).into_owned(), true)
            }
        }
    }
}

fn channel_body(rx: mpsc::Receiver<Chunk>) -> Body {
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk.map(Frame::data), rx))
    });
    BodyExt::boxed(StreamBody::new(stream))
}

fn full(bytes: impl Into<Bytes>) -> Body {
    BodyExt::boxed(Full::new(bytes.into()).map_err(|never| match never {}))
}

fn respond(status: u16, headers: HeaderMap, body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    *response.headers_mut() = headers;
    response
}

/// An error of the gateway's own, in the wire's shape.
fn error(wire: Wire, status: StatusCode, kind: ErrorKind, message: &str) -> Response<Body> {
    let body = wire.error_body(status.as_u16(), kind, message).to_string();
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    respond(status.as_u16(), headers, full(body))
}

fn too_large(wire: Wire, max: usize) -> Response<Body> {
    error(
        wire,
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorKind::TooLarge,
        &format!("the request body is larger than the gateway's limit of {max} bytes"),
    )
}
