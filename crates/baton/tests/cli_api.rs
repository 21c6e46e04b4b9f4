//! `--api openai|anthropic` on every command that takes `--model`: it reaches the model's
//! configuration, a run remembers it and goes on with it (`answer`, `resume`) without the flag,
//! an API the run remembers that this baton does not know is refused with a hint, and usage
//! with cache writes (Anthropic's prompt caching) is shown by `runs show`, text and JSON.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

#[path = "../../../tests/common.rs"]
mod common;

use baton_llm::Trace;
use baton_llm::testing::anthropic::{AnthropicServer, Exchange, message, trace_answers};
use common::{Baton, Run, example, repo, walk};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const ANTHROPIC_KEY: &str = "sk-ant-test-cli-api-0123456789";
const OPENAI_KEY: &str = "sk-openai-test-cli-api-0123456789";

/// `baton` with both keys in the environment (so the key that arrives says which API's
/// settings were used) and no model or endpoint from the environment.
fn baton_env(baton: &Baton, args: &[&str]) -> Run {
    baton_with(baton, args, &[("ANTHROPIC_API_KEY", ANTHROPIC_KEY)])
}

fn baton_with(baton: &Baton, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
    cmd.args(args)
        .current_dir(repo())
        .env("BATON_HOME", baton.home.path())
        .env("OPENAI_API_KEY", OPENAI_KEY)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("BATON_MODEL")
        .env_remove("OPENAI_BASE_URL");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("baton runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Every request went to the Messages API with the Anthropic key.
fn all_native(exchanges: &[Exchange]) {
    assert!(!exchanges.is_empty());
    for e in exchanges {
        assert_eq!(e.path, "/v1/messages", "{e:?}");
        assert_eq!(e.header("x-api-key"), Some(ANTHROPIC_KEY));
        assert_eq!(e.status, 200, "{e:?}");
    }
}

/// Starts the create-story run on a fresh sample project against `server` with
/// `--api anthropic`; it stops at its question.
fn start_waiting(baton: &Baton, server: &AnthropicServer, tmp: &Path) -> String {
    let project = baton_testkit::sample_project(tmp);
    let pkg = example("create-story-micro");
    let run = baton_env(
        baton,
        &[
            "run",
            pkg.to_str().unwrap(),
            "--project",
            project.to_str().unwrap(),
            "--model",
            "claude-x",
            "--base-url",
            &server.base_url(),
            "--api",
            "anthropic",
            "--non-interactive",
            "--json",
        ],
    );
    assert_eq!(run.code, 10, "{}{}", run.stdout, run.stderr);
    run.json()["runId"].as_str().unwrap().to_string()
}

/// The run's `run.json` in the store.
fn run_json(baton: &Baton, id: &str) -> PathBuf {
    walk(baton.home.path())
        .into_iter()
        .find(|p| p.ends_with(Path::new(id).join("run.json")))
        .expect("the run's metadata")
}

fn edit_model(baton: &Baton, id: &str, edit: impl FnOnce(&mut Value)) {
    let path = run_json(baton, id);
    let mut v: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut v["model"]);
    std::fs::write(&path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

#[test]
fn a_run_started_with_api_anthropic_remembers_it_and_answer_goes_on_with_it() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let trace = Trace::load(&baton_testkit::demo_trace()).unwrap();
    let server = AnthropicServer::start(trace_answers(&trace, false)).unwrap();
    let id = start_waiting(&baton, &server, tmp.path());
    let asked_at_start = server.exchanges().len();
    all_native(&server.exchanges());

    let shown = baton_env(&baton, &["runs", "show", &id, "--json"]).json();
    assert_eq!(shown["run"]["model"]["api"], "anthropic", "{shown}");
    assert_eq!(shown["run"]["model"]["baseUrl"], server.base_url());

    // No --api, no --base-url, no --model: the run's own.
    let answered = baton_env(
        &baton,
        &["answer", &id, "1-2-user-authentication", "--json"],
    );
    assert_eq!(answered.code, 0, "{}{}", answered.stdout, answered.stderr);
    assert_eq!(answered.json()["phase"], "completed");
    let exchanges = server.exchanges();
    assert!(
        exchanges.len() > asked_at_start,
        "the answer reached the server"
    );
    all_native(&exchanges);
    assert!(exchanges.iter().all(|e| e.body["model"] == "claude-x"));

    // The played cache wrote the prompt's prefix and read it back: both are shown.
    let shown = baton_env(&baton, &["runs", "show", &id, "--json"]).json();
    let usage = &shown["run"]["usage"];
    let written = usage["cacheWriteTokens"].as_u64().unwrap_or(0);
    assert!(written > 0, "{usage}");
    assert!(
        usage["cachedPromptTokens"].as_u64().unwrap_or(0) > 0,
        "{usage}"
    );
    let text = baton_env(&baton, &["runs", "show", &id]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout.contains("% cached, ") && text.stdout.contains(" written to cache; "),
        "{}",
        text.stdout
    );
}

#[test]
fn resume_goes_on_with_the_remembered_api_and_an_unknown_one_is_refused() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let ask = || message(None, "Which story should I prepare?", &[]);
    let server = AnthropicServer::start(vec![ask(), ask()]).unwrap();
    // Stopped by its budget before its first call: the run remembers its model all the same.
    let project = baton_testkit::sample_project(tmp.path());
    let pkg = example("create-story-micro");
    let started = baton_env(
        &baton,
        &[
            "run",
            pkg.to_str().unwrap(),
            "--project",
            project.to_str().unwrap(),
            "--model",
            "claude-x",
            "--base-url",
            &server.base_url(),
            "--api",
            "anthropic",
            "--budget-tokens",
            "10",
            "--non-interactive",
            "--json",
        ],
    );
    assert_eq!(started.code, 12, "{}{}", started.stdout, started.stderr);
    assert!(server.exchanges().is_empty());
    let id = started.json()["runId"].as_str().unwrap().to_string();

    let resumed = baton_env(&baton, &["resume", &id, "--non-interactive", "--json"]);
    assert_eq!(resumed.code, 10, "{}{}", resumed.stdout, resumed.stderr);
    assert_eq!(server.exchanges().len(), 1);
    all_native(&server.exchanges());

    // A value this baton does not speak: refused, naming it, with the flag to go on with.
    edit_model(&baton, &id, |m| m["api"] = "gemini".into());
    let refused = baton_env(&baton, &["answer", &id, "the first", "--json"]);
    assert_eq!(refused.code, 2, "{}{}", refused.stdout, refused.stderr);
    let v = refused.json();
    assert_eq!(v["error"]["code"], "LLM_CONFIG_INVALID", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\"gemini\""),
        "{v}"
    );
    assert!(
        v["error"]["hint"].as_str().unwrap().contains("--api"),
        "{v}"
    );
    assert_eq!(server.exchanges().len(), 1, "nothing was sent");
    let flagged = baton_env(
        &baton,
        &[
            "answer",
            &id,
            "the first",
            "--api",
            "anthropic",
            "--non-interactive",
            "--json",
        ],
    );
    assert_eq!(flagged.code, 10, "{}{}", flagged.stdout, flagged.stderr);
    assert_eq!(server.exchanges().len(), 2);
    all_native(&server.exchanges());

    // A run written before the API was remembered still reads (and spoke OpenAI's).
    edit_model(&baton, &id, |m| {
        m.as_object_mut().unwrap().remove("api");
    });
    let shown = baton_env(&baton, &["runs", "show", &id, "--json"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(shown.json()["run"]["model"].get("api").is_none());
}

/// The flag reaches the configuration of each command family: with `--api anthropic` and no
/// endpoint anywhere, the model is Anthropic's own, whose key is `ANTHROPIC_API_KEY` (missing
/// here, so nothing is sent anywhere).
#[test]
fn the_flag_reaches_the_model_of_run_epic_and_session() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = baton_testkit::sample_project(&tmp.path().join("p"));
    let pkg = example("create-story-micro");
    let epic = tmp.path().join("taskboard-epic");
    baton_testkit::copy_dir(&repo().join("examples/projects/taskboard-epic"), &epic);
    let (p, e) = (project.to_str().unwrap(), epic.to_str().unwrap());
    let pkg = pkg.to_str().unwrap();
    let families: [&[&str]; 3] = [
        &["run", pkg, "--project", p],
        &["epic", "run", "2", "-p", e],
        &["session", "start", "add CSV export", "-p", p, "-y"],
    ];
    for args in families {
        let mut with: Vec<&str> = args.to_vec();
        with.extend(["--model", "claude-x", "--non-interactive", "--json"]);
        let openai = baton_with(&baton, &with, &[]);
        with.extend(["--api", "anthropic"]);
        let anthropic = baton_with(&baton, &with, &[]);
        let said = format!("{}{}", anthropic.stdout, anthropic.stderr);
        assert!(said.contains("LLM_KEY_MISSING"), "{args:?}: {said}");
        assert!(said.contains("ANTHROPIC_API_KEY"), "{args:?}: {said}");
        assert!(said.contains("api.anthropic.com"), "{args:?}: {said}");
        // Without the flag the same command is OpenAI's (its key is set).
        let said = format!("{}{}", openai.stdout, openai.stderr);
        assert!(!said.contains("ANTHROPIC_API_KEY"), "{args:?}: {said}");
        let bad = baton_with(&baton, &[args, &["--api", "gemini"]].concat(), &[]);
        assert_eq!(bad.code, 2, "{args:?}: {}", bad.stderr);
    }
}

#[test]
fn every_command_that_takes_model_takes_api() {
    let baton = Baton::new();
    let commands: [&[&str]; 11] = [
        &["run"],
        &["resume"],
        &["answer"],
        &["chat"],
        &["agent"],
        &["epic", "run"],
        &["epic", "answer"],
        &["epic", "resume"],
        &["session", "start"],
        &["session", "continue"],
        &["session", "answer"],
    ];
    for command in commands {
        let help = baton.run(&[command, &["--help"]].concat());
        assert_eq!(help.code, 0, "{command:?}: {}", help.stderr);
        assert!(help.stdout.contains("--model"), "{command:?}");
        assert!(
            help.stdout.contains("--api <API>"),
            "{command:?}: {}",
            help.stdout
        );
        assert!(
            help.stdout
                .contains("anthropic is chosen by itself for api.anthropic.com"),
            "{command:?}"
        );
    }
}

/// A queued epic's story units carry the API (`StoryModel.api`): the flag is taken, and the
/// epic goes on to its next check (here: the project is not a git repository).
#[test]
fn a_queued_epic_takes_api() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let epic = tmp.path().join("taskboard-epic");
    baton_testkit::copy_dir(&repo().join("examples/projects/taskboard-epic"), &epic);
    for dry in [false, true] {
        let mut args = vec![
            "epic",
            "run",
            "2",
            "-p",
            epic.to_str().unwrap(),
            "--queue",
            "postgres://baton@127.0.0.1:9/baton",
            "--api",
            "anthropic",
            "--json",
        ];
        if dry {
            args.push("--dry-run");
        }
        let run = baton_with(&baton, &args, &[]);
        assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
        let v = run.json();
        assert_eq!(v["error"]["code"], "QUEUE_PROJECT_NOT_GIT", "{v}");
    }
}
