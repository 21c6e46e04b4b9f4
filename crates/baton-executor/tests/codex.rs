//! The real Codex CLI against a played OpenAI Responses API on loopback: the scripted model has
//! Codex run `env` with its shell tool and write hello.txt with its own apply_patch tool; the
//! file is written, the server saw every request (and nothing else was contacted), the CLI's
//! JSONL reads as baton's events, a resume continues the same session, and a refused request
//! ends the run as a failed result.
//!
//! Skips (saying so) without the codex CLI, unless `BATON_REQUIRE_EXECUTORS=1`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::support;

use baton_executor::{Event, ExecutorKind, Job, Mode, testing};
use baton_llm::testing::responses::{
    self, ResponsesServer, add_file_patch, apply_patch, exec_command, text,
};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;
use support::{Cli, Direct, Dirs, OneRequest, Run, dirs, run_collecting, shape, stderr_of};

/// A model Codex knows, so it offers its freeform apply_patch tool.
const MODEL: &str = "gpt-5.5";
const TOKEN: &str = "baton-run-test-token-5f1e";

/// Launches codex as the adapter says (empty environment but PATH, HOME, TMPDIR, LANG and the
/// launch's own, stdin /dev/null), with `gateway` as the model's address; waits up to two
/// minutes.
fn run_codex(
    program: &Path,
    direct: &Direct,
    gateway: &str,
    prompt: &str,
    resume: Option<&str>,
) -> Run {
    let cli = Cli {
        kind: ExecutorKind::Codex,
        program,
        token: TOKEN,
        model: MODEL,
    };
    let (launch, env) = direct.prepare(&cli, gateway, prompt, resume);
    let mut child = Command::new(&launch.program)
        .args(&launch.args)
        .env_clear()
        .envs(env)
        .current_dir(&direct.workdir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).ok();
        s
    });
    let pid = child.id();
    let (done, waited) = mpsc::channel();
    std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).ok();
        let status = child.wait();
        done.send((s, status)).ok();
    });
    let Ok((stdout, status)) = waited.recv_timeout(Duration::from_secs(120)) else {
        Command::new("kill")
            .arg("-9")
            .arg(pid.to_string())
            .status()
            .ok();
        panic!("codex did not finish in two minutes");
    };
    let stderr = stderr.join().unwrap();
    let adapter = ExecutorKind::Codex.adapter().unwrap();
    let events = stdout.lines().flat_map(|l| adapter.parse_line(l)).collect();
    Run {
        status: status.unwrap(),
        stdout,
        stderr,
        events,
    }
}

/// `http://127.0.0.1:<port>` of a played server (its base URL without `/v1`).
fn origin(server: &ResponsesServer) -> String {
    server.base_url().trim_end_matches("/v1").to_string()
}

fn codex() -> Option<PathBuf> {
    testing::require_or_skip(ExecutorKind::Codex)
}

/// The one-file task: the model has Codex print its environment with its shell tool, write
/// hello.txt with its apply_patch tool, then stop.
fn hello_answers() -> Vec<serde_json::Value> {
    vec![
        responses::answer(vec![
            responses::message("Checking the environment first."),
            exec_command("call_env", "env"),
        ]),
        responses::answer(vec![apply_patch(
            "call_hello",
            &add_file_patch("hello.txt", "hello from codex"),
        )]),
        text("Done: hello.txt is written."),
    ]
}

/// [`hello_answers`] as the transcript reads it.
const HELLO_SHAPES: [&str; 8] = [
    "session",
    "message Checking the environment first.",
    "call shell",
    "result ok",
    "call apply_patch",
    "result ok",
    "message Done: hello.txt is written.",
    "end ok",
];

#[test]
fn codex_writes_a_file_with_its_own_tool_against_the_played_responses_api() {
    let Some(program) = codex() else { return };
    let direct = Direct::new();
    let server = ResponsesServer::start_with_key(hello_answers(), TOKEN).unwrap();
    let run = run_codex(
        &program,
        &direct,
        &origin(&server),
        "Create hello.txt saying hello.",
        None,
    );
    assert!(
        run.status.success(),
        "{}\n{}\n{}",
        run.status,
        run.stdout,
        run.stderr
    );

    // The file, written by Codex's own apply_patch tool.
    assert_eq!(
        std::fs::read_to_string(direct.workdir.join("hello.txt")).unwrap(),
        "hello from codex\n"
    );

    // The server saw each request, each with the run's token, and nothing else was asked.
    let exchanges = server.exchanges();
    assert_eq!(exchanges.len(), 3, "{:?}", paths(&exchanges));
    for e in &exchanges {
        assert_eq!(
            (e.method.as_str(), e.path.as_str(), e.status),
            ("POST", "/v1/responses", 200)
        );
        assert_eq!(
            e.header("authorization"),
            Some(format!("Bearer {TOKEN}").as_str())
        );
        assert_eq!(e.body["model"], MODEL);
        assert_eq!(e.body["stream"], true);
    }
    assert_eq!(server.remaining(), 0);
    assert_eq!(direct.trapped(), 0, "Codex contacted another address");

    // Codex was offered the tools the script uses, and no hosted web search.
    let tools: Vec<String> = exchanges[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            t["name"]
                .as_str()
                .or(t["type"].as_str())
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert!(tools.contains(&"exec_command".into()) && tools.contains(&"apply_patch".into()));
    assert!(!tools.contains(&"web_search".into()), "{tools:?}");

    // What `env` printed came back to the model: the tools' environment holds no token.
    let env = exchanges[1].tool_output("call_env").unwrap();
    assert!(env.contains("HOME="), "{env}");
    assert!(
        !env.contains(TOKEN) && !env.contains("BATON_GATEWAY_TOKEN"),
        "{env}"
    );
    let patched = exchanges[2].tool_output("call_hello").unwrap();
    assert!(patched.contains("hello.txt"), "{patched}");

    // The transcript as baton records it.
    let Event::Session { id } = &run.events[0] else {
        panic!("{:?}", run.events)
    };
    assert!(!id.is_empty());
    let shapes: Vec<String> = run.events.iter().map(shape).collect();
    assert_eq!(shapes, HELLO_SHAPES, "{}", run.stdout);
    let written = direct.workdir.join("hello.txt");
    assert!(run.events.iter().any(|e| matches!(e,
        Event::ToolResult { output, .. } if output == &format!("add {}", written.display()))));
}

#[test]
fn a_resume_continues_the_same_codex_session() {
    let Some(program) = codex() else { return };
    let direct = Direct::new();
    let server = ResponsesServer::start(vec![
        text("Which greeting do you want?"),
        text("Using hola."),
    ])
    .unwrap();
    let first = run_codex(&program, &direct, &origin(&server), "Greet.", None);
    assert!(first.status.success(), "{}", first.stderr);
    let Event::Session { id } = first.events[0].clone() else {
        panic!("{:?}", first.events)
    };
    let second = run_codex(&program, &direct, &origin(&server), "hola", Some(&id));
    assert!(second.status.success(), "{}", second.stderr);
    assert_eq!(second.events[0], Event::Session { id: id.clone() });
    assert!(second.events.contains(&Event::Message {
        text: "Using hola.".into()
    }));
    // The answer went to the model with the conversation so far.
    let exchanges = server.exchanges();
    assert_eq!(exchanges.len(), 2);
    let input = exchanges[1].body["input"].to_string();
    assert!(
        input.contains("Which greeting do you want?") && input.contains("hola"),
        "{input}"
    );
    assert_eq!(direct.trapped(), 0);
}

#[test]
fn a_refused_request_ends_codex_with_a_failed_result() {
    let Some(program) = codex() else { return };
    let direct = Direct::new();
    let server = ResponsesServer::start(vec![responses::refusal(
        400,
        "invalid_request_error",
        Some("budget_exceeded"),
        "The run's budget is spent.",
    )])
    .unwrap();
    let run = run_codex(&program, &direct, &origin(&server), "Work.", None);
    assert!(!run.status.success());
    // Not retried: one request, then the end.
    assert_eq!(server.exchanges().len(), 1);
    let Some(Event::Result { text, is_error }) = run.events.last() else {
        panic!("{:?}", run.events)
    };
    assert!(is_error);
    assert!(text.contains("The run's budget is spent."), "{text}");
}

fn paths(exchanges: &[responses::Exchange]) -> Vec<String> {
    exchanges
        .iter()
        .map(|e| format!("{} {} {}", e.method, e.path, e.status))
        .collect()
}

// ---- Through baton's runner and gateway ----

const KEY: &str = "sk-operator-key-0123456789abcdef";

fn job<'a>(program: &'a Path, d: &'a Dirs, prompt: &'a str, mode: Mode) -> Job<'a> {
    support::job(ExecutorKind::Codex, MODEL, program, d, prompt, mode)
}

fn live(upstream: &ResponsesServer) -> Mode {
    support::live(upstream.base_url(), KEY)
}

/// The one-file task through the gateway: the upstream (which accepts only the operator's key)
/// saw every request with that key and never the run's token; `env` run by the CLI's shell tool
/// shows no real key (nor the token); the transcript holds the calls. Then the record replays
/// with the upstream gone and a fresh project gets the same file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_gateway_codex_holds_no_real_key_and_its_run_replays() {
    let Some(program) = codex() else { return };
    let d = dirs();
    let upstream = ResponsesServer::start_with_key(hello_answers(), KEY).unwrap();
    let prompt = "Create hello.txt saying hello.";
    let (outcome, seen) = run_collecting(job(&program, &d, prompt, live(&upstream))).await;
    assert_eq!(
        outcome.exit_code,
        Some(0),
        "{outcome:#?}\n{}",
        stderr_of(&d)
    );
    assert_eq!(
        std::fs::read_to_string(d.workdir.join("hello.txt")).unwrap(),
        "hello from codex\n"
    );
    assert!(outcome.session.is_some());
    assert_eq!(outcome.budget, None);
    support::assert_confined_where_possible(&outcome);

    let exchanges = upstream.exchanges();
    assert_eq!(exchanges.len(), 3, "{:?}", paths(&exchanges));
    assert_eq!(outcome.exchanges, 3);
    for e in &exchanges {
        assert_eq!((e.path.as_str(), e.status), ("/v1/responses", 200));
        assert_eq!(
            e.header("authorization"),
            Some(format!("Bearer {KEY}").as_str())
        );
        assert!(
            !e.headers.iter().any(|(_, v)| v.contains("baton-run-")),
            "the run's token reached the upstream: {:?}",
            e.headers
        );
    }
    let env = exchanges[1].tool_output("call_env").unwrap();
    assert!(env.contains("HOME="), "{env}");
    assert!(!env.contains(KEY), "the real key reached the CLI: {env}");
    assert!(
        !env.contains("baton-run-"),
        "the token is in the tools' environment: {env}"
    );
    let shapes: Vec<String> = seen.iter().map(shape).collect();
    assert_eq!(shapes, HELLO_SHAPES);

    // Replay: a fresh project, the upstream gone, the same file from the record.
    drop(upstream);
    let again = dirs();
    let replay = job(&program, &again, prompt, support::replay_of(&d));
    support::assert_replays(replay, &again, 3).await;
    assert_eq!(
        std::fs::read_to_string(again.workdir.join("hello.txt")).unwrap(),
        "hello from codex\n"
    );
}

/// The budget refuses the second request: the upstream never sees it and the run ends with
/// the refusal, the file of the answered request written, not the refused one's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_refusal_ends_the_codex_run() {
    let Some(program) = codex() else { return };
    let d = dirs();
    let upstream = ResponsesServer::start_with_key(
        vec![
            responses::answer(vec![exec_command("call_1", "printf one > one.txt")]),
            responses::answer(vec![exec_command("call_2", "printf two > two.txt")]),
            text("never served"),
        ],
        KEY,
    )
    .unwrap();
    let (outcome, _) = run_collecting(Job {
        meter: Some(OneRequest::new(None)),
        ..job(&program, &d, "Write files.", live(&upstream))
    })
    .await;
    let budget = outcome
        .budget
        .clone()
        .unwrap_or_else(|| panic!("not stopped by the budget: {outcome:#?}\n{}", stderr_of(&d)));
    assert_eq!(budget.code, "BUDGET_EXCEEDED");
    assert_eq!(
        upstream.exchanges().len(),
        1,
        "the refused request went out"
    );
    assert_eq!(upstream.remaining(), 2);
    assert!(d.workdir.join("one.txt").exists());
    assert!(!d.workdir.join("two.txt").exists());
}
