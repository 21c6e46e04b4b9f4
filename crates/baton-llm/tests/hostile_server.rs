//! The HTTP client against a server that lies, loops, streams forever and echoes secrets: every
//! call ends, within its caps, and no error carries the key.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_llm::client::EMPTY_ANSWER_NUDGE;
use baton_llm::testing::{Reply, ScriptedServer, ServerOptions};
use baton_llm::{
    ApiKey, CallOptions, ChatModel, ChatRequest, ChatResponse, HttpChatModel, LlmConfig, LlmError,
    Message, Role, ToolCall,
};
use serde_json::json;
use std::time::{Duration, Instant};

const KEY: &str = "sk-abc123def456ghi789jkl012mno345wxyz";
/// A small cap, so the endless answers end fast.
const CAP: usize = 64 * 1024;
/// No test here may take longer, whatever the server does.
const BOUND: Duration = Duration::from_secs(5);

fn config(server: &ScriptedServer, stream: bool) -> LlmConfig {
    LlmConfig {
        base_url: server.base_url(),
        model: Some("test-model".into()),
        api_key: Some(ApiKey::new(KEY)),
        timeout: Duration::from_millis(800),
        max_retries: 2,
        stream,
        retry_base_delay: Duration::from_millis(10),
        max_backoff: Duration::from_millis(50),
        max_response_bytes: CAP,
        ..LlmConfig::default()
    }
}

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::system("You are a test."), Message::user("go")],
        tools: Vec::new(),
        options: Default::default(),
    }
}

/// One call with the config, bounded in time; the result and how long it took.
async fn call_with(
    config: LlmConfig,
    request: &ChatRequest,
) -> (Result<ChatResponse, LlmError>, Duration) {
    let model = HttpChatModel::new(config).unwrap();
    let started = Instant::now();
    let result = tokio::time::timeout(BOUND, model.chat(request, CallOptions::default()))
        .await
        .unwrap_or_else(|_| panic!("the call did not end within {BOUND:?}"));
    (result, started.elapsed())
}

async fn call(config: LlmConfig) -> (Result<ChatResponse, LlmError>, Duration) {
    call_with(config, &request()).await
}

fn assert_too_big(err: &LlmError) {
    assert_eq!(err.code(), "LLM_BAD_RESPONSE", "{err}");
    assert!(err.to_string().contains("max_response_bytes"), "{err}");
}

#[tokio::test]
async fn an_endless_stream_is_cut_at_the_cap() {
    let server = ScriptedServer::start(vec![
        Reply::endless_stream(Duration::ZERO),
        Reply::text("never"),
    ])
    .await
    .unwrap();
    let (result, took) = call(config(&server, true)).await;
    assert_too_big(&result.unwrap_err());
    assert_eq!(
        server.received().len(),
        1,
        "a cut answer is not asked again"
    );
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

#[tokio::test]
async fn an_sse_event_that_never_ends_is_cut_at_the_cap() {
    // No line end ever: the event parser would buffer it forever.
    let mut piece = b"data: ".to_vec();
    piece.extend(std::iter::repeat_n(b'x', 8192));
    let server = ScriptedServer::start(vec![Reply::EndlessBody {
        status: 200,
        content_type: "text/event-stream".into(),
        piece,
    }])
    .await
    .unwrap();
    let (result, took) = call(config(&server, true)).await;
    assert_too_big(&result.unwrap_err());
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

#[tokio::test]
async fn an_endless_plain_body_is_cut_at_the_cap() {
    let server = ScriptedServer::start(Vec::new()).await.unwrap();
    // A server that ignores `stream: true` is read the same way.
    for stream in [false, true] {
        server.push(Reply::EndlessBody {
            status: 200,
            content_type: "application/json".into(),
            piece: br#"{"choices":[{"message":{"content":"aaaaaaaaaaaaaaaa"#.repeat(100),
        });
        let (result, took) = call(config(&server, stream)).await;
        assert_too_big(&result.unwrap_err());
        assert!(took < Duration::from_secs(2), "took {took:?}");
    }
}

#[tokio::test]
async fn an_endless_error_body_is_cut_at_the_cap() {
    let server = ScriptedServer::start(vec![
        Reply::EndlessBody {
            status: 503,
            content_type: "text/html".into(),
            piece: b"<p>busy</p>".repeat(400),
        },
        Reply::text("never"),
    ])
    .await
    .unwrap();
    let (result, _) = call(config(&server, false)).await;
    let err = result.unwrap_err();
    assert_too_big(&err);
    assert!(err.to_string().contains("HTTP 503"), "{err}");
    assert_eq!(server.received().len(), 1);
}

#[tokio::test]
async fn a_whole_answer_over_the_cap_is_refused_and_one_under_it_passes() {
    let big = "b".repeat(CAP + 1);
    let server = ScriptedServer::start(vec![Reply::text(&big), Reply::text(&big[..CAP / 2])])
        .await
        .unwrap();
    let (result, _) = call(config(&server, false)).await;
    assert_too_big(&result.unwrap_err());
    let (result, _) = call(config(&server, false)).await;
    assert_eq!(result.unwrap().message.text().len(), CAP / 2);
}

#[tokio::test]
async fn a_stream_that_trickles_forever_ends_at_max_call() {
    let server = ScriptedServer::start(vec![Reply::endless_stream(Duration::from_millis(20))])
        .await
        .unwrap();
    let mut c = config(&server, true);
    c.max_call = Duration::from_millis(400);
    let (result, took) = call(c).await;
    let err = result.unwrap_err();
    assert_eq!(err.code(), "LLM_TIMEOUT", "{err}");
    assert!(err.to_string().contains("max_call_s"), "{err}");
    // The stream never ends by itself: any bound shows max_call ended it (BOUND leaves room
    // for a loaded machine).
    assert!(took < BOUND, "took {took:?}");
}

#[tokio::test]
async fn max_call_bounds_the_retries_of_a_silent_server() {
    let server = ScriptedServer::start(vec![Reply::Hang, Reply::Hang, Reply::Hang])
        .await
        .unwrap();
    let mut c = config(&server, false);
    // Three silent tries would take 3 × 30 s; max_call ends them long before.
    c.timeout = Duration::from_secs(30);
    c.max_call = Duration::from_millis(300);
    let (result, took) = call(c).await;
    assert_eq!(result.unwrap_err().code(), "LLM_TIMEOUT");
    assert!(took < BOUND, "took {took:?}");
}

#[tokio::test]
async fn a_day_long_retry_after_is_clamped_then_rate_limited() {
    let server = ScriptedServer::start(vec![
        Reply::rate_limited(86_400),
        Reply::rate_limited(86_400),
        // Too large for a duration at all: ignored, not a panic.
        Reply::error(429, "slow down").with_header("retry-after", "1e300"),
    ])
    .await
    .unwrap();
    let (result, took) = call(config(&server, false)).await;
    let err = result.unwrap_err();
    assert_eq!(err.code(), "LLM_RATE_LIMITED");
    assert_eq!(server.received().len(), 3, "one try and two retries");
    // Clamped to max_backoff (50 ms): a day would never end; BOUND leaves room for a loaded
    // machine.
    assert!(took < BOUND, "took {took:?}");
}

#[tokio::test]
async fn a_retry_that_would_end_past_max_call_is_not_waited_for() {
    // A 30 s Retry-After against a 2 s max_call: the first answer comes well within max_call
    // even on a loaded machine, and waiting would take 30 s.
    let server = ScriptedServer::start(vec![Reply::rate_limited(30), Reply::text("too late")])
        .await
        .unwrap();
    let mut c = config(&server, false);
    c.max_backoff = Duration::from_secs(30);
    c.max_call = Duration::from_secs(2);
    let (result, took) = call(c).await;
    assert_eq!(result.unwrap_err().code(), "LLM_RATE_LIMITED");
    assert_eq!(server.received().len(), 1);
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

#[tokio::test]
async fn an_empty_answer_is_asked_again_once_with_a_nudge() {
    let server = ScriptedServer::start(vec![Reply::empty(), Reply::text("done")])
        .await
        .unwrap();
    let (result, _) = call(config(&server, false)).await;
    assert_eq!(result.unwrap().message.text(), "done");
    let got = server.received();
    let (first, second) = (
        got[0].body["messages"].as_array().unwrap(),
        got[1].body["messages"].as_array().unwrap(),
    );
    assert_eq!(second.len(), first.len() + 1);
    assert_eq!(&second[..first.len()], &first[..]);
    assert_eq!(
        second[first.len()],
        json!({"role": "user", "content": EMPTY_ANSWER_NUDGE})
    );

    // Streamed whitespace is empty too; a tool call is an answer.
    let server = ScriptedServer::start(vec![
        Reply::stream_text(&[" ", "\n\t"]),
        Reply::stream_tool_call("c1", "fs_read", "{}", 4),
    ])
    .await
    .unwrap();
    let (result, _) = call(config(&server, true)).await;
    assert_eq!(result.unwrap().message.tool_calls.len(), 1);
}

#[tokio::test]
async fn empty_answers_twice_are_a_bad_response() {
    let server = ScriptedServer::start(vec![Reply::text("  \n"), Reply::empty(), Reply::text("x")])
        .await
        .unwrap();
    let (result, _) = call(config(&server, false)).await;
    let err = result.unwrap_err();
    assert_eq!(err.code(), "LLM_BAD_RESPONSE");
    assert!(err.to_string().contains("nothing"), "{err}");
    assert_eq!(server.received().len(), 2, "one nudge, no more");
}

/// No piece of the key (8 characters or more) is in the message.
fn assert_clean(err: &LlmError) {
    let text = err.to_string();
    for start in 0..=KEY.len() - 8 {
        assert!(
            !text.contains(&KEY[start..start + 8]),
            "{:?} leaks in {text}",
            &KEY[start..start + 8]
        );
    }
    assert!(!text.to_ascii_lowercase().contains("bearer sk"), "{text}");
    assert!(text.contains("***"), "{text}");
}

#[tokio::test]
async fn provider_errors_never_carry_the_key() {
    let stream_error = Reply::Stream {
        payloads: vec![
            json!({"error": {"message": format!("upstream refused key {KEY}")}}).to_string(),
        ],
        pause: Duration::ZERO,
        break_after: None,
    };
    let cases: Vec<(Reply, bool, &str)> = vec![
        (
            Reply::error(
                401,
                &format!("Incorrect API key provided: {KEY}. See the docs."),
            ),
            false,
            "LLM_HTTP_ERROR",
        ),
        (
            Reply::error(401, "Incorrect API key provided: sk-abc1****wxyz."),
            false,
            "LLM_HTTP_ERROR",
        ),
        (Reply::EchoHeaders { status: 400 }, false, "LLM_HTTP_ERROR"),
        (
            Reply::EchoHeaders { status: 429 },
            false,
            "LLM_RATE_LIMITED",
        ),
        (
            Reply::error(500, &format!("proxy saw key={KEY}")),
            false,
            "LLM_HTTP_ERROR",
        ),
        (stream_error, true, "LLM_BAD_RESPONSE"),
        (
            Reply::json(200, json!({"error": {"message": format!("bad key {KEY}")}})),
            false,
            "LLM_BAD_RESPONSE",
        ),
    ];
    for (reply, stream, code) in cases {
        let server = ScriptedServer::start(vec![reply]).await.unwrap();
        let mut c = config(&server, stream);
        c.max_retries = 0;
        let (result, _) = call(c).await;
        let err = result.unwrap_err();
        assert_eq!(err.code(), code, "{err}");
        assert_clean(&err);
    }
    // The echo really carried the header, and it is gone.
    let server = ScriptedServer::start(vec![Reply::EchoHeaders { status: 400 }])
        .await
        .unwrap();
    let (result, _) = call(config(&server, false)).await;
    let text = result.unwrap_err().to_string();
    assert!(text.contains("authorization: ***"), "{text}");
}

fn tool_call(id: &str) -> Message {
    let mut m = Message::assistant("");
    m.content = None;
    m.tool_calls = vec![ToolCall {
        id: id.into(),
        name: "fs.read".into(),
        arguments: "{}".into(),
    }];
    m
}

#[tokio::test]
async fn the_strict_server_refuses_unpaired_tool_messages_like_openai() {
    let mut orphan = request();
    orphan.messages.push(Message::tool_result("call_x", "{}"));
    let mut unanswered = request();
    unanswered.messages.push(tool_call("call_y"));
    unanswered.messages.push(Message::user("and now?"));
    for (req, id) in [(&orphan, "call_x"), (&unanswered, "call_y")] {
        let server = ScriptedServer::start(vec![Reply::text("fine")])
            .await
            .unwrap();
        let (result, _) = call_with(config(&server, false), req).await;
        match result.unwrap_err() {
            LlmError::Http { status, message } => {
                assert_eq!(status, 400);
                assert!(
                    message.contains("tool_call_id") && message.contains(id),
                    "{message}"
                );
            }
            other => panic!("{other}"),
        }
        assert_eq!(server.remaining(), 1, "a refused request uses up no reply");
        // The lenient server takes it.
        let lenient = ScriptedServer::start_with(
            vec![Reply::text("fine")],
            ServerOptions {
                strict_tool_calls: false,
            },
        )
        .await
        .unwrap();
        let (result, _) = call_with(config(&lenient, false), req).await;
        assert_eq!(result.unwrap().message.text(), "fine");
    }
    // A well-paired conversation passes.
    let mut paired = request();
    paired.messages.push(tool_call("call_z"));
    paired.messages.push(Message::tool_result("call_z", "{}"));
    let server = ScriptedServer::start(vec![Reply::text("fine")])
        .await
        .unwrap();
    let (result, _) = call_with(config(&server, false), &paired).await;
    assert_eq!(result.unwrap().message.role, Role::Assistant);
}
