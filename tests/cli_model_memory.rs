//! A run remembers its model: `answer`, `resume` and `chat` go on with the model name and the
//! endpoint the run was started with (never the key, which still comes from the environment),
//! `--model` overrides; a replayed run goes on from its trace, offline. And an endpoint that
//! cannot be reached fails at once, naming itself and the setting that chose it, and the run
//! says why in `runs list`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;

use baton_llm::Trace;
use baton_llm::testing::{Reply, ScriptedServer};
use common::{Baton, Run, example, repo, trace_until_question, walk};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const KEY: &str = "sk-test-model-memory-0123456789";

/// `baton` with only a key in the environment, and `OPENAI_BASE_URL` when given.
fn baton_env(baton: &Baton, base_url: Option<&str>, args: &[&str]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
    cmd.args(args)
        .current_dir(repo())
        .env("BATON_HOME", baton.home.path())
        .env("OPENAI_API_KEY", KEY)
        .env_remove("BATON_MODEL")
        .env_remove("OPENAI_BASE_URL");
    if let Some(url) = base_url {
        cmd.env("OPENAI_BASE_URL", url);
    }
    let out = cmd.output().expect("baton runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The demo conversation as replies: read, ask which story, then the rest of the workflow.
fn demo_replies() -> Vec<Reply> {
    Reply::from_trace(&Trace::load(&baton_testkit::demo_trace()).unwrap())
}

/// The model names the server was asked for, in order.
fn models_asked(server: &ScriptedServer) -> Vec<String> {
    server
        .received()
        .iter()
        .map(|r| r.body["model"].as_str().unwrap_or("").to_string())
        .collect()
}

/// Starts the create-story run on a fresh sample project with `--model model-x`; it stops at
/// its question.
fn start_waiting(baton: &Baton, server: &ScriptedServer, tmp: &Path) -> String {
    let project = baton_testkit::sample_project(tmp);
    let pkg = example("create-story-micro");
    let run = baton_env(
        baton,
        Some(&server.base_url()),
        &[
            "run",
            pkg.to_str().unwrap(),
            "--project",
            project.to_str().unwrap(),
            "--model",
            "model-x",
            "--non-interactive",
            "--json",
        ],
    );
    assert_eq!(run.code, 10, "{}{}", run.stdout, run.stderr);
    run.json()["runId"].as_str().unwrap().to_string()
}

fn no_key_in_the_store(baton: &Baton) {
    for file in walk(baton.home.path()) {
        let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned();
        assert!(!text.contains(KEY), "{} holds the key", file.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answer_and_chat_go_on_with_the_model_and_endpoint_the_run_started_with() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let server = ScriptedServer::start(demo_replies()).await.unwrap();
    let id = start_waiting(&baton, &server, tmp.path());
    let asked_at_start = server.received().len();
    assert!(asked_at_start > 0);

    // No --model, no OPENAI_BASE_URL: only the key.
    let answered = baton_env(
        &baton,
        None,
        &["answer", &id[..13], "1-2-user-authentication", "--json"],
    );
    assert_eq!(answered.code, 0, "{}{}", answered.stdout, answered.stderr);
    assert_eq!(answered.json()["phase"], "completed");
    let models = models_asked(&server);
    assert!(
        models.len() > asked_at_start,
        "the answer reached the server"
    );
    assert!(models.iter().all(|m| m == "model-x"), "{models:?}");

    // --model still overrides; the endpoint stays the run's.
    server.push(Reply::text("You are welcome."));
    let chat = baton_env(
        &baton,
        None,
        &["chat", &id, "thanks", "--model", "model-y", "--json"],
    );
    assert_eq!(chat.code, 0, "{}{}", chat.stdout, chat.stderr);
    assert_eq!(models_asked(&server).last().unwrap(), "model-y");

    let shown = baton.run(&["runs", "show", &id, "--json"]).json();
    assert_eq!(shown["run"]["model"]["name"], "model-y", "{shown}");
    assert_eq!(shown["run"]["model"]["baseUrl"], server.base_url());
    no_key_in_the_store(&baton);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_goes_on_with_the_remembered_model_and_model_overrides_it() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    // The model asks at once, and again at each continuation.
    let server = ScriptedServer::start(vec![Reply::text("Which story should I prepare?")])
        .await
        .unwrap();
    let id = start_waiting(&baton, &server, tmp.path());
    server.push(Reply::text("Which story should I prepare?"));
    let resumed = baton_env(
        &baton,
        None,
        &["resume", &id, "--non-interactive", "--json"],
    );
    assert_eq!(resumed.code, 10, "{}{}", resumed.stdout, resumed.stderr);
    assert_eq!(models_asked(&server).last().unwrap(), "model-x");
    server.push(Reply::text("Which story should I prepare?"));
    let overridden = baton_env(
        &baton,
        None,
        &["answer", &id, "the first", "--model", "model-y", "--json"],
    );
    assert_eq!(
        overridden.code, 10,
        "{}{}",
        overridden.stdout, overridden.stderr
    );
    assert_eq!(models_asked(&server).last().unwrap(), "model-y");
}

/// A replayed run goes on from the trace it was started with, offline, without a model.
#[test]
fn a_replayed_run_is_answered_from_its_own_trace() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    // The demo recording without its recorded answer: the run waits for a person there.
    let mut trace: Value =
        serde_json::from_slice(&std::fs::read(baton_testkit::demo_trace()).unwrap()).unwrap();
    trace["dialogues"]
        .as_array_mut()
        .unwrap()
        .retain(|d| d["type"] != "user_input");
    let path = tmp.path().join("no-answer.trace.json");
    std::fs::write(&path, trace.to_string()).unwrap();
    let project = baton_testkit::sample_project(&tmp.path().join("p"));
    let pkg = example("create-story-micro");
    let run = baton.run(&[
        "run",
        pkg.to_str().unwrap(),
        "--project",
        project.to_str().unwrap(),
        "--replay",
        path.to_str().unwrap(),
        "--non-interactive",
        "--json",
    ]);
    assert_eq!(run.code, 10, "{}{}", run.stdout, run.stderr);
    let id = run.json()["runId"].as_str().unwrap().to_string();
    let listed = baton.run(&["runs", "list", "--json"]).json();
    assert_eq!(listed[0]["model"]["replay"], true, "{listed}");

    // No model anywhere: the trace goes on.
    let answered = baton.run(&["answer", &id, "1-2-user-authentication", "--json"]);
    assert_eq!(answered.code, 0, "{}{}", answered.stdout, answered.stderr);
    assert_eq!(answered.json()["phase"], "completed");
}

/// The trace a replayed run remembers was removed: `answer` says which trace it was and how
/// to go on, and the run still waits, so the hint works.
#[test]
fn a_remembered_trace_that_is_gone_is_named_with_a_way_on() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("gone.trace.json");
    std::fs::write(
        &path,
        std::fs::read(trace_until_question(tmp.path())).unwrap(),
    )
    .unwrap();
    let project = baton_testkit::sample_project(&tmp.path().join("p"));
    let pkg = example("create-story-micro");
    let run = baton.run(&[
        "run",
        pkg.to_str().unwrap(),
        "--project",
        project.to_str().unwrap(),
        "--replay",
        path.to_str().unwrap(),
        "--non-interactive",
        "--json",
    ]);
    assert_eq!(run.code, 10, "{}{}", run.stdout, run.stderr);
    let id = run.json()["runId"].as_str().unwrap().to_string();
    std::fs::remove_file(&path).unwrap();

    let answered = baton.run(&["answer", &id, "1-2-user-authentication", "--json"]);
    assert_eq!(answered.code, 2, "{}{}", answered.stdout, answered.stderr);
    let error = &answered.json()["error"];
    assert_eq!(error["code"], "TRACE_INVALID", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("was started with the recorded trace"),
        "{message}"
    );
    assert!(message.contains("gone.trace.json"), "{message}");
    assert!(
        error["hint"].as_str().unwrap().contains("--replay"),
        "{error}"
    );
    let shown = baton.run(&["runs", "show", &id, "--json"]).json();
    assert_eq!(shown["run"]["phase"], "waiting-user", "{shown}");
}

fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    port
}

#[test]
fn a_closed_endpoint_fails_at_once_and_the_run_says_it_never_reached_the_model() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = baton_testkit::sample_project(tmp.path());
    let pkg = example("create-story-micro");
    let url = format!("http://127.0.0.1:{}/v1", closed_port());
    let started = Instant::now();
    let run = baton_env(
        &baton,
        Some(&url),
        &[
            "run",
            pkg.to_str().unwrap(),
            "--project",
            project.to_str().unwrap(),
            "--model",
            "m",
            "--non-interactive",
        ],
    );
    // The default retries alone took 7.5 s.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("LLM_CONNECT_ERROR"), "{}", run.stderr);
    assert!(run.stderr.contains(&url), "{}", run.stderr);
    assert!(run.stderr.contains("OPENAI_BASE_URL"), "{}", run.stderr);
    assert!(run.stderr.contains("hint:"), "{}", run.stderr);

    let listed = baton.run(&["runs", "list", "--json"]).json();
    assert_eq!(listed[0]["phase"], "failed");
    assert_eq!(listed[0]["stopReason"], "model-unreachable", "{listed}");
    let table = baton.run(&["runs", "list"]).stdout;
    assert!(table.contains("model-unreachable"), "{table}");
    let id = listed[0]["runId"].as_str().unwrap();
    let shown = baton.run(&["runs", "show", id]).stdout;
    assert!(shown.contains("failed (model-unreachable)"), "{shown}");
    assert!(shown.contains(&format!("model     m at {url}")), "{shown}");

    // --base-url is named as the setting when it chose the endpoint.
    let flagged = baton_env(
        &baton,
        None,
        &[
            "run",
            pkg.to_str().unwrap(),
            "--project",
            project.to_str().unwrap(),
            "--model",
            "m",
            "--base-url",
            &url,
            "--non-interactive",
        ],
    );
    assert_eq!(flagged.code, 1);
    assert!(flagged.stderr.contains("--base-url"), "{}", flagged.stderr);
}

#[test]
fn a_missing_key_for_a_remote_endpoint_is_said_before_anything_runs() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = baton_testkit::sample_project(tmp.path());
    let pkg = example("create-story-micro");
    // TEST-NET-1: never reachable, and never tried.
    let url = "http://192.0.2.1:9/v1";
    let started = Instant::now();
    let run = baton.run(&[
        "run",
        pkg.to_str().unwrap(),
        "--project",
        project.to_str().unwrap(),
        "--model",
        "m",
        "--base-url",
        url,
        "--non-interactive",
        "--json",
    ]);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    let error = &run.json()["error"];
    assert_eq!(error["code"], "LLM_KEY_MISSING", "{error}");
    assert!(error["message"].as_str().unwrap().contains(url), "{error}");
    assert!(
        error["hint"].as_str().unwrap().contains("OPENAI_API_KEY"),
        "{error}"
    );
    let listed = baton.run(&["runs", "list", "--json"]).json();
    assert_eq!(listed, serde_json::json!([]), "no run was made");
}
