//! The HTTP client against the scripted server: every fault, retried or not, never hanging.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_llm::testing::{Reply, ScriptedServer};
use baton_llm::{
    ApiKey, CallOptions, ChatModel, ChatRequest, HttpChatModel, LlmConfig, LlmError, Message,
    StreamEvent, ToolDef,
};
use serde_json::json;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

fn config(server: &ScriptedServer, stream: bool) -> LlmConfig {
    LlmConfig {
        base_url: server.base_url(),
        model: Some("test-model".into()),
        api_key: Some(ApiKey::new("sk-test-123")),
        timeout: Duration::from_millis(800),
        max_retries: 2,
        stream,
        retry_base_delay: Duration::from_millis(10),
        ..LlmConfig::default()
    }
}

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![
            Message::system("You are a test."),
            Message::user("RUN_DIRECTIVE\n- intent: start"),
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
            ToolDef {
                name: "ui.ask_user".into(),
                description: "Ask".into(),
                parameters: json!({"type": "object"}),
            },
        ],
        options: Default::default(),
    }
}

async fn call(model: &HttpChatModel) -> Result<baton_llm::ChatResponse, LlmError> {
    model.chat(&request(), CallOptions::default()).await
}

#[tokio::test]
async fn plain_answer_with_key_url_and_aliased_tools() {
    let server = ScriptedServer::start(vec![Reply::tool_calls(&[(
        "call_1",
        "fs_read",
        r#"{"path":"@project/a.md"}"#,
    )])])
    .await
    .unwrap();
    let model = HttpChatModel::new(config(&server, false)).unwrap();
    let r = call(&model).await.unwrap();
    assert_eq!(
        r.message.tool_calls[0].name, "fs.read",
        "wire names map back to dotted names"
    );
    assert_eq!(
        r.message.tool_calls[0].arguments,
        r#"{"path":"@project/a.md"}"#
    );
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(r.usage.unwrap().total_tokens, 29);
    let got = &server.received()[0];
    assert_eq!(
        (got.method.as_str(), got.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(got.header("authorization"), Some("Bearer sk-test-123"));
    assert_eq!(got.body["model"], "test-model");
    assert_eq!(got.body["tool_choice"], "auto");
    assert_eq!(got.body["tools"][0]["function"]["name"], "fs_read");
    assert_eq!(got.body["tools"][2]["function"]["name"], "ui_ask_user");
    assert_eq!(got.body["stream"], false);
}

#[tokio::test]
async fn no_key_means_no_authorization_header() {
    let server = ScriptedServer::start(vec![Reply::text("hi")])
        .await
        .unwrap();
    let mut c = config(&server, false);
    c.api_key = None;
    let r = call(&HttpChatModel::new(c).unwrap()).await.unwrap();
    assert_eq!(r.message.text(), "hi");
    assert_eq!(server.received()[0].header("authorization"), None);
}

#[tokio::test]
async fn rate_limit_honours_retry_after() {
    let server = ScriptedServer::start(vec![Reply::rate_limited(1), Reply::text("after the wait")])
        .await
        .unwrap();
    let model = HttpChatModel::new(config(&server, false)).unwrap();
    let started = Instant::now();
    let r = call(&model).await.unwrap();
    assert_eq!(r.message.text(), "after the wait");
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "waited {:?}",
        started.elapsed()
    );
    assert_eq!(server.received().len(), 2);
}

#[tokio::test]
async fn persistent_rate_limit_gives_up_with_its_code() {
    let server = ScriptedServer::start(vec![
        Reply::rate_limited(0),
        Reply::rate_limited(0),
        Reply::rate_limited(0),
    ])
    .await
    .unwrap();
    let err = call(&HttpChatModel::new(config(&server, false)).unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "LLM_RATE_LIMITED");
    assert_eq!(server.received().len(), 3, "one try and two retries");
}

#[tokio::test]
async fn server_errors_are_retried_then_reported() {
    let server = ScriptedServer::start(vec![
        Reply::error(500, "boom"),
        Reply::error(503, "busy"),
        Reply::text("ok"),
    ])
    .await
    .unwrap();
    assert_eq!(
        call(&HttpChatModel::new(config(&server, false)).unwrap())
            .await
            .unwrap()
            .message
            .text(),
        "ok"
    );
    let server = ScriptedServer::start(vec![
        Reply::error(500, "boom"),
        Reply::error(500, "boom"),
        Reply::error(502, "bad gateway"),
    ])
    .await
    .unwrap();
    let err = call(&HttpChatModel::new(config(&server, false)).unwrap())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        LlmError::Http {
            status: 502,
            message: "bad gateway".into()
        }
    );
    assert_eq!(err.code(), "LLM_HTTP_ERROR");
    for status in [408, 409] {
        let server = ScriptedServer::start(vec![Reply::error(status, "again"), Reply::text("ok")])
            .await
            .unwrap();
        assert!(
            call(&HttpChatModel::new(config(&server, false)).unwrap())
                .await
                .is_ok(),
            "{status} is retried"
        );
    }
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let server = ScriptedServer::start(vec![
        Reply::error(400, "model 'x' does not exist"),
        Reply::text("never"),
    ])
    .await
    .unwrap();
    let err = call(&HttpChatModel::new(config(&server, false)).unwrap())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        LlmError::Http {
            status: 400,
            message: "model 'x' does not exist".into()
        }
    );
    assert_eq!(server.received().len(), 1);
    assert!(!err.to_string().contains("sk-test-123"));
}

#[tokio::test]
async fn malformed_json_is_a_bad_response() {
    let server = ScriptedServer::start(vec![Reply::malformed(), Reply::text("never")])
        .await
        .unwrap();
    let err = call(&HttpChatModel::new(config(&server, false)).unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "LLM_BAD_RESPONSE");
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn slow_answers_wait_and_silent_servers_time_out() {
    let server = ScriptedServer::start(vec![
        Reply::text("slow but fine").delayed(Duration::from_millis(300)),
    ])
    .await
    .unwrap();
    assert_eq!(
        call(&HttpChatModel::new(config(&server, false)).unwrap())
            .await
            .unwrap()
            .message
            .text(),
        "slow but fine"
    );
    let server = ScriptedServer::start(vec![Reply::Hang, Reply::Hang, Reply::Hang])
        .await
        .unwrap();
    let mut c = config(&server, true);
    c.timeout = Duration::from_millis(300);
    let started = Instant::now();
    let err = call(&HttpChatModel::new(c).unwrap()).await.unwrap_err();
    assert_eq!(err.code(), "LLM_TIMEOUT");
    // Three attempts of 300 ms plus short backoffs: never past the bound.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn streamed_text_arrives_as_deltas() {
    let server = ScriptedServer::start(vec![Reply::stream_text(&["Hel", "lo", " world"])])
        .await
        .unwrap();
    let model = HttpChatModel::new(config(&server, true)).unwrap();
    let seen = Mutex::new(Vec::new());
    let on_event = |e: StreamEvent| {
        if let StreamEvent::TextDelta(t) = e {
            seen.lock().unwrap().push(t);
        }
    };
    let r = model
        .chat(
            &request(),
            CallOptions {
                on_event: Some(&on_event),
                cancel: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(r.message.text(), "Hello world");
    assert_eq!(*seen.lock().unwrap(), ["Hel", "lo", " world"]);
    assert_eq!(r.usage.unwrap().total_tokens, 8);
    let body = &server.received()[0].body;
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn tool_call_arguments_split_across_many_chunks_merge_exactly() {
    let args = r##"{"path":"@project/artifacts/create-story/target.md","content":"# Target Story\n\n- storyKey: 1-2-user-authentication\n- ünïcödé ✓\n"}"##;
    let server =
        ScriptedServer::start(vec![Reply::stream_tool_call("call_9", "fs_write", args, 1)])
            .await
            .unwrap();
    let model = HttpChatModel::new(config(&server, true)).unwrap();
    let started = Mutex::new(Vec::new());
    let on_event = |e: StreamEvent| {
        if let StreamEvent::ToolCallStarted { name, .. } = e {
            started.lock().unwrap().push(name);
        }
    };
    let r = model
        .chat(
            &request(),
            CallOptions {
                on_event: Some(&on_event),
                cancel: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(r.message.tool_calls.len(), 1);
    assert_eq!(r.message.tool_calls[0].id, "call_9");
    assert_eq!(r.message.tool_calls[0].name, "fs.write");
    assert_eq!(r.message.tool_calls[0].arguments, args);
    assert_eq!(*started.lock().unwrap(), ["fs.write"]);
}

#[tokio::test]
async fn stream_broken_before_content_falls_back_to_plain_once() {
    let mut broken = Reply::stream_text(&["never", "seen"]);
    if let Reply::Stream { break_after, .. } = &mut broken {
        *break_after = Some(0);
    }
    let server = ScriptedServer::start(vec![broken, Reply::text("plain answer")])
        .await
        .unwrap();
    let r = call(&HttpChatModel::new(config(&server, true)).unwrap())
        .await
        .unwrap();
    assert_eq!(r.message.text(), "plain answer");
    let got = server.received();
    assert_eq!(
        (got[0].body["stream"].clone(), got[1].body["stream"].clone()),
        (json!(true), json!(false))
    );
}

#[tokio::test]
async fn stream_reset_mid_answer_is_retried() {
    let mut broken = Reply::stream_text(&["partial ", "answer", " lost"]);
    if let Reply::Stream { break_after, .. } = &mut broken {
        *break_after = Some(2);
    }
    let server = ScriptedServer::start(vec![broken, Reply::stream_text(&["whole answer"])])
        .await
        .unwrap();
    let r = call(&HttpChatModel::new(config(&server, true)).unwrap())
        .await
        .unwrap();
    assert_eq!(r.message.text(), "whole answer");
    assert_eq!(server.received()[1].body["stream"], true);
}

#[tokio::test]
async fn malformed_stream_chunk_is_a_bad_response() {
    let server = ScriptedServer::start(vec![Reply::Stream {
        payloads: vec!["{not json".into()],
        pause: Duration::ZERO,
        break_after: None,
    }])
    .await
    .unwrap();
    let err = call(&HttpChatModel::new(config(&server, true)).unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "LLM_BAD_RESPONSE");
}

#[tokio::test]
async fn cancellation_stops_a_hanging_call() {
    let server = ScriptedServer::start(vec![Reply::Hang]).await.unwrap();
    let mut c = config(&server, false);
    c.timeout = Duration::from_secs(60);
    let model = HttpChatModel::new(c).unwrap();
    let token = CancellationToken::new();
    let t2 = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        t2.cancel();
    });
    let started = Instant::now();
    let err = model
        .chat(
            &request(),
            CallOptions {
                on_event: None,
                cancel: Some(&token),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err, LlmError::Cancelled);
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn unreachable_endpoint_is_a_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let c = LlmConfig {
        base_url: format!("http://127.0.0.1:{port}/v1"),
        model: Some("m".into()),
        timeout: Duration::from_millis(500),
        max_retries: 1,
        retry_base_delay: Duration::from_millis(5),
        ..LlmConfig::default()
    };
    let err = call(&HttpChatModel::new(c).unwrap()).await.unwrap_err();
    assert_eq!(err.code(), "LLM_CONNECT_ERROR");
}

/// A port nobody listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    port
}

#[tokio::test]
async fn a_refused_connection_fails_at_once_naming_the_endpoint_and_its_setting() {
    let url = format!("http://127.0.0.1:{}/v1", closed_port());
    let env = |k: &str| match k {
        "OPENAI_BASE_URL" => Some(url.clone()),
        "BATON_MODEL" => Some("m".to_string()),
        _ => None,
    };
    // The default retries (4, from 500 ms) would take 7.5 s.
    let c = LlmConfig::load(None, None, &env, &Default::default()).unwrap();
    let model = HttpChatModel::new(c).unwrap();
    let started = Instant::now();
    let err = call(&model).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(err.code(), "LLM_CONNECT_ERROR");
    let message = err.to_string();
    assert!(message.contains(&url), "{message}");
    assert!(message.contains("OPENAI_BASE_URL"), "{message}");
    assert!(err.is_unreachable());
    assert!(err.hint().unwrap().contains("OPENAI_BASE_URL"));
}

#[tokio::test]
async fn a_refused_connection_after_an_answer_is_retried() {
    // The endpoint answered once: a refusal now is a restart, worth the usual retries.
    let server = ScriptedServer::start(vec![Reply::text("hello")])
        .await
        .unwrap();
    let mut c = config(&server, false);
    c.retry_base_delay = Duration::from_millis(150);
    c.max_retries = 1;
    let model = HttpChatModel::new(c).unwrap();
    call(&model).await.unwrap();
    let addr = server
        .base_url()
        .trim_start_matches("http://")
        .trim_end_matches("/v1")
        .to_string();
    drop(server);
    // Until the listener is gone (the server's task ends on the runtime).
    for _ in 0..500 {
        if std::net::TcpStream::connect(&addr).is_err() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let started = Instant::now();
    let err = call(&model).await.unwrap_err();
    assert_eq!(err.code(), "LLM_CONNECT_ERROR", "{err}");
    assert!(
        started.elapsed() >= Duration::from_millis(100),
        "not retried: {:?}",
        started.elapsed()
    );
}

#[test]
fn a_missing_key_for_a_remote_endpoint_is_said_before_any_request() {
    let remote = LlmConfig {
        base_url: "http://192.0.2.1:9/v1".into(),
        model: Some("m".into()),
        ..LlmConfig::default()
    };
    let Err(err) = HttpChatModel::new(remote.clone()) else {
        panic!("a model without a key for a remote endpoint")
    };
    assert_eq!(err.code(), "LLM_KEY_MISSING");
    let message = err.to_string();
    assert!(message.contains("OPENAI_API_KEY"), "{message}");
    assert!(message.contains("http://192.0.2.1:9/v1"), "{message}");
    assert!(err.hint().unwrap().contains("OPENAI_API_KEY"));
    let with_key = LlmConfig {
        api_key: Some(ApiKey::new("sk-x")),
        ..remote
    };
    assert!(HttpChatModel::new(with_key).is_ok());
    let local = LlmConfig {
        base_url: "http://localhost:11434/v1".into(),
        model: Some("m".into()),
        ..LlmConfig::default()
    };
    assert!(
        HttpChatModel::new(local).is_ok(),
        "a local server needs no key"
    );
}

#[tokio::test]
async fn request_bodies_snapshot() {
    let server = ScriptedServer::start(vec![Reply::text("a"), Reply::text("b")])
        .await
        .unwrap();
    let model = HttpChatModel::new(config(&server, false)).unwrap();
    // A turn that offers tools.
    model
        .chat(&request(), CallOptions::default())
        .await
        .unwrap();
    // A turn that returns a tool result after an assistant tool call.
    let mut req = request();
    let mut assistant = Message::assistant("");
    assistant.content = None;
    assistant.tool_calls = vec![baton_llm::ToolCall {
        id: "tc01".into(),
        name: "fs.read".into(),
        arguments: r#"{"path":"@state/workflow.md"}"#.into(),
    }];
    assistant
        .extra
        .insert("reasoning_content".into(), json!("check the state first"));
    req.messages.push(assistant);
    req.messages.push(Message::tool_result(
        "tc01",
        r#"{"ok":false,"error":{"code":"ENOENT","message":"File not found: @state/workflow.md"}}"#,
    ));
    req.options.temperature = Some(0.2);
    model.chat(&req, CallOptions::default()).await.unwrap();
    let got = server.received();
    insta::assert_json_snapshot!("tool_call_turn", got[0].body);
    insta::assert_json_snapshot!("tool_result_turn", got[1].body);
}
