//! `baton models check` and the model section of `baton doctor`, on the real binary against
//! loopback servers: a healthy endpoint, one without tool calling, a refused key, a closed
//! port; doctor with a model, without one, and with `--no-model`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

use baton_llm::testing::{Reply, ScriptedServer};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}{}", self.stdout, self.stderr))
    }
}

/// `baton args` in `cwd` with its own `BATON_HOME`, no model settings from the environment
/// but `env`, off a terminal (so no colour). Run off the test's runtime, which serves the
/// scripted endpoint meanwhile.
async fn baton(home: &Path, cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_baton"));
    command
        .args(args)
        .current_dir(cwd)
        .env("BATON_HOME", home)
        .env("NO_COLOR", "1");
    for var in [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "BATON_MODEL",
        "OPENAI_BASE_URL",
    ] {
        command.env_remove(var);
    }
    for (k, v) in env {
        command.env(k, v);
    }
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn cached_answer(cached: u64) -> Reply {
    Reply::json(
        200,
        json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "cached"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1_412, "completion_tokens": 2, "total_tokens": 1_414,
                "prompt_tokens_details": {"cached_tokens": cached}}
        }),
    )
}

/// Every answer of a healthy endpoint, in the order the checks ask.
fn healthy() -> Vec<Reply> {
    vec![
        Reply::text("ready"),
        Reply::tool_calls(&[("call_1", "probe_echo", r#"{"word":"baton"}"#)]),
        Reply::text("baton"),
        Reply::stream_text(&["1 2 3", " 4 5 6", " 7 8"]),
        cached_answer(0),
        cached_answer(1_280),
        Reply::json(200, json!({"id": "played", "context_length": 131_072})),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_endpoint_passes_and_the_json_has_its_shape() {
    let home = tempfile::tempdir().unwrap();
    let server = ScriptedServer::start(healthy()).await.unwrap();
    let url = server.base_url();
    let args = [
        "models",
        "check",
        "--model",
        "played",
        "--base-url",
        &url,
        "--json",
    ];
    let out = baton(home.path(), home.path(), &args, &[]).await;
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let r = out.json();
    assert_eq!(
        (&r["model"], &r["endpoint"], &r["api"]),
        (&json!("played"), &json!(url), &json!("openai"))
    );
    let checks = r["checks"].as_array().unwrap();
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["reachable", "tools", "streaming", "cache", "context"]
    );
    for c in checks {
        let keys: Vec<&String> = c.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            ["name", "verdict", "detail", "hint", "figures"],
            "{c}"
        );
        assert_eq!(c["verdict"], "pass", "{c}");
    }
    assert_eq!(checks[3]["figures"]["cachedPromptTokens"], 1_280);
    assert_eq!(checks[4]["figures"]["contextTokens"], 131_072);
    assert_eq!(server.remaining(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_tool_calling_fails_the_check_and_says_so() {
    let home = tempfile::tempdir().unwrap();
    let mut replies = healthy();
    // Ollama's answer to a request with tools for a model without them.
    replies.splice(
        1..3,
        [Reply::error(
            400,
            "registry.ollama.ai/library/gemma:2b does not support tools",
        )],
    );
    let server = ScriptedServer::start(replies).await.unwrap();
    let url = server.base_url();
    let args = ["models", "check", "--model", "played", "--base-url", &url];
    let out = baton(home.path(), home.path(), &args, &[]).await;
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    let line = out
        .stdout
        .lines()
        .find(|l| l.contains("tools "))
        .unwrap_or_else(|| panic!("{}", out.stdout));
    assert!(line.trim_start().starts_with("fail"), "{line}");
    assert!(
        line.contains("this model does not call tools; baton's workflows need tool calling"),
        "{line}"
    );
    assert!(out.stdout.contains("hint: "), "{}", out.stdout);
    assert!(out.stdout.contains("1 failed"), "{}", out.stdout);
    assert!(
        !out.stdout.contains('\x1b'),
        "colour off a terminal: {}",
        out.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_key_names_its_variable_and_never_shows_the_key() {
    let home = tempfile::tempdir().unwrap();
    let secret = "sk-cli-probe-secret-987654321";
    let server = ScriptedServer::start(Vec::new()).await.unwrap();
    let url = server.base_url();
    for json in [false, true] {
        let mut args = vec!["models", "check", "--model", "played", "--base-url", &url];
        if json {
            args.push("--json");
        }
        server.push(Reply::error(
            401,
            &format!("Incorrect API key provided: {secret}"),
        ));
        let out = baton(
            home.path(),
            home.path(),
            &args,
            &[("OPENAI_API_KEY", secret)],
        )
        .await;
        assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
        let all = format!("{}{}", out.stdout, out.stderr);
        assert!(all.contains("the endpoint refused the API key"), "{all}");
        assert!(all.contains("OPENAI_API_KEY"), "{all}");
        assert!(!all.contains("987654321"), "the key leaked: {all}");
        assert!(all.contains("not tried"), "the rest is skipped: {all}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_port_fails_fast() {
    let home = tempfile::tempdir().unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/v1");
    let started = Instant::now();
    let args = ["models", "check", "--model", "played", "--base-url", &url];
    let out = baton(home.path(), home.path(), &args, &[]).await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains(&format!("127.0.0.1:{port}")),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("(set by --base-url)"), "{}", out.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_model_configured_is_a_usage_error_with_a_hint() {
    let home = tempfile::tempdir().unwrap();
    let out = baton(
        home.path(),
        home.path(),
        &["models", "check", "--json"],
        &[],
    )
    .await;
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert_eq!(out.json()["error"]["code"], "LLM_CONFIG_INVALID");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_checks_the_configured_model_unless_told_not_to() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    let p = project.path().to_str().unwrap();

    // No model configured: the section says how to configure one.
    let out = baton(
        home.path(),
        project.path(),
        &["doctor", "--json", "-p", p],
        &[],
    )
    .await;
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let model = &out.json()["model"];
    assert_eq!(model["checked"], false);
    assert_eq!(model["reason"], "no model configured");
    assert!(model["hint"].as_str().unwrap().contains("BATON_MODEL"));

    let server = ScriptedServer::start(healthy()).await.unwrap();
    std::fs::write(
        project.path().join("baton.toml"),
        format!(
            "[llm]\nmodel = \"played\"\nbase_url = \"{}\"\n",
            server.base_url()
        ),
    )
    .unwrap();
    let out = baton(
        home.path(),
        project.path(),
        &["doctor", "--json", "--no-model", "-p", p],
        &[],
    )
    .await;
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(out.json()["model"]["checked"], false);
    assert!(server.received().is_empty(), "--no-model sends nothing");

    let out = baton(home.path(), project.path(), &["doctor", "-p", p], &[]).await;
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("terminal: "), "{}", out.stdout);
    assert!(
        out.stdout.contains(&format!(
            "model: played at {} (api openai)",
            server.base_url()
        )),
        "{}",
        out.stdout
    );
    for name in ["reachable", "tools", "streaming", "cache", "context"] {
        let line = out
            .stdout
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(name))
            .unwrap_or_else(|| panic!("no {name} line: {}", out.stdout));
        assert!(line.trim_start().starts_with("pass"), "{line}");
    }
    assert_eq!(server.remaining(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_s_messages_api_is_checked_with_its_cache_writes_and_reads() {
    use baton_llm::testing::anthropic::{AnthropicServer, message};
    let home = tempfile::tempdir().unwrap();
    let call = vec![(
        "toolu_1".to_string(),
        "probe_echo".to_string(),
        json!({"word": "baton"}),
    )];
    let server = AnthropicServer::start(vec![
        message(None, "ready", &[]),
        message(None, "", &call),
        message(None, "baton", &[]),
        message(None, "1 2 3 4 5 6 7 8", &[]),
        message(None, "cached", &[]),
        message(None, "cached", &[]),
    ])
    .unwrap();
    let url = server.base_url();
    let secret = "sk-ant-probe-secret-24680";
    let args = [
        "models",
        "check",
        "--api",
        "anthropic",
        "--model",
        "played",
        "--base-url",
        &url,
        "--json",
    ];
    let out = baton(
        home.path(),
        home.path(),
        &args,
        &[("ANTHROPIC_API_KEY", secret)],
    )
    .await;
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        !out.stdout.contains("24680"),
        "the key leaked: {}",
        out.stdout
    );
    let r = out.json();
    assert_eq!(r["api"], "anthropic");
    let verdicts: Vec<(&str, &str)> = r["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["verdict"].as_str().unwrap()))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("reachable", "pass"),
            ("tools", "pass"),
            ("streaming", "pass"),
            ("cache", "pass"),
            // The played API lists no models.
            ("context", "skipped"),
        ],
        "{r:#}"
    );
    let cache = &r["checks"][3]["figures"];
    assert!(
        cache["cachedPromptTokens"].as_u64().unwrap() >= 1_024,
        "{cache}"
    );
    assert!(
        cache["cacheWriteTokens"].as_u64().unwrap() >= 1_024,
        "{cache}"
    );
    assert_eq!(server.remaining(), 0);
    // Every request, the listing's too, carries Anthropic's key header and version.
    let exchanges = server.exchanges();
    assert_eq!(exchanges.len(), 8, "{exchanges:#?}");
    for e in &exchanges {
        assert_eq!(e.header("x-api-key"), Some(secret), "{}", e.path);
        assert!(e.header("anthropic-version").is_some(), "{}", e.path);
        assert!(e.header("authorization").is_none(), "{}", e.path);
    }
    assert_eq!(exchanges[6].path, "/v1/models/played");
}
