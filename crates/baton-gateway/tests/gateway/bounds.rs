//! Bounds: request bodies and heads, and an upstream that never stops talking.

use crate::common::*;
use baton_gateway::{Limits, Wire};
use baton_llm::testing::{Reply, ScriptedServer};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;

#[tokio::test]
async fn a_body_over_32_mib_is_413_and_never_forwarded() {
    let upstream = ScriptedServer::start(vec![Reply::text("never")])
        .await
        .unwrap();
    let gw = Setup::live(Wire::AnthropicMessages, upstream.base_url())
        .start()
        .await;
    let big = format!(
        "{{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{{\"role\":\"user\",\"content\":\"{}\"}}]}}",
        "a".repeat(32 * 1024 * 1024)
    );
    let got = client()
        .post(format!("{}/v1/messages", gw.base_url()))
        .header("x-api-key", TOKEN)
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(got.status(), 413);
    let body: Value = serde_json::from_slice(&got.bytes().await.unwrap()).unwrap();
    assert_eq!(body["error"]["type"], "request_too_large");
    assert!(upstream.received().is_empty());
}

#[tokio::test]
async fn a_streamed_body_without_a_length_is_bounded_too() {
    let upstream = ScriptedServer::start(vec![Reply::text("ok")])
        .await
        .unwrap();
    let gw = Setup {
        limits: Limits {
            max_request_body: 4096,
            ..Limits::default()
        },
        ..Setup::live(Wire::ChatCompletions, upstream.base_url())
    }
    .start()
    .await;
    let pieces = (0..100).map(|_| Ok::<_, std::io::Error>(vec![b' '; 100]));
    let got = client()
        .post(format!("{}/v1/chat/completions", gw.base_url()))
        .bearer_auth(TOKEN)
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            pieces,
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(got.status(), 413);
    // Under the limit, the same gateway forwards.
    let small = call(
        &gw.base_url(),
        "POST",
        "/v1/chat/completions",
        Some(TOKEN),
        Wire::ChatCompletions,
        Some(&json!({"messages": []})),
    )
    .await;
    assert_eq!(small.status, 200);
    assert_eq!(upstream.received().len(), 1);
}

#[tokio::test]
async fn an_oversize_request_head_is_refused() {
    let upstream = ScriptedServer::start(vec![Reply::text("never")])
        .await
        .unwrap();
    let gw = Setup::live(Wire::ChatCompletions, upstream.base_url())
        .start()
        .await;
    let got = client()
        .get(format!("{}/v1/models", gw.base_url()))
        .bearer_auth(TOKEN)
        .header("x-filler", "f".repeat(100 * 1024))
        .send()
        .await;
    // The gateway answers 431, or hyper closes the connection when the head outgrows its
    // read buffer first.
    if let Ok(r) = got {
        assert_eq!(r.status(), 431);
    }
    assert!(upstream.received().is_empty());
    let fits = call(
        &gw.base_url(),
        "GET",
        "/v1/models",
        Some(TOKEN),
        Wire::ChatCompletions,
        None,
    )
    .await;
    assert_eq!(fits.status, 200);
}

/// An upstream that streams one event forever, and tells when its client went away.
async fn endless_upstream() -> (String, oneshot::Receiver<u64>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (gone, gone_rx) = oneshot::channel();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            socket.read_exact(&mut byte).await.unwrap();
            head.push(byte[0]);
        }
        socket
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            .await
            .unwrap();
        let event = format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": {"content": "and on and on "}}]})
        );
        let chunk = format!("{:x}\r\n{event}\r\n", event.len());
        let mut sent = 0u64;
        while socket.write_all(chunk.as_bytes()).await.is_ok() {
            sent += event.len() as u64;
        }
        let _ = gone.send(sent);
    });
    (format!("http://127.0.0.1:{port}/v1"), gone_rx)
}

#[tokio::test]
async fn an_endless_answer_keeps_streaming_its_record_is_capped_and_a_hang_up_drops_the_upstream() {
    let (base, gone) = endless_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("gateway.jsonl");
    let cap = 64 * 1024;
    let meter = TestMeter::new(10);
    let gw = Setup {
        meter: Some(meter.clone()),
        record: Some(record.clone()),
        limits: Limits {
            max_recorded_response: cap,
            ..Limits::default()
        },
        ..Setup::live(Wire::ChatCompletions, base)
    }
    .start()
    .await;
    let response = client()
        .post(format!("{}/v1/chat/completions", gw.base_url()))
        .bearer_auth(TOKEN)
        .body(json!({"model": "m", "stream": true, "messages": []}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let mut read = 0usize;
    while read < 20 * cap {
        read += body.next().await.unwrap().unwrap().len();
    }
    // The CLI hangs up.
    drop(body);
    let sent = tokio::time::timeout(PATIENCE, gone)
        .await
        .expect("the gateway kept the upstream connection open")
        .unwrap();
    assert!(sent as usize >= read);
    let settled = meter.settled(1).await;
    assert!(
        settled[0].counted_completion as usize >= read / 100,
        "{settled:?}"
    );
    gw.shutdown().await;
    let text = std::fs::read_to_string(&record).unwrap();
    let line: Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(line["response_truncated"], true);
    assert_eq!(line["cut"], true);
    assert_eq!(line["response"].as_str().unwrap().len(), cap);
}
