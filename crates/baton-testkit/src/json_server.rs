//! A loopback HTTP server for played models: every request's JSON body goes to a handler,
//! whose JSON answer is sent back (with status 200, or the status the handler chose). One thread per connection, `connection:
//! close`, no keep-alive: what an OpenAI-compatible client needs, nothing more.
//!
//! Players (a model that answers from the request) only write the handler.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Largest request body read (a played conversation is far smaller).
const MAX_BODY: usize = 64 * 1024 * 1024;

pub type Handler = dyn Fn(&Value) -> Value + Send + Sync;

/// A handler that also chooses the HTTP status (a played failure).
pub type StatusHandler = dyn Fn(&Value) -> (u16, Value) + Send + Sync;

/// The server; it stops accepting when dropped.
pub struct JsonServer {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl JsonServer {
    pub fn start(handler: Arc<Handler>) -> JsonServer {
        JsonServer::start_with_status(Arc::new(move |body: &Value| (200, handler(body))))
    }

    /// [`JsonServer::start`] with a handler that chooses each answer's status.
    pub fn start_with_status(handler: Arc<StatusHandler>) -> JsonServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().expect("local address").port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let handler = handler.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, &*handler);
                });
            }
        });
        JsonServer { port, stop }
    }

    /// `http://127.0.0.1:<port>/v1`
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

impl Drop for JsonServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve(mut stream: TcpStream, handler: &StatusHandler) -> std::io::Result<()> {
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
    let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
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
    let (status, reply) = handler(&body);
    let reply = reply.to_string();
    let response = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
        reason(status),
        reply.len()
    );
    stream.write_all(response.as_bytes())?;
    stream.flush()
}

/// The reason phrase of the statuses a played model answers with.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Posts `body` to the server and reads the whole answer.
    fn post(server: &JsonServer, body: &str) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        write!(
            s,
            "POST /v1/chat/completions HTTP/1.1\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn the_handler_answers_each_request() {
        let server = JsonServer::start(Arc::new(
            |body: &Value| serde_json::json!({"echo": body["n"]}),
        ));
        assert!(server.base_url().ends_with(&format!(":{}/v1", server.port)));
        let out = post(&server, r#"{"n": 7}"#);
        assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
        assert!(out.ends_with(r#"{"echo":7}"#), "{out}");
    }

    #[test]
    fn a_status_handler_chooses_the_status() {
        let server = JsonServer::start_with_status(Arc::new(|body: &Value| {
            (400, serde_json::json!({"error": body["n"]}))
        }));
        let out = post(&server, r#"{"n": 3}"#);
        assert!(out.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{out}");
        assert!(out.ends_with(r#"{"error":3}"#), "{out}");
    }
}
