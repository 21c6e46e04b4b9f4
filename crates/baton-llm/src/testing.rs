//! A scripted OpenAI-compatible server on 127.0.0.1, for tests: it answers each request with
//! the next scripted reply (JSON, SSE stream, or a fault) and records what it received.
//!
//! Hand-written on a raw socket, so faults are exact: a connection reset in the middle of a
//! stream, a reply that never comes, a body that is not JSON.

use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, Clone)]
pub enum Reply {
    /// A complete HTTP response.
    Full {
        status: u16,
        content_type: String,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
        delay: Duration,
    },
    /// An SSE stream of `data:` payloads, `pause` apart. With `break_after: Some(n)` the
    /// connection is cut after `n` payloads, mid-stream.
    Stream {
        payloads: Vec<String>,
        pause: Duration,
        break_after: Option<usize>,
    },
    /// Read the request and never answer.
    Hang,
}

impl Reply {
    pub fn json(status: u16, body: Value) -> Reply {
        Reply::Full {
            status,
            content_type: "application/json".into(),
            headers: Vec::new(),
            body: body.to_string().into_bytes(),
            delay: Duration::ZERO,
        }
    }

    /// An assistant text answer.
    pub fn text(content: &str) -> Reply {
        Reply::json(
            200,
            json!({
                "id": "chatcmpl-1", "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
            }),
        )
    }

    /// An answer with tool calls: `(id, wire name, arguments JSON text)`.
    pub fn tool_calls(calls: &[(&str, &str, &str)]) -> Reply {
        let calls: Vec<Value> = calls
            .iter()
            .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
            .collect();
        Reply::json(
            200,
            json!({
                "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": calls}, "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29}
            }),
        )
    }

    pub fn error(status: u16, message: &str) -> Reply {
        Reply::json(
            status,
            json!({"error": {"message": message, "type": "server_error"}}),
        )
    }

    pub fn rate_limited(retry_after_s: u32) -> Reply {
        match Reply::error(429, "Rate limit reached") {
            Reply::Full {
                status,
                content_type,
                body,
                delay,
                ..
            } => Reply::Full {
                status,
                content_type,
                headers: vec![("retry-after".into(), retry_after_s.to_string())],
                body,
                delay,
            },
            other => other,
        }
    }

    pub fn malformed() -> Reply {
        Reply::Full {
            status: 200,
            content_type: "application/json".into(),
            headers: Vec::new(),
            body: b"{\"choices\": [ {\"message\": ".to_vec(),
            delay: Duration::ZERO,
        }
    }

    pub fn delayed(self, by: Duration) -> Reply {
        match self {
            Reply::Full {
                status,
                content_type,
                headers,
                body,
                ..
            } => Reply::Full {
                status,
                content_type,
                headers,
                body,
                delay: by,
            },
            other => other,
        }
    }

    /// A recorded conversation as replies, one per model answer; tool names as they travel on
    /// the wire (`fs.read` → `fs_read`).
    pub fn from_trace(trace: &crate::Trace) -> Vec<Reply> {
        trace
            .dialogues()
            .map(|d| {
                if d.tool_calls.is_empty() {
                    return Reply::text(&d.content);
                }
                let wire: Vec<(String, String, String)> = d
                    .tool_calls
                    .iter()
                    .map(|c| (c.id.clone(), c.name.replace('.', "_"), c.arguments.clone()))
                    .collect();
                let refs: Vec<(&str, &str, &str)> = wire
                    .iter()
                    .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
                    .collect();
                Reply::tool_calls(&refs)
            })
            .collect()
    }

    /// A streamed text answer in the given pieces.
    pub fn stream_text(pieces: &[&str]) -> Reply {
        let mut payloads: Vec<String> = pieces
            .iter()
            .map(|p| json!({"choices": [{"index": 0, "delta": {"content": p}}]}).to_string())
            .collect();
        payloads.push(
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}).to_string(),
        );
        payloads.push(json!({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}).to_string());
        payloads.push("[DONE]".into());
        Reply::Stream {
            payloads,
            pause: Duration::ZERO,
            break_after: None,
        }
    }

    /// A streamed tool call whose arguments arrive `piece` bytes at a time.
    pub fn stream_tool_call(id: &str, name: &str, arguments: &str, piece: usize) -> Reply {
        let mut payloads = vec![json!({"choices": [{"index": 0, "delta": {"role": "assistant",
            "tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}}]})
        .to_string()];
        let chars: Vec<char> = arguments.chars().collect();
        for chunk in chars.chunks(piece.max(1)) {
            let s: String = chunk.iter().collect();
            payloads.push(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": s}}]}}]}).to_string());
        }
        payloads.push(
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
                .to_string(),
        );
        payloads.push("[DONE]".into());
        Reply::Stream {
            payloads,
            pause: Duration::ZERO,
            break_after: None,
        }
    }
}

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
    pub async fn start(replies: Vec<Reply>) -> std::io::Result<ScriptedServer> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let script = Arc::new(Mutex::new(VecDeque::from(replies)));
        let received = Arc::new(Mutex::new(Vec::new()));
        let (s, r) = (script.clone(), received.clone());
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (s, r) = (s.clone(), r.clone());
                tokio::spawn(async move {
                    let _ = serve(socket, s, r).await;
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
) -> std::io::Result<()> {
    let Some(request) = read_request(&mut socket).await? else {
        return Ok(());
    };
    if let Ok(mut r) = received.lock() {
        r.push(request);
    }
    let reply = script
        .lock()
        .ok()
        .and_then(|mut s| s.pop_front())
        .unwrap_or_else(|| Reply::error(500, "the scripted server has no reply left"));
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
    }
    Ok(())
}
