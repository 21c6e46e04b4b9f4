//! The `ChatModel` trait: one request, one assistant answer.

use crate::error::LlmError;
use crate::price::Price;
use crate::types::{ChatRequest, ChatResponse, StreamEvent};
use std::future::Future;
use std::pin::Pin;
use tokio_util::sync::CancellationToken;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Per-call options: live events and cancellation.
#[derive(Clone, Copy, Default)]
pub struct CallOptions<'a> {
    /// Called with text deltas and tool-call starts while a streamed answer arrives.
    pub on_event: Option<&'a (dyn Fn(StreamEvent) + Send + Sync)>,
    /// Cancels the call (and its retries) when triggered.
    pub cancel: Option<&'a CancellationToken>,
}

impl CallOptions<'_> {
    pub fn emit(&self, event: StreamEvent) {
        if let Some(f) = self.on_event {
            f(event);
        }
    }
}

/// A chat model.
///
/// Contract for a model that answers live (the HTTP client): `chat` never returns an empty
/// answer (no tool call and no text but whitespace); it asks once more with a nudge, then fails
/// with `LLM_BAD_RESPONSE`. Callers may therefore treat a text-only answer as something to show.
/// Its errors never carry the API key. A replay serves what was recorded, as it was recorded.
pub trait ChatModel: Send + Sync {
    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
        options: CallOptions<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, LlmError>>;

    /// The model name, for logs and traces.
    fn model_name(&self) -> &str;

    /// What a run remembers of this model, to be continued with it (never a key).
    fn identity(&self) -> ModelIdentity {
        ModelIdentity {
            name: self.model_name().to_string(),
            ..ModelIdentity::default()
        }
    }

    /// The completion cap a request carries when it names none (the client sends it as
    /// `max_tokens` or `max_completion_tokens`): with the counted prompt, the most a call can
    /// cost in tokens.
    fn max_completion_tokens(&self) -> u32 {
        crate::wire::DEFAULT_MAX_COMPLETION_TOKENS
    }

    /// What this model's tokens cost, when a price is known (configured or built in).
    fn price(&self) -> Option<Price> {
        None
    }

    /// The name [`Self::price`] is looked up under (`[models."<name>"] price`): the model's
    /// own, or for a replay the model the trace recorded.
    fn price_name(&self) -> &str {
        self.model_name()
    }

    /// The context window of this model, when configured or known.
    fn context_tokens(&self) -> Option<u64> {
        None
    }
}

/// What a run remembers of the model that drove it, so `answer`, `resume` and `chat` go on
/// with the same one. Never a key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelIdentity {
    pub name: String,
    /// The endpoint, when it holds no secret (no user, password or query).
    pub base_url: Option<String>,
    /// The wire protocol, for a live model.
    pub api: Option<crate::config::Api>,
    /// A recorded trace answers, not a model.
    pub replay: bool,
    /// Where the replayed trace comes from (a file path, or `bundled:<name>`), when known.
    pub trace: Option<String>,
}

/// A borrowed model is a model (so wrappers can hold `&dyn ChatModel`).
impl<T: ChatModel + ?Sized> ChatModel for &T {
    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
        options: CallOptions<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, LlmError>> {
        (**self).chat(request, options)
    }

    fn model_name(&self) -> &str {
        (**self).model_name()
    }

    fn identity(&self) -> ModelIdentity {
        (**self).identity()
    }

    fn max_completion_tokens(&self) -> u32 {
        (**self).max_completion_tokens()
    }

    fn price(&self) -> Option<Price> {
        (**self).price()
    }

    fn price_name(&self) -> &str {
        (**self).price_name()
    }

    fn context_tokens(&self) -> Option<u64> {
        (**self).context_tokens()
    }
}
