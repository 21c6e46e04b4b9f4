//! A scripted OpenAI-compatible server on 127.0.0.1, for tests: it answers each request with
//! the next scripted reply (JSON, SSE stream, or a fault) and records what it received.
//!
//! Hand-written on a raw socket, so faults are exact: a connection reset in the middle of a
//! stream, a reply that never comes, a body that is not JSON, an answer that never ends.
//!
//! It is strict by default, like OpenAI: a request whose tool calls and tool results do not
//! pair up gets HTTP 400 (and uses up no scripted reply).

pub mod anthropic;
pub mod caching;
mod reply;
pub mod responses;
mod tool_protocol;

pub use reply::Reply;
pub use tool_protocol::violation;

/// The client of a played model at `base_url` (a loopback test server), as the tests and
/// measurements drive it: model `played`, no streaming, no retries.
pub fn played_model(base_url: String) -> Result<crate::HttpChatModel, crate::LlmError> {
    crate::HttpChatModel::new(crate::LlmConfig {
        base_url,
        model: Some("played".into()),
        stream: false,
        max_retries: 0,
        retry_base_delay: Duration::from_millis(1),
        ..crate::LlmConfig::default()
    })
}

/// The request a wire body (`/chat/completions`, OpenAI's shape) carries, as baton's types:
/// what a played server received, for a test to count its tokens the way baton counts a
/// request. Tool names stay as on the wire (`fs_read`), which counts the same.
pub fn request_of(body: &Value) -> crate::ChatRequest {
    use crate::{Message, Role, ToolCall, ToolDef};
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_string();
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|m| {
            let role = match m.get("role").and_then(Value::as_str) {
                Some("system") => Role::System,
                Some("assistant") => Role::Assistant,
                Some("tool") => Role::Tool,
                _ => Role::User,
            };
            let tool_calls = m
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|c| {
                    let f = c.get("function").unwrap_or(c);
                    ToolCall::new(
                        text(c.get("id")),
                        text(f.get("name")),
                        text(f.get("arguments")),
                    )
                })
                .collect();
            let extra = m
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, _)| {
                    !matches!(
                        k.as_str(),
                        "role" | "content" | "tool_calls" | "tool_call_id"
                    )
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            Message {
                role,
                content: m.get("content").and_then(Value::as_str).map(str::to_owned),
                tool_calls,
                tool_call_id: m
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                extra,
            }
        })
        .collect();
    let tools = body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|t| {
            let f = t.get("function").unwrap_or(t);
            ToolDef {
                name: text(f.get("name")),
                description: text(f.get("description")),
                parameters: f.get("parameters").cloned().unwrap_or(Value::Null),
            }
        })
        .collect();
    crate::ChatRequest {
        messages,
        tools,
        options: Default::default(),
    }
}

use serde_json::Value;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the server received.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// How the server judges requests.
#[derive(Debug, Clone, Copy)]
pub struct ServerOptions {
    /// Refuse (HTTP 400) a request with an unanswered tool call or an orphan tool result.
    pub strict_tool_calls: bool,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            strict_tool_calls: true,
        }
    }
}

pub struct ScriptedServer {
    port: u16,
    script: Arc<Mutex<VecDeque<Reply>>>,
    received: Arc<Mutex<Vec<Received>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ScriptedServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ScriptedServer {
    /// A strict server (see [`ServerOptions`]).
    pub async fn start(replies: Vec<Reply>) -> std::io::Result<ScriptedServer> {
        ScriptedServer::start_with(replies, ServerOptions::default()).await
    }

    pub async fn start_with(
        replies: Vec<Reply>,
        options: ServerOptions,
    ) -> std::io::Result<ScriptedServer> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let script = Arc::new(Mutex::new(VecDeque::from(replies)));
        let received = Arc::new(Mutex::new(Vec::new()));
        let (s, r) = (script.clone(), received.clone());
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (s, r) = (s.clone(), r.clone());
                tokio::spawn(async move {
                    let _ = serve(socket, s, r, options).await;
                });
            }
        });
        Ok(ScriptedServer {
            port,
            script,
            received,
            task,
        })
    }

    /// `http://127.0.0.1:<port>/v1`
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    pub fn push(&self, reply: Reply) {
        if let Ok(mut s) = self.script.lock() {
            s.push_back(reply);
        }
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().map(|r| r.clone()).unwrap_or_default()
    }

    pub fn remaining(&self) -> usize {
        self.script.lock().map(|s| s.len()).unwrap_or(0)
    }
}

async fn read_request(socket: &mut TcpStream) -> std::io::Result<Option<Received>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or("");
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| {
            l.split_once(':')
                .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        })
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body_bytes = &buf[head_end..(head_end + length).min(buf.len())];
    let body = serde_json::from_slice(body_bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body_bytes).into_owned()));
    Ok(Some(Received {
        method,
        path,
        headers,
        body,
    }))
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        408 => "Request Timeout",
        409 => "Conflict",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

async fn serve(
    mut socket: TcpStream,
    script: Arc<Mutex<VecDeque<Reply>>>,
    received: Arc<Mutex<Vec<Received>>>,
    options: ServerOptions,
) -> std::io::Result<()> {
    let Some(request) = read_request(&mut socket).await? else {
        return Ok(());
    };
    let refusal = if options.strict_tool_calls {
        tool_protocol::violation(&request.body)
            .map(|m| Reply::json(400, tool_protocol::error_body(&m)))
    } else {
        None
    };
    let echoed: Vec<String> = request
        .headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    if let Ok(mut r) = received.lock() {
        r.push(request);
    }
    let reply = refusal.unwrap_or_else(|| {
        script
            .lock()
            .ok()
            .and_then(|mut s| s.pop_front())
            .unwrap_or_else(|| Reply::error(500, "the scripted server has no reply left"))
    });
    let reply = match reply {
        Reply::EchoHeaders { status } => Reply::error(
            status,
            &format!(
                "the gateway refused the request; it had: {}",
                echoed.join("; ")
            ),
        ),
        other => other,
    };
    match reply {
        Reply::Full {
            status,
            content_type,
            headers,
            body,
            delay,
        } => {
            tokio::time::sleep(delay).await;
            let mut head = format!(
                "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n",
                reason(status),
                body.len()
            );
            for (k, v) in headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            socket.write_all(head.as_bytes()).await?;
            socket.write_all(&body).await?;
            socket.shutdown().await?;
        }
        Reply::Stream {
            payloads,
            pause,
            break_after,
        } => {
            socket
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n")
                .await?;
            for (i, payload) in payloads.iter().enumerate() {
                if break_after == Some(i) {
                    // Cut the connection without ending the chunked body: the client sees a
                    // broken stream, not a clean end.
                    drop(socket);
                    return Ok(());
                }
                let event = format!("data: {payload}\n\n");
                socket
                    .write_all(format!("{:x}\r\n{event}\r\n", event.len()).as_bytes())
                    .await?;
                socket.flush().await?;
                if !pause.is_zero() {
                    tokio::time::sleep(pause).await;
                }
            }
            socket.write_all(b"0\r\n\r\n").await?;
            socket.shutdown().await?;
        }
        Reply::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        Reply::EndlessStream { payload, pause } => {
            socket
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n")
                .await?;
            let event = format!("data: {payload}\n\n");
            let chunk = format!("{:x}\r\n{event}\r\n", event.len());
            // Ends when the client hangs up and the write fails.
            loop {
                socket.write_all(chunk.as_bytes()).await?;
                if !pause.is_zero() {
                    socket.flush().await?;
                    tokio::time::sleep(pause).await;
                }
            }
        }
        Reply::EndlessBody {
            status,
            content_type,
            piece,
        } => {
            let head = format!(
                "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
                reason(status)
            );
            socket.write_all(head.as_bytes()).await?;
            let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
            chunk.extend_from_slice(&piece);
            chunk.extend_from_slice(b"\r\n");
            loop {
                socket.write_all(&chunk).await?;
            }
        }
        // Turned into a `Full` error above.
        Reply::EchoHeaders { .. } => {}
    }
    Ok(())
}
