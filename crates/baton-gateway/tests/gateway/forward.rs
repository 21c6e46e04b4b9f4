//! Forwarding: the key swap, the token check, answers passed on byte for byte, routes.

use crate::common::*;
use baton_gateway::Wire;
use baton_llm::testing::anthropic::{AnthropicServer, message};
use baton_llm::testing::{Reply, ScriptedServer};
use serde_json::json;
use std::time::Duration;

fn anthropic_request(stream: bool) -> serde_json::Value {
    json!({"model": "claude-played", "max_tokens": 1024, "stream": stream,
        "messages": [{"role": "user", "content": "Write the story file."}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_sees_the_operators_key_and_the_cli_never_does() {
    let upstream = AnthropicServer::start(vec![
        message(None, "Done.", &[]),
        message(None, "Done again.", &[]),
    ])
    .unwrap();
    let gw = Setup::live(Wire::AnthropicMessages, upstream.base_url())
        .start()
        .await;
    let streamed = call(
        &gw.base_url(),
        "POST",
        "/v1/messages",
        Some(TOKEN),
        Wire::AnthropicMessages,
        Some(&anthropic_request(true)),
    )
    .await;
    assert_eq!(streamed.status, 200, "{}", streamed.text());
    assert!(
        streamed.text().contains("message_stop"),
        "{}",
        streamed.text()
    );
    let whole = call(
        &gw.base_url(),
        "POST",
        "/v1/messages",
        Some(TOKEN),
        Wire::AnthropicMessages,
        Some(&anthropic_request(false)),
    )
    .await;
    assert_eq!(whole.json()["content"][0]["text"], "Done again.");
    let seen_upstream = upstream.exchanges();
    assert_eq!(seen_upstream.len(), 2);
    for e in &seen_upstream {
        assert_eq!(e.status, 200);
        assert_eq!(e.header("x-api-key"), Some(KEY));
        assert_eq!(e.header("authorization"), None);
        let all = format!("{:?}{}", e.headers, e.body);
        assert!(
            !all.contains(TOKEN),
            "the run's token reached the upstream: {all}"
        );
    }
    for got in [&streamed, &whole] {
        assert!(!seen(got).contains(KEY));
    }
    assert_eq!(gw.exchanges(), 2);
}

#[tokio::test]
async fn openai_wires_get_the_key_as_a_bearer_token() {
    for (wire, path) in [
        (Wire::OpenAiResponses, "/v1/responses"),
        (Wire::ChatCompletions, "/v1/chat/completions"),
    ] {
        let upstream = ScriptedServer::start(vec![Reply::text("ok")])
            .await
            .unwrap();
        let gw = Setup::live(wire, upstream.base_url()).start().await;
        let got = call(
            &gw.base_url(),
            "POST",
            path,
            Some(TOKEN),
            wire,
            Some(&json!({"model": "m", "input": "hi"})),
        )
        .await;
        assert_eq!(got.status, 200);
        let r = &upstream.received()[0];
        assert_eq!(r.path, path);
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {KEY}").as_str())
        );
        assert!(!format!("{:?}", r.headers).contains(TOKEN));
        assert!(!seen(&got).contains(KEY));
    }
}

#[tokio::test]
async fn a_wrong_or_missing_token_gets_401_in_the_apis_shape_and_nothing_is_forwarded() {
    let upstream = ScriptedServer::start(vec![Reply::text("never")])
        .await
        .unwrap();
    for wire in [
        Wire::AnthropicMessages,
        Wire::OpenAiResponses,
        Wire::ChatCompletions,
    ] {
        let gw = Setup::live(wire, upstream.base_url()).start().await;
        for token in [None, Some("baton-run-other"), Some(KEY)] {
            let got = call(&gw.base_url(), "GET", "/v1/models", token, wire, None).await;
            assert_eq!(got.status, 401, "{wire:?} {token:?}");
            let body = got.json();
            match wire {
                Wire::AnthropicMessages => {
                    assert_eq!(body["type"], "error");
                    assert_eq!(body["error"]["type"], "authentication_error");
                }
                _ => assert_eq!(body["error"]["code"], "invalid_api_key", "{body}"),
            }
        }
    }
    assert!(upstream.received().is_empty());
    assert_eq!(upstream.remaining(), 1);
}

#[tokio::test]
async fn a_stream_reaches_the_cli_byte_for_byte_and_the_query_is_kept() {
    let events = vec![
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 5, "output_tokens": 1}}}).to_string(),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "héllo — 世界"}}).to_string(),
        json!({"type": "message_delta", "usage": {"output_tokens": 3}}).to_string(),
        "[DONE]".to_string(),
    ];
    let stream = || Reply::Stream {
        payloads: events.clone(),
        pause: Duration::from_millis(2),
        break_after: None,
    };
    let upstream = ScriptedServer::start(vec![stream(), stream()])
        .await
        .unwrap();
    let body = anthropic_request(true);
    let direct = client()
        .post(format!("{}/messages", upstream.base_url()))
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let direct_type = direct.headers()["content-type"].clone();
    let direct = direct.bytes().await.unwrap();
    let gw = Setup::live(Wire::AnthropicMessages, upstream.base_url())
        .start()
        .await;
    let through = call(
        &gw.base_url(),
        "POST",
        "/v1/messages?beta=true",
        Some(TOKEN),
        Wire::AnthropicMessages,
        Some(&body),
    )
    .await;
    assert_eq!(through.status, 200);
    assert_eq!(through.headers["content-type"], direct_type);
    assert_eq!(through.body, direct.to_vec());
    assert_eq!(upstream.received()[1].path, "/v1/messages?beta=true");
}

#[tokio::test]
async fn any_other_route_is_404_in_the_apis_shape_and_never_forwarded() {
    let upstream = ScriptedServer::start(vec![Reply::text("never")])
        .await
        .unwrap();
    let cases = [
        (Wire::AnthropicMessages, "POST", "/v1/responses"),
        (Wire::AnthropicMessages, "GET", "/v1/messages"),
        (Wire::AnthropicMessages, "POST", "/v1/complete"),
        (Wire::OpenAiResponses, "POST", "/v1/chat/completions"),
        (Wire::OpenAiResponses, "POST", "/v1/messages/count_tokens"),
        (Wire::ChatCompletions, "POST", "/v1/embeddings"),
        (Wire::ChatCompletions, "GET", "/"),
        (Wire::ChatCompletions, "GET", "/v1/models/a/b"),
    ];
    for (wire, method, path) in cases {
        let gw = Setup::live(wire, upstream.base_url()).start().await;
        let got = call(
            &gw.base_url(),
            method,
            path,
            Some(TOKEN),
            wire,
            Some(&json!({})),
        )
        .await;
        assert_eq!(got.status, 404, "{wire:?} {method} {path}");
        let body = got.json();
        match wire {
            Wire::AnthropicMessages => assert_eq!(body["error"]["type"], "not_found_error"),
            _ => assert_eq!(body["error"]["code"], "unknown_url"),
        }
    }
    assert!(upstream.received().is_empty());
}

#[tokio::test]
async fn model_lists_and_token_counts_are_forwarded_but_are_not_model_calls() {
    let upstream = ScriptedServer::start(vec![
        Reply::json(
            200,
            json!({"data": [{"id": "claude-played", "type": "model"}]}),
        ),
        Reply::json(200, json!({"input_tokens": 12})),
    ])
    .await
    .unwrap();
    let meter = TestMeter::new(0);
    let gw = Setup {
        meter: Some(meter.clone()),
        ..Setup::live(Wire::AnthropicMessages, upstream.base_url())
    }
    .start()
    .await;
    let models = call(
        &gw.base_url(),
        "GET",
        "/v1/models?limit=100",
        Some(TOKEN),
        Wire::AnthropicMessages,
        None,
    )
    .await;
    assert_eq!(models.json()["data"][0]["id"], "claude-played");
    let count = call(
        &gw.base_url(),
        "POST",
        "/v1/messages/count_tokens",
        Some(TOKEN),
        Wire::AnthropicMessages,
        Some(&anthropic_request(false)),
    )
    .await;
    assert_eq!(count.json()["input_tokens"], 12);
    let received = upstream.received();
    assert_eq!(received[0].path, "/v1/models?limit=100");
    assert_eq!(received[1].path, "/v1/messages/count_tokens");
    assert_eq!(received[1].body["max_tokens"], 1024);
    assert!(
        meter.admitted().is_empty(),
        "a meter refusing everything was never asked"
    );
    assert_eq!(gw.exchanges(), 0);
}

#[tokio::test]
async fn an_upstream_echoing_the_key_never_hands_it_to_the_cli() {
    let upstream = ScriptedServer::start(vec![Reply::EchoHeaders { status: 401 }])
        .await
        .unwrap();
    let gw = Setup::live(Wire::ChatCompletions, upstream.base_url())
        .start()
        .await;
    let got = call(
        &gw.base_url(),
        "POST",
        "/v1/chat/completions",
        Some(TOKEN),
        Wire::ChatCompletions,
        Some(&json!({"messages": []})),
    )
    .await;
    assert_eq!(got.status, 401);
    let text = got.text();
    assert!(text.contains("authorization: Bearer <redacted>"), "{text}");
    assert!(!text.contains(KEY));
}

#[tokio::test]
async fn an_unreachable_upstream_is_a_502_in_the_apis_shape() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let meter = TestMeter::new(5);
    let gw = Setup {
        meter: Some(meter.clone()),
        ..Setup::live(Wire::AnthropicMessages, format!("http://127.0.0.1:{port}"))
    }
    .start()
    .await;
    let got = call(
        &gw.base_url(),
        "POST",
        "/v1/messages",
        Some(TOKEN),
        Wire::AnthropicMessages,
        Some(&anthropic_request(false)),
    )
    .await;
    assert_eq!(got.status, 502);
    assert_eq!(got.json()["error"]["type"], "api_error");
    assert!(!got.text().contains(&port.to_string()), "{}", got.text());
    assert_eq!(meter.settled(1).await[0].status, 502);
}
