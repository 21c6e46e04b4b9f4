//! `baton` against a scripted OpenAI-compatible server on 127.0.0.1.
//!
//! One driver per run, across processes: while one `baton answer` drives a run (its model call
//! hangs on a scripted server), a second `resume`/`answer` is refused with `RUN_BUSY` naming the
//! holder, `runs list` shows the run live; once the holder is killed the run shows as
//! interrupted and the next driver takes the lock over. And a driver stopped by SIGINT or
//! SIGTERM records `ENGINE_ABORTED` and leaves the run idle and resumable.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;

use baton_llm::testing::{Reply, ScriptedServer};
use common::{Baton, example, repo, trace_until_question, walk};
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn baton_with_model(baton: &Baton, base_url: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
    cmd.args(args)
        .current_dir(repo())
        .env("BATON_HOME", baton.home.path())
        .env("OPENAI_BASE_URL", base_url)
        .env("BATON_MODEL", "scripted")
        .env("OPENAI_API_KEY", "sk-test")
        .stdin(Stdio::null());
    cmd
}

/// The run's entry in `runs list --json` (the store holds this one run).
fn listed(baton: &Baton, id: &str) -> Value {
    let entry = baton.run(&["runs", "list", "--json"]).json()[0].clone();
    assert_eq!(entry["runId"], id);
    entry
}

fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(
            // Generous for a loaded 2-core machine; it ends on its condition.
            start.elapsed() < Duration::from_secs(60),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A run stopped at its first question, and the store it lives in.
fn waiting_run(baton: &Baton, tmp: &Path) -> (String, std::path::PathBuf) {
    let project = baton_testkit::sample_project(tmp);
    let trace = trace_until_question(tmp);
    let pkg = example("create-story-micro");
    let first = baton.run(&[
        "run",
        pkg.to_str().unwrap(),
        "--project",
        project.to_str().unwrap(),
        "--replay",
        trace.to_str().unwrap(),
        "--non-interactive",
        "--json",
    ]);
    assert_eq!(first.code, 10, "{}{}", first.stdout, first.stderr);
    (first.json()["runId"].as_str().unwrap().to_string(), trace)
}

/// `baton answer` in a child process, once its call has reached a model that never answers.
fn answer_hanging(baton: &Baton, server: &ScriptedServer, id: &str) -> Killed {
    let driver = Killed(
        baton_with_model(
            baton,
            &server.base_url(),
            &["answer", id, "1-2-user-authentication", "--non-interactive"],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap(),
    );
    wait_for("the answer reaches the model", || {
        !server.received().is_empty()
    });
    driver
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_stops_the_run_and_leaves_it_resumable() {
    for signal in ["-INT", "-TERM"] {
        let baton = Baton::new();
        let tmp = tempfile::tempdir().unwrap();
        let (id, _) = waiting_run(&baton, tmp.path());
        let server = ScriptedServer::start(vec![Reply::Hang]).await.unwrap();
        let mut driver = answer_hanging(&baton, &server, &id);
        let sent = Command::new("kill")
            .args([signal, &driver.0.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        wait_for("the driver stops", || {
            driver.0.try_wait().unwrap().is_some()
        });
        let status = driver.0.wait().unwrap();
        assert_eq!(status.code(), Some(130), "{signal}");
        let shown = baton.run(&["runs", "show", &id, "--json"]).json();
        assert_eq!(shown["run"]["phase"], "idle", "{signal}: {shown}");
        assert_eq!(
            shown["run"]["waitingFor"]["error"]["code"],
            "ENGINE_ABORTED"
        );
        let log = baton.run(&["runs", "log", &id, "--json"]).stdout;
        assert!(
            log.lines().last().unwrap().contains("ENGINE_ABORTED"),
            "{signal}: {log}"
        );
        // And it goes on from there.
        server.push(Reply::text("Which story do you mean?"));
        let resumed = baton_with_model(
            &baton,
            &server.base_url(),
            &["resume", &id, "--non-interactive", "--json"],
        )
        .output()
        .unwrap();
        assert_eq!(resumed.status.code(), Some(10), "{signal}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_driver_is_refused_and_a_dead_drivers_lock_is_taken_over() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let (id, trace) = waiting_run(&baton, tmp.path());

    // The first driver: its model call never returns.
    let server = ScriptedServer::start(vec![Reply::Hang]).await.unwrap();
    let holder = answer_hanging(&baton, &server, &id);
    let pid = holder.0.id();
    assert_eq!(listed(&baton, &id)["phase"], "running");
    assert!(
        listed(&baton, &id).get("interrupted").is_none(),
        "a live run is not interrupted"
    );

    // A second driver, in text and in JSON.
    let busy = baton.run(&["resume", &id, "--replay", trace.to_str().unwrap()]);
    assert_eq!(busy.code, 1, "{}{}", busy.stdout, busy.stderr);
    assert!(busy.stderr.contains("error[RUN_BUSY]"), "{}", busy.stderr);
    assert!(
        busy.stderr.contains(&format!("pid {pid}")),
        "{}",
        busy.stderr
    );
    assert!(busy.stderr.contains("baton answer"), "{}", busy.stderr);
    let busy = baton.run(&["answer", &id, "again", "--json"]);
    assert_eq!(busy.code, 1);
    assert_eq!(busy.json()["error"]["code"], "RUN_BUSY", "{}", busy.stdout);
    assert_eq!(server.received().len(), 1, "no second model call was made");

    // `runs log --follow` keeps following while the driver lives...
    let mut follow = Killed(
        Command::new(env!("CARGO_BIN_EXE_baton"))
            .args(["runs", "log", &id, "--follow"])
            .env("BATON_HOME", baton.home.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        follow.0.try_wait().unwrap().is_none(),
        "follow gave up on a live run"
    );

    // The holder dies: the run is interrupted, the follower ends, and the lock is free for the
    // next driver.
    drop(holder);
    wait_for("--follow ends once no process drives the run", || {
        follow.0.try_wait().unwrap().is_some()
    });
    let entry = listed(&baton, &id);
    assert_eq!(entry["phase"], "running");
    assert_eq!(entry["interrupted"], true, "{entry}");
    let shown = baton.run(&["runs", "show", &id]);
    assert!(shown.stdout.contains("interrupted"), "{}", shown.stdout);
    server.push(Reply::text("Which story do you mean?"));
    let taken = baton_with_model(
        &baton,
        &server.base_url(),
        &["resume", &id, "--non-interactive", "--json"],
    )
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&taken.stdout);
    assert_eq!(
        taken.status.code(),
        Some(10),
        "{stdout}{}",
        String::from_utf8_lossy(&taken.stderr)
    );
    assert_eq!(listed(&baton, &id)["phase"], "waiting-user");
}

/// A provider error that echoes the API key (in its message, or by echoing the request's
/// `Authorization` header) never reaches the index, the run's files or the terminal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_echoing_the_key_never_gets_it_stored_or_printed() {
    const KEY: &str = "sk-proj-Zq8VwX4tLmN2pR7sK1yB9cD3fG6hJ0aE";
    for reply in [
        Reply::error(
            401,
            &format!("Incorrect API key provided: {KEY}. Check your key."),
        ),
        Reply::EchoHeaders { status: 403 },
    ] {
        let baton = Baton::new();
        let tmp = tempfile::tempdir().unwrap();
        let (id, _) = waiting_run(&baton, tmp.path());
        let server = ScriptedServer::start(vec![reply]).await.unwrap();
        let out = baton_with_model(
            &baton,
            &server.base_url(),
            &[
                "answer",
                &id,
                "1-2-user-authentication",
                "--non-interactive",
                "--json",
            ],
        )
        .env("OPENAI_API_KEY", KEY)
        .output()
        .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(printed.contains("LLM_"), "{printed}");
        let leaks = |text: &str| text.contains(KEY) || text.contains(&KEY[..16]);
        assert!(!leaks(&printed), "{printed}");
        for file in walk(baton.home.path()) {
            let bytes = std::fs::read(&file).unwrap();
            assert!(
                !leaks(&String::from_utf8_lossy(&bytes)),
                "{} holds the key",
                file.display()
            );
        }
    }
}

/// `baton run` reads the project's `baton.toml` tool settings: with the terminal turned on
/// the dev agent is offered `terminal.run`; a bad setting is refused before any model call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_projects_tool_settings_reach_the_run() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("pricing");
    baton_testkit::copy_dir(&repo().join("examples/projects/pricing"), &project);
    let pkg = example("dev-story");
    let server = ScriptedServer::start(vec![Reply::text("Which story should I implement?")])
        .await
        .unwrap();
    let run = |baton: &Baton| {
        baton_with_model(
            baton,
            &server.base_url(),
            &[
                "run",
                pkg.to_str().unwrap(),
                "--project",
                project.to_str().unwrap(),
                "--non-interactive",
                "--json",
            ],
        )
        .output()
        .unwrap()
    };
    std::fs::write(
        project.join("baton.toml"),
        "[tools.terminal]\nenabld = true\n",
    )
    .unwrap();
    let refused = run(&baton);
    assert_eq!(refused.status.code(), Some(2));
    let error: Value = serde_json::from_slice(&refused.stdout).unwrap();
    assert_eq!(error["error"]["code"], "TOOLS_CONFIG_INVALID", "{error}");
    assert!(
        server.received().is_empty(),
        "no model call before the settings are valid"
    );

    std::fs::write(
        project.join("baton.toml"),
        "[tools.terminal]\nenabled = true\n",
    )
    .unwrap();
    let waiting = run(&baton);
    assert_eq!(
        waiting.status.code(),
        Some(10),
        "{}",
        String::from_utf8_lossy(&waiting.stderr)
    );
    let tools: Vec<String> = server.received()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(tools.iter().any(|t| t == "terminal_run"), "{tools:?}");
}
