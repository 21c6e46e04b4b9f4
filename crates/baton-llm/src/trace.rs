//! Traces in the `crewagent.runtime.llm.trace.v1` format: loading (a JSON file, or the JSON
//! block of a markdown document such as the reference conversation) and recording.

use crate::error::LlmError;
use crate::types::{ChatRequest, ChatResponse, Message, Role, ToolCall};
use serde_json::{Map, Value, json};
use std::path::Path;

pub const TRACE_VERSION: &str = "crewagent.runtime.llm.trace.v1";

/// One model call of a trace: what the assistant answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Dialogue {
    pub id: String,
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    /// The workflow node the answer was given at: the entry's `nodeId`, else the node its
    /// recorded request was made at; none when the trace says neither.
    pub node: Option<String>,
    /// The recorded entry as it is, for tools that want more (request, runtime, uiAfter).
    pub raw: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    Dialogue(Dialogue),
    UserInput { id: String, raw_text: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    pub entries: Vec<Entry>,
    /// Top-level fields other than `dialogues` (workflow, assumptions, templates, …).
    pub meta: Map<String, Value>,
}

impl Trace {
    pub fn dialogues(&self) -> impl Iterator<Item = &Dialogue> {
        self.entries.iter().filter_map(|e| match e {
            Entry::Dialogue(d) => Some(d),
            Entry::UserInput { .. } => None,
        })
    }

    pub fn user_inputs(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().filter_map(|e| match e {
            Entry::UserInput { raw_text, .. } => Some(raw_text.as_str()),
            Entry::Dialogue(_) => None,
        })
    }

    pub fn load(path: &Path) -> Result<Trace, LlmError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| LlmError::TraceInvalid(format!("cannot read {}: {e}", path.display())))?;
        Trace::parse(&text)
    }

    /// Parses a trace from JSON text, or from the first fenced ```json block holding one.
    pub fn parse(text: &str) -> Result<Trace, LlmError> {
        let value: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(json_error) => {
                let block = json_blocks(text)
                    .find(|b| b.contains("\"traceVersion\""))
                    .ok_or_else(|| {
                        LlmError::TraceInvalid(format!(
                            "not JSON ({json_error}) and no ```json block with a traceVersion"
                        ))
                    })?;
                serde_json::from_str(block).map_err(|e| {
                    LlmError::TraceInvalid(format!("the ```json block is not JSON: {e}"))
                })?
            }
        };
        Trace::from_value(value)
    }

    pub fn from_value(value: Value) -> Result<Trace, LlmError> {
        let Value::Object(mut top) = value else {
            return Err(LlmError::TraceInvalid("a trace is a JSON object".into()));
        };
        match top.get("traceVersion").and_then(Value::as_str) {
            Some(TRACE_VERSION) => {}
            other => {
                return Err(LlmError::TraceInvalid(format!(
                    "traceVersion is {other:?}, expected {TRACE_VERSION:?}"
                )));
            }
        }
        let Some(Value::Array(items)) = top.shift_remove("dialogues") else {
            return Err(LlmError::TraceInvalid(
                "the trace has no dialogues array".into(),
            ));
        };
        let mut entries = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            let id = item
                .get("id")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| format!("#{i}"));
            if item.get("type").and_then(Value::as_str) == Some("user_input") {
                let raw = item
                    .pointer("/uiToRuntime/rawText")
                    .or_else(|| item.get("rawText"))
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        LlmError::TraceInvalid(format!("user input {id} has no rawText"))
                    })?;
                entries.push(Entry::UserInput {
                    id,
                    raw_text: raw.to_string(),
                });
                continue;
            }
            let assistant = item.pointer("/response/assistant").ok_or_else(|| {
                LlmError::TraceInvalid(format!("dialogue {id} has no response.assistant"))
            })?;
            let content = assistant
                .get("content")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let mut tool_calls = Vec::new();
            for (n, call) in assistant
                .get("toolCalls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let name = call.get("name").and_then(Value::as_str).ok_or_else(|| {
                    LlmError::TraceInvalid(format!("dialogue {id}: tool call {n} has no name"))
                })?;
                let arguments = match call.get("arguments") {
                    Some(Value::String(s)) => s.clone(),
                    Some(v) => v.to_string(),
                    None => "{}".to_string(),
                };
                tool_calls.push(ToolCall {
                    id: call
                        .get("id")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .unwrap_or_else(|| format!("{id}-{n}")),
                    name: name.to_string(),
                    arguments,
                });
            }
            let node = item
                .get("nodeId")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| recorded_request_node(&item));
            entries.push(Entry::Dialogue(Dialogue {
                id,
                content,
                tool_calls,
                node,
                raw: item,
            }));
        }
        Ok(Trace { entries, meta: top })
    }
}

/// The workflow node a request is made at: the `currentNodeId` of its last run directive.
/// None after the workflow completed (the directive names no node) and for requests baton did
/// not compose.
pub fn request_node(messages: &[Message]) -> Option<String> {
    messages
        .iter()
        .rev()
        .filter(|m| m.role == Role::User)
        .find_map(|m| directive_node(m.text()))
        .flatten()
}

/// [`request_node`] of a recorded request (`request.messages[]` as the recorder writes them).
fn recorded_request_node(item: &Value) -> Option<String> {
    item.pointer("/request/messages")?
        .as_array()?
        .iter()
        .rev()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .find_map(|m| directive_node(m.get("content").and_then(Value::as_str).unwrap_or("")))
        .flatten()
}

/// For a run directive, the node it names (none once the workflow completed); `None` for any
/// other message.
fn directive_node(text: &str) -> Option<Option<String>> {
    let body = text.strip_prefix("RUN_DIRECTIVE")?;
    Some(
        body.lines()
            .find_map(|l| l.trim().strip_prefix("- currentNodeId:"))
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty()),
    )
}

/// Bodies of ```json fenced blocks.
fn json_blocks(text: &str) -> impl Iterator<Item = &str> {
    text.split("```json")
        .skip(1)
        .filter_map(|rest| rest.split_once("\n```").map(|(block, _)| block))
}

fn message_json(m: &Message) -> Value {
    let role = m.role.as_str();
    let mut out = json!({"role": role, "content": m.text()});
    if !m.tool_calls.is_empty() {
        out["toolCalls"] = Value::Array(m.tool_calls.iter().map(tool_call_json).collect());
    }
    if let Some(id) = &m.tool_call_id {
        out["toolCallId"] = json!(id);
    }
    out
}

/// Arguments as an object, as the reference trace writes them, when that object serializes back
/// to the very same text; otherwise the text itself, so a replay gives the model's bytes.
fn tool_call_json(c: &ToolCall) -> Value {
    let args = match serde_json::from_str::<Value>(&c.arguments) {
        Ok(v) if v.is_object() && serde_json::to_string(&v).is_ok_and(|t| t == c.arguments) => v,
        _ => Value::String(c.arguments.clone()),
    };
    json!({"id": c.id, "name": c.name, "arguments": args})
}

/// Builds a trace while a run goes. The engine adds tool runs, phase changes and user inputs;
/// [`crate::RecordingModel`] adds the model calls. Nothing here ever sees an API key.
#[derive(Debug, Clone, Default)]
pub struct TraceRecorder {
    meta: Map<String, Value>,
    dialogues: Vec<Value>,
    calls: usize,
}

impl TraceRecorder {
    pub fn new(meta: Map<String, Value>) -> TraceRecorder {
        TraceRecorder {
            meta,
            dialogues: Vec::new(),
            calls: 0,
        }
    }

    /// Records one model call; returns its id (`C01`, `C02`, …).
    pub fn record_call(
        &mut self,
        phase_before: &str,
        request: &ChatRequest,
        response: &ChatResponse,
    ) -> String {
        self.record_model_call(phase_before, None, request, response)
    }

    /// [`Self::record_call`] naming the model that answered (`model`), so a replay of the
    /// trace is priced as that model.
    pub fn record_model_call(
        &mut self,
        phase_before: &str,
        model: Option<&str>,
        request: &ChatRequest,
        response: &ChatResponse,
    ) -> String {
        self.calls += 1;
        let id = format!("C{:02}", self.calls);
        let mut assistant =
            json!({"role": "assistant", "content": response.message.text(), "toolCalls": []});
        assistant["toolCalls"] = Value::Array(
            response
                .message
                .tool_calls
                .iter()
                .map(tool_call_json)
                .collect(),
        );
        // Provider fields sent back with the answer (reasoning, Anthropic's signed thinking):
        // a replay gives them back, so a continued run stays valid for the provider.
        if !response.message.extra.is_empty() {
            assistant["extra"] = Value::Object(response.message.extra.clone());
        }
        let mut entry = json!({
            "id": id,
            "phaseBefore": phase_before,
            "nodeId": request_node(&request.messages),
            "request": {
                "messages": request.messages.iter().map(message_json).collect::<Vec<_>>(),
                "tools": request.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
            },
            "response": {"assistant": assistant},
        });
        if let Some(m) = model {
            entry["model"] = json!(m);
        }
        // A request baton did not compose is at no node.
        if entry["nodeId"].is_null()
            && let Some(fields) = entry.as_object_mut()
        {
            fields.shift_remove("nodeId");
        }
        if let Some(u) = response.usage {
            entry["response"]["usage"] = json!(u);
        }
        if let Some(r) = &response.finish_reason {
            entry["response"]["finishReason"] = json!(r);
        }
        self.dialogues.push(entry);
        id
    }

    fn last_call(&mut self) -> Option<&mut Value> {
        self.dialogues
            .iter_mut()
            .rev()
            .find(|d| d.get("type").is_none())
    }

    /// Adds the results of the last call's tool calls.
    pub fn record_tool_runs(&mut self, runs: Vec<(String, Value)>) {
        if let Some(d) = self.last_call() {
            let list: Vec<Value> = runs
                .into_iter()
                .map(|(id, result)| json!({"toolCallId": id, "result": result}))
                .collect();
            d["runtime"]["toolRuns"] = Value::Array(list);
        }
    }

    /// Records what the run did after the last call (`uiAfter`).
    pub fn record_ui_after(&mut self, phase: &str, reason: &str) {
        if let Some(d) = self.last_call() {
            d["runtime"]["uiAfter"] = json!({"phase": phase, "reason": reason});
        }
    }

    pub fn record_user_input(&mut self, raw_text: &str, wrapped: &str) {
        let n = self
            .dialogues
            .iter()
            .filter(|d| d.get("type").is_some())
            .count()
            + 1;
        self.dialogues.push(json!({
            "id": format!("U{n:02}"),
            "type": "user_input",
            "uiToRuntime": {"rawText": raw_text, "wrappedMessage": wrapped},
        }));
    }

    pub fn to_value(&self) -> Value {
        let mut top = Map::new();
        top.insert("traceVersion".into(), json!(TRACE_VERSION));
        for (k, v) in &self.meta {
            if k != "traceVersion" && k != "dialogues" {
                top.insert(k.clone(), v.clone());
            }
        }
        top.insert("dialogues".into(), Value::Array(self.dialogues.clone()));
        Value::Object(top)
    }

    /// Pretty JSON with a final newline.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec_pretty(&self.to_value()).unwrap_or_default();
        out.push(b'\n');
        out
    }
}
