//! `baton models check`'s probes against loopback servers: a healthy one, one without tool
//! calling (text instead of a call; a 400 refusing `tools`), a refused key, a closed port, a
//! listing with the window, and a silent one.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use baton_llm::config::Setting;
use baton_llm::probe::{self, ProbeOptions, Report, Verdict};
use baton_llm::testing::{Reply, ScriptedServer};
use baton_llm::{ApiKey, LlmConfig};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn config(base_url: String) -> LlmConfig {
    LlmConfig {
        base_url,
        base_url_source: Setting::Flag("--base-url"),
        model: Some("played".into()),
        max_retries: 0,
        retry_base_delay: Duration::from_millis(1),
        ..LlmConfig::default()
    }
}

async fn check(config: &LlmConfig) -> Report {
    probe::check_model(config, ProbeOptions::default())
        .await
        .unwrap()
}

fn verdicts(report: &Report) -> Vec<(&str, Verdict)> {
    report.checks.iter().map(|c| (c.name, c.verdict)).collect()
}

fn answer_with_usage(prompt: u64, cached: u64) -> Reply {
    Reply::json(
        200,
        json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "cached"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": 2, "total_tokens": prompt + 2,
                "prompt_tokens_details": {"cached_tokens": cached}}
        }),
    )
}

/// What a healthy server answers after the tool check: a stream with usage, two cached
/// answers, the model's own listing.
fn after_tools(listing: Value) -> Vec<Reply> {
    vec![
        Reply::stream_text(&["1 2 3", " 4 5 6", " 7 8"]),
        answer_with_usage(1_412, 0),
        answer_with_usage(1_412, 1_280),
        Reply::json(200, listing),
    ]
}

fn tool_round_trip() -> Vec<Reply> {
    vec![
        Reply::tool_calls(&[("call_1", "probe_echo", r#"{"word":"baton"}"#)]),
        Reply::text("baton"),
    ]
}

#[tokio::test]
async fn a_healthy_endpoint_passes_every_check_with_its_figures() {
    let mut replies = vec![Reply::text("ready")];
    replies.extend(tool_round_trip());
    replies.extend(after_tools(
        json!({"id": "played", "object": "model", "max_model_len": 32_768}),
    ));
    let server = ScriptedServer::start(replies).await.unwrap();
    let report = check(&config(server.base_url())).await;
    assert_eq!(
        verdicts(&report),
        [
            ("reachable", Verdict::Pass),
            ("tools", Verdict::Pass),
            ("streaming", Verdict::Pass),
            ("cache", Verdict::Pass),
            ("context", Verdict::Pass),
        ],
        "{report:#?}"
    );
    assert!(!report.failed());
    assert_eq!(report.api, "openai");
    assert_eq!(report.endpoint, server.base_url());
    let figures = |name: &str| report.check(name).unwrap().figures.clone();
    assert_eq!(figures("reachable")["promptTokens"], 11);
    assert_eq!(figures("tools")["toolCalls"], 1);
    assert_eq!(figures("streaming")["pieces"], 3);
    assert_eq!(figures("streaming")["completionTokens"], 3);
    assert_eq!(figures("cache")["cachedPromptTokens"], 1_280);
    assert_eq!(figures("cache")["promptTokens"], 1_412);
    assert!(figures("cache").get("cacheWriteTokens").is_none());
    assert_eq!(figures("context")["contextTokens"], 32_768);
    assert_eq!(figures("context")["field"], "max_model_len");

    // What was sent: small caps, the tool offered and its result sent back, a stream asking
    // for usage, the same long prefix twice, one GET of the model.
    let got = server.received();
    assert_eq!(got.len(), 7, "{got:#?}");
    for r in &got[..6] {
        assert_eq!(r.path, "/v1/chat/completions");
        assert_eq!(r.body["max_tokens"], probe::PROBE_MAX_TOKENS);
    }
    assert_eq!(got[1].body["tools"][0]["function"]["name"], "probe_echo");
    let back = got[2].body["messages"].as_array().unwrap();
    let result = back.last().unwrap();
    assert_eq!(
        (result["role"].as_str(), result["tool_call_id"].as_str()),
        (Some("tool"), Some("call_1"))
    );
    assert_eq!(result["content"], "echo: baton");
    assert_eq!(got[3].body["stream"], true);
    assert_eq!(got[3].body["stream_options"]["include_usage"], true);
    assert_eq!(got[4].body["messages"], got[5].body["messages"]);
    let prefix = got[4].body["messages"][0]["content"].as_str().unwrap();
    assert!(
        prefix.len() > 4_800,
        "~1,200 tokens at least: {}",
        prefix.len()
    );
    assert_eq!(
        (got[6].method.as_str(), got[6].path.as_str()),
        ("GET", "/v1/models/played")
    );
    assert_eq!(server.remaining(), 0);
}

#[tokio::test]
async fn a_model_that_answers_text_when_offered_tools_fails_the_tool_check() {
    let mut replies = vec![
        Reply::text("ready"),
        Reply::text("I would echo the word baton, but I can only talk."),
    ];
    replies.extend(after_tools(json!({"id": "played"})));
    let server = ScriptedServer::start(replies).await.unwrap();
    let report = check(&config(server.base_url())).await;
    let tools = report.check("tools").unwrap();
    assert_eq!(tools.verdict, Verdict::Fail, "{report:#?}");
    assert!(
        tools
            .detail
            .contains("this model does not call tools; baton's workflows need tool calling"),
        "{}",
        tools.detail
    );
    assert!(tools.hint.as_deref().unwrap().contains("tool"));
    assert!(report.failed());
    // The other checks still ran: the model is reachable, it just cannot drive a workflow.
    assert_eq!(report.check("streaming").unwrap().verdict, Verdict::Pass);
    assert_eq!(report.check("context").unwrap().verdict, Verdict::Skipped);
}

#[tokio::test]
async fn an_endpoint_that_refuses_the_tools_field_fails_the_tool_check() {
    let mut replies = vec![
        Reply::text("ready"),
        Reply::error(
            400,
            "registry.ollama.ai/library/gemma:2b does not support tools",
        ),
    ];
    replies.extend(after_tools(json!({"id": "played"})));
    let server = ScriptedServer::start(replies).await.unwrap();
    let report = check(&config(server.base_url())).await;
    let tools = report.check("tools").unwrap();
    assert_eq!(tools.verdict, Verdict::Fail);
    assert!(
        tools.detail.contains("this model does not call tools"),
        "{}",
        tools.detail
    );
    assert!(
        tools.detail.contains("does not support tools"),
        "{}",
        tools.detail
    );
    assert_eq!(report.check("cache").unwrap().verdict, Verdict::Pass);
}

#[tokio::test]
async fn a_refused_key_fails_at_once_naming_the_variable_never_the_key() {
    let secret = "sk-probe-secret-0123456789";
    let server = ScriptedServer::start(vec![Reply::error(
        401,
        &format!("Incorrect API key provided: {secret}"),
    )])
    .await
    .unwrap();
    let mut config = config(server.base_url());
    config.api_key = Some(ApiKey::new(secret));
    let report = check(&config).await;
    assert_eq!(
        verdicts(&report),
        [
            ("reachable", Verdict::Fail),
            ("tools", Verdict::Skipped),
            ("streaming", Verdict::Skipped),
            ("cache", Verdict::Skipped),
            ("context", Verdict::Skipped),
        ]
    );
    let reach = report.check("reachable").unwrap();
    assert!(
        reach.detail.contains("the endpoint refused the API key"),
        "{}",
        reach.detail
    );
    assert!(reach.hint.as_deref().unwrap().contains("OPENAI_API_KEY"));
    let all = serde_json::to_string(&report).unwrap();
    assert!(!all.contains("0123456789"), "the key leaked: {all}");
    assert_eq!(
        server.received().len(),
        1,
        "nothing more is spent after a refusal"
    );
}

#[tokio::test]
async fn a_closed_port_fails_fast_naming_the_endpoint_and_its_setting() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let config = config(format!("http://127.0.0.1:{port}/v1"));
    let started = Instant::now();
    let report = check(&config).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let reach = report.check("reachable").unwrap();
    assert_eq!(reach.verdict, Verdict::Fail);
    assert!(
        reach.detail.contains(&format!("127.0.0.1:{port}")),
        "{}",
        reach.detail
    );
    assert!(reach.detail.contains("--base-url"), "{}", reach.detail);
    assert!(reach.hint.is_some());
    assert!(
        report.checks[1..]
            .iter()
            .all(|c| c.verdict == Verdict::Skipped)
    );
}

#[tokio::test]
async fn an_unknown_model_fails_with_a_hint_to_list_models() {
    let server =
        ScriptedServer::start(vec![Reply::error(404, "The model `played` does not exist")])
            .await
            .unwrap();
    let report = check(&config(server.base_url())).await;
    let reach = report.check("reachable").unwrap();
    assert_eq!(reach.verdict, Verdict::Fail);
    assert!(reach.detail.contains("no model played"), "{}", reach.detail);
    let hint = reach.hint.as_deref().unwrap();
    assert!(
        hint.contains("/models") && hint.contains("$OPENAI_API_KEY"),
        "{hint}"
    );
}

#[tokio::test]
async fn the_window_is_found_in_the_list_when_the_model_has_no_page() {
    let mut replies = vec![Reply::text("ready")];
    replies.extend(tool_round_trip());
    let mut rest = after_tools(json!({}));
    rest.pop();
    replies.extend(rest);
    replies.push(Reply::error(404, "not found"));
    replies.push(Reply::json(
        200,
        json!({"data": [
            {"id": "other", "context_length": 8_192},
            {"id": "played", "context_length": 131_072, "top_provider": {"context_length": 65_536}},
        ]}),
    ));
    let server = ScriptedServer::start(replies).await.unwrap();
    let report = check(&config(server.base_url())).await;
    let context = report.check("context").unwrap();
    assert_eq!(context.verdict, Verdict::Pass, "{context:#?}");
    assert_eq!(context.figures["contextTokens"], 131_072);
    assert_eq!(context.figures["field"], "context_length");
    // baton assumes 32,768 for an unknown model: the hint says how to use the whole window.
    assert!(
        context
            .hint
            .as_deref()
            .unwrap()
            .contains("context_tokens = 131072")
    );
    let got = server.received();
    assert_eq!(got.last().unwrap().path, "/v1/models");
}

#[tokio::test]
async fn no_usage_in_the_stream_and_no_cache_are_warnings_not_failures() {
    let mut replies = vec![Reply::text("ready")];
    replies.extend(tool_round_trip());
    let pieces = ["1 2", " 3 4"]
        .iter()
        .map(|p| json!({"choices": [{"index": 0, "delta": {"content": p}}]}).to_string())
        .chain(["[DONE]".to_string()])
        .collect();
    replies.push(Reply::Stream {
        payloads: pieces,
        pause: Duration::ZERO,
        break_after: None,
    });
    replies.push(answer_with_usage(1_412, 0));
    replies.push(answer_with_usage(1_412, 0));
    replies.push(Reply::json(200, json!({"id": "played", "object": "model"})));
    replies.push(Reply::json(200, json!({"data": [{"id": "played"}]})));
    let server = ScriptedServer::start(replies).await.unwrap();
    let report = check(&config(server.base_url())).await;
    let streaming = report.check("streaming").unwrap();
    assert_eq!(streaming.verdict, Verdict::Warn);
    assert!(
        streaming.detail.contains("budgets and cost can't count"),
        "{}",
        streaming.detail
    );
    let cache = report.check("cache").unwrap();
    assert_eq!(cache.verdict, Verdict::Warn);
    assert!(
        cache.detail.contains("no prompt caching reported"),
        "{}",
        cache.detail
    );
    let context = report.check("context").unwrap();
    assert_eq!(context.verdict, Verdict::Skipped);
    assert!(context.hint.as_deref().unwrap().contains("context_tokens"));
    assert!(!report.failed());
}

#[tokio::test]
async fn a_silent_endpoint_is_given_up_on_at_the_deadline() {
    let server = ScriptedServer::start(vec![Reply::Hang]).await.unwrap();
    let options = ProbeOptions {
        deadline: Duration::from_millis(500),
        ..ProbeOptions::default()
    };
    let started = Instant::now();
    let report = probe::check_model(&config(server.base_url()), options)
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(report.check("reachable").unwrap().verdict, Verdict::Fail);
    assert_eq!(report.check("tools").unwrap().verdict, Verdict::Skipped);
}
