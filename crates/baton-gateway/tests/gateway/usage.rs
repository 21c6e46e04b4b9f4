//! Usage read from each wire's answers, streamed or whole, and baton's own counts beside it;
//! figures that cannot be counts never panic nor count.

use crate::common::*;
use baton_gateway::Wire;
use baton_llm::testing::anthropic::{AnthropicServer, message};
use baton_llm::testing::caching::tokens;
use baton_llm::testing::{Reply, ScriptedServer};
use serde_json::{Value, json};
use std::time::Duration;

fn stream(payloads: Vec<Value>) -> Reply {
    Reply::Stream {
        payloads: payloads.iter().map(Value::to_string).collect(),
        pause: Duration::ZERO,
        break_after: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_usage_with_its_cache_fields_is_read_from_the_stream() {
    let answers = vec![
        message(None, "First.", &[]),
        message(None, "Second answer.", &[]),
    ];
    let completions: Vec<u64> = answers
        .iter()
        .map(|m| tokens(m["content"].to_string().len()))
        .collect();
    let upstream = AnthropicServer::start(answers).unwrap();
    let meter = TestMeter::new(10);
    let gw = Setup {
        meter: Some(meter.clone()),
        ..Setup::live(Wire::AnthropicMessages, upstream.base_url())
    }
    .start()
    .await;
    let system = "You are the developer. ".repeat(400);
    let body = json!({"model": "claude-played", "max_tokens": 512, "stream": true,
        "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": "Go."}]});
    for _ in 0..2 {
        let got = call(
            &gw.base_url(),
            "POST",
            "/v1/messages",
            Some(TOKEN),
            Wire::AnthropicMessages,
            Some(&body),
        )
        .await;
        assert_eq!(got.status, 200, "{}", got.text());
    }
    let settled = meter.settled(2).await;
    let served = upstream.exchanges();
    for (i, s) in settled.iter().enumerate() {
        let used = served[i].usage.unwrap();
        let r = s.reported.unwrap();
        assert_eq!(r.prompt_tokens, used.prompt_tokens());
        assert_eq!(r.cached_prompt_tokens, used.cache_read_input_tokens);
        assert_eq!(r.cache_write_tokens, used.cache_creation_input_tokens);
        assert_eq!(r.completion_tokens, completions[i]);
        assert_eq!((s.status, s.model.as_deref()), (200, Some("claude-played")));
        assert!(s.counted_prompt >= 400 * 5, "counted {}", s.counted_prompt);
        assert!(s.counted_completion > 0);
    }
    assert!(settled[0].reported.unwrap().cache_write_tokens > 0);
    assert!(
        settled[1].reported.unwrap().cached_prompt_tokens > 0,
        "{settled:?}"
    );
}

#[tokio::test]
async fn responses_usage_comes_from_response_completed() {
    let upstream = ScriptedServer::start(vec![stream(vec![
        json!({"type": "response.created", "response": {"id": "r1", "status": "in_progress"}}),
        json!({"type": "response.output_text.delta", "item_id": "m1", "delta": "All files written."}),
        json!({"type": "response.completed", "response": {"id": "r1", "status": "completed",
            "usage": {"input_tokens": 1500, "input_tokens_details": {"cached_tokens": 1200},
                "output_tokens": 90, "output_tokens_details": {"reasoning_tokens": 64}, "total_tokens": 1590}}}),
    ])])
    .await
    .unwrap();
    let meter = TestMeter::new(10);
    let gw = Setup {
        meter: Some(meter.clone()),
        ..Setup::live(Wire::OpenAiResponses, upstream.base_url())
    }
    .start()
    .await;
    let got = call(
        &gw.base_url(),
        "POST",
        "/v1/responses",
        Some(TOKEN),
        Wire::OpenAiResponses,
        Some(&json!({"model": "gpt-played", "input": "go", "stream": true})),
    )
    .await;
    assert_eq!(got.status, 200);
    let s = &meter.settled(1).await[0];
    let r = s.reported.unwrap();
    assert_eq!(
        (
            r.prompt_tokens,
            r.cached_prompt_tokens,
            r.completion_tokens,
            r.reasoning_tokens,
            r.total_tokens
        ),
        (1500, 1200, 90, 64, 1590)
    );
    assert_eq!(
        s.counted_completion,
        "All files written.".len().div_ceil(4) as u64
    );
}

#[tokio::test]
async fn chat_usage_is_the_final_chunks_or_else_counted_from_the_deltas() {
    let deltas = || {
        vec![
            json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Writing "}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "fs_write", "arguments": "{\"path\":\"a.md\"}"}}]}}]}),
        ]
    };
    let mut with_usage = deltas();
    with_usage.push(json!({"choices": [], "usage": {"prompt_tokens": 300, "completion_tokens": 21, "total_tokens": 321, "prompt_tokens_details": {"cached_tokens": 256}}}));
    let upstream = ScriptedServer::start(vec![
        stream(with_usage),
        stream(deltas()),
        Reply::text("whole"),
    ])
    .await
    .unwrap();
    let meter = TestMeter::new(10);
    let gw = Setup {
        meter: Some(meter.clone()),
        ..Setup::live(Wire::ChatCompletions, upstream.base_url())
    }
    .start()
    .await;
    let body =
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "go"}]});
    for i in 0..3 {
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
        // One at a time: settlements come in request order.
        meter.settled(i + 1).await;
    }
    let settled = meter.settled(3).await;
    let r = settled[0].reported.unwrap();
    assert_eq!(
        (r.prompt_tokens, r.cached_prompt_tokens, r.completion_tokens),
        (300, 256, 21)
    );
    assert_eq!(settled[1].reported, None);
    // "Writing " and the arguments: 8 + 15 ASCII bytes.
    assert_eq!(settled[1].counted_completion, 23u64.div_ceil(4));
    assert_eq!(settled[0].counted_completion, settled[1].counted_completion);
    let whole = settled[2].reported.unwrap();
    assert_eq!((whole.prompt_tokens, whole.completion_tokens), (11, 7));
    assert_eq!(settled[2].counted_completion, 2);
}

#[tokio::test]
async fn usage_that_cannot_be_counts_never_panics_nor_counts() {
    let garbage = vec![
        json!({"type": "message_start", "message": {"usage": {"input_tokens": -40, "cache_read_input_tokens": "lots", "cache_creation_input_tokens": 1e300, "output_tokens": [1]}}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "abcd"}}),
        json!({"type": "message_delta", "usage": {"output_tokens": 18446744073709551615u64}}),
        json!({"type": "message_delta", "usage": null}),
    ];
    let responses = vec![
        json!({"type": "response.completed", "response": {"usage": {"input_tokens": -1, "input_tokens_details": {"cached_tokens": 1e30}, "output_tokens": "many", "output_tokens_details": {"reasoning_tokens": -3}}}}),
    ];
    let chat = vec![
        json!({"choices": [], "usage": {"prompt_tokens": 1e20, "completion_tokens": -7, "total_tokens": {}}}),
    ];
    for (wire, path, events) in [
        (Wire::AnthropicMessages, "/v1/messages", garbage),
        (Wire::OpenAiResponses, "/v1/responses", responses),
        (Wire::ChatCompletions, "/v1/chat/completions", chat),
    ] {
        let upstream = ScriptedServer::start(vec![stream(events.clone())])
            .await
            .unwrap();
        let meter = TestMeter::new(10);
        let gw = Setup {
            meter: Some(meter.clone()),
            ..Setup::live(wire, upstream.base_url())
        }
        .start()
        .await;
        let got = call(
            &gw.base_url(),
            "POST",
            path,
            Some(TOKEN),
            wire,
            Some(&json!({"model": "m", "stream": true, "max_tokens": 10})),
        )
        .await;
        assert_eq!(got.status, 200);
        assert_eq!(got.text(), sse(&events), "passed on unchanged");
        let r = meter.settled(1).await[0].reported.unwrap();
        assert!(
            r.prompt_tokens == 0 && r.completion_tokens == 0 && r.cached_prompt_tokens == 0,
            "{wire:?}: {r:?}"
        );
    }
}

/// The usage of the `response.completed` event in a streamed Responses answer.
fn completed_usage(sse: &str) -> Value {
    sse.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|e| e["type"] == "response.completed")
        .map(|e| e["response"]["usage"].clone())
        .expect("a response.completed event")
}

#[tokio::test]
async fn a_strict_responses_api_gets_the_key_and_its_usage_is_read_with_cache_and_reasoning() {
    use baton_llm::testing::responses::{ResponsesServer, text, with_reasoning_tokens};
    let upstream = ResponsesServer::start_with_key(
        vec![with_reasoning_tokens(text("Planned."), 40), text("Done.")],
        KEY,
    )
    .unwrap();
    let meter = TestMeter::new(10);
    let gw = Setup {
        meter: Some(meter.clone()),
        ..Setup::live(Wire::OpenAiResponses, upstream.base_url())
    }
    .start()
    .await;
    let instructions = "You are the developer of this story. ".repeat(300);
    let mut seen_usage = Vec::new();
    for turn in ["plan", "do"] {
        let body = json!({"model": "gpt-played", "instructions": instructions, "stream": true,
            "input": [{"role": "user", "content": turn}]});
        let got = call(
            &gw.base_url(),
            "POST",
            "/v1/responses",
            Some(TOKEN),
            Wire::OpenAiResponses,
            Some(&body),
        )
        .await;
        assert_eq!(got.status, 200, "{}", got.text());
        seen_usage.push(completed_usage(&got.text()));
    }
    assert!(upstream.exchanges().iter().all(|e| e.status == 200));
    let settled = meter.settled(2).await;
    for (s, u) in settled.iter().zip(&seen_usage) {
        let r = s.reported.unwrap();
        assert_eq!(r.prompt_tokens, u["input_tokens"].as_u64().unwrap());
        assert_eq!(
            r.cached_prompt_tokens,
            u["input_tokens_details"]["cached_tokens"].as_u64().unwrap()
        );
        assert_eq!(r.completion_tokens, u["output_tokens"].as_u64().unwrap());
        assert_eq!(
            r.reasoning_tokens,
            u["output_tokens_details"]["reasoning_tokens"]
                .as_u64()
                .unwrap()
        );
    }
    assert_eq!(settled[0].reported.unwrap().reasoning_tokens, 40);
    assert!(
        settled[1].reported.unwrap().cached_prompt_tokens > 0,
        "{settled:?}"
    );
}
