//! A played OpenAI Responses API (`POST /v1/responses`) on 127.0.0.1, for tests of clients that
//! speak it (Codex): it checks each request as strictly as the API does ([`check`]: the model,
//! the key, every tool call answered by an output with its `call_id` and no output without its
//! call, a `previous_response_id` it stored), answers with the next scripted answer, whole or as
//! the API's event stream ([`events`]), and reports usage from a played prompt cache
//! (`input_tokens_details.cached_tokens`) and the answer's reasoning tokens.
//!
//! Answers are built with [`answer`] from output items ([`message`], [`function_call`],
//! [`exec_command`], [`shell`], [`apply_patch`]), or are refusals ([`refusal`]).

pub mod check;
pub mod events;

use crate::testing::caching::{PromptCache, tokens};
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Largest request body read.
const MAX_BODY: usize = 64 * 1024 * 1024;

/// One request as the server saw it, and the status it answered.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
    pub status: u16,
}

impl Exchange {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The `output` of each `function_call_output` / `custom_tool_call_output` item of the
    /// request's input, by `call_id`.
    pub fn tool_output(&self, call_id: &str) -> Option<String> {
        self.body["input"]
            .as_array()?
            .iter()
            .find(|i| {
                i["call_id"] == call_id
                    && i["type"].as_str().is_some_and(|t| t.ends_with("_output"))
            })
            .map(|i| match &i["output"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
    }
}

#[derive(Default)]
struct State {
    answers: VecDeque<Value>,
    key: Option<String>,
    cache: PromptCache,
    /// The output of each response stored (`store` not false), by id.
    stored: HashMap<String, Vec<Value>>,
    served: u64,
    exchanges: Vec<Exchange>,
}

/// The server; it stops accepting when dropped.
pub struct ResponsesServer {
    port: u16,
    stop: Arc<AtomicBool>,
    state: Arc<Mutex<State>>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

impl ResponsesServer {
    /// Serves `answers` (see [`answer`], [`refusal`]) in order, to any key.
    pub fn start(answers: Vec<Value>) -> std::io::Result<ResponsesServer> {
        ResponsesServer::start_inner(answers, None)
    }

    /// As [`ResponsesServer::start`], refusing (401) a request without `Bearer <key>`.
    pub fn start_with_key(answers: Vec<Value>, key: &str) -> std::io::Result<ResponsesServer> {
        ResponsesServer::start_inner(answers, Some(key.to_string()))
    }

    fn start_inner(answers: Vec<Value>, key: Option<String>) -> std::io::Result<ResponsesServer> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(Mutex::new(State {
            answers: answers.into(),
            key,
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
        Ok(ResponsesServer { port, stop, state })
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

impl Drop for ResponsesServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// An answer: the response's output items, in order.
pub fn answer(output: Vec<Value>) -> Value {
    json!({"output": output})
}

/// An answer of one assistant message.
pub fn text(text: &str) -> Value {
    answer(vec![message(text)])
}

/// An answer the model spent `reasoning_tokens` thinking over (reported in the usage).
pub fn with_reasoning_tokens(mut answer: Value, reasoning_tokens: u64) -> Value {
    answer["reasoning_tokens"] = json!(reasoning_tokens);
    answer
}

/// A scripted refusal: HTTP `status` with the API's error body.
pub fn refusal(status: u16, kind: &str, code: Option<&str>, message: &str) -> Value {
    json!({"refuse": status, "error": {"message": message, "type": kind, "param": null,
        "code": code}})
}

/// An assistant `message` output item.
pub fn message(text: &str) -> Value {
    json!({"type": "message", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

/// A `function_call` output item (`arguments` is sent as its JSON text, as the API does).
pub fn function_call(call_id: &str, name: &str, arguments: &Value) -> Value {
    json!({"type": "function_call", "id": format!("fc_{call_id}"), "call_id": call_id,
        "name": name, "arguments": arguments.to_string(), "status": "completed"})
}

/// Codex's unified shell tool: run `cmd` (a shell command line).
pub fn exec_command(call_id: &str, cmd: &str) -> Value {
    function_call(call_id, "exec_command", &json!({"cmd": cmd}))
}

/// Codex's older `shell` tool: run `command` (argv).
pub fn shell(call_id: &str, command: &[&str]) -> Value {
    function_call(call_id, "shell", &json!({"command": command}))
}

/// Codex's freeform `apply_patch` tool (a `custom_tool_call` whose input is the patch text,
/// `*** Begin Patch` … `*** End Patch`).
pub fn apply_patch(call_id: &str, patch: &str) -> Value {
    json!({"type": "custom_tool_call", "id": format!("ctc_{call_id}"), "call_id": call_id,
        "name": "apply_patch", "input": patch, "status": "completed"})
}

/// A patch that adds the file `path` with `content` (each line prefixed `+`).
pub fn add_file_patch(path: &str, content: &str) -> String {
    let lines: String = content.lines().map(|l| format!("+{l}\n")).collect();
    format!("*** Begin Patch\n*** Add File: {path}\n{lines}*** End Patch\n")
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
    let mut request_line = lines.next().unwrap_or_default().split_whitespace();
    let method = request_line.next().unwrap_or_default().to_string();
    let path = request_line.next().unwrap_or_default().to_string();
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
    let end = (head_end + length).min(buf.len());
    let body: Value = serde_json::from_slice(&buf[head_end..end]).unwrap_or(Value::Null);
    let reply = respond(state, method, path, headers, body);
    stream.write_all(&reply)?;
    stream.flush()
}

/// Decides the answer to one request and records the exchange.
fn respond(
    state: &Mutex<State>,
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Value,
) -> Vec<u8> {
    let mut s = lock(state);
    let route = path.split('?').next().unwrap_or_default();
    let refused = check::key(&headers, s.key.as_deref()).err().or_else(|| {
        if method != "POST" || route != "/v1/responses" {
            Some(check::Refusal {
                status: 404,
                kind: "invalid_request_error",
                code: None,
                param: None,
                message: format!("Invalid URL ({method} {path})"),
            })
        } else {
            check::request(&body, &s.stored).err()
        }
    });
    let mut exchange = Exchange {
        method,
        path,
        headers,
        body,
        status: 200,
    };
    if let Some(refusal) = refused {
        exchange.status = refusal.status;
        s.exchanges.push(exchange);
        return http(
            refusal.status,
            "application/json",
            &refusal.body().to_string(),
        );
    }
    let Some(scripted) = s.answers.pop_front() else {
        exchange.status = 500;
        s.exchanges.push(exchange);
        let body = json!({"error": {"message": "no scripted answer left", "type": "server_error",
            "param": null, "code": null}});
        return http(500, "application/json", &body.to_string());
    };
    if let Some(status) = scripted["refuse"].as_u64() {
        let status = u16::try_from(status).unwrap_or(500);
        exchange.status = status;
        s.exchanges.push(exchange);
        let body = json!({"error": scripted["error"]});
        return http(status, "application/json", &body.to_string());
    }
    s.served += 1;
    let response = response_of(&mut s, &exchange.body, &scripted);
    if exchange.body["store"] != false
        && let Some(id) = response["id"].as_str()
    {
        let output = response["output"].as_array().cloned().unwrap_or_default();
        s.stored.insert(id.to_string(), output);
    }
    let streamed = exchange.body["stream"] == true;
    s.exchanges.push(exchange);
    drop(s);
    if streamed {
        http(200, "text/event-stream", &events::stream(&response))
    } else {
        http(200, "application/json", &response.to_string())
    }
}

/// The completed `response` object of a scripted answer to `request`.
fn response_of(s: &mut State, request: &Value, scripted: &Value) -> Value {
    let n = s.served;
    let mut output = scripted["output"].as_array().cloned().unwrap_or_default();
    for (i, item) in output.iter_mut().enumerate() {
        if item.get("id").is_none() {
            item["id"] = json!(format!("msg_{n:04}_{i}"));
        }
    }
    // The prompt as the cache sees it: what comes first in every request of a conversation.
    let prompt = json!([request["instructions"], request["tools"], request["input"]]);
    let (input_tokens, cached_tokens) = s.cache.serve(prompt.to_string().into_bytes());
    let reasoning_tokens = scripted["reasoning_tokens"].as_u64().unwrap_or(0);
    let output_tokens = tokens(Value::Array(output.clone()).to_string().len()) + reasoning_tokens;
    json!({
        "id": format!("resp_{n:04}"),
        "object": "response",
        "created_at": 1_700_000_000 + n,
        "status": "completed",
        "error": null,
        "incomplete_details": null,
        "model": request["model"],
        "output": output,
        "parallel_tool_calls": request.get("parallel_tool_calls").cloned().unwrap_or(json!(true)),
        "previous_response_id": request.get("previous_response_id").cloned().unwrap_or(Value::Null),
        "store": request.get("store").cloned().unwrap_or(json!(true)),
        "tool_choice": request.get("tool_choice").cloned().unwrap_or(json!("auto")),
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": cached_tokens},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
            "total_tokens": input_tokens + output_tokens,
        },
    })
}

fn http(status: u16, content_type: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status} Status\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests;
