//! The budget: the output cap set before forwarding, the meter asked first, a refused request
//! never forwarded.

use crate::common::*;
use baton_gateway::Wire;
use baton_llm::testing::anthropic::{AnthropicServer, message};
use baton_llm::testing::{Reply, ScriptedServer};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_request_never_reaches_the_upstream_and_sets_the_refusal() {
    let upstream =
        AnthropicServer::start(vec![message(None, "One.", &[]), message(None, "Two.", &[])])
            .unwrap();
    let meter = TestMeter::new(1);
    let gw = Setup {
        meter: Some(meter.clone()),
        ..Setup::live(Wire::AnthropicMessages, upstream.base_url())
    }
    .start()
    .await;
    let refusal = gw.refusal();
    assert!(refusal.borrow().is_none());
    let body = json!({"model": "claude-played", "max_tokens": 100,
        "messages": [{"role": "user", "content": "Go."}]});
    let first = call(
        &gw.base_url(),
        "POST",
        "/v1/messages",
        Some(TOKEN),
        Wire::AnthropicMessages,
        Some(&body),
    )
    .await;
    assert_eq!(first.status, 200);
    let second = call(
        &gw.base_url(),
        "POST",
        "/v1/messages",
        Some(TOKEN),
        Wire::AnthropicMessages,
        Some(&body),
    )
    .await;
    assert_eq!(second.status, 400);
    let err = second.json();
    assert_eq!(err["type"], "error");
    assert_eq!(err["error"]["type"], "invalid_request_error");
    let message = err["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("BUDGET_EXCEEDED: "), "{message}");
    assert_eq!(
        upstream.exchanges().len(),
        1,
        "the refused request was forwarded"
    );
    assert_eq!(upstream.remaining(), 1);
    let got = refusal.borrow().clone().expect("the refusal watch is set");
    assert_eq!(got.code, "BUDGET_EXCEEDED");
    assert_eq!(got.details["allowed"], 1);
    assert_eq!(gw.exchanges(), 1);
}

#[tokio::test]
async fn openai_wires_refuse_in_their_own_shape() {
    let upstream = ScriptedServer::start(vec![Reply::text("never")])
        .await
        .unwrap();
    let meter = TestMeter::new(0);
    let gw = Setup {
        meter: Some(meter.clone()),
        ..Setup::live(Wire::OpenAiResponses, upstream.base_url())
    }
    .start()
    .await;
    let mut refusal = gw.refusal();
    let got = call(
        &gw.base_url(),
        "POST",
        "/v1/responses",
        Some(TOKEN),
        Wire::OpenAiResponses,
        Some(&json!({"model": "m", "input": "go"})),
    )
    .await;
    assert_eq!(got.status, 400);
    assert_eq!(got.json()["error"]["type"], "invalid_request_error");
    assert!(
        got.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("BUDGET_EXCEEDED")
    );
    tokio::time::timeout(PATIENCE, refusal.changed())
        .await
        .unwrap()
        .unwrap();
    assert!(upstream.received().is_empty());
    assert_eq!(gw.exchanges(), 0);
}

#[tokio::test]
async fn the_output_cap_is_set_or_lowered_before_the_meter_and_the_upstream_see_it() {
    let upstream =
        ScriptedServer::start(vec![Reply::text("a"), Reply::text("b"), Reply::text("c")])
            .await
            .unwrap();
    let meter = TestMeter::new(10);
    let gw = Setup {
        meter: Some(meter.clone()),
        cap: Some(2048),
        ..Setup::live(Wire::ChatCompletions, upstream.base_url())
    }
    .start()
    .await;
    let prompt = "word ".repeat(2000);
    for extra in [
        json!({"max_tokens": 32000}),
        json!({}),
        json!({"max_completion_tokens": 64}),
    ] {
        let mut body = json!({"model": "m", "messages": [{"role": "user", "content": prompt}]});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let got = call(
            &gw.base_url(),
            "POST",
            "/v1/chat/completions",
            Some(TOKEN),
            Wire::ChatCompletions,
            Some(&body),
        )
        .await;
        assert_eq!(got.status, 200);
    }
    let sent: Vec<_> = upstream.received().into_iter().map(|r| r.body).collect();
    assert_eq!(sent[0]["max_tokens"], 2048);
    assert_eq!(sent[1]["max_completion_tokens"], 2048);
    assert_eq!(sent[2]["max_completion_tokens"], 64);
    let admitted = meter.admitted();
    let caps: Vec<u64> = admitted.iter().map(|a| a.max_output_tokens).collect();
    assert_eq!(caps, vec![2048, 2048, 64]);
    // 10,000 bytes of prompt text: about 2,500 tokens.
    assert!(
        admitted
            .iter()
            .all(|a| (2500..2600).contains(&a.prompt_tokens)),
        "{admitted:?}"
    );
    assert_eq!(admitted[0].model.as_deref(), Some("m"));
}
