//! The real OpenCode CLI against a played, strict chat-completions server on loopback: the
//! scripted model has OpenCode write hello.txt with its own write tool; the file is written, the
//! server saw every request (and nothing else was contacted: no plugin install, no model list),
//! the CLI's JSON events read as baton's events, and a resume continues the same session.
//!
//! Then through baton's runner and gateway: the upstream sees the operator's key and never the
//! run's token, the CLI's environment holds no real key, a budget refusal ends OpenCode (which
//! would retry it for over a minute) within seconds, and the record replays offline.
//!
//! Skips (saying so) without the opencode CLI, unless `BATON_REQUIRE_EXECUTORS=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::support;

use baton_executor::{Event, ExecutorKind, Job, Mode, testing};
use baton_llm::testing::{Received, Reply, ScriptedServer};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::{
    Cli, Direct, Dirs, OneRequest, Run, assert_confined_where_possible, dirs, marked_processes,
    run_collecting, shape, stderr_of, transcript,
};

const MODEL: &str = "played-1.5";
const TOKEN: &str = "baton-run-test-token-0c7a";

/// Launches opencode as the adapter says (empty environment but PATH, HOME, TMPDIR, LANG, a
/// trap proxy and the launch's own; stdin /dev/null; cwd the workdir), with `gateway` as the
/// model's address; waits up to two minutes.
async fn run_opencode(
    program: &Path,
    direct: &Direct,
    gateway: &str,
    prompt: &str,
    resume: Option<&str>,
) -> Run {
    let cli = Cli {
        kind: ExecutorKind::Opencode,
        program,
        token: TOKEN,
        model: MODEL,
    };
    let (launch, env) = direct.prepare(&cli, gateway, prompt, resume);
    let child = tokio::process::Command::new(&launch.program)
        .args(&launch.args)
        .env_clear()
        .envs(env)
        .current_dir(&direct.workdir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let output = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("opencode did not finish in two minutes")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let adapter = ExecutorKind::Opencode.adapter().unwrap();
    let events = stdout.lines().flat_map(|l| adapter.parse_line(l)).collect();
    Run {
        status: output.status,
        stdout,
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        events,
    }
}

fn opencode() -> Option<PathBuf> {
    testing::require_or_skip(ExecutorKind::Opencode)
}

/// `http://127.0.0.1:<port>` of a played server (its base URL without `/v1`).
fn origin(server: &ScriptedServer) -> String {
    server.base_url().trim_end_matches("/v1").to_string()
}

/// The content of the tool message answering `call_id` in a request.
fn tool_output(request: &Received, call_id: &str) -> Option<String> {
    request.body["messages"]
        .as_array()?
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .map(|m| match &m["content"] {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        })
}

fn write_hello(content: &str) -> Reply {
    let args = serde_json::json!({"filePath": "hello.txt", "content": content}).to_string();
    Reply::stream_tool_call("call_hello", "write", &args, 7)
}

#[tokio::test]
async fn opencode_writes_a_file_with_its_own_tool_against_the_played_chat_completions() {
    let Some(program) = opencode() else { return };
    let direct = Direct::new();
    let server = ScriptedServer::start(vec![
        write_hello("hello from opencode\n"),
        Reply::stream_text(&["Done: ", "hello.txt is written."]),
    ])
    .await
    .unwrap();
    let started = Instant::now();
    let run = run_opencode(
        &program,
        &direct,
        &origin(&server),
        "Create hello.txt saying hello.",
        None,
    )
    .await;
    let took = started.elapsed();
    assert!(
        run.status.success(),
        "{}\n{}\n{}",
        run.status,
        run.stdout,
        run.stderr
    );
    eprintln!("one opencode task took {took:?}");

    // The file, written by OpenCode's own write tool.
    assert_eq!(
        std::fs::read_to_string(direct.workdir.join("hello.txt")).unwrap(),
        "hello from opencode\n"
    );

    // The server saw each request, each with the run's token and model; no title request
    // (the adapter names the session), nothing else was asked, nothing else contacted.
    let received = server.received();
    assert_eq!(received.len(), 2, "{received:?}");
    for r in &received {
        assert_eq!(
            (r.method.as_str(), r.path.as_str()),
            ("POST", "/v1/chat/completions")
        );
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {TOKEN}").as_str())
        );
        assert_eq!(r.body["model"], MODEL);
        assert_eq!(r.body["stream"], true);
        assert!(r.body["tools"].as_array().is_some_and(|t| !t.is_empty()));
    }
    assert_eq!(server.remaining(), 0);
    assert_eq!(direct.trapped(), 0, "OpenCode contacted another address");
    let wrote = tool_output(&received[1], "call_hello").unwrap();
    assert!(wrote.contains("Wrote file successfully"), "{wrote}");

    // The transcript as baton records it.
    let Event::Session { id } = &run.events[0] else {
        panic!("{:?}", run.events)
    };
    assert!(id.starts_with("ses_"), "{id}");
    let shapes: Vec<String> = run.events.iter().map(shape).collect();
    assert_eq!(
        shapes,
        [
            "session",
            "call write",
            "result ok",
            "session",
            "message Done: hello.txt is written.",
            "end ok",
        ],
        "{}",
        run.stdout
    );
    assert!(run.events.contains(&Event::ToolCall {
        id: "call_hello".into(),
        name: "write".into(),
        input: serde_json::json!({"filePath": "hello.txt", "content": "hello from opencode\n"}),
    }));
}

#[tokio::test]
async fn a_resume_continues_the_same_opencode_session() {
    let Some(program) = opencode() else { return };
    let direct = Direct::new();
    let server = ScriptedServer::start(vec![
        Reply::stream_text(&["Which greeting do you want?"]),
        Reply::stream_text(&["Using hola."]),
    ])
    .await
    .unwrap();
    let first = run_opencode(&program, &direct, &origin(&server), "Greet.", None).await;
    assert!(first.status.success(), "{}", first.stderr);
    let Event::Session { id } = first.events[0].clone() else {
        panic!("{:?}", first.events)
    };
    // A new gateway address for the resumed launch: the seeded config reads it afresh.
    let second_server = ScriptedServer::start(vec![Reply::stream_text(&["Using hola."])])
        .await
        .unwrap();
    let second = run_opencode(
        &program,
        &direct,
        &origin(&second_server),
        "hola",
        Some(&id),
    )
    .await;
    assert!(second.status.success(), "{}", second.stderr);
    assert_eq!(second.events[0], Event::Session { id: id.clone() });
    assert!(second.events.contains(&Event::Message {
        text: "Using hola.".into()
    }));
    assert_eq!(server.received().len(), 1);
    // The answer went to the model with the conversation so far.
    let received = second_server.received();
    assert_eq!(received.len(), 1);
    let messages = received[0].body["messages"].to_string();
    assert!(
        messages.contains("Which greeting do you want?") && messages.contains("hola"),
        "{messages}"
    );
    assert_eq!(direct.trapped(), 0);
}

const KEY: &str = "sk-operator-key-6f0d2c91e4";

fn job<'a>(program: &'a Path, d: &'a Dirs, prompt: &'a str, mode: Mode) -> Job<'a> {
    support::job(ExecutorKind::Opencode, MODEL, program, d, prompt, mode)
}

fn live(server: &ScriptedServer) -> Mode {
    support::live(server.base_url(), KEY)
}

/// The one-file task through the runner: the model has OpenCode print its environment with its
/// bash tool, then write hello.txt. Every request reached the upstream with the operator's key,
/// none with the token; the CLI's environment held the token only; the transcript holds the
/// tool calls. Then the record replays with the upstream gone: the same file, in a new project.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_file_task_goes_through_the_gateway_with_the_token_only_and_replays() {
    let Some(program) = opencode() else { return };
    let d = dirs();
    let server = ScriptedServer::start(vec![
        Reply::stream_tool_call(
            "call_env",
            "bash",
            &json!({"command": "env", "description": "environment"}).to_string(),
            9,
        ),
        write_hello("hello through the gateway\n"),
        Reply::stream_text(&["Created hello.txt."]),
    ])
    .await
    .unwrap();
    let started = Instant::now();
    let (outcome, seen) = run_collecting(job(
        &program,
        &d,
        "Create hello.txt saying hello.",
        live(&server),
    ))
    .await;
    eprintln!(
        "one opencode task through the runner took {:?}",
        started.elapsed()
    );
    assert_eq!(
        outcome.exit_code,
        Some(0),
        "{outcome:#?}\n{}",
        stderr_of(&d)
    );
    let target = d.workdir.join("hello.txt");
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "hello through the gateway\n"
    );
    assert!(
        outcome
            .session
            .as_deref()
            .is_some_and(|s| s.starts_with("ses_"))
    );
    assert_eq!(outcome.budget, None);
    assert_eq!(outcome.question, None);
    assert_eq!(outcome.exchanges, 3);
    assert_confined_where_possible(&outcome);

    let received = server.received();
    assert_eq!(received.len(), 3, "{received:#?}");
    let env = tool_output(&received[1], "call_env").unwrap();
    let token = env
        .lines()
        .find_map(|l| l.strip_prefix("BATON_GATEWAY_TOKEN="))
        .expect("the CLI holds the run's token")
        .to_string();
    assert!(token.starts_with("baton-run-"), "{token}");
    assert!(env.contains("HOME="), "{env}");
    assert!(!env.contains(KEY), "the real key reached the CLI: {env}");
    for r in &received {
        assert_eq!(
            (r.method.as_str(), r.path.as_str()),
            ("POST", "/v1/chat/completions")
        );
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {KEY}").as_str()),
            "{:?}",
            r.headers
        );
        assert!(
            !r.headers.iter().any(|(_, v)| v.contains(&token)),
            "the token reached the upstream: {:?}",
            r.headers
        );
    }
    assert_eq!(transcript(&d.run_dir), seen);
    assert_eq!(
        seen.iter().map(shape).collect::<Vec<_>>(),
        [
            "session",
            "call bash",
            "result ok",
            "session",
            "call write",
            "result ok",
            "session",
            "message Created hello.txt.",
            "end ok",
        ]
    );

    // Replay: a fresh project, the upstream gone, the same file from the record.
    drop(server);
    let again = dirs();
    let replay = job(
        &program,
        &again,
        "Create hello.txt saying hello.",
        support::replay_of(&d),
    );
    support::assert_replays(replay, &again, 3).await;
    assert_eq!(
        std::fs::read_to_string(again.workdir.join("hello.txt")).unwrap(),
        "hello through the gateway\n"
    );
}

/// An answer resumes OpenCode's own session in the same run folder, through a new gateway
/// (another address, another token): the upstream sees the earlier conversation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_resumes_the_opencode_session_through_a_new_gateway() {
    let Some(program) = opencode() else { return };
    let d = dirs();
    let server = ScriptedServer::start(vec![
        Reply::stream_text(&["Which colour should the button be?"]),
        Reply::stream_text(&["Blue it is."]),
    ])
    .await
    .unwrap();
    let (first, _) = run_collecting(job(&program, &d, "Make a button.", live(&server))).await;
    assert_eq!(first.exit_code, Some(0), "{first:#?}\n{}", stderr_of(&d));
    let session = first.session.clone().expect("a session");
    let (second, seen) = run_collecting(Job {
        resume: Some(&session),
        ..job(&program, &d, "Blue, please.", live(&server))
    })
    .await;
    assert_eq!(second.exit_code, Some(0), "{second:#?}\n{}", stderr_of(&d));
    assert_eq!(second.session.as_deref(), Some(session.as_str()));
    assert!(seen.contains(&Event::Message {
        text: "Blue it is.".into()
    }));
    let received = server.received();
    assert_eq!(received.len(), 2);
    let conversation = received[1].body["messages"].to_string();
    for said in [
        "Make a button.",
        "Which colour should the button be?",
        "Blue, please.",
    ] {
        assert!(
            conversation.contains(said),
            "{said} missing: {conversation}"
        );
    }
}

/// A refused request ends the run within seconds (OpenCode 1.18 does not retry the gateway's
/// 400, but it does retry an unreachable or failing server for over a minute: the runner ends
/// its process group at the refusal), the upstream never sees the refused request, and the
/// background job the model started dies with the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_refusal_ends_opencode_within_seconds() {
    let Some(program) = opencode() else { return };
    let d = dirs();
    let marker = format!("baton-opencode-test-job-{}", std::process::id());
    let background = format!("(exec -a {marker} sleep 600) >/dev/null 2>&1 & echo started");
    let server = ScriptedServer::start(vec![
        Reply::stream_tool_call(
            "call_bg",
            "bash",
            &json!({"command": background, "description": "a background job"}).to_string(),
            11,
        ),
        Reply::stream_text(&["never served"]),
    ])
    .await
    .unwrap();
    let meter = OneRequest::new(Some(&marker));
    let (outcome, _) = run_collecting(Job {
        meter: Some(meter.clone()),
        ..job(&program, &d, "Start the job.", live(&server))
    })
    .await;
    let ended = Instant::now();
    let (refused_at, running) = meter.first_refusal();
    let budget = outcome.budget.clone().expect("stopped by the budget");
    assert_eq!(budget.code, "BUDGET_EXCEEDED", "{outcome:#?}");
    let after = ended - refused_at;
    eprintln!("the run ended {after:?} after the refusal");
    assert!(
        after < Duration::from_secs(5),
        "the run lasted {after:?} after the refusal\n{}",
        stderr_of(&d)
    );
    assert_eq!(server.received().len(), 1, "the refused request went out");
    assert_eq!(server.remaining(), 1);
    // The job the model left running (OpenCode exiting on its own leaves it) died with the run.
    assert_eq!(
        running.len(),
        1,
        "the background job was not running at the refusal"
    );
    assert_eq!(
        marked_processes(&marker),
        Vec::<(u32, u32)>::new(),
        "the background job outlived the run"
    );
}
