//! Serving a recorded trace as the model: offline, deterministic runs for tests, CI and demos.

use crate::error::LlmError;
use crate::model::{BoxFuture, CallOptions, ChatModel, ModelIdentity};
use crate::trace::{Entry, Trace, TraceRecorder, request_node};
use crate::types::{ChatRequest, ChatResponse, Message, Role, StreamEvent, Usage};
use serde_json::{Map, Value};
use std::sync::{Arc, Mutex};

#[derive(Debug, Default)]
struct Cursor {
    next: usize,
    served: usize,
    last_id: String,
    /// Set by [`ReplayModel::fast_forward`] until the next call: the answer in line may be one
    /// the stopped run had already acted on (see [`ReplayModel::serve`]).
    positioned: bool,
}

/// A `ChatModel` that answers with the recorded assistant messages, in order.
///
/// It checks that the run keeps to the recording and to the protocol: every request must be a
/// conversation OpenAI would accept (each tool call answered, no orphan result; the engine may
/// rename recorded ids, so calls are paired by what the request holds, not by the recorded
/// ids), a recorded user input must be taken (with [`ReplayModel::take_user_input`]) before
/// the next call, and an answer recorded at a workflow node is served only at that node.
/// Otherwise `REPLAY_MISMATCH`; past the last recorded answer, `REPLAY_EXHAUSTED`.
pub struct ReplayModel {
    trace: Trace,
    cursor: Mutex<Cursor>,
    /// Where the trace comes from, remembered by the runs it drives.
    source: Option<String>,
    /// The recorded model's price (see [`ReplayModel::with_price`]).
    price: Option<crate::Price>,
}

impl ReplayModel {
    pub fn new(trace: Trace) -> ReplayModel {
        ReplayModel {
            trace,
            cursor: Mutex::new(Cursor::default()),
            source: None,
            price: None,
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

    /// The model that answered in the recording: the first dialogue's `model`, else the
    /// trace's; none for a trace that does not say (an authored one).
    pub fn recorded_model(&self) -> Option<&str> {
        self.trace
            .dialogues()
            .find_map(|d| d.raw.get("model").and_then(Value::as_str))
            .or_else(|| self.trace.meta.get("model").and_then(Value::as_str))
            .filter(|m| !m.is_empty())
    }

    /// Prices the replay's recorded usage, so a USD budget and `costUsd` work as they did for
    /// the recorded run: `price` is what the configuration says for [`ChatModel::price_name`].
    pub fn with_price(mut self, price: Option<crate::Price>) -> ReplayModel {
        self.price = price;
        self
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
        c.positioned = true;
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

    /// A run stopped after an answer's tools moved it to the next node but before its
    /// conversation log kept them (a kill) counts that answer as unfinished; the run is at the
    /// next node all the same. When the answer in line was recorded at another node and the
    /// one after it at the node the run asks at, the first was used: pass over it.
    fn pass_over_acted_answer(&self, c: &mut Cursor, asked: &str) {
        let node_at = |i: usize| match self.trace.entries.get(i) {
            Some(Entry::Dialogue(d)) => Some(d.node.as_deref()),
            _ => None,
        };
        if let (Some(Some(current)), Some(Some(following))) = (node_at(c.next), node_at(c.next + 1))
            && current != asked
            && following == asked
        {
            c.next += 1;
            c.served += 1;
        }
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
        let positioned = std::mem::take(&mut c.positioned);
        let asked = request_node(&request.messages);
        if positioned && let Some(asked) = asked.as_deref() {
            self.pass_over_acted_answer(&mut c, asked);
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
                // An answer recorded at another node would act on the wrong step (a workflow
                // edited since the recording, or a replay put at the wrong place): stop here.
                if let (Some(recorded), Some(asked)) = (d.node.as_deref(), asked)
                    && recorded != asked
                {
                    return Err(LlmError::ReplayMismatch {
                        dialogue: d.id.clone(),
                        reason: format!(
                            "this run asks at node {asked}, but that answer was recorded at \
                             node {recorded}: the trace and the workflow disagree (the workflow \
                             changed since the recording, or the run went another way)"
                        ),
                    });
                }
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

    /// The recorded model's name, else `replay` (a `[models."replay"]` price then applies).
    fn price_name(&self) -> &str {
        self.recorded_model().unwrap_or("replay")
    }

    fn price(&self) -> Option<crate::Price> {
        self.price
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
            // The name prices are looked up under: a replay recorded again keeps the model of
            // its own recording, if that named one.
            let model = Some(self.inner.price_name())
                .filter(|m| !(self.inner.identity().replay && *m == "replay"));
            if let Ok(mut r) = self.recorder.lock() {
                r.record_model_call(self.phase, model, request, &response);
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

    fn price_name(&self) -> &str {
        self.inner.price_name()
    }

    fn context_tokens(&self) -> Option<u64> {
        self.inner.context_tokens()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn directive(node: &str) -> Message {
        Message::user(format!(
            "RUN_DIRECTIVE\n- runType: bmad-micro\n- currentNodeId: {node}\n- effectiveAgentId: sm\n"
        ))
    }

    fn at(node: &str) -> ChatRequest {
        ChatRequest {
            messages: vec![Message::system("rules"), directive(node)],
            ..ChatRequest::default()
        }
    }

    fn answer(text: &str) -> ChatResponse {
        ChatResponse {
            message: Message::assistant(text),
            finish_reason: Some("stop".into()),
            usage: None,
            usage_faults: Vec::new(),
        }
    }

    #[tokio::test]
    async fn a_recorded_answer_is_served_only_at_the_node_it_was_recorded_at() {
        let mut recorder = TraceRecorder::new(Map::new());
        recorder.record_call("running", &at("step-01"), &answer("one"));
        recorder.record_call("running", &at("step-02"), &answer("two"));
        let value = recorder.to_value();
        assert_eq!(
            value.pointer("/dialogues/1/nodeId"),
            Some(&json!("step-02"))
        );
        let replay = ReplayModel::new(Trace::from_value(value).unwrap());

        let first = replay.chat(&at("step-01"), CallOptions::default()).await;
        assert_eq!(first.unwrap().message.text(), "one");
        // The workflow now has a step the recording never saw.
        let err = replay
            .chat(&at("step-01b"), CallOptions::default())
            .await
            .unwrap_err();
        assert_eq!(err.code(), "REPLAY_MISMATCH");
        let text = err.to_string();
        for part in ["C02", "node step-01b", "node step-02:", "disagree"] {
            assert!(text.contains(part), "{part} missing from: {text}");
        }
        assert_eq!(
            replay.remaining(),
            1,
            "the mismatched answer is not used up"
        );
    }

    #[tokio::test]
    async fn a_resumed_replay_passes_over_an_answer_the_killed_run_acted_on() {
        let mut recorder = TraceRecorder::new(Map::new());
        recorder.record_call("running", &at("step-01"), &answer("one"));
        recorder.record_call("running", &at("step-01"), &answer("moves on"));
        recorder.record_call("running", &at("step-02"), &answer("two"));
        let trace = Trace::from_value(recorder.to_value()).unwrap();

        // Killed after the second answer's tools moved the run to step-02, before the log
        // kept them: one finished turn, and the run asks at step-02.
        let resumed = ReplayModel::new(trace.clone());
        resumed.fast_forward(1, 0);
        let served = resumed.chat(&at("step-02"), CallOptions::default()).await;
        assert_eq!(served.unwrap().message.text(), "two");
        assert_eq!(resumed.served(), 3);

        // Killed before those tools ran: the run is still at step-01 and gets the answer again.
        let resumed = ReplayModel::new(trace.clone());
        resumed.fast_forward(1, 0);
        let served = resumed.chat(&at("step-01"), CallOptions::default()).await;
        assert_eq!(served.unwrap().message.text(), "moves on");

        // Only right after positioning: a run that simply went elsewhere is a mismatch.
        let fresh = ReplayModel::new(trace);
        assert!(
            fresh
                .chat(&at("step-01"), CallOptions::default())
                .await
                .is_ok()
        );
        let err = fresh
            .chat(&at("step-02"), CallOptions::default())
            .await
            .unwrap_err();
        assert_eq!(err.code(), "REPLAY_MISMATCH");
    }

    #[tokio::test]
    async fn a_request_at_no_node_or_an_answer_without_one_is_not_checked() {
        let trace = Trace::from_value(json!({
            "traceVersion": crate::trace::TRACE_VERSION,
            "dialogues": [
                {"id": "C01", "response": {"assistant": {"content": "authored"}}},
                {"id": "C02", "nodeId": "end-99", "response": {"assistant": {"content": "closing"}}}
            ]
        }))
        .unwrap();
        let replay = ReplayModel::new(trace);
        let plain = ChatRequest {
            messages: vec![Message::user("hello")],
            ..ChatRequest::default()
        };
        assert!(
            replay
                .chat(&at("anywhere"), CallOptions::default())
                .await
                .is_ok()
        );
        assert!(replay.chat(&plain, CallOptions::default()).await.is_ok());
        assert_eq!(replay.served(), 2);
    }

    #[test]
    fn a_completed_workflow_s_directive_names_no_node() {
        let done = Message::user("RUN_DIRECTIVE\n- runType: bmad-micro\n- effectiveAgentId: sm\n");
        assert_eq!(request_node(&[directive("end-99"), done]), None);
        assert_eq!(
            request_node(&[directive("step-01"), Message::user("USER_INPUT\nyes")]),
            Some("step-01".into())
        );
    }
}
