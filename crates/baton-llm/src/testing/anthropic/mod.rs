//! A played Anthropic Messages API on 127.0.0.1, for tests: it checks each request as strictly
//! as the API does (see [`check`]), answers with the next scripted message, whole or as the
//! API's event stream, and reports usage from a played prompt cache that honours `cache_control`
//! breakpoints as Anthropic's does ([`cache`]). Scripted answers may carry thinking blocks with
//! signatures; a later request must send them back unchanged.

pub mod cache;
pub mod check;

use crate::trace::Trace;
use cache::{BreakpointCache, CacheUse};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Largest request body read.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// One request as the server saw it, and what it answered.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
    pub status: u16,
    /// The usage reported (a refused request has none).
    pub usage: Option<CacheUse>,
}

impl Exchange {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct State {
    answers: VecDeque<Value>,
    cache: BreakpointCache,
    issued: check::Issued,
    exchanges: Vec<Exchange>,
}

/// The server; it stops accepting when dropped.
pub struct AnthropicServer {
    port: u16,
    stop: Arc<AtomicBool>,
    state: Arc<Mutex<State>>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

impl AnthropicServer {
    /// Serves `answers` (Messages API `message` objects, see [`message`]) in order.
    pub fn start(answers: Vec<Value>) -> std::io::Result<AnthropicServer> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(Mutex::new(State {
            answers: answers.into(),
            ..State::default()
        }));
        let (stopped, shared) = (stop.clone(), state.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let shared = shared.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, &shared);
                });
            }
        });
        Ok(AnthropicServer { port, stop, state })
    }

    /// `http://127.0.0.1:<port>/v1`
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    pub fn exchanges(&self) -> Vec<Exchange> {
        lock(&self.state).exchanges.clone()
    }

    /// Scripted answers not served yet.
    pub fn remaining(&self) -> usize {
        lock(&self.state).answers.len()
    }
}

impl Drop for AnthropicServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// An answer message: `thinking` (with a signature) first when given, then the text when not
/// empty, then `tool_use` blocks of `(id, wire name, input)`.
pub fn message(thinking: Option<&str>, text: &str, calls: &[(String, String, Value)]) -> Value {
    let mut content = Vec::new();
    if let Some(t) = thinking {
        content.push(json!({"type": "thinking", "thinking": t,
            "signature": format!("sig-{:016x}", fingerprint(t))}));
    }
    if !text.is_empty() {
        content.push(json!({"type": "text", "text": text}));
    }
    for (id, name, input) in calls {
        content.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
    }
    let stop = if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    json!({"id": "msg_played", "type": "message", "role": "assistant", "model": "played",
        "content": content, "stop_reason": stop, "stop_sequence": null})
}

fn fingerprint(s: &str) -> u64 {
    // FNV-1a: stable across runs, unlike the std hasher.
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The recorded answers of `trace` as Messages API answers (tool names as on the wire,
/// `fs.read` → `fs_read`), each with a thinking block when `thinking`.
pub fn trace_answers(trace: &Trace, thinking: bool) -> Vec<Value> {
    trace
        .dialogues()
        .enumerate()
        .map(|(i, d)| {
            let calls: Vec<(String, String, Value)> = d
                .tool_calls
                .iter()
                .map(|c| {
                    let input = serde_json::from_str(&c.arguments).unwrap_or_else(|_| json!({}));
                    (c.id.clone(), c.name.replace('.', "_"), input)
                })
                .collect();
            let thought = format!("Turn {i}: deciding what to do next.");
            message(thinking.then_some(thought.as_str()), &d.content, &calls)
        })
        .collect()
}

fn serve(mut stream: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    let head_end = loop {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.lines();
    let path = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or_default()
        .to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
        .min(MAX_BODY);
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body: Value = serde_json::from_slice(&buf[head_end..]).unwrap_or(Value::Null);
    let reply = answer(state, path, headers, body);
    stream.write_all(&reply)?;
    stream.flush()
}

/// Decides the answer to one request and records the exchange.
fn answer(
    state: &Mutex<State>,
    path: String,
    headers: Vec<(String, String)>,
    body: Value,
) -> Vec<u8> {
    let mut s = lock(state);
    // The API takes a query (Claude Code posts to `/v1/messages?beta=true`).
    let route = path.split('?').next().unwrap_or_default();
    let refused = if route != "/v1/messages" {
        Some((404, "not_found_error", format!("no route {path}")))
    } else if !headers.iter().any(|(k, _)| k == "anthropic-version") {
        Some((
            400,
            "invalid_request_error",
            "anthropic-version: header is required".to_string(),
        ))
    } else {
        check::check(&body, &s.issued)
            .err()
            .map(|e| (400, "invalid_request_error", e))
    };
    let record = |s: &mut State, status, usage| {
        s.exchanges.push(Exchange {
            path: path.clone(),
            headers: headers.clone(),
            body: body.clone(),
            status,
            usage,
        });
    };
    if let Some((status, kind, message)) = refused {
        record(&mut s, status, None);
        return error_reply(status, kind, &message);
    }
    let Some(mut msg) = s.answers.pop_front() else {
        record(&mut s, 500, None);
        return error_reply(500, "api_error", "no scripted answer left");
    };
    let used = s.cache.serve(&body);
    let mut signature = None;
    for b in msg["content"].as_array().into_iter().flatten() {
        if b["type"] == "thinking"
            && let (Some(sig), Some(t)) = (b["signature"].as_str(), b["thinking"].as_str())
        {
            s.issued.signatures.insert(sig.to_string(), t.to_string());
            signature = Some(sig.to_string());
        }
        if let (Some(sig), Some(id)) = (&signature, b["id"].as_str())
            && b["type"] == "tool_use"
        {
            s.issued
                .thinking_of_call
                .insert(id.to_string(), sig.clone());
        }
    }
    let output = crate::testing::caching::tokens(msg["content"].to_string().len());
    msg["usage"] = json!({
        "input_tokens": used.input_tokens,
        "cache_creation_input_tokens": used.cache_creation_input_tokens,
        "cache_read_input_tokens": used.cache_read_input_tokens,
        "output_tokens": output,
    });
    record(&mut s, 200, Some(used));
    drop(s);
    if body["stream"] == true {
        http(200, "text/event-stream", &events(&msg))
    } else {
        http(200, "application/json", &msg.to_string())
    }
}

fn error_reply(status: u16, kind: &str, message: &str) -> Vec<u8> {
    let body = json!({"type": "error", "error": {"type": kind, "message": message}});
    http(status, "application/json", &body.to_string())
}

fn http(status: u16, content_type: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status} Status\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// `message` as the API streams it: text and tool input in several deltas, the thinking text
/// then its signature, a ping, usage at the start (input) and in `message_delta` (output).
pub fn events(message: &Value) -> String {
    let mut out = String::new();
    let mut event = |name: &str, data: Value| {
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    };
    let usage = &message["usage"];
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["usage"]["output_tokens"] = json!(1);
    event(
        "message_start",
        json!({"type": "message_start", "message": start}),
    );
    event("ping", json!({"type": "ping"}));
    for (index, block) in message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let (empty, deltas) = match block["type"].as_str().unwrap_or_default() {
            "text" => {
                let text = block["text"].as_str().unwrap_or_default();
                let deltas = pieces(text)
                    .map(|p| json!({"type": "text_delta", "text": p}))
                    .collect();
                (json!({"type": "text", "text": ""}), deltas)
            }
            "tool_use" => {
                let input = block["input"].to_string();
                let deltas = pieces(&input)
                    .map(|p| json!({"type": "input_json_delta", "partial_json": p}))
                    .collect();
                let mut empty = block.clone();
                empty["input"] = json!({});
                (empty, deltas)
            }
            "thinking" => (
                json!({"type": "thinking", "thinking": ""}),
                vec![
                    json!({"type": "thinking_delta", "thinking": block["thinking"]}),
                    json!({"type": "signature_delta", "signature": block["signature"]}),
                ],
            ),
            _ => (block.clone(), Vec::new()),
        };
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": empty}),
        );
        for delta in deltas {
            event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            );
        }
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        );
    }
    event(
        "message_delta",
        json!({"type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": null},
            "usage": {"output_tokens": usage["output_tokens"]}}),
    );
    event("message_stop", json!({"type": "message_stop"}));
    out
}

/// Up to three pieces of `s`, cut at character boundaries.
fn pieces(s: &str) -> impl Iterator<Item = String> {
    let chars: Vec<char> = s.chars().collect();
    let size = chars.len().div_ceil(3).max(1);
    chars
        .chunks(size)
        .map(|c| c.iter().collect::<String>())
        .collect::<Vec<_>>()
        .into_iter()
}
