//! Talking to models: an HTTP client for OpenAI-compatible endpoints and Anthropic's Messages API (streaming, retries, timeouts,
//! cancellation, lenient decoding), tool-name aliasing, configuration, and traces that record a
//! run's conversation and replay it offline.
//!
//! Nothing here knows about workflows.

pub mod anthropic;
mod body;
pub mod client;
pub mod config;
pub mod endpoint;
pub mod error;
pub mod model;
pub mod names;
pub mod price;
pub mod probe;
pub mod protocol;
pub mod replay;
pub mod scrub;
pub mod testing;
pub mod trace;
pub mod types;
pub mod wire;

pub use client::HttpChatModel;
pub use config::{ApiKey, LlmConfig, LlmOverrides};
pub use error::LlmError;
pub use model::{BoxFuture, CallOptions, ChatModel, ModelIdentity};
pub use price::Price;
pub use replay::{RecordingModel, ReplayModel};
pub use trace::{Trace, TraceRecorder};
pub use types::{
    ChatOptions, ChatRequest, ChatResponse, Message, Role, StreamEvent, ToolCall, ToolDef, Usage,
};
