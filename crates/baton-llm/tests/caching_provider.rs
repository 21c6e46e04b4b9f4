//! The played caching provider over HTTP: the client reads its `cached_tokens` into the usage of
//! each call, and a request that extends the previous one is served mostly from the cache.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use baton_llm::testing::caching::{CachingProvider, cached_tokens};
use baton_llm::{CallOptions, ChatModel, ChatRequest, HttpChatModel, LlmConfig, Message};
use baton_testkit::json_server::JsonServer;
use serde_json::{Value, json};
use std::sync::Arc;

fn answer() -> Value {
    json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "noted"}, "finish_reason": "stop"}]})
}

#[tokio::test]
async fn a_growing_conversation_is_served_from_the_cache() {
    let provider = Arc::new(CachingProvider::new());
    let p = provider.clone();
    let server = JsonServer::start(Arc::new(move |body: &Value| p.answer(body, answer())));
    let config = LlmConfig {
        base_url: server.base_url(),
        model: Some("cache-test".into()),
        stream: false,
        ..LlmConfig::default()
    };
    let model = HttpChatModel::new(config).unwrap();
    let mut request = ChatRequest {
        messages: vec![
            Message::system("rules ".repeat(1_200)),
            Message::user("first question"),
        ],
        ..ChatRequest::default()
    };
    let first = model
        .chat(&request, CallOptions::default())
        .await
        .unwrap()
        .usage
        .unwrap();
    assert!(first.prompt_tokens > 1_500, "{first:?}");
    assert_eq!(first.cached_prompt_tokens, 0);
    request.messages.push(Message::assistant("noted"));
    request.messages.push(Message::user("second question"));
    let second = model
        .chat(&request, CallOptions::default())
        .await
        .unwrap()
        .usage
        .unwrap();
    // Everything but the new messages was seen before; the last partial block is not cached.
    assert_eq!(
        second.cached_prompt_tokens,
        cached_tokens(second.cached_prompt_tokens)
    );
    assert!(
        second.prompt_tokens - second.cached_prompt_tokens < 128 + 40,
        "{second:?}"
    );
    assert_eq!(provider.served().len(), 2);
    assert_eq!(
        provider.totals(),
        (
            first.prompt_tokens + second.prompt_tokens,
            second.cached_prompt_tokens
        )
    );
}
