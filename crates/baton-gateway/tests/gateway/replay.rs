//! Record, then replay with the upstream gone: the same bytes, in order, and errors for what
//! the record does not hold.

use crate::common::*;
use baton_gateway::Wire;
use baton_llm::testing::{Reply, ScriptedServer};
use serde_json::{Value, json};
use std::time::Duration;

/// The CLI's side of one run: a model list, two streamed turns, a token count.
async fn run(base: &str) -> Vec<(u16, Vec<u8>)> {
    let turn = |n: u32| {
        json!({"model": "claude-played", "max_tokens": 64, "stream": true,
        "messages": [{"role": "user", "content": format!("turn {n}")}]})
    };
    let mut out = Vec::new();
    let got = call(
        base,
        "GET",
        "/v1/models",
        Some(TOKEN),
        Wire::AnthropicMessages,
        None,
    )
    .await;
    out.push((got.status, got.body));
    for n in 0..2 {
        let got = call(
            base,
            "POST",
            "/v1/messages?beta=true",
            Some(TOKEN),
            Wire::AnthropicMessages,
            Some(&turn(n)),
        )
        .await;
        out.push((got.status, got.body));
    }
    let got = call(
        base,
        "POST",
        "/v1/messages/count_tokens",
        Some(TOKEN),
        Wire::AnthropicMessages,
        Some(&turn(9)),
    )
    .await;
    out.push((got.status, got.body));
    out
}

fn events(text: &str, output: u64) -> Reply {
    Reply::Stream {
        payloads: vec![
            json!({"type": "message_start", "message": {"model": "claude-played", "usage": {"input_tokens": 20, "output_tokens": 1}}}).to_string(),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}).to_string(),
            json!({"type": "message_delta", "usage": {"output_tokens": output}}).to_string(),
            json!({"type": "message_stop"}).to_string(),
        ],
        pause: Duration::from_millis(1),
        break_after: None,
    }
}

#[tokio::test]
async fn a_recorded_run_replays_byte_for_byte_with_the_upstream_gone() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("gateway.jsonl");
    let upstream = ScriptedServer::start(vec![
        Reply::json(200, json!({"data": [{"id": "claude-played"}]})),
        events("First turn.", 7),
        events("Second turn, longer.", 11),
        Reply::rate_limited(3),
    ])
    .await
    .unwrap();
    let upstream_url = upstream.base_url();
    let live_meter = TestMeter::new(10);
    let gw = Setup {
        meter: Some(live_meter.clone()),
        record: Some(record.clone()),
        ..Setup::live(Wire::AnthropicMessages, upstream_url.clone())
    }
    .start()
    .await;
    let live = run(&gw.base_url()).await;
    assert_eq!(
        live.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        vec![200, 200, 200, 429]
    );
    gw.shutdown().await;
    drop(upstream);
    let text = std::fs::read_to_string(&record).unwrap();
    assert!(!text.contains(KEY) && !text.contains(TOKEN), "{text}");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[1]["path"], "/v1/messages?beta=true");
    assert_eq!(lines[1]["request"]["messages"][0]["content"], "turn 0");
    assert_eq!(
        lines[1]["request_headers"]["anthropic-version"],
        "2023-06-01"
    );
    assert_eq!(lines[3]["status"], 429);
    assert_eq!(lines[3]["response_headers"]["retry-after"], "3");

    // The upstream is gone: the replay cannot reach it.
    let replay_meter = TestMeter::new(10);
    let gw = Setup {
        meter: Some(replay_meter.clone()),
        ..Setup::replay(Wire::AnthropicMessages, record.clone())
    }
    .start()
    .await;
    // A request the record never held (another model) is not served, and uses up nothing.
    let other = call(
        &gw.base_url(),
        "POST",
        "/v1/messages",
        Some(TOKEN),
        Wire::AnthropicMessages,
        Some(&json!({"model": "claude-other", "max_tokens": 1, "messages": []})),
    )
    .await;
    assert!(
        other.json()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("REPLAY_MISMATCH"),
        "{}",
        other.text()
    );
    let replayed = run(&gw.base_url()).await;
    assert_eq!(replayed, live);
    assert_eq!(gw.exchanges(), 2);
    let (a, b) = (live_meter.settled(2).await, replay_meter.settled(2).await);
    let reported =
        |s: &Vec<baton_gateway::Settled>| s.iter().map(|s| s.reported).collect::<Vec<_>>();
    assert_eq!(reported(&a), reported(&b));
    assert_eq!(b[1].reported.unwrap().completion_tokens, 11);

    // Beyond the record.
    let more = call(
        &gw.base_url(),
        "POST",
        "/v1/messages",
        Some(TOKEN),
        Wire::AnthropicMessages,
        Some(&json!({"model": "claude-played", "max_tokens": 1, "messages": []})),
    )
    .await;
    assert_eq!(more.status, 500);
    assert!(
        more.json()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("REPLAY_EXHAUSTED"),
        "{}",
        more.text()
    );
    let bad = call(
        &gw.base_url(),
        "GET",
        "/v1/models",
        Some("wrong"),
        Wire::AnthropicMessages,
        None,
    )
    .await;
    assert_eq!(bad.status, 401, "a replay still wants the run's token");
    assert_eq!(gw.exchanges(), 2);
}

#[tokio::test]
async fn a_replay_refused_by_the_budget_is_refused_again() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("gateway.jsonl");
    let upstream = ScriptedServer::start(vec![Reply::text("done")])
        .await
        .unwrap();
    let gw = Setup {
        record: Some(record.clone()),
        ..Setup::live(Wire::ChatCompletions, upstream.base_url())
    }
    .start()
    .await;
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "go"}]});
    let live = call(
        &gw.base_url(),
        "POST",
        "/v1/chat/completions",
        Some(TOKEN),
        Wire::ChatCompletions,
        Some(&body),
    )
    .await;
    gw.shutdown().await;
    let meter = TestMeter::new(0);
    let gw = Setup {
        meter: Some(meter.clone()),
        ..Setup::replay(Wire::ChatCompletions, record.clone())
    }
    .start()
    .await;
    let replayed = call(
        &gw.base_url(),
        "POST",
        "/v1/chat/completions",
        Some(TOKEN),
        Wire::ChatCompletions,
        Some(&body),
    )
    .await;
    assert_eq!((live.status, replayed.status), (200, 400));
    assert!(gw.refusal().borrow().is_some());
}

#[tokio::test]
async fn a_record_that_is_not_one_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("gateway.jsonl");
    std::fs::write(&record, "{\"seq\": 0}\n").unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let config = baton_gateway::GatewayConfig {
        wire: Wire::ChatCompletions,
        upstream: baton_gateway::Upstream::Replay { record },
        token: TOKEN.into(),
        meter: None,
        record: None,
        max_output_tokens: None,
    };
    let err = baton_gateway::Gateway::start(listener, config)
        .await
        .err()
        .unwrap();
    assert_eq!(err.code(), "GATEWAY_RECORD_UNREADABLE");
    assert!(err.to_string().contains("line 1"), "{err}");
}
