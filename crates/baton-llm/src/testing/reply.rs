//! The scripted server's replies: answers, streams and faults.

use serde_json::{Value, json};
use std::time::Duration;

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
    /// An SSE stream that never ends: `payload` again and again, `pause` apart, until the client
    /// goes away.
    EndlessStream { payload: String, pause: Duration },
    /// A status line and headers, then a chunked body of `piece` repeated until the client goes
    /// away (an endless JSON answer, error page, or SSE event without a line end).
    EndlessBody {
        status: u16,
        content_type: String,
        piece: Vec<u8>,
    },
    /// An error whose JSON message echoes the request's headers, `Authorization` included, as
    /// a careless proxy does.
    EchoHeaders { status: u16 },
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
        Reply::error(429, "Rate limit reached")
            .with_header("retry-after", &retry_after_s.to_string())
    }

    /// An answer with no text and no tool call.
    pub fn empty() -> Reply {
        Reply::json(
            200,
            json!({
                "choices": [{"index": 0, "message": {"role": "assistant", "content": null}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 11, "completion_tokens": 0, "total_tokens": 11}
            }),
        )
    }

    /// A streamed text delta, forever.
    pub fn endless_stream(pause: Duration) -> Reply {
        Reply::EndlessStream {
            payload: json!({"choices": [{"index": 0, "delta": {"content": "and on "}}]})
                .to_string(),
            pause,
        }
    }

    /// The same reply with one more header (a `Full` reply only).
    pub fn with_header(self, name: &str, value: &str) -> Reply {
        match self {
            Reply::Full {
                status,
                content_type,
                mut headers,
                body,
                delay,
            } => {
                headers.push((name.to_string(), value.to_string()));
                Reply::Full {
                    status,
                    content_type,
                    headers,
                    body,
                    delay,
                }
            }
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
