//! The model answers before the epic writes anything: one short request (a few tokens, capped)
//! sent before the sprint status, the progress record or a run is touched, so an endpoint that
//! is down, a refused key or an unknown model stops `baton epic run` with nothing to undo. A
//! dry run sends it too: it says what the real run would meet. `baton session start` sends it
//! before it creates a session whose chain needed no model call.

use super::error::{EpicError, Result};
use baton_llm::{CallOptions, ChatModel, ChatOptions, ChatRequest, Message};
use tokio_util::sync::CancellationToken;

/// The check's request: a model that answers at all answers this.
pub const PROMPT: &str = "Reply with the single word: ready";
/// Its completion cap: enough for a reasoning model to get to the word.
const MAX_TOKENS: u32 = 64;

/// Sends the check to `model`; its error, when it does not answer, with the LLM's code and
/// hint, and `consequence` (what was not done, e.g. "nothing was started or written").
pub async fn check(
    model: &dyn ChatModel,
    cancel: &CancellationToken,
    consequence: &str,
) -> Result<()> {
    let request = ChatRequest {
        messages: vec![Message::user(PROMPT)],
        tools: Vec::new(),
        options: ChatOptions {
            max_tokens: Some(MAX_TOKENS),
            ..ChatOptions::default()
        },
    };
    let options = CallOptions {
        on_event: None,
        cancel: Some(cancel),
    };
    match model.chat(&request, options).await {
        Ok(_) => Ok(()),
        Err(e) => {
            let hint = e.hint().unwrap_or_else(|| {
                "check the model with `baton models check`, then run the command again".into()
            });
            Err(EpicError::failure(
                e.code(),
                format!(
                    "the model {} did not answer a first short request, so {consequence}: {e}",
                    model.model_name()
                ),
            )
            .hint(hint))
        }
    }
}
