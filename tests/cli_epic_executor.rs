//! Coding-agent CLIs as the executors of an epic's phases, through the real `baton` binary: a
//! BMAD 6.12 project whose build phase is run by the real Claude Code CLI behind baton's
//! gateway (a strict played Anthropic API holds the operator's key), its review by baton's own
//! loop (the played chat model). The story ends approved with the files the CLI wrote with its
//! own tools; the upstream saw every model request with the operator's key and never the
//! run's token; the CLI's environment held no real key; `baton runs log` shows its tool calls;
//! a budget stops the CLI before the request that would cross it (exit 12); the phase replays
//! offline from its record. Skipped, saying so, when the CLI is missing (fails with
//! `BATON_REQUIRE_EXECUTORS=1`, as CI sets it).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

#[allow(unused_imports)] // `common` re-exports helpers other tests use
mod common;
#[path = "../crates/baton-epic/tests/support/player.rs"]
mod player;

use baton_executor::ExecutorKind;
use baton_executor::testing::require_or_skip;
use baton_llm::testing::anthropic::{AnthropicServer, message};
use common::Baton;
use player::{Player, Scenario};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const IMPL: &str = "_bmad-output/implementation-artifacts";
const KEY: &str = "sk-ant-operator-key-for-the-gateway-only";
const KEY_VAR: &str = "BATON_TEST_OPERATOR_KEY";
const STORY: &str = "1-1-tide-table";

fn write(root: &Path, rel: &str, text: &str) {
    baton_testkit::write_file(root, rel, text);
}

/// BMAD 6.12 as `install --yes` leaves it (the build skills and the review), one story in the
/// backlog.
fn bmad_612(into: &Path) -> PathBuf {
    let root = into.join("harbor");
    write(
        &root,
        "_bmad/bmm/config.yaml",
        "project_name: harbor\nimplementation_artifacts: \"{project-root}/_bmad-output/implementation-artifacts\"\n",
    );
    write(
        &root,
        &format!("{IMPL}/sprint-status.yaml"),
        &format!(
            "project: harbor\ntracking_system: file-system\n\ndevelopment_status:\n  epic-1: in-progress\n  {STORY}: backlog\n  epic-1-retrospective: optional\n"
        ),
    );
    for (name, body) in [
        (
            "bmad-build-auto",
            "Build the story without stopping: plan it in a spec, implement it, set the spec's status.",
        ),
        (
            "bmad-build",
            "Build the story with the user at each checkpoint.",
        ),
        (
            "bmad-code-review",
            "Review the change and record the findings.",
        ),
    ] {
        write(
            &root,
            &format!(".claude/skills/{name}/SKILL.md"),
            &format!("---\nname: {name}\ndescription: {name} for the harbor.\n---\n{body}\n"),
        );
    }
    write(
        &root,
        ".claude/skills/bmad-build-auto/customize.toml",
        "[workflow]\nroute = \"auto\"\nreview = \"quick\"\non_complete = \"\"\n",
    );
    root
}

fn call(id: &str, name: &str, input: Value) -> Value {
    message(None, "", &[(id.to_string(), name.to_string(), input)])
}

/// What the played Claude model does in the build phase: print the environment, write the
/// spec (status done) and the code with Claude Code's own tools, then stop.
fn build_answers(root: &Path) -> Vec<Value> {
    let spec = root.join(format!("{IMPL}/spec-{STORY}.md"));
    let code = root.join(format!("src/{STORY}.txt"));
    vec![
        call(
            "toolu_env",
            "Bash",
            json!({"command": "env", "description": "environment"}),
        ),
        call(
            "toolu_spec",
            "Write",
            json!({"file_path": spec, "content": format!("---\ntitle: '{STORY}'\nstatus: 'done'\n---\n# {STORY}\n\n## Auto Run Result\n\nbuilt by Claude Code\n")}),
        ),
        call(
            "toolu_code",
            "Write",
            json!({"file_path": code, "content": "tides: high at noon\n"}),
        ),
        message(None, "Built the tide table.", &[]),
    ]
}

fn configure(root: &Path, cli: &Path, upstream: &str) {
    write(
        root,
        "baton.toml",
        &format!(
            "[autopilot.phases.build]\nexecutor = \"claude-code\"\n\n[executors.claude-code]\ncommand = {cli:?}\nupstream = {upstream:?}\napi_key_env = \"{KEY_VAR}\"\nmodel = \"claude-sonnet-4-5\"\n"
        ),
    );
}

/// The run id of the story's build phase, from the loop's progress file.
fn build_run(root: &Path) -> String {
    let progress: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join(format!("{IMPL}/.baton-epic-progress.json"))).unwrap(),
    )
    .unwrap();
    progress["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["phase"] == "build")
        .and_then(|r| r["runId"].as_str())
        .unwrap_or_else(|| panic!("no build run in {progress}"))
        .to_string()
}

#[test]
fn claude_code_builds_the_story_through_the_gateway_and_the_story_ends_approved() {
    let Some(cli) = require_or_skip(ExecutorKind::ClaudeCode) else {
        return;
    };
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let root = bmad_612(tmp.path()).canonicalize().unwrap();
    let upstream = AnthropicServer::start(build_answers(&root)).unwrap();
    let url = upstream.base_url().trim_end_matches("/v1").to_string();
    configure(&root, &cli, &url);
    let player = Player::start(&root, Scenario::default());
    let p = root.to_str().unwrap();
    let record = tmp.path().join("record");
    std::fs::create_dir_all(&record).unwrap();

    let dry = baton.played(
        &player.base_url(),
        &["epic", "story", STORY, "-p", p, "--dry-run", "--json"],
    );
    assert_eq!(dry.code, 0, "{}{}", dry.stdout, dry.stderr);
    assert!(dry.stdout.contains("run by claude-code"), "{}", dry.stdout);

    let run = baton.played_with(
        &player.base_url(),
        &[
            "epic",
            "story",
            STORY,
            "-p",
            p,
            "--json",
            "--non-interactive",
            "--record",
            record.to_str().unwrap(),
        ],
        &[(KEY_VAR, KEY)],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.json()["outcome"], "done", "{}", run.stdout);
    let sprint = std::fs::read_to_string(root.join(format!("{IMPL}/sprint-status.yaml"))).unwrap();
    assert!(sprint.contains(&format!("{STORY}: done")), "{sprint}");
    // The CLI wrote these with its own tools; the review (baton's loop) approved them.
    assert_eq!(
        std::fs::read_to_string(root.join(format!("src/{STORY}.txt"))).unwrap(),
        "tides: high at noon\n"
    );
    let spec = std::fs::read_to_string(root.join(format!("{IMPL}/spec-{STORY}.md"))).unwrap();
    assert!(spec.contains("built by Claude Code"), "{spec}");
    assert!(
        player.served().iter().any(|p| p == "code-review"),
        "{:?}",
        player.served()
    );
    assert!(
        !player.served().iter().any(|p| p == "build"),
        "baton's model did not build"
    );

    // Every model request of the CLI reached the upstream with the operator's key.
    let exchanges = upstream.exchanges();
    assert_eq!(exchanges.len(), 4, "{exchanges:#?}");
    for e in &exchanges {
        assert_eq!(e.status, 200, "{e:#?}");
        assert_eq!(e.header("x-api-key"), Some(KEY));
    }
    // The CLI's shell saw a per-run token, never the key: its `env` output is in the request
    // that carried the tool's result.
    let env_output = exchanges[1].body.to_string();
    assert!(
        env_output.contains("ANTHROPIC_API_KEY=baton-run-"),
        "{env_output}"
    );
    assert!(!env_output.contains(KEY), "the real key reached the CLI");
    assert!(
        !env_output.contains(KEY_VAR),
        "the key's variable reached the CLI"
    );

    // `baton runs log` shows what the CLI did.
    let id = build_run(&root);
    let log = baton.run(&["runs", "log", &id]);
    assert_eq!(log.code, 0, "{}", log.stderr);
    assert!(log.stdout.contains("executor.tool"), "{}", log.stdout);
    assert!(log.stdout.contains("Write"), "{}", log.stdout);
    assert!(
        log.stdout.contains(&format!("src/{STORY}.txt")),
        "{}",
        log.stdout
    );
    let shown = baton.run(&["runs", "show", &id, "--json"]);
    assert_eq!(shown.json()["run"]["usage"]["modelCalls"], 4, "{}", shown.stdout);

    // The phase replays offline from its record: a fresh copy of the project, no upstream.
    let recorded = record.join(format!("{STORY}.build.1.exchanges.jsonl"));
    assert!(recorded.is_file(), "{:?}", common::walk(&record));
    let text = std::fs::read_to_string(&recorded).unwrap();
    assert!(!text.contains(KEY), "the record holds the key");
    drop(upstream);
    // The same project again, from scratch, with a new store and no upstream at all.
    std::fs::remove_dir_all(&root).unwrap();
    let root = bmad_612(tmp.path()).canonicalize().unwrap();
    configure(&root, &cli, "http://127.0.0.1:9");
    let fresh = Baton::new();
    let replay = fresh.played(
        &player.base_url(),
        &[
            "epic",
            "story",
            STORY,
            "-p",
            p,
            "--json",
            "--non-interactive",
            "--replay",
            record.to_str().unwrap(),
        ],
    );
    assert_eq!(replay.code, 0, "{}{}", replay.stdout, replay.stderr);
    assert_eq!(
        replay.json()["outcome"],
        "done",
        "{}",
        replay.stdout
    );
    assert_eq!(
        std::fs::read_to_string(root.join(format!("src/{STORY}.txt"))).unwrap(),
        "tides: high at noon\n"
    );
}
