//! A run never dies of its own history: `baton` against a strict scripted OpenAI-compatible
//! server on 127.0.0.1 (it refuses a tool call without its result and an orphan result).
//!
//! The model sends a 3 MB `fs.write` (refused as oversized) and is killed while it thinks
//! about the next turn; `baton resume` then finishes the run. Another model writes 400 files
//! in one turn under the default 32,768-token window. Every request the server receives is
//! under the window and well-formed; the conversation log keeps the whole answer.
//!
//! The context policy is remembered with the run: a run started with `--context full` and
//! answered without `--context` goes on carrying its history (every request begins with the
//! whole previous one, across the node changes after the answer); `--context node` on the
//! answer wins and is remembered in its place.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;

use baton_llm::Trace;
use baton_llm::testing::{Reply, ScriptedServer};
use baton_llm::wire::prompt_bytes;
use common::{Baton, example, repo};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The default window of a model baton knows nothing about.
const WINDOW: usize = 32_768;

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

fn output(cmd: &mut Command) -> (i32, Value, String) {
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), json, stdout + &stderr)
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The demo conversation as replies: read, ask, then the rest of the workflow.
fn demo_replies() -> Vec<Reply> {
    Reply::from_trace(&Trace::load(&baton_testkit::demo_trace()).unwrap())
}

fn write_reply(calls: &[(String, String)]) -> Reply {
    let calls: Vec<(String, String, String)> = calls
        .iter()
        .enumerate()
        .map(|(i, (path, content))| {
            (
                format!("w{i}"),
                "fs_write".to_string(),
                json!({"path": path, "content": content}).to_string(),
            )
        })
        .collect();
    let refs: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
        .collect();
    Reply::tool_calls(&refs)
}

/// Every request under the window (the chars/4 estimate of a model baton does not know is at
/// most a quarter of the body's bytes) and with its calls and results paired.
fn check_requests(server: &ScriptedServer) -> Vec<Value> {
    let bodies: Vec<Value> = server.received().into_iter().map(|r| r.body).collect();
    for (i, body) in bodies.iter().enumerate() {
        let bytes = body.to_string().len();
        assert!(
            bytes / 4 < WINDOW,
            "request {i}: {bytes} bytes, over a {WINDOW}-token window"
        );
        assert_eq!(
            baton_llm::testing::violation(body),
            None,
            "request {i} breaks the tool protocol"
        );
    }
    bodies
}

fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn conversation_log(baton: &Baton, project: &Path, run_id: &str) -> u64 {
    let _ = project;
    let found = common::walk(baton.home.path())
        .into_iter()
        .find(|p| p.ends_with("logs/conversation.jsonl") && p.to_string_lossy().contains(run_id))
        .unwrap();
    std::fs::metadata(found).unwrap().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_3mb_write_neither_fails_the_run_nor_its_resume_after_a_kill() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = baton_testkit::sample_project(tmp.path());
    let pkg = example("create-story-micro");
    let huge = "3 MB of a story nobody asked for. ".repeat(3 * 1024 * 1024 / 34 + 1);
    assert!(huge.len() > 3 * 1024 * 1024);
    let first = ScriptedServer::start(vec![
        write_reply(&[("@project/notes/huge.md".into(), huge.clone())]),
        Reply::Hang,
    ])
    .await
    .unwrap();
    let mut driver = Killed(
        baton_with_model(
            &baton,
            &first.base_url(),
            &[
                "run",
                pkg.to_str().unwrap(),
                "--project",
                project.to_str().unwrap(),
                "--non-interactive",
                "--json",
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap(),
    );
    // The run asks the model again after the refused write (it failed there before).
    wait_for("the second request", || {
        if let Ok(Some(status)) = driver.0.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = driver.0.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            panic!("the run ended before its second request ({status}): {err}");
        }
        first.received().len() >= 2
    });
    let _ = driver.0.kill();
    let _ = driver.0.wait();
    let bodies = check_requests(&first);
    let second = bodies[1].to_string();
    let sha = baton_package::digest::sha256_hex(huge.as_bytes());
    assert!(second.contains(&sha), "the elided content keeps its sha256");
    assert!(
        second.contains("E_WRITE_LIMIT"),
        "and its result says it was refused"
    );
    assert!(!project.join("notes/huge.md").exists());
    let runs = baton.run(&["runs", "list", "--json"]).json();
    let id = runs[0]["runId"].as_str().unwrap().to_string();
    assert!(
        conversation_log(&baton, &project, &id) > 3 * 1024 * 1024,
        "the conversation log keeps the whole answer"
    );

    // Resumed after the kill: the restored history carries the 3 MB call again.
    let rest = ScriptedServer::start(demo_replies()).await.unwrap();
    let (code, out, text) = output(&mut baton_with_model(
        &baton,
        &rest.base_url(),
        &["resume", &id, "--non-interactive", "--json"],
    ));
    assert_eq!(code, 10, "waits for the story's name: {text}");
    assert_eq!(out["phase"], "waiting-user", "{out}");
    let (code, out, text) = output(&mut baton_with_model(
        &baton,
        &rest.base_url(),
        &["answer", &id, "1-2-user-authentication", "--json"],
    ));
    assert_eq!(code, 0, "{text}");
    assert_eq!(out["phase"], "completed", "{out}");
    let bodies = check_requests(&rest);
    assert_eq!(bodies.len(), 10);
    assert!(bodies[0].to_string().contains(&sha), "{}", bodies[0]);
    assert!(
        project
            .join("artifacts/stories/1-2-user-authentication.md")
            .is_file()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_of_400_writes_completes_under_the_default_window() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = baton_testkit::sample_project(tmp.path());
    let pkg = example("create-story-micro");
    let writes: Vec<(String, String)> = (0..400)
        .map(|i| {
            (
                format!("@project/notes/w{i:03}.md"),
                format!(
                    "# Note {i}\n\n{}\n",
                    "A line of the note, kept. ".repeat(40)
                ),
            )
        })
        .collect();
    let mut replies = vec![write_reply(&writes)];
    replies.extend(demo_replies());
    let server = ScriptedServer::start(replies).await.unwrap();
    let (code, out, text) = output(&mut baton_with_model(
        &baton,
        &server.base_url(),
        &[
            "run",
            pkg.to_str().unwrap(),
            "--project",
            project.to_str().unwrap(),
            "--non-interactive",
            "--json",
        ],
    ));
    assert_eq!(code, 10, "{text}");
    let id = out["runId"].as_str().unwrap().to_string();
    let (code, out, text) = output(&mut baton_with_model(
        &baton,
        &server.base_url(),
        &["answer", &id, "1-2-user-authentication", "--json"],
    ));
    assert_eq!(code, 0, "{text}");
    assert_eq!(out["phase"], "completed", "{out}");
    let bodies = check_requests(&server);
    assert_eq!(bodies.len(), 11);
    for (i, (path, content)) in writes.iter().enumerate() {
        let file = project.join(path.trim_start_matches("@project/"));
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            *content,
            "write {i}"
        );
    }
    // The latest write is still shown whole to the model right after its turn.
    assert!(bodies[1].to_string().contains("w399"));
}

/// How many of `bodies` begin with the whole previous request, and how many node changes
/// (`NODE_BRIEF` messages added) those requests crossed.
fn extensions(bodies: &[Value]) -> (Vec<bool>, usize) {
    let mut extends = Vec::new();
    let mut node_changes = 0;
    for i in 1..bodies.len() {
        let (prev, next) = (prompt_bytes(&bodies[i - 1]), prompt_bytes(&bodies[i]));
        let ok = next.starts_with(&prev);
        if ok {
            let n = bodies[i - 1]["messages"].as_array().unwrap().len();
            node_changes += bodies[i]["messages"].as_array().unwrap()[n..]
                .iter()
                .filter(|m| {
                    m["content"]
                        .as_str()
                        .is_some_and(|c| c.starts_with("NODE_BRIEF"))
                })
                .count();
        }
        extends.push(ok);
    }
    (extends, node_changes)
}

/// The run's `run.json`.
fn run_json(baton: &Baton, run_id: &str) -> Value {
    let found = common::walk(baton.home.path())
        .into_iter()
        .find(|p| p.ends_with(format!("{run_id}/run.json")))
        .unwrap();
    serde_json::from_slice(&std::fs::read(found).unwrap()).unwrap()
}

/// `baton run --context full` on the demo conversation, stopped at its question: the server,
/// the run id and the number of requests before the answer.
async fn started_full(baton: &Baton, project: &Path) -> (ScriptedServer, String, usize) {
    let server = ScriptedServer::start(demo_replies()).await.unwrap();
    let pkg = example("create-story-micro");
    let (code, out, text) = output(&mut baton_with_model(
        baton,
        &server.base_url(),
        &[
            "run",
            pkg.to_str().unwrap(),
            "--project",
            project.to_str().unwrap(),
            "--context",
            "full",
            "--non-interactive",
            "--json",
        ],
    ));
    assert_eq!(code, 10, "waits for the story's name: {text}");
    let id = out["runId"].as_str().unwrap().to_string();
    assert_eq!(run_json(baton, &id)["context"], "full");
    let before = server.received().len();
    (server, id, before)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_goes_on_with_the_remembered_context_policy_unless_told_otherwise() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();

    // Answered without --context: the run keeps carrying its history.
    let project = baton_testkit::sample_project(&tmp.path().join("a"));
    let (server, id, before) = started_full(&baton, &project).await;
    let shown = baton.run(&["runs", "show", &id]);
    assert!(shown.stdout.contains("context   full"), "{}", shown.stdout);
    let (code, out, text) = output(&mut baton_with_model(
        &baton,
        &server.base_url(),
        &["answer", &id, "1-2-user-authentication", "--json"],
    ));
    assert_eq!(code, 0, "{text}");
    assert_eq!(out["phase"], "completed", "{out}");
    let bodies = check_requests(&server);
    assert_eq!(bodies.len(), 10);
    let (extends, _) = extensions(&bodies);
    assert!(
        extends.iter().all(|e| *e),
        "every request begins with the whole previous one, the answer's too: {extends:?}"
    );
    let (_, after_answer) = extensions(&bodies[before..]);
    assert!(
        after_answer >= 1,
        "the requests after the answer cross a node change"
    );
    let shown = baton.run(&["runs", "show", &id, "--json"]).json();
    assert_eq!(shown["context"], "full", "{shown}");
    assert_eq!(shown["runPrefixExtensions"], 1.0, "{shown}");
    assert_eq!(run_json(&baton, &id)["context"], "full");

    // --context node on the answer wins, and is remembered.
    let project = baton_testkit::sample_project(&tmp.path().join("b"));
    let (server, id, before) = started_full(&baton, &project).await;
    let (code, out, text) = output(&mut baton_with_model(
        &baton,
        &server.base_url(),
        &[
            "answer",
            &id,
            "1-2-user-authentication",
            "--context",
            "node",
            "--json",
        ],
    ));
    assert_eq!(code, 0, "{text}");
    assert_eq!(out["phase"], "completed", "{out}");
    let bodies = check_requests(&server);
    assert_eq!(bodies.len(), 10);
    let (extends, _) = extensions(&bodies[before..]);
    assert!(
        extends.iter().any(|e| !e),
        "the history restarts at a node after the answer: {extends:?}"
    );
    let shown = baton.run(&["runs", "show", &id, "--json"]).json();
    assert_eq!(shown["context"], "node", "{shown}");
    assert!(
        shown["runPrefixExtensions"].as_f64().unwrap() < 1.0,
        "{shown}"
    );
    let meta = run_json(&baton, &id);
    assert!(
        meta.get("context").is_none(),
        "the default is not written: {meta}"
    );
}
