//! Serving a recorded trace as the model: offline, deterministic runs for tests, CI and demos.

use crate::error::LlmError;
use crate::model::{BoxFuture, CallOptions, ChatModel, ModelIdentity};
use crate::trace::{Entry, Trace, TraceRecorder};
use crate::types::{ChatRequest, ChatResponse, Message, Role, StreamEvent, Usage};
use serde_json::{Map, Value};
use std::sync::{Arc, Mutex};

#[derive(Debug, Default)]
struct Cursor {
    next: usize,
    served: usize,
    last_id: String,
}

/// A `ChatModel` that answers with the recorded assistant messages, in order.
///
/// It checks that the run keeps to the recording and to the protocol: every request must be a
/// conversation OpenAI would accept (each tool call answered, no orphan result; the engine may
/// rename recorded ids, so calls are paired by what the request holds, not by the recorded
/// ids), and a recorded user input must be taken (with [`ReplayModel::take_user_input`]) before
/// the next call. Otherwise `REPLAY_MISMATCH`; past the last recorded answer, `REPLAY_EXHAUSTED`.
pub struct ReplayModel {
    trace: Trace,
    cursor: Mutex<Cursor>,
    /// Where the trace comes from, remembered by the runs it drives.
    source: Option<String>,
}

impl ReplayModel {
    pub fn new(trace: Trace) -> ReplayModel {
        ReplayModel {
            trace,
            cursor: Mutex::new(Cursor::default()),
            source: None,
        }
    }

    /// Names where the trace comes from (a file path, or `bundled:<name>`), so a run it drives
    /// remembers it and is continued from the same trace.
    pub fn with_source(mut self, source: impl Into<String>) -> ReplayModel {
        self.source = Some(source.into());
        self
    }

    pub fn trace(&self) -> &Trace {
        &self.trace
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cursor> {
        self.cursor
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The recorded user input that comes next, if the run is at that point; consumes it.
    pub fn take_user_input(&self) -> Option<String> {
        let mut c = self.lock();
        match self.trace.entries.get(c.next) {
            Some(Entry::UserInput { raw_text, .. }) => {
                c.next += 1;
                Some(raw_text.clone())
            }
            _ => None,
        }
    }

    /// Skips what a run already went through: `turns` model answers and `answers` user
    /// inputs, in recorded order. Used when a replayed run is resumed or answered.
    pub fn fast_forward(&self, mut turns: usize, mut answers: usize) {
        let mut c = self.lock();
        while let Some(entry) = self.trace.entries.get(c.next) {
            match entry {
                Entry::Dialogue(_) if turns > 0 => {
                    turns -= 1;
                    c.served += 1;
                }
                Entry::UserInput { .. } if answers > 0 => answers -= 1,
                _ => break,
            }
            c.next += 1;
        }
    }

    /// Drops a recorded user input that is next in line (the user answered it live).
    pub fn skip_user_input(&self) {
        let mut c = self.lock();
        if let Some(Entry::UserInput { .. }) = self.trace.entries.get(c.next) {
            c.next += 1;
        }
    }

    /// Model answers served so far.
    pub fn served(&self) -> usize {
        self.lock().served
    }

    /// Recorded answers not served yet.
    pub fn remaining(&self) -> usize {
        let c = self.lock();
        self.trace.entries[c.next.min(self.trace.entries.len())..]
            .iter()
            .filter(|e| matches!(e, Entry::Dialogue(_)))
            .count()
    }

    fn serve(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let mut c = self.lock();
        // A request OpenAI would refuse (an unanswered or orphan tool call) is refused here too,
        // so a replayed run proves its requests are well formed.
        if let Err(v) = crate::protocol::validate(&request.messages) {
            return Err(LlmError::ReplayMismatch {
                dialogue: c.last_id.clone(),
                reason: format!("the request is not a valid conversation: {v}"),
            });
        }
        match self.trace.entries.get(c.next) {
            None => Err(LlmError::ReplayExhausted { served: c.served }),
            Some(Entry::UserInput { id, raw_text }) => Err(LlmError::ReplayMismatch {
                dialogue: id.clone(),
                reason: format!(
                    "the recording has the user answering {raw_text:?} before the next model call"
                ),
            }),
            Some(Entry::Dialogue(d)) => {
                c.next += 1;
                c.served += 1;
                c.last_id = d.id.clone();
                let finish = if d.tool_calls.is_empty() {
                    "stop"
                } else {
                    "tool_calls"
                };
                Ok(ChatResponse {
                    message: Message {
                        role: Role::Assistant,
                        content: Some(d.content.clone()),
                        tool_calls: d.tool_calls.clone(),
                        tool_call_id: None,
                        extra: match d.raw.pointer("/response/assistant/extra") {
                            Some(Value::Object(extra)) => extra.clone(),
                            _ => Map::new(),
                        },
                    },
                    finish_reason: Some(finish.to_string()),
                    // The tokens the recording says the call used, so a replayed run reports
                    // what the recorded one cost (none when the trace did not record them).
                    usage: d
                        .raw
                        .pointer("/response/usage")
                        .and_then(|u| serde_json::from_value::<Usage>(u.clone()).ok()),
                    usage_faults: Vec::new(),
                })
            }
        }
    }
}

impl ChatModel for ReplayModel {
    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
        options: CallOptions<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, LlmError>> {
        Box::pin(async move {
            let response = self.serve(request)?;
            if let Some(text) = response
                .message
                .content
                .as_deref()
                .filter(|t| !t.is_empty())
            {
                options.emit(StreamEvent::TextDelta(text.to_string()));
            }
            Ok(response)
        })
    }

    fn model_name(&self) -> &str {
        "replay"
    }

    fn identity(&self) -> ModelIdentity {
        ModelIdentity {
            name: "replay".into(),
            replay: true,
            trace: self.source.clone(),
            ..ModelIdentity::default()
        }
    }
}

/// Wraps a model and records every call it answers.
pub struct RecordingModel<M> {
    inner: M,
    recorder: Arc<Mutex<TraceRecorder>>,
    phase: &'static str,
}

impl<M: ChatModel> RecordingModel<M> {
    pub fn new(inner: M, recorder: Arc<Mutex<TraceRecorder>>) -> RecordingModel<M> {
        RecordingModel {
            inner,
            recorder,
            phase: "running",
        }
    }

    pub fn inner(&self) -> &M {
        &self.inner
    }
}

impl<M: ChatModel> ChatModel for RecordingModel<M> {
    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
        options: CallOptions<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, LlmError>> {
        Box::pin(async move {
            let response = self.inner.chat(request, options).await?;
            if let Ok(mut r) = self.recorder.lock() {
                r.record_call(self.phase, request, &response);
            }
            Ok(response)
        })
    }

    fn model_name(&self) -> &str {
        self.inner.model_name()
    }

    fn identity(&self) -> ModelIdentity {
        self.inner.identity()
    }

    fn max_completion_tokens(&self) -> u32 {
        self.inner.max_completion_tokens()
    }

    fn price(&self) -> Option<crate::Price> {
        self.inner.price()
    }

    fn context_tokens(&self) -> Option<u64> {
        self.inner.context_tokens()
    }
}
