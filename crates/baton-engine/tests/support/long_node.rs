//! A scripted model for one long node: `calls` tool calls (one `fs.read` of a project file per
//! turn), then a question for the user. A request without tools is a summary request: it gets a
//! fixed summary, or an error. Every request is checked and measured as it arrives.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_engine::TokenCounter;
use baton_llm::{
    BoxFuture, CallOptions, ChatModel, ChatRequest, ChatResponse, LlmError, Message, ToolCall,
};
use std::path::Path;
use std::sync::Mutex;

/// One request as the model received it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub tokens: usize,
    pub chars: usize,
    /// Bytes this request shares, from the start, with the previous one.
    pub common_prefix: usize,
    pub prev_chars: usize,
    pub valid: Result<(), String>,
    /// The messages as JSON, when kept.
    pub json: Option<String>,
}

#[derive(Default)]
struct State {
    served: usize,
    previous: String,
    seen: Vec<Seen>,
    summaries: usize,
}

pub struct LongNode {
    pub calls: usize,
    pub summary_fails: bool,
    pub keep_json: bool,
    /// Read whole files instead of a window of lines.
    pub read_whole: bool,
    /// The model name (it decides how tokens are counted).
    pub name: &'static str,
    state: Mutex<State>,
}

pub const FILES: usize = 50;

/// `notes/f00.md` … `notes/f49.md` in `project`, about 1 KB each.
pub fn write_notes(project: &Path) {
    let dir = project.join("notes");
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..FILES {
        let mut text = format!("# Note {i}\n\n");
        for line in 0..14 {
            text.push_str(&format!(
                "- fact {i}.{line}: the taskboard keeps cards in columns; card {line} of note {i} is open\n"
            ));
        }
        std::fs::write(dir.join(format!("f{i:02}.md")), text).unwrap();
    }
}

impl LongNode {
    pub fn new(calls: usize) -> LongNode {
        LongNode {
            calls,
            summary_fails: false,
            keep_json: true,
            read_whole: false,
            name: "scripted-long-node",
            state: Mutex::new(State::default()),
        }
    }

    /// Requests with tools (the run's turns), in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    pub fn summaries(&self) -> usize {
        self.state.lock().unwrap().summaries
    }

    fn observe(&self, request: &ChatRequest) {
        let json = serde_json::to_string(&request.messages).unwrap();
        let tokens =
            TokenCounter::for_model(self.model_name()).request(&request.messages, &request.tools);
        let mut s = self.state.lock().unwrap();
        // The previous array without its closing bracket.
        let prev = s.previous.strip_suffix(']').unwrap_or(&s.previous);
        let common = prev
            .bytes()
            .zip(json.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        let seen = Seen {
            tokens,
            chars: json.len(),
            common_prefix: common,
            prev_chars: prev.len(),
            valid: baton_llm::protocol::validate(&request.messages).map_err(|v| v.to_string()),
            json: self.keep_json.then(|| json.clone()),
        };
        s.seen.push(seen);
        s.previous = json;
    }
}

impl ChatModel for LongNode {
    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
        _: CallOptions<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, LlmError>> {
        Box::pin(async move {
            if request.tools.is_empty() {
                self.state.lock().unwrap().summaries += 1;
                if self.summary_fails {
                    return Err(LlmError::Http {
                        status: 503,
                        message: "summaries are down".into(),
                    });
                }
                let n = self.state.lock().unwrap().served;
                return Ok(ChatResponse {
                    message: Message::assistant(format!(
                        "User goal: read every note.\nCurrent status: {n} reads done.\nDo not repeat: reads already done."
                    )),
                    finish_reason: Some("stop".into()),
                    usage: None,
                    usage_faults: Vec::new(),
                });
            }
            self.observe(request);
            let n = {
                let mut s = self.state.lock().unwrap();
                s.served += 1;
                s.served - 1
            };
            let mut message = Message::assistant("");
            if n < self.calls {
                message.tool_calls = vec![ToolCall {
                    id: format!("read_{n}"),
                    name: "fs.read".into(),
                    arguments: if self.read_whole {
                        format!("{{\"path\":\"@project/notes/f{:02}.md\"}}", n % FILES)
                    } else {
                        format!(
                            "{{\"path\":\"@project/notes/f{:02}.md\",\"startLine\":1,\"endLine\":{}}}",
                            n % FILES,
                            20 + n
                        )
                    },
                }];
            } else {
                message.content =
                    Some("I have read every note. Which one should I summarize first?".into());
            }
            Ok(ChatResponse {
                message,
                finish_reason: None,
                usage: None,
                usage_faults: Vec::new(),
            })
        })
    }

    fn model_name(&self) -> &str {
        self.name
    }
}

/// Mean of `common_prefix / chars` (each request's share that is the previous one's prefix)
/// and of `common_prefix / prev_chars` (the previous request's share kept as the prefix), over
/// the requests after the first.
pub fn prefix_shares(seen: &[Seen]) -> (f64, f64) {
    let rest = &seen[1.min(seen.len())..];
    let n = rest.len().max(1) as f64;
    let of_request: f64 = rest
        .iter()
        .map(|s| s.common_prefix as f64 / s.chars as f64)
        .sum();
    let of_previous: f64 = rest
        .iter()
        .map(|s| s.common_prefix as f64 / s.prev_chars.max(1) as f64)
        .sum();
    (of_request / n, of_previous / n)
}
