//! Provider-neutral chat types. Tool names here are the dotted names (`fs.read`); the HTTP
//! client maps them to wire-safe names and back.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as JSON text, exactly as the model produced them.
    pub arguments: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Provider fields that must be sent back with the message (e.g. `reasoning_content`).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
}

impl Message {
    fn new(role: Role, content: impl Into<String>) -> Message {
        Message {
            role,
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: None,
            extra: Map::new(),
        }
    }

    pub fn system(content: impl Into<String>) -> Message {
        Message::new(Role::System, content)
    }

    pub fn user(content: impl Into<String>) -> Message {
        Message::new(Role::User, content)
    }

    pub fn assistant(content: impl Into<String>) -> Message {
        Message::new(Role::Assistant, content)
    }

    pub fn tool_result(tool_call_id: impl Into<String>, content: impl Into<String>) -> Message {
        Message {
            tool_call_id: Some(tool_call_id.into()),
            ..Message::new(Role::Tool, content)
        }
    }

    pub fn text(&self) -> &str {
        self.content.as_deref().unwrap_or("")
    }

    /// An assistant message that calls tools (no text).
    pub fn assistant_calls(calls: Vec<ToolCall>) -> Message {
        Message {
            content: None,
            tool_calls: calls,
            ..Message::new(Role::Assistant, "")
        }
    }
}

impl ToolCall {
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// The completion cap sent (`max_tokens` or `max_completion_tokens`); the client sends its
    /// configured cap when this is `None`, so no request goes without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Sent as `prompt_cache_key` where the configuration allows it: requests with the same
    /// key are routed to the same prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_key: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    pub tools: Vec<ToolDef>,
    #[serde(default)]
    pub options: ChatOptions,
}

/// The tokens of one model call (or a sum of calls), as the provider reported them.
///
/// `cached_prompt_tokens` is the part of `prompt_tokens` the provider served from its prompt
/// cache (billed at the cached price); `cache_write_tokens` the part it wrote to its cache
/// (Anthropic bills those above the input price); `reasoning_tokens` the part of `completion_tokens` spent
/// thinking. `cost_usd` is set only where a price is known for every call summed; it is never
/// guessed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub prompt_tokens: u64,
    #[serde(default)]
    pub cached_prompt_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    pub completion_tokens: u64,
    #[serde(default)]
    pub reasoning_tokens: u64,
    pub total_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl Usage {
    /// Nothing counted (the start of a sum).
    pub fn is_zero(&self) -> bool {
        self.prompt_tokens == 0
            && self.cached_prompt_tokens == 0
            && self.cache_write_tokens == 0
            && self.completion_tokens == 0
            && self.reasoning_tokens == 0
            && self.total_tokens == 0
            && self.cost_usd.is_none()
    }

    /// Adds `other`. The cost stays known only if both sides know it (an empty sum takes the
    /// other side's): a sum with an unpriced call has no cost rather than a wrong one.
    pub fn add(&mut self, other: Usage) {
        if other.is_zero() {
            return;
        }
        if self.is_zero() {
            *self = other;
            return;
        }
        // Saturating: a sum of figures read from files must not overflow.
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.cached_prompt_tokens = self
            .cached_prompt_tokens
            .saturating_add(other.cached_prompt_tokens);
        self.cache_write_tokens = self
            .cache_write_tokens
            .saturating_add(other.cache_write_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(other.reasoning_tokens);
        self.total_tokens = self.total_tokens.saturating_add(other.total_tokens);
        self.cost_usd = match (self.cost_usd, other.cost_usd) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
    }

    /// The share of prompt tokens served from the provider's cache (0 without prompt tokens).
    pub fn cached_share(&self) -> f64 {
        if self.prompt_tokens == 0 {
            0.0
        } else {
            self.cached_prompt_tokens as f64 / self.prompt_tokens as f64
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatResponse {
    /// The assistant message: text and/or tool calls.
    pub message: Message,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Usage figures the provider reported that cannot be counts (negative, fractional, absurd,
    /// a total under its parts): left out of `usage`, kept to be warned about.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub usage_faults: Vec<String>,
}

/// Live output while a streamed answer arrives.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    TextDelta(String),
    ToolCallStarted { index: usize, name: String },
}
