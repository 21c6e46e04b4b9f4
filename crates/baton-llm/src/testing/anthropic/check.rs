//! What Anthropic's Messages API refuses with HTTP 400, checked as strictly as it does: a played
//! server that accepted more would let a client bug through.

use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// The thinking the server issued: each signature's text (a block sent back must match it),
/// and the signature that went with each tool call (its turn must be sent back with it, as
/// the API requires while thinking is on).
#[derive(Debug, Default)]
pub struct Issued {
    pub signatures: HashMap<String, String>,
    pub thinking_of_call: HashMap<String, String>,
}

/// Why a request body is refused, or `Ok`.
pub fn check(body: &Value, issued: &Issued) -> Result<(), String> {
    if !body["model"].is_string() {
        return Err("model: Field required".into());
    }
    if body["max_tokens"].as_u64().unwrap_or(0) == 0 {
        return Err("max_tokens: Field required (a positive integer)".into());
    }
    if body["thinking"]["type"] == "enabled" {
        let budget = body["thinking"]["budget_tokens"].as_u64().unwrap_or(0);
        if budget < 1024 {
            return Err(
                "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
                    .into(),
            );
        }
        if budget >= body["max_tokens"].as_u64().unwrap_or(0) {
            return Err("`max_tokens` must be greater than `thinking.budget_tokens`".into());
        }
    }
    let breakpoints = crate::anthropic::request::breakpoints(body);
    if breakpoints > 4 {
        return Err(format!(
            "A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}."
        ));
    }
    for (i, t) in body["tools"].as_array().into_iter().flatten().enumerate() {
        let name = t["name"].as_str().unwrap_or_default();
        let valid = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(format!(
                "tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
            ));
        }
        if t["input_schema"]["type"] != "object" {
            return Err(format!(
                "tools.{i}.input_schema.type: Input should be 'object'"
            ));
        }
    }
    match &body["system"] {
        Value::Null | Value::String(_) => {}
        Value::Array(a) => {
            for (i, b) in a.iter().enumerate() {
                text_block(b, &format!("system.{i}"))?;
            }
        }
        _ => return Err("system: Input should be a valid string or list".into()),
    }
    let messages = body["messages"]
        .as_array()
        .filter(|m| !m.is_empty())
        .ok_or("messages: at least one message is required")?;
    let mut open: Vec<String> = Vec::new();
    let mut ids = HashSet::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or_default();
        let expected = if i % 2 == 0 { "user" } else { "assistant" };
        if role != expected {
            return Err(format!(
                "messages.{i}: roles must alternate between \"user\" and \"assistant\", starting with \"user\""
            ));
        }
        let blocks: Vec<Value> = match &m["content"] {
            Value::String(s) if !s.is_empty() => {
                vec![serde_json::json!({"type": "text", "text": s})]
            }
            Value::Array(a) if !a.is_empty() => a.clone(),
            _ => {
                return Err(format!(
                    "messages.{i}: all messages must have non-empty content"
                ));
            }
        };
        let mut answered = Vec::new();
        for (j, b) in blocks.iter().enumerate() {
            let at = format!("messages.{i}.content.{j}");
            match (role, b["type"].as_str().unwrap_or_default()) {
                (_, "text") => text_block(b, &at)?,
                ("user", "tool_result") => {
                    if j != answered.len() {
                        return Err(format!(
                            "{at}: tool_result blocks must come first in the user message"
                        ));
                    }
                    let id = b["tool_use_id"].as_str().unwrap_or_default().to_string();
                    if !open.contains(&id) {
                        return Err(format!(
                            "{at}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                        ));
                    }
                    answered.push(id);
                }
                ("assistant", "tool_use") => {
                    let id = b["id"].as_str().unwrap_or_default().to_string();
                    if id.is_empty() || !ids.insert(id.clone()) {
                        return Err(format!("{at}: `tool_use` ids must be unique and non-empty"));
                    }
                    if !b["input"].is_object() {
                        return Err(format!("{at}.input: Input should be a valid dictionary"));
                    }
                    if let Some(sig) = issued.thinking_of_call.get(&id)
                        && !blocks.iter().any(|t| t["signature"] == sig.as_str())
                    {
                        return Err(format!(
                            "{at}: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a final `assistant` message must start with a thinking block"
                        ));
                    }
                }
                ("assistant", "thinking") => {
                    let sig = b["signature"].as_str().unwrap_or_default();
                    if issued.signatures.get(sig).map(String::as_str) != b["thinking"].as_str() {
                        return Err(format!("{at}: Invalid `signature` in `thinking` block"));
                    }
                }
                ("assistant", "redacted_thinking") => {}
                (role, kind) => {
                    return Err(format!("{at}: a {role} message cannot hold a {kind} block"));
                }
            }
        }
        if role == "user" {
            if let Some(missing) = open.iter().find(|id| !answered.contains(id)) {
                return Err(format!(
                    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {missing}. Each `tool_use` block must have a corresponding `tool_result` block in the next message."
                ));
            }
            open.clear();
        } else {
            open = blocks
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .filter_map(|b| b["id"].as_str().map(str::to_owned))
                .collect();
        }
    }
    if !open.is_empty() {
        return Err("the last message has `tool_use` blocks without results".into());
    }
    Ok(())
}

fn text_block(b: &Value, at: &str) -> Result<(), String> {
    if b["type"] != "text" {
        return Err(format!("{at}.type: Input should be 'text'"));
    }
    match b["text"].as_str() {
        Some(t) if !t.trim().is_empty() => Ok(()),
        _ => Err(format!(
            "{at}: text content blocks must contain non-whitespace text"
        )),
    }
}
