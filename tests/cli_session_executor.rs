//! A lifecycle session whose execution steps are run by a coding-agent CLI, through the real
//! `baton` binary: `[session] executor = "claude-code"`, the real Claude Code behind baton's
//! gateway, a strict played Anthropic API holding the operator's key. Each step's files are
//! written by the CLI's own tools, the steps are judged by those files and the session moves on
//! to completed; the upstream saw every model request with the operator's key and the CLI's
//! shell only a per-run token; `baton runs log` shows the CLI's tool calls; the session
//! replays offline from its record; a budget stops the step before the request that would
//! cross it (exit 12). Skipped, saying so, when the CLI is missing (fails with
//! `BATON_REQUIRE_EXECUTORS=1`, as CI sets it).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;
use crate::ralph_support;

use baton_executor::ExecutorKind;
use baton_executor::testing::require_or_skip;
use baton_llm::testing::anthropic::{AnthropicServer, message};
use common::{claude_call as call, claude_origin};
use ralph_support::{Fx, Out};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Stdio};

const KEY: &str = "sk-ant-operator-key-for-the-gateway-only";
const KEY_VAR: &str = "BATON_TEST_OPERATOR_KEY";
const PLAN: &str = ".workflow/scratch/plan.md";
const CODE: &str = "src/header.txt";

/// `baton ARGS` in the project, its HOME and store the fixture's; baton's own model points at
/// a closed port (the steps never ask it: a call would fail the session).
fn baton(fx: &Fx, args: &[&str]) -> Out {
    let o = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(args)
        .current_dir(&fx.project)
        .env("HOME", &fx.home)
        .env("BATON_HOME", fx.tmp.path().join("baton-home"))
        .env_remove("MAESTRO_HOME")
        .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .env("BATON_MODEL", "never-called")
        .env("OPENAI_API_KEY", "sk-not-used")
        .env(KEY_VAR, KEY)
        .stdin(Stdio::null())
        .output()
        .expect("baton runs");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// What the played Claude model does: in the plan step, print the environment and write the
/// plan; in the execute step, write the code; each time stop with a summary.
fn answers(project: &Path) -> Vec<Value> {
    vec![
        call(
            "toolu_env",
            "Bash",
            json!({"command": "env", "description": "environment"}),
        ),
        call(
            "toolu_plan",
            "Write",
            json!({"file_path": project.join(PLAN), "content": "# Plan\n\n1. print a header row\n"}),
        ),
        message(None, "Planned the header row.", &[]),
        call(
            "toolu_code",
            "Write",
            json!({"file_path": project.join(CODE), "content": "header: on\n"}),
        ),
        message(None, "Added the header row.", &[]),
    ]
}

fn configure(fx: &Fx, cli: &Path, upstream: &str) {
    fx.file(
        "baton.toml",
        &format!(
            "[session]\nexecutor = \"claude-code\"\n\n[executors.claude-code]\ncommand = {cli:?}\nupstream = {upstream:?}\napi_key_env = \"{KEY_VAR}\"\nmodel = \"claude-sonnet-4-5\"\n"
        ),
    );
}

/// The task run linked to step `index` of session `id`.
fn step_run(fx: &Fx, id: &str, index: usize) -> String {
    let link: Value = serde_json::from_str(
        &std::fs::read_to_string(fx.dir(id).join(format!("step-runs/{index}.json"))).unwrap(),
    )
    .unwrap();
    link["runId"].as_str().unwrap().to_string()
}

#[test]
fn claude_code_runs_the_steps_through_the_gateway_and_the_session_completes() {
    let Some(cli) = require_or_skip(ExecutorKind::ClaudeCode) else {
        return;
    };
    let fx = Fx::new();
    let project = fx.project.canonicalize().unwrap();
    let upstream = AnthropicServer::start(answers(&project)).unwrap();
    configure(&fx, &cli, &claude_origin(&upstream));
    let id = fx.created("plan,execute");
    let record = fx.tmp.path().join("record");

    let run = baton(
        &fx,
        &[
            "session",
            "continue",
            "--json",
            "--non-interactive",
            "--record",
            record.to_str().unwrap(),
        ],
    );
    run.code(0);
    let v = run.json();
    assert_eq!(v["outcome"], "completed", "{v:#}");
    // The CLI wrote these with its own tools.
    assert_eq!(
        std::fs::read_to_string(project.join(PLAN)).unwrap(),
        "# Plan\n\n1. print a header row\n"
    );
    assert_eq!(
        std::fs::read_to_string(project.join(CODE)).unwrap(),
        "header: on\n"
    );
    // Each step was judged by the files it wrote, cited as its evidence.
    let doc = fx.get(&id);
    let steps = doc["steps"].as_array().unwrap();
    assert_eq!(steps[0]["completion_status"], "DONE", "{doc:#}");
    assert_eq!(steps[0]["completion_evidence"], PLAN, "{doc:#}");
    assert_eq!(steps[1]["completion_evidence"], CODE, "{doc:#}");
    assert_eq!(steps[1]["status"], "completed", "{doc:#}");
    assert_eq!(upstream.remaining(), 0);

    // Every model request reached the upstream with the operator's key only.
    let exchanges = upstream.exchanges();
    assert_eq!(exchanges.len(), 5, "{exchanges:#?}");
    common::assert_all_keyed(&exchanges, KEY);
    // The CLI's prompt is the step's, without ralph's completion commands.
    let first = exchanges[0].body.to_string();
    assert!(first.contains("stop with a one-line summary"), "{first}");
    assert!(!first.contains("ralph complete"), "{first}");
    // Its shell saw a per-run token, never the key.
    let env_output = exchanges[1].body.to_string();
    common::assert_claude_env_holds_the_token_only(&env_output, KEY);

    // `baton runs log` shows what the CLI did in each step.
    let plan_run = step_run(&fx, &id, 0);
    let log = baton(&fx, &["runs", "log", &plan_run]);
    log.code(0);
    assert!(log.stdout.contains("executor.tool"), "{}", log.stdout);
    assert!(log.stdout.contains("Write"), "{}", log.stdout);
    assert!(log.stdout.contains(PLAN), "{}", log.stdout);
    let shown = baton(&fx, &["runs", "show", &plan_run, "--json"]);
    assert_eq!(
        shown.json()["run"]["usage"]["modelCalls"],
        3,
        "{}",
        shown.stdout
    );

    // The session replays offline from its record: the same project from scratch, a new
    // store, no upstream at all.
    for step in ["step-0.1", "step-1.1"] {
        let recorded = record.join(format!("{step}.exchanges.jsonl"));
        assert!(recorded.is_file(), "{recorded:?}");
        let text = std::fs::read_to_string(&recorded).unwrap();
        assert!(!text.contains(KEY), "the record holds the key");
    }
    drop(upstream);
    std::fs::remove_dir_all(&fx.project).unwrap();
    std::fs::remove_dir_all(fx.tmp.path().join("baton-home")).unwrap();
    std::fs::create_dir_all(&fx.project).unwrap();
    configure(&fx, &cli, "http://127.0.0.1:9");
    fx.created("plan,execute");
    let replay = baton(
        &fx,
        &[
            "session",
            "continue",
            "--json",
            "--non-interactive",
            "--replay",
            record.to_str().unwrap(),
        ],
    );
    replay.code(0);
    assert_eq!(replay.json()["outcome"], "completed", "{}", replay.stdout);
    assert_eq!(
        std::fs::read_to_string(project.join(CODE)).unwrap(),
        "header: on\n"
    );
}

#[test]
fn a_budget_stops_the_cli_before_the_request_that_would_cross_it() {
    let Some(cli) = require_or_skip(ExecutorKind::ClaudeCode) else {
        return;
    };
    let fx = Fx::new();
    let project = fx.project.canonicalize().unwrap();
    let upstream = AnthropicServer::start(answers(&project)).unwrap();
    configure(&fx, &cli, &claude_origin(&upstream));
    let id = fx.created("plan,execute");
    // Claude Code's first request alone is estimated far above 1,000 tokens.
    let run = baton(
        &fx,
        &[
            "session",
            "continue",
            "--json",
            "--non-interactive",
            "--budget-tokens",
            "1000",
        ],
    );
    run.code(12);
    assert_eq!(
        run.json()["error"]["code"],
        "BUDGET_EXCEEDED",
        "{}",
        run.stdout
    );
    assert!(
        upstream.exchanges().is_empty(),
        "the upstream saw a refused request"
    );
    assert!(!project.join(PLAN).exists());
    // The step stays claimed (nothing was decided); its run says why it stopped.
    assert_eq!(fx.get(&id)["steps"][0]["status"], "running");
    // The CLI ran (its session started) and the gateway refused its first request.
    let log = baton(&fx, &["runs", "log", &step_run(&fx, &id, 0)]);
    assert!(log.stdout.contains("executor.session"), "{}", log.stdout);
    assert!(
        log.stdout
            .contains("budget of 1000 tokens would be crossed"),
        "{}",
        log.stdout
    );
}
