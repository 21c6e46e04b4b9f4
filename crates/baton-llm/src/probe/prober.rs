//! What the checks share: the model as configured and the same with streaming on (both with a
//! probe's bounds), the probe's options, and the checks' names.

use super::failure::{self, Outcome};
use crate::client::HttpChatModel;
use crate::config::LlmConfig;
use crate::error::LlmError;
use crate::model::{CallOptions, ChatModel};
use crate::types::{ChatOptions, ChatRequest, ChatResponse, Message, StreamEvent, ToolDef};
use std::time::Duration;

/// The completion cap of every probe request: room for a reasoning model to think a little
/// and answer, no more.
pub const PROBE_MAX_TOKENS: u32 = 256;
/// The default time one check may take, its retries included.
pub const PROBE_DEADLINE: Duration = Duration::from_secs(60);
/// The largest chat answer a probe reads (the model listing has its own cap).
const PROBE_MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// The checks' names, in the order they run.
pub const REACHABLE: &str = "reachable";
pub const TOOLS: &str = "tools";
pub const STREAMING: &str = "streaming";
pub const CACHE: &str = "cache";
pub const CONTEXT: &str = "context";
pub(crate) const ORDER: [&str; 5] = [REACHABLE, TOOLS, STREAMING, CACHE, CONTEXT];

/// How long each check may take and how much each request may answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeOptions {
    pub deadline: Duration,
    pub max_tokens: u32,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            deadline: PROBE_DEADLINE,
            max_tokens: PROBE_MAX_TOKENS,
        }
    }
}

/// The models the checks talk to, with a probe's bounds.
pub(crate) struct Probe {
    /// The configuration with a probe's bounds (retries, deadline, answer size).
    pub(crate) config: LlmConfig,
    model: HttpChatModel,
    streaming: HttpChatModel,
    pub(crate) options: ProbeOptions,
}

impl Probe {
    pub(crate) fn new(config: &LlmConfig, options: ProbeOptions) -> Result<Probe, LlmError> {
        let mut bounded = config.clone();
        bounded.max_retries = bounded.max_retries.min(1);
        bounded.max_backoff = bounded.max_backoff.min(Duration::from_secs(2));
        bounded.timeout = bounded.timeout.min(options.deadline);
        bounded.max_call = options.deadline;
        bounded.max_response_bytes = bounded.max_response_bytes.min(PROBE_MAX_RESPONSE_BYTES);
        let model = HttpChatModel::new(bounded.clone())?;
        let streaming = HttpChatModel::new(LlmConfig {
            stream: true,
            ..bounded.clone()
        })?;
        Ok(Probe {
            config: bounded,
            model,
            streaming,
            options,
        })
    }

    pub(crate) fn model_name(&self) -> &str {
        self.model.model_name()
    }

    /// A request with the probe's completion cap.
    pub(crate) fn request(&self, messages: Vec<Message>, tools: Vec<ToolDef>) -> ChatRequest {
        ChatRequest {
            messages,
            tools,
            options: ChatOptions {
                max_tokens: Some(self.options.max_tokens),
                ..ChatOptions::default()
            },
        }
    }

    pub(crate) async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.model.chat(request, CallOptions::default()).await
    }

    /// A streamed call, with the number of text pieces that arrived.
    pub(crate) async fn chat_streamed(
        &self,
        request: &ChatRequest,
    ) -> Result<(ChatResponse, usize), LlmError> {
        let pieces = std::sync::atomic::AtomicUsize::new(0);
        let count = |e: StreamEvent| {
            if matches!(e, StreamEvent::TextDelta(_)) {
                pieces.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        };
        let options = CallOptions {
            on_event: Some(&count),
            cancel: None,
        };
        let response = self.streaming.chat(request, options).await?;
        Ok((response, pieces.load(std::sync::atomic::Ordering::Relaxed)))
    }

    pub(crate) fn failed(&self, name: &'static str, e: &LlmError) -> Outcome {
        failure::from_error(name, e, &self.config)
    }
}
