//! The request body of the Messages API, and where its cache breakpoints go.
//!
//! Anthropic caches a prompt prefix only up to a block marked `cache_control`, at most four
//! per request. baton marks: the last tool (the tools come first and change least: a new
//! node's or agent's system prompt still reads them), the end of the system prompt, the end
//! of the previous request's prompt (the last message before the latest answer, so this
//! request reads what the last one wrote even past the API's 20-block look-back), and the end
//! of this prompt (written for the next one). Every request of a run then reads all but its
//! newest turn from the cache.

use super::blocks::THINKING_BLOCKS;
use crate::names::ToolNames;
use crate::types::{ChatRequest, Message, Role};
use serde_json::{Value, json};

/// Anthropic refuses a request with more `cache_control` blocks.
pub const MAX_BREAKPOINTS: usize = 4;

/// What a body carries beyond the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyOptions {
    /// `max_tokens`, required by the API, when the request names no cap.
    pub default_cap: u32,
    /// Extended thinking's budget, when on.
    pub thinking_tokens: Option<u32>,
}

/// The body of `POST /messages` for `req`.
pub fn request_body(
    model: &str,
    req: &ChatRequest,
    names: &ToolNames,
    stream: bool,
    options: &BodyOptions,
) -> Value {
    let (system, rest): (Vec<&Message>, Vec<&Message>) =
        req.messages.iter().partition(|m| m.role == Role::System);
    let mut system: Vec<Value> = system
        .iter()
        .filter(|m| !m.text().is_empty())
        .map(|m| text_block(m.text()))
        .collect();
    let mut messages = turns(&rest, names);
    let mut tools: Vec<Value> = req
        .tools
        .iter()
        .map(|t| {
            json!({"name": names.to_wire(&t.name), "description": t.description,
                "input_schema": schema(&t.parameters)})
        })
        .collect();
    place_breakpoints(&mut tools, &mut system, &mut messages);
    let max_tokens = req.options.max_tokens.unwrap_or(options.default_cap);
    let mut body = json!({
        "model": model,
        "max_tokens": max_tokens,
        "messages": messages,
    });
    // The budget must stay under the cap; a request capped lower thinks without it.
    let thinking = options.thinking_tokens.filter(|b| *b < max_tokens);
    if !system.is_empty() {
        body["system"] = Value::Array(system);
    }
    if !tools.is_empty() {
        body["tools"] = Value::Array(tools);
    }
    match (thinking, req.options.temperature) {
        (Some(budget), _) => {
            // The API refuses a temperature beside thinking.
            body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
        }
        (None, Some(t)) => body["temperature"] = json!(t),
        (None, None) => {}
    }
    if stream {
        body["stream"] = json!(true);
    }
    body
}

fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// `input_schema` must be an object schema.
fn schema(parameters: &Value) -> Value {
    if parameters.is_object() {
        parameters.clone()
    } else {
        json!({"type": "object", "properties": {}})
    }
}

/// The conversation as alternating user and assistant turns: tool results become
/// `tool_result` blocks of a user turn (first in it, as the API wants), consecutive messages of
/// one side are merged, and nothing is sent empty (the API refuses empty text blocks).
fn turns(messages: &[&Message], names: &ToolNames) -> Vec<Value> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in messages {
        let (role, blocks) = match m.role {
            Role::Assistant => ("assistant", assistant_blocks(m, names)),
            Role::Tool => (
                "user",
                vec![json!({"type": "tool_result",
                    "tool_use_id": m.tool_call_id.as_deref().unwrap_or_default(),
                    "content": non_empty(m.text())})],
            ),
            // Leading system messages went to `system`; `partition` keeps the others' order.
            Role::User | Role::System => ("user", vec![text_block(non_empty(m.text()))]),
        };
        match out.last_mut() {
            Some((last, existing)) if *last == role => {
                if m.role == Role::Tool {
                    // Tool results go before any text of the same user turn.
                    let at = existing
                        .iter()
                        .take_while(|b| b["type"] == "tool_result")
                        .count();
                    existing.splice(at..at, blocks);
                } else {
                    existing.extend(blocks);
                }
            }
            _ => out.push((role, blocks)),
        }
    }
    out.into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

/// The API refuses empty text; a placeholder keeps the turn.
fn non_empty(text: &str) -> &str {
    if text.trim().is_empty() {
        "(empty)"
    } else {
        text
    }
}

fn assistant_blocks(m: &Message, names: &ToolNames) -> Vec<Value> {
    let mut blocks: Vec<Value> = match m.extra.get(THINKING_BLOCKS) {
        Some(Value::Array(kept)) => kept.clone(),
        _ => Vec::new(),
    };
    if !m.text().trim().is_empty() {
        blocks.push(text_block(m.text()));
    }
    for call in &m.tool_calls {
        blocks.push(json!({"type": "tool_use", "id": call.id,
            "name": names.to_wire(&call.name), "input": tool_input(&call.arguments)}));
    }
    if blocks.is_empty() {
        blocks.push(text_block("(empty)"));
    }
    blocks
}

/// `input` must be an object: arguments that are not one (a model's malformed JSON, kept as it
/// was written) travel as a string under `arguments`.
fn tool_input(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({ "arguments": arguments }),
    }
}

fn mark(block: &mut Value) {
    if let Some(o) = block.as_object_mut() {
        o.insert("cache_control".into(), json!({"type": "ephemeral"}));
    }
}

/// The last block of a turn that may carry `cache_control` (thinking blocks may not).
fn last_markable(turn: &mut Value) -> Option<&mut Value> {
    turn.get_mut("content")?
        .as_array_mut()?
        .iter_mut()
        .rev()
        .find(|b| !matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking")))
}

fn place_breakpoints(tools: &mut [Value], system: &mut [Value], messages: &mut [Value]) {
    let mut marked = 0;
    for last in [tools.last_mut(), system.last_mut()].into_iter().flatten() {
        mark(last);
        marked += 1;
    }
    // The end of this prompt, and of the previous request's: the last user turn before the
    // newest assistant turn.
    let end = messages.len().checked_sub(1);
    let previous_end = messages
        .iter()
        .rposition(|m| m["role"] == "assistant")
        .and_then(|a| a.checked_sub(1));
    for at in [previous_end, end].into_iter().flatten() {
        if marked >= MAX_BREAKPOINTS {
            break;
        }
        if let Some(block) = messages.get_mut(at).and_then(last_markable)
            && block.get("cache_control").is_none()
        {
            mark(block);
            marked += 1;
        }
    }
}

/// How many blocks of a body carry `cache_control` (for tests and checks).
pub fn breakpoints(body: &Value) -> usize {
    fn count(v: &Value) -> usize {
        match v {
            Value::Object(o) => {
                usize::from(o.contains_key("cache_control")) + o.values().map(count).sum::<usize>()
            }
            Value::Array(a) => a.iter().map(count).sum(),
            _ => 0,
        }
    }
    count(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{ToolCall, ToolDef};

    fn names() -> ToolNames {
        ToolNames::new(["fs.read"])
    }

    fn marked(body: &Value) -> Vec<String> {
        let mut at = Vec::new();
        if let Some(s) = body["system"].as_array() {
            for (i, b) in s.iter().enumerate() {
                if b.get("cache_control").is_some() {
                    at.push(format!("system.{i}"));
                }
            }
        }
        for (i, t) in body["tools"].as_array().into_iter().flatten().enumerate() {
            if t.get("cache_control").is_some() {
                at.push(format!("tools.{i}"));
            }
        }
        for (i, m) in body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            for (j, b) in m["content"].as_array().into_iter().flatten().enumerate() {
                if b.get("cache_control").is_some() {
                    at.push(format!("messages.{i}.{j}"));
                }
            }
        }
        at
    }

    fn options() -> BodyOptions {
        BodyOptions {
            default_cap: 1000,
            thinking_tokens: None,
        }
    }

    #[test]
    fn thinking_is_asked_for_within_the_cap_and_without_a_temperature() {
        let mut req = ChatRequest {
            messages: vec![Message::user("go")],
            tools: vec![],
            options: Default::default(),
        };
        req.options.temperature = Some(0.2);
        let on = BodyOptions {
            default_cap: 8000,
            thinking_tokens: Some(2048),
        };
        let body = request_body("claude", &req, &names(), false, &on);
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": 2048})
        );
        assert!(body.get("temperature").is_none());
        // A request capped under the budget goes without thinking.
        req.options.max_tokens = Some(1500);
        let body = request_body("claude", &req, &names(), false, &on);
        assert!(body.get("thinking").is_none());
        assert_eq!(body["temperature"], json!(0.2f32));
    }

    fn tool() -> ToolDef {
        ToolDef {
            name: "fs.read".into(),
            description: "Read".into(),
            parameters: json!({"type": "object"}),
        }
    }

    #[test]
    fn breakpoints_mark_the_system_prompt_the_previous_end_and_this_end() {
        let mut answer =
            Message::assistant_calls(vec![ToolCall::new("t1", "fs.read", "{\"path\":\"a\"}")]);
        answer.extra.insert(
            THINKING_BLOCKS.into(),
            json!([{"type": "thinking", "thinking": "hm", "signature": "s1"}]),
        );
        let req = ChatRequest {
            messages: vec![
                Message::system("rules"),
                Message::system("persona"),
                Message::user("start"),
                answer,
                Message::tool_result("t1", "content of a"),
                Message::user("and now?"),
            ],
            tools: vec![tool()],
            options: Default::default(),
        };
        let body = request_body("claude", &req, &names(), true, &options());
        // Two system blocks, three turns: the tool result and the text merged in one user turn.
        assert_eq!(body["system"].as_array().unwrap().len(), 2);
        let turns = body["messages"].as_array().unwrap();
        assert_eq!(turns.len(), 3);
        assert_eq!(turns[2]["content"][0]["type"], "tool_result");
        assert_eq!(turns[2]["content"][1]["text"], "and now?");
        // Thinking first and unchanged, then the call with its input as an object.
        assert_eq!(
            turns[1]["content"][0],
            json!({"type": "thinking", "thinking": "hm", "signature": "s1"})
        );
        assert_eq!(turns[1]["content"][1]["input"], json!({"path": "a"}));
        assert_eq!(turns[1]["content"][1]["name"], "fs_read");
        assert_eq!(
            marked(&body),
            ["system.1", "tools.0", "messages.0.0", "messages.2.1"]
        );
        assert_eq!(
            (body["max_tokens"].as_u64(), body["stream"].as_bool()),
            (Some(1000), Some(true))
        );

        // No system prompt; a first request has no previous end.
        let req = ChatRequest {
            messages: vec![Message::user("start")],
            tools: vec![tool()],
            options: Default::default(),
        };
        let body = request_body("claude", &req, &names(), false, &options());
        assert_eq!(marked(&body), ["tools.0", "messages.0.0"]);
        assert!(body.get("stream").is_none());
        assert!(breakpoints(&body) <= MAX_BREAKPOINTS);
    }

    #[test]
    fn nothing_is_sent_empty_and_arguments_that_are_no_object_are_kept() {
        let req = ChatRequest {
            messages: vec![
                Message::user("  "),
                Message::assistant_calls(vec![
                    ToolCall::new("t1", "fs.read", "{not json"),
                    ToolCall::new("t2", "fs.read", ""),
                ]),
                Message::tool_result("t1", ""),
                Message::tool_result("t2", "x"),
                Message::assistant(""),
            ],
            tools: vec![],
            options: Default::default(),
        };
        let body = request_body("claude", &req, &names(), false, &options());
        let turns = body["messages"].as_array().unwrap();
        assert_eq!(turns[0]["content"][0]["text"], "(empty)");
        assert_eq!(
            turns[1]["content"][0]["input"],
            json!({"arguments": "{not json"})
        );
        assert_eq!(turns[1]["content"][1]["input"], json!({}));
        assert_eq!(turns[2]["content"][0]["content"], "(empty)");
        assert_eq!(turns[3]["content"][0]["text"], "(empty)");
    }
}
