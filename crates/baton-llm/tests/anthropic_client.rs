//! The native Anthropic Messages API client against played servers: the strict played API
//! (breakpoints, alternation, tool results, thinking blocks sent back with their signatures,
//! cache usage), and the scripted server for faults (529 and 429 retried after `retry-after`,
//! an `error` event mid-stream, a cut answer, a refused key).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_llm::anthropic::{MAX_BREAKPOINTS, THINKING_BLOCKS, request::breakpoints};
use baton_llm::config::Api;
use baton_llm::testing::anthropic::{AnthropicServer, message};
use baton_llm::testing::{Reply, ScriptedServer};
use baton_llm::{
    ApiKey, CallOptions, ChatModel, ChatRequest, HttpChatModel, LlmConfig, LlmError, Message,
    StreamEvent, ToolDef,
};
use serde_json::json;
use std::sync::Mutex;
use std::time::{Duration, Instant};

fn config(base_url: String, stream: bool) -> LlmConfig {
    LlmConfig {
        api: Api::Anthropic,
        base_url,
        model: Some("claude-sonnet-4-5".into()),
        api_key: Some(ApiKey::new("sk-ant-test-123")),
        timeout: Duration::from_secs(5),
        max_retries: 2,
        stream,
        retry_base_delay: Duration::from_millis(10),
        ..LlmConfig::default()
    }
}

/// A system prompt long enough to be cached (over 1,024 played tokens), and two tools.
fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![
            Message::system(format!("You are a test. {}", "Rules. ".repeat(800))),
            Message::user("Read the brief, then write the story."),
        ],
        tools: vec![
            ToolDef {
                name: "fs.read".into(),
                description: "Read a file".into(),
                parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            },
            ToolDef {
                name: "fs.write".into(),
                description: "Write a file".into(),
                parameters: json!({"type": "object"}),
            },
        ],
        options: Default::default(),
    }
}

#[tokio::test]
async fn a_tool_loop_with_thinking_and_cache_breakpoints_streamed_and_whole() {
    for stream in [true, false] {
        let server = AnthropicServer::start(vec![
            message(
                Some("The brief first."),
                "Reading it.",
                &[
                    (
                        "toolu_1".into(),
                        "fs_read".into(),
                        json!({"path": "brief.md"}),
                    ),
                    (
                        "toolu_2".into(),
                        "fs_read".into(),
                        json!({"path": "notes/é.md"}),
                    ),
                ],
            ),
            message(None, "Done: the story is written.", &[]),
        ])
        .unwrap();
        let model = HttpChatModel::new(config(server.base_url(), stream)).unwrap();
        let shown = Mutex::new(String::new());
        let on_event = |e: StreamEvent| {
            if let StreamEvent::TextDelta(t) = e {
                shown.lock().unwrap().push_str(&t);
            }
        };
        let options = CallOptions {
            on_event: Some(&on_event),
            cancel: None,
        };
        let mut req = request();
        let first = model.chat(&req, options).await.unwrap();
        assert_eq!(first.message.text(), "Reading it.");
        assert_eq!(*shown.lock().unwrap(), "Reading it.", "stream {stream}");
        assert_eq!(first.finish_reason.as_deref(), Some("tool_calls"));
        let calls = &first.message.tool_calls;
        assert_eq!(calls.len(), 2);
        assert_eq!(
            (calls[0].id.as_str(), calls[0].name.as_str()),
            ("toolu_1", "fs.read")
        );
        let args: serde_json::Value = serde_json::from_str(&calls[1].arguments).unwrap();
        assert_eq!(args, json!({"path": "notes/é.md"}));
        let kept = &first.message.extra[THINKING_BLOCKS];
        assert_eq!(kept[0]["thinking"], "The brief first.");
        assert!(kept[0]["signature"].as_str().unwrap().starts_with("sig-"));
        let u1 = first.usage.unwrap();
        assert_eq!(u1.cached_prompt_tokens, 0);
        assert!(u1.cache_write_tokens > 1_000, "{u1:?}");

        // The next request carries the answer back (thinking block unchanged) and the results;
        // the played API refuses it otherwise.
        req.messages.push(first.message.clone());
        req.messages
            .push(Message::tool_result("toolu_1", "# Brief\nA task board."));
        req.messages
            .push(Message::tool_result("toolu_2", "nothing"));
        let second = model.chat(&req, options).await.unwrap();
        assert_eq!(second.message.text(), "Done: the story is written.");
        assert_eq!(second.finish_reason.as_deref(), Some("stop"));
        let u2 = second.usage.unwrap();

        let exchanges = server.exchanges();
        assert_eq!(
            exchanges.len(),
            2,
            "{:?}",
            exchanges.iter().map(|e| e.status).collect::<Vec<_>>()
        );
        for (e, u) in exchanges.iter().zip([u1, u2]) {
            assert_eq!(e.status, 200);
            assert_eq!(e.path, "/v1/messages");
            assert_eq!(e.header("x-api-key"), Some("sk-ant-test-123"));
            assert_eq!(e.header("anthropic-version"), Some("2023-06-01"));
            assert!(e.header("authorization").is_none());
            let n = breakpoints(&e.body);
            assert!((1..=MAX_BREAKPOINTS).contains(&n), "{n} breakpoints");
            // What baton recorded is what the server reported.
            let reported = e.usage.unwrap();
            assert_eq!(u.cached_prompt_tokens, reported.cache_read_input_tokens);
            assert_eq!(u.cache_write_tokens, reported.cache_creation_input_tokens);
            assert_eq!(u.prompt_tokens, reported.prompt_tokens());
        }
        // The second request read the first one's whole prompt from the cache.
        assert_eq!(u2.cached_prompt_tokens, u1.prompt_tokens, "stream {stream}");
        let body = &exchanges[1].body;
        assert_eq!(body["messages"].as_array().unwrap().len(), 3);
        assert_eq!(body["messages"][2]["content"][0]["type"], "tool_result");
        assert_eq!(body["messages"][2]["content"][1]["tool_use_id"], "toolu_2");
        assert_eq!(body["tools"][0]["name"], "fs_read");
        assert_eq!(body["stream"] == true, stream);
    }
}

#[tokio::test]
async fn overloaded_and_rate_limited_answers_are_retried_after_the_wait_asked_for() {
    let ok = message(None, "fine", &[]);
    let server = ScriptedServer::start(vec![
        Reply::json(529, json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))
            .with_header("retry-after", "0.3"),
        Reply::json(429, json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}))
            .with_header("retry-after", "0.2"),
        Reply::json(200, ok),
    ])
    .await
    .unwrap();
    let model = HttpChatModel::new(config(server.base_url(), false)).unwrap();
    let started = Instant::now();
    let r = model
        .chat(&request(), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(r.message.text(), "fine");
    assert_eq!(server.received().len(), 3);
    // The waits the server asked for were kept (the base delay is 10 ms).
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );

    // Overloaded every time: the error says so once the retries are spent.
    let overloaded = || {
        Reply::json(
            529,
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        )
    };
    let server = ScriptedServer::start(vec![overloaded(), overloaded(), overloaded()])
        .await
        .unwrap();
    let model = HttpChatModel::new(config(server.base_url(), false)).unwrap();
    let e = model
        .chat(&request(), CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(server.received().len(), 3);
    assert!(matches!(e, LlmError::Http { status: 529, .. }), "{e}");
    assert!(e.to_string().contains("Overloaded"), "{e}");
}

#[tokio::test]
async fn an_error_event_mid_stream_is_retried_and_a_cut_answer_says_so() {
    let events = |reason: &str| {
        vec![
            json!({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": 12, "output_tokens": 1}}}).to_string(),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}).to_string(),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "A long answ"}}).to_string(),
            json!({"type": "message_delta", "delta": {"stop_reason": reason}, "usage": {"output_tokens": 16}}).to_string(),
            json!({"type": "message_stop"}).to_string(),
        ]
    };
    let error_event =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
            .to_string();
    let server = ScriptedServer::start(vec![
        Reply::Stream {
            payloads: vec![events("")[0].clone(), error_event],
            pause: Duration::ZERO,
            break_after: None,
        },
        Reply::Stream {
            payloads: events("max_tokens"),
            pause: Duration::ZERO,
            break_after: None,
        },
    ])
    .await
    .unwrap();
    let model = HttpChatModel::new(config(server.base_url(), true)).unwrap();
    let r = model
        .chat(&request(), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(
        server.received().len(),
        2,
        "the overloaded stream was asked again"
    );
    assert_eq!(r.message.text(), "A long answ");
    // A cut answer is `length`, which the runtime turns into LLM_ANSWER_TRUNCATED.
    assert_eq!(r.finish_reason.as_deref(), Some("length"));
    let u = r.usage.unwrap();
    assert_eq!((u.prompt_tokens, u.completion_tokens), (12, 16));

    // A stream that ends before saying how the answer ended is broken, not short.
    let mut cut = events("end_turn");
    cut.truncate(3);
    let server = ScriptedServer::start(vec![Reply::Stream {
        payloads: cut,
        pause: Duration::ZERO,
        break_after: None,
    }])
    .await
    .unwrap();
    let mut c = config(server.base_url(), true);
    c.max_retries = 0;
    let model = HttpChatModel::new(c).unwrap();
    let e = model
        .chat(&request(), CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(e.code(), "LLM_BAD_RESPONSE", "{e}");
    assert!(e.to_string().contains("message_stop"), "{e}");
}

#[tokio::test]
async fn a_refused_key_is_not_retried_and_not_shown() {
    let server = ScriptedServer::start(vec![Reply::json(
        401,
        json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
    )])
    .await
    .unwrap();
    let model = HttpChatModel::new(config(server.base_url(), true)).unwrap();
    let e = model
        .chat(&request(), CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(server.received().len(), 1);
    assert_eq!(e.code(), "LLM_HTTP_ERROR");
    let text = e.to_string();
    assert!(
        text.contains("invalid x-api-key") && text.contains("refused the API key"),
        "{text}"
    );
    assert!(!text.contains("sk-ant-test-123"));
}

#[tokio::test]
async fn the_played_api_refuses_what_anthropic_refuses() {
    // Each body below breaks one rule; the played API answers 400 with the reason.
    let server = AnthropicServer::start(vec![]).unwrap();
    let post = |body: serde_json::Value| {
        let url = format!("{}/messages", server.base_url());
        async move {
            let r = reqwest::Client::new()
                .post(url)
                .header("anthropic-version", "2023-06-01")
                .header("content-type", "application/json")
                .body(body.to_string())
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let text = |t: &str| json!({"type": "text", "text": t});
    let cc = |mut b: serde_json::Value| {
        b["cache_control"] = json!({"type": "ephemeral"});
        b
    };
    let cases = [
        (
            json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [cc(text("a")), cc(text("b")), cc(text("c")), cc(text("d")), cc(text("e"))]}]}),
            "maximum of 4",
        ),
        (
            json!({"model": "m", "max_tokens": 5, "messages": [{"role": "assistant", "content": "hi"}]}),
            "alternate",
        ),
        (
            json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [text("")]}]}),
            "non-whitespace",
        ),
        (
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
            "max_tokens",
        ),
        (
            json!({"model": "m", "max_tokens": 5, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]},
            {"role": "user", "content": "no result"}]}),
            "without `tool_result`",
        ),
        (
            json!({"model": "m", "max_tokens": 5, "messages": [
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "x"}]}]}),
            "unexpected `tool_use_id`",
        ),
        (
            json!({"model": "m", "max_tokens": 5, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "changed", "signature": "sig-forged"}, text("x")]},
            {"role": "user", "content": "go on"}]}),
            "signature",
        ),
    ];
    for (body, says) in cases {
        let (status, answer) = post(body.clone()).await;
        assert_eq!(status, 400, "{body}");
        assert!(answer.contains(says), "{answer} should say {says}");
    }
}
