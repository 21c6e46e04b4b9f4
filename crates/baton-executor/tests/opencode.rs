//! The real OpenCode CLI against a played, strict chat-completions server on loopback: the
//! scripted model has OpenCode write hello.txt with its own write tool; the file is written, the
//! server saw every request (and nothing else was contacted: no plugin install, no model list),
//! the CLI's JSON events read as baton's events, and a resume continues the same session.
//!
//! Skips (saying so) without the opencode CLI, unless `BATON_REQUIRE_EXECUTORS=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_executor::{Event, ExecutorKind, Invocation, testing};
use baton_llm::testing::{Received, Reply, ScriptedServer};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const MODEL: &str = "played-1.5";
const TOKEN: &str = "baton-run-test-token-0c7a";

/// A loopback listener standing in for every other address: the CLI's proxy for anything but
/// 127.0.0.1, counting the connections it gets (there must be none).
struct Trap {
    port: u16,
    hits: Arc<AtomicUsize>,
}

impl Trap {
    fn start() -> Trap {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = hits.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                counted.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
        Trap { port, hits }
    }
}

struct Run {
    status: std::process::ExitStatus,
    stdout: String,
    stderr: String,
    events: Vec<Event>,
}

/// Launches opencode as the adapter says (empty environment but PATH, HOME, TMPDIR, LANG, a
/// trap proxy and the launch's own; stdin /dev/null; cwd the workdir), with `gateway` as the
/// model's address; waits up to two minutes.
async fn run_opencode(
    program: &Path,
    workdir: &Path,
    home: &Path,
    gateway: &str,
    prompt: &str,
    resume: Option<&str>,
    trap: &Trap,
) -> Run {
    let adapter = ExecutorKind::Opencode.adapter().unwrap();
    let launch = adapter.launch(&Invocation {
        program,
        workdir,
        home,
        gateway,
        token: TOKEN,
        model: MODEL,
        prompt,
        resume,
        extra_args: &[],
    });
    let tmp = home.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    for (relative, content) in &launch.files {
        let path = home.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        if !path.exists() {
            std::fs::write(&path, content).unwrap();
        }
    }
    let proxy = format!("http://127.0.0.1:{}", trap.port);
    let child = tokio::process::Command::new(&launch.program)
        .args(&launch.args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("TMPDIR", &tmp)
        .env("LANG", "C.UTF-8")
        .env("HTTPS_PROXY", &proxy)
        .env("HTTP_PROXY", &proxy)
        .env("ALL_PROXY", &proxy)
        .env("NO_PROXY", "127.0.0.1")
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .current_dir(workdir)
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
    let dir = tempfile::tempdir().unwrap();
    let (workdir, home) = (dir.path().join("work"), dir.path().join("home"));
    std::fs::create_dir_all(&workdir).unwrap();
    let server = ScriptedServer::start(vec![
        write_hello("hello from opencode\n"),
        Reply::stream_text(&["Done: ", "hello.txt is written."]),
    ])
    .await
    .unwrap();
    let trap = Trap::start();
    let started = Instant::now();
    let run = run_opencode(
        &program,
        &workdir,
        &home,
        &origin(&server),
        "Create hello.txt saying hello.",
        None,
        &trap,
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
        std::fs::read_to_string(workdir.join("hello.txt")).unwrap(),
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
    assert_eq!(
        trap.hits.load(Ordering::SeqCst),
        0,
        "OpenCode contacted another address"
    );
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
    let dir = tempfile::tempdir().unwrap();
    let (workdir, home) = (dir.path().join("work"), dir.path().join("home"));
    std::fs::create_dir_all(&workdir).unwrap();
    let server = ScriptedServer::start(vec![
        Reply::stream_text(&["Which greeting do you want?"]),
        Reply::stream_text(&["Using hola."]),
    ])
    .await
    .unwrap();
    let trap = Trap::start();
    let first = run_opencode(
        &program,
        &workdir,
        &home,
        &origin(&server),
        "Greet.",
        None,
        &trap,
    )
    .await;
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
        &workdir,
        &home,
        &origin(&second_server),
        "hola",
        Some(&id),
        &trap,
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
    assert_eq!(trap.hits.load(Ordering::SeqCst), 0);
}

/// An event in a word or two, for comparing transcripts whose ids and paths vary.
fn shape(e: &Event) -> String {
    match e {
        Event::Session { .. } => "session".into(),
        Event::Message { text } => format!("message {text}"),
        Event::ToolCall { name, .. } => format!("call {name}"),
        Event::ToolResult { is_error, .. } => {
            format!("result {}", if *is_error { "error" } else { "ok" })
        }
        Event::Question { text } => format!("question {text}"),
        Event::Result { is_error, .. } => {
            format!("end {}", if *is_error { "error" } else { "ok" })
        }
    }
}
