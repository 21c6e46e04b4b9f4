//! The real Claude Code CLI run by baton's runner: through the per-run gateway (the only key it
//! holds is the run's token), against a strict played Anthropic Messages API that holds the
//! operator's key. Skipped, saying so, when the CLI is missing (fails when
//! `BATON_REQUIRE_EXECUTORS=1`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::support;

use baton_executor::testing::require_or_skip;
use baton_executor::{Event, ExecutorKind, Job, Mode, SandboxPaths, group, run};
use baton_llm::testing::anthropic::{AnthropicServer, Exchange, message};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use support::{
    Dirs, OneRequest, assert_confined_where_possible, dirs, marked_processes, run_collecting,
    stderr_of, tool_output, transcript,
};

const KEY: &str = "sk-ant-operator-key-0123456789";
const MODEL: &str = "claude-sonnet-4-5";

fn call(id: &str, name: &str, input: Value) -> Value {
    message(None, "", &[(id.to_string(), name.to_string(), input)])
}

fn say(text: &str) -> Value {
    message(None, text, &[])
}

/// The played API.
struct Upstream {
    server: AnthropicServer,
}

impl Upstream {
    fn start(answers: Vec<Value>) -> Upstream {
        Upstream {
            server: AnthropicServer::start(answers).unwrap(),
        }
    }

    /// As the vendor writes it (no `/v1`).
    fn url(&self) -> String {
        self.server.base_url().trim_end_matches("/v1").to_string()
    }

    fn exchanges(&self) -> Vec<Exchange> {
        self.server.exchanges()
    }
}

fn job<'a>(program: &'a Path, d: &'a Dirs, prompt: &'a str, mode: Mode) -> Job<'a> {
    support::job(ExecutorKind::ClaudeCode, MODEL, program, d, prompt, mode)
}

fn live(upstream: &Upstream) -> Mode {
    support::live(upstream.url(), KEY)
}

/// The one-file task: the model has the CLI print its environment and write `hello.txt`. The
/// file is written; every request reached the upstream with the operator's key and none with
/// the token; the CLI's environment held the token only; the transcript holds its tool calls.
/// Then the record replays with the upstream gone: the same file is written again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_file_task_goes_through_the_gateway_with_the_token_only_and_replays() {
    let Some(cli) = require_or_skip(ExecutorKind::ClaudeCode) else {
        return;
    };
    let d = dirs();
    let target = d.workdir.join("hello.txt");
    let answers = vec![
        call(
            "toolu_env",
            "Bash",
            json!({"command": "env", "description": "environment"}),
        ),
        call(
            "toolu_write",
            "Write",
            json!({"file_path": target, "content": "hello from claude\n"}),
        ),
        say("Created hello.txt."),
    ];
    let upstream = Upstream::start(answers);
    let (outcome, seen) = run_collecting(job(
        &cli,
        &d,
        "Create hello.txt saying hello.",
        live(&upstream),
    ))
    .await;
    let stderr = stderr_of(&d);
    assert_eq!(outcome.exit_code, Some(0), "{outcome:#?}\n{stderr}");
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "hello from claude\n"
    );
    assert_eq!(
        outcome.result,
        Some(Event::Result {
            text: "Created hello.txt.".into(),
            is_error: false
        })
    );
    assert!(outcome.session.is_some());
    assert_eq!(outcome.question, None);
    assert_eq!(outcome.budget, None);
    assert_confined_where_possible(&outcome);

    let exchanges = upstream.exchanges();
    assert_eq!(exchanges.len(), 3, "{exchanges:#?}");
    assert_eq!(outcome.exchanges, 3);
    let env = tool_output(&seen, "toolu_env");
    let token = env
        .lines()
        .find_map(|l| l.strip_prefix("ANTHROPIC_API_KEY="))
        .expect("the CLI holds a key")
        .to_string();
    assert!(token.starts_with("baton-run-"), "{token}");
    assert!(!env.contains(KEY), "the real key reached the CLI: {env}");
    for e in &exchanges {
        assert_eq!(e.status, 200, "{e:#?}");
        assert_eq!(e.header("x-api-key"), Some(KEY), "{:?}", e.headers);
        assert!(
            !e.headers.iter().any(|(_, v)| v.contains(&token)),
            "the token reached the upstream: {:?}",
            e.headers
        );
    }
    assert_eq!(transcript(&d.run_dir), seen);
    assert!(seen.contains(&Event::ToolCall {
        id: "toolu_write".into(),
        name: "Write".into(),
        input: json!({"file_path": target, "content": "hello from claude\n"}),
    }));

    // Replay: a fresh project, the upstream gone, the same file from the record.
    drop(upstream);
    let again = dirs();
    let replay = job(
        &cli,
        &again,
        "Create hello.txt saying hello.",
        support::replay_of(&d),
    );
    support::assert_replays(replay, &again, 3).await;
    // The record names the first project's path: the replayed Write writes there again.
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "hello from claude\n"
    );
}

/// Names the CLI's background job in the process table.
const MARKER: &str = "baton-executor-test-background-job";

/// The budget refuses the second request: the upstream never sees it, the run ends with the
/// refusal, and nothing of the CLI's process group is left (its background job included).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_refusal_ends_the_cli_and_its_whole_process_group() {
    let Some(cli) = require_or_skip(ExecutorKind::ClaudeCode) else {
        return;
    };
    let d = dirs();
    let answers = vec![
        call(
            "toolu_bg",
            "Bash",
            json!({"command": format!(
                "(exec -a {MARKER} tail -f /dev/null) >/dev/null 2>&1 & cut -d' ' -f5 /proc/self/stat"),
                "description": "background"}),
        ),
        say("never served"),
    ];
    let upstream = Upstream::start(answers);
    let meter = OneRequest::new(Some(MARKER));
    let (outcome, seen) = run_collecting(Job {
        meter: Some(meter.clone()),
        ..job(&cli, &d, "Start the job.", live(&upstream))
    })
    .await;
    let budget = outcome.budget.clone().expect("stopped by the budget");
    assert_eq!(budget.code, "BUDGET_EXCEEDED", "{outcome:#?}");
    assert_eq!(
        upstream.exchanges().len(),
        1,
        "the refused request went out"
    );
    assert_eq!(upstream.server.remaining(), 1);
    let out = tool_output(&seen, "toolu_bg");
    let pgid: u32 = out.trim().parse().unwrap_or_else(|_| panic!("{out:?}"));
    let (_, running) = meter.first_refusal();
    assert_eq!(
        running,
        [(running.first().map_or(0, |r| r.0), pgid)],
        "the background job was not running in the CLI's group at the refusal"
    );
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", running[0].0)).unwrap_or_default();
    assert!(
        stat.is_empty() || stat.rsplit_once(')').unwrap().1.split_whitespace().next() == Some("Z"),
        "the background job outlived the run: {stat}"
    );
    assert_eq!(
        group::members(pgid),
        Vec::<u32>::new(),
        "the CLI's group outlived the run"
    );
}

/// A final answer that asks becomes the run's question; answering it resumes the CLI's own
/// session (the upstream sees the earlier conversation) in the same run folder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_is_surfaced_and_the_answer_resumes_the_session() {
    let Some(cli) = require_or_skip(ExecutorKind::ClaudeCode) else {
        return;
    };
    let d = dirs();
    let upstream = Upstream::start(vec![
        say("Which colour should the button be?"),
        say("Blue it is."),
    ]);
    let (first, _) = run_collecting(job(&cli, &d, "Make a button.", live(&upstream))).await;
    assert_eq!(first.exit_code, Some(0), "{first:#?}\n{}", stderr_of(&d));
    assert_eq!(
        first.question.as_deref(),
        Some("Which colour should the button be?")
    );
    let session = first.session.clone().expect("a session");
    let (second, _) = run_collecting(Job {
        resume: Some(&session),
        ..job(&cli, &d, "Blue, please.", live(&upstream))
    })
    .await;
    assert_eq!(second.exit_code, Some(0), "{second:#?}\n{}", stderr_of(&d));
    assert_eq!(second.session.as_deref(), Some(session.as_str()));
    assert_eq!(second.question, None);
    let exchanges = upstream.exchanges();
    assert_eq!(exchanges.len(), 2);
    let conversation = exchanges[1].body["messages"].to_string();
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
    // Both launches appended to the one transcript.
    let sessions = transcript(&d.run_dir)
        .iter()
        .filter(|e| matches!(e, Event::Session { .. }))
        .count();
    assert_eq!(sessions, 2);
}

const CHILD_RUN_DIR: &str = "BATON_EXECUTOR_TEST_CHILD_RUN_DIR";
const LEFTOVER: &str = "baton-executor-test-leftover-job";

/// Not a test by itself: the baton process [`a_sigkill_of_baton_leaves_no_cli_and_the_next_run_ends_its_leftovers`]
/// kills. It runs the CLI, which starts a background job, says so on stdout, and then waits
/// on a model that has no answer left (Claude Code retries for minutes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by a_sigkill_of_baton_leaves_no_cli_and_the_next_run_ends_its_leftovers"]
async fn child_runs_a_cli_until_killed() {
    let (Some(run_dir), Some(cli)) = (
        std::env::var_os(CHILD_RUN_DIR),
        require_or_skip(ExecutorKind::ClaudeCode),
    ) else {
        return;
    };
    let run_dir = PathBuf::from(run_dir);
    let d = Dirs {
        _root: tempfile::tempdir().unwrap(),
        workdir: run_dir.parent().unwrap().join("project"),
        run_dir,
    };
    let upstream = Upstream::start(vec![call(
        "toolu_bg",
        "Bash",
        json!({"command": format!("(exec -a {LEFTOVER} tail -f /dev/null) >/dev/null 2>&1 & echo started"),
            "description": "background"}),
    )]);
    let mut on_event = |e: &Event| {
        if matches!(e, Event::ToolResult { id, .. } if id == "toolu_bg") {
            println!("background job started");
        }
    };
    let _ = run(
        job(&cli, &d, "Start the job.", live(&upstream)),
        &mut on_event,
    )
    .await;
}

/// baton killed by SIGKILL mid-run (no guard runs): the CLI dies with it (its parent-death
/// signal); what it started and left running is ended by the next run in the same folder,
/// before that run's CLI starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_of_baton_leaves_no_cli_and_the_next_run_ends_its_leftovers() {
    use std::io::BufRead;
    let Some(cli) = require_or_skip(ExecutorKind::ClaudeCode) else {
        return;
    };
    let d = dirs();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            // The harness names a test by its module path past the crate's name.
            concat!(module_path!(), "::child_runs_a_cli_until_killed")
                .split_once("::")
                .map_or("", |(_, name)| name),
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_RUN_DIR, &d.run_dir)
        .env("BATON_EXECUTOR_PATH", cli.parent().unwrap())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let started = stdout
        .lines()
        .map_while(Result::ok)
        .any(|l| l.contains("background job started"));
    assert!(started, "the child never started its background job");
    let marked: Vec<(u32, u32)> = marked_processes(LEFTOVER)
        .into_iter()
        .filter(|&(pid, _)| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                String::from_utf8_lossy(&env)
                    .contains(&format!("HOME={}", d.run_dir.join("home").display()))
            })
        })
        .collect();
    assert_eq!(marked.len(), 1, "{marked:?}");
    let (job_pid, cli_pid) = marked[0];
    let cli_end = pidfd(cli_pid);
    child.kill().unwrap();
    child.wait().unwrap();
    // The kernel sends the parent-death signal as baton ends: wait for the CLI's end.
    assert!(ends_within(&cli_end, 30_000), "the CLI outlived baton");
    assert!(
        alive(job_pid),
        "the background job should have outlived the CLI"
    );

    let upstream = Upstream::start(vec![say("Done.")]);
    let (outcome, _) = run_collecting(job(&cli, &d, "Finish.", live(&upstream))).await;
    assert_eq!(
        outcome.exit_code,
        Some(0),
        "{outcome:#?}\n{}",
        stderr_of(&d)
    );
    assert!(outcome.leftovers_killed >= 1, "{outcome:#?}");
    assert!(
        !alive(job_pid),
        "the leftover background job is still running"
    );
}

/// A descriptor that becomes readable when process `pid` ends.
fn pidfd(pid: u32) -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open has no memory arguments; the descriptor is owned from here.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    assert!(fd >= 0, "pidfd_open: {}", std::io::Error::last_os_error());
    unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) }
}

fn ends_within(pidfd: &std::os::fd::OwnedFd, millis: i32) -> bool {
    use std::os::fd::AsRawFd;
    let mut poll = libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd, alive for the call.
    unsafe { libc::poll(&mut poll, 1, millis) == 1 }
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit_once(')').unwrap().1.split_whitespace().next() != Some("Z"))
}

/// From inside the CLI's own shell tool: no write outside the project and the home, no read
/// of a denied path, no address but the gateway (not the host's loopback, not the internet),
/// and no rewrite of the run's transcript or record even when the run folder lies in the
/// project.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_is_confined_to_its_project_and_the_gateway() {
    let Some(cli) = require_or_skip(ExecutorKind::ClaudeCode) else {
        return;
    };
    if let Err(e) = baton_sandbox::PrivateNetwork::new() {
        eprintln!("skipped: no private network here ({e})");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    let (outside, secret) = (root_path.join("outside"), root_path.join("secret"));
    for dir in [&outside, &secret] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(secret.join("key.txt"), "TOP-SECRET-VALUE").unwrap();
    let workdir = root_path.join("project");
    let d = Dirs {
        run_dir: workdir.join(".run"),
        workdir,
        _root: root,
    };
    std::fs::create_dir_all(&d.workdir).unwrap();
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    host.set_nonblocking(true).unwrap();
    let port = host.local_addr().unwrap().port();
    let run = d.run_dir.display();
    let command = format!(
        "echo escaped > {out}/escape.txt; cat {secret}/key.txt; \
         (echo x > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo host-reached; \
         (echo x > /dev/tcp/1.1.1.1/80) 2>/dev/null && echo internet-reached; \
         echo forged >> {run}/transcript.jsonl; echo forged >> {run}/exchanges.jsonl; \
         echo inside > {project}/inside.txt; echo end",
        out = outside.display(),
        secret = secret.display(),
        project = d.workdir.display(),
    );
    let upstream = Upstream::start(vec![
        call(
            "toolu_try",
            "Bash",
            json!({"command": command, "description": "try"}),
        ),
        say("Done."),
    ]);
    let mut confined = job(&cli, &d, "Try.", live(&upstream));
    confined.sandbox = SandboxPaths {
        read_denied: vec![secret.clone()],
        allow_unconfined: false,
        ..SandboxPaths::default()
    };
    let (outcome, seen) = run_collecting(confined).await;
    assert_eq!(
        outcome.exit_code,
        Some(0),
        "{outcome:#?}\n{}",
        stderr_of(&d)
    );
    let out = tool_output(&seen, "toolu_try");
    assert!(out.contains("end"), "{out}");
    assert!(!out.contains("TOP-SECRET"), "a denied file was read: {out}");
    assert!(!out.contains("host-reached"), "{out}");
    assert!(!out.contains("internet-reached"), "{out}");
    assert!(host.accept().is_err(), "the host's loopback was reached");
    assert!(
        !outside.join("escape.txt").exists(),
        "wrote outside the project"
    );
    assert_eq!(
        std::fs::read_to_string(d.workdir.join("inside.txt")).unwrap(),
        "inside\n"
    );
    assert_eq!(transcript(&d.run_dir), seen, "the transcript was rewritten");
    let record = std::fs::read_to_string(d.run_dir.join("exchanges.jsonl")).unwrap();
    assert!(
        record
            .lines()
            .all(|l| serde_json::from_str::<Value>(l).is_ok()),
        "the record was rewritten: {record}"
    );
}
