//! Tool-call ids unique within a run.
//!
//! Providers that send no ids get `call_0, call_1, …` from the client on every turn, and some
//! providers reuse their own ids across turns. A run's conversation log, its resume and a strict
//! provider all pair calls with results by id, so a repeated id makes an interrupted call look
//! answered. Every call whose id is empty or was already used in this run gets a fresh one,
//! before the answer is recorded, logged or executed.

use baton_llm::{BoxFuture, CallOptions, ChatModel, ChatRequest, ChatResponse, LlmError};
use std::collections::HashSet;
use std::sync::Mutex;

pub struct UniqueCallIds<'m> {
    inner: &'m dyn ChatModel,
    used: Mutex<HashSet<String>>,
}

impl<'m> UniqueCallIds<'m> {
    /// `used`: every id the run's conversation log already holds.
    pub fn new(inner: &'m dyn ChatModel, used: HashSet<String>) -> UniqueCallIds<'m> {
        UniqueCallIds {
            inner,
            used: Mutex::new(used),
        }
    }

    fn make_unique(&self, response: &mut ChatResponse) {
        let mut used = self
            .used
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for call in &mut response.message.tool_calls {
            if call.id.is_empty() || used.contains(&call.id) {
                // Deterministic, so a replayed run names its calls the same way every time.
                let mut n = used.len();
                while used.contains(&format!("call_baton_{n}")) {
                    n += 1;
                }
                call.id = format!("call_baton_{n}");
            }
            used.insert(call.id.clone());
        }
    }
}

impl ChatModel for UniqueCallIds<'_> {
    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
        options: CallOptions<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, LlmError>> {
        Box::pin(async move {
            let mut response = self.inner.chat(request, options).await?;
            self.make_unique(&mut response);
            Ok(response)
        })
    }

    fn model_name(&self) -> &str {
        self.inner.model_name()
    }

    fn identity(&self) -> baton_llm::ModelIdentity {
        self.inner.identity()
    }

    fn max_completion_tokens(&self) -> u32 {
        self.inner.max_completion_tokens()
    }

    fn price(&self) -> Option<baton_llm::Price> {
        self.inner.price()
    }

    fn context_tokens(&self) -> Option<u64> {
        self.inner.context_tokens()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_llm::{Message, ToolCall};

    struct Fixed;

    impl ChatModel for Fixed {
        fn chat<'a>(
            &'a self,
            _: &'a ChatRequest,
            _: CallOptions<'a>,
        ) -> BoxFuture<'a, Result<ChatResponse, LlmError>> {
            Box::pin(async {
                let message = Message::assistant_calls(
                    ["call_0", "call_1", "", "call_1"]
                        .iter()
                        .map(|id| ToolCall::new(*id, "fs.read", "{}"))
                        .collect(),
                );
                Ok(ChatResponse {
                    message,
                    finish_reason: None,
                    usage: None,
                    usage_faults: Vec::new(),
                })
            })
        }

        fn model_name(&self) -> &str {
            "fixed"
        }
    }

    #[tokio::test]
    async fn repeated_and_missing_ids_are_replaced_every_turn() {
        let model = UniqueCallIds::new(&Fixed, HashSet::from(["call_0".to_string()]));
        let request = ChatRequest {
            messages: Vec::new(),
            tools: Vec::new(),
            options: Default::default(),
        };
        let mut seen = HashSet::from(["call_0".to_string()]);
        for _ in 0..3 {
            let r = model.chat(&request, CallOptions::default()).await.unwrap();
            for call in &r.message.tool_calls {
                assert!(!call.id.is_empty());
                assert!(seen.insert(call.id.clone()), "{} reused", call.id);
            }
        }
        assert_eq!(seen.len(), 13);
    }
}
