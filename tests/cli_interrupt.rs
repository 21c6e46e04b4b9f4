//! Ctrl-C in the demos says what happened and how to go on, with the exact command, and that
//! command finishes the demo offline with its recorded model; a second Ctrl-C names the real
//! run; a session stopped this way is shown as interrupted, not as running.
//!
//! Every signal is sent once the process has said something (a line on stderr), never after
//! a fixed sleep.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;

use common::{Baton, Tmux, example, tmux_missing, trace_until_question};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

/// A `baton` process whose stderr is read line by line as it comes.
struct Watched {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Watched {
    fn start(baton: &Baton, cwd: &Path, args: &[&str]) -> Watched {
        let mut child = Command::new(env!("CARGO_BIN_EXE_baton"))
            .args(args)
            .current_dir(cwd)
            .env("BATON_HOME", baton.home.path())
            .env_remove("OPENAI_API_KEY")
            .env_remove("BATON_MODEL")
            .env_remove("OPENAI_BASE_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Watched {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits (60 s at most) for a stderr line matching `what`.
    fn wait_for(&mut self, what: &str, mut matches: impl FnMut(&str) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let hit = matches(&line);
                    self.seen.push(line);
                    if hit {
                        return;
                    }
                }
                Err(_) => panic!("no line {what}; stderr so far:\n{}", self.seen.join("\n")),
            }
        }
    }

    fn interrupt(&self) {
        let sent = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    }

    /// Waits for the end: (exit code, all of stderr).
    fn finish(mut self) -> (i32, String) {
        let status = self.child.wait().unwrap();
        self.seen.extend(self.lines.iter());
        (status.code().unwrap_or(-1), self.seen.join("\n"))
    }
}

/// The command in the last "continue with `…`" of `stderr`, as words.
fn continuation(stderr: &str) -> Vec<String> {
    let at = stderr
        .rfind("continue with `")
        .unwrap_or_else(|| panic!("no continuation in:\n{stderr}"));
    let rest = &stderr[at + "continue with `".len()..];
    let command = &rest[..rest.find('`').unwrap()];
    words(command)
}

/// Splits a command as a shell would (spaces, single quotes).
fn words(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in command.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any {
                    out.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            c => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(word);
    }
    out
}

/// Runs a printed `baton …` continuation in `cwd`.
fn run_continuation(baton: &Baton, cwd: &Path, command: &[String]) -> common::Run {
    assert_eq!(command[0], "baton", "{command:?}");
    let args: Vec<&str> = command[1..].iter().map(String::as_str).collect();
    baton.run_in(cwd, &args)
}

#[test]
fn ctrl_c_in_the_demo_names_the_run_and_resume_finishes_it_offline() {
    let baton = Baton::new();
    let cwd = tempfile::tempdir().unwrap();
    let mut demo = Watched::start(&baton, cwd.path(), &["demo"]);
    // Said once Ctrl-C is watched; the run has all its steps ahead.
    demo.wait_for("the demo's banner", |l| l.starts_with("baton demo:"));
    demo.interrupt();
    let (code, stderr) = demo.finish();
    assert_eq!(code, 130, "{stderr}");
    assert!(!stderr.contains("<RUN>"), "{stderr}");
    let command = continuation(&stderr);
    let runs = baton.run(&["runs", "list", "--json"]).json();
    let id = runs[0]["runId"].as_str().unwrap().to_string();
    assert_eq!(command[..2], ["baton", "resume"], "{stderr}");
    assert!(id.starts_with(&command[2]), "{command:?} names run {id}");
    assert_eq!(runs[0]["phase"], "idle", "{runs}");

    // No key, no model: the run goes on with the demo's recorded model.
    let resumed = run_continuation(&baton, cwd.path(), &command);
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    let shown = baton.run(&["runs", "show", &id, "--json"]).json();
    assert_eq!(shown["run"]["phase"], "completed", "{shown}");
    assert!(
        cwd.path()
            .join("baton-demo/artifacts/stories/1-2-user-authentication.md")
            .is_file()
    );
}

#[test]
fn a_second_ctrl_c_names_the_real_run() {
    let baton = Baton::new();
    let cwd = tempfile::tempdir().unwrap();
    let mut demo = Watched::start(&baton, cwd.path(), &["demo"]);
    demo.wait_for("the demo's banner", |l| l.starts_with("baton demo:"));
    demo.interrupt();
    demo.wait_for("the first signal's answer", |l| {
        l.starts_with("stopping after the current step")
    });
    // The process may end before the second signal lands; either way it names the run.
    demo.interrupt();
    let (code, stderr) = demo.finish();
    assert_eq!(code, 130, "{stderr}");
    assert!(!stderr.contains("<RUN>"), "{stderr}");
    let id = baton.run(&["runs", "list", "--json"]).json()[0]["runId"]
        .as_str()
        .unwrap()
        .to_string();
    let command = continuation(&stderr);
    assert_eq!(command[..2], ["baton", "resume"], "{stderr}");
    assert!(id.starts_with(&command[2]), "{stderr}");
}

#[test]
fn ctrl_c_in_the_epic_demo_and_the_printed_command_finishes_the_epic_offline() {
    let baton = Baton::new();
    let cwd = tempfile::tempdir().unwrap();
    let mut demo = Watched::start(&baton, cwd.path(), &["demo", "epic"]);
    demo.wait_for("the first phase run", |l| l.contains("create-story · run"));
    demo.interrupt();
    let (code, stderr) = demo.finish();
    assert_eq!(code, 130, "{stderr}");
    let command = continuation(&stderr);
    assert_eq!(
        command[..5],
        ["baton", "epic", "resume", "--project", "baton-demo-epic"],
        "{stderr}"
    );
    assert_eq!(command[5], "--replay", "{stderr}");

    // `baton epic resume` stopped in turn names the same command (project and traces).
    let args: Vec<&str> = command[1..].iter().map(String::as_str).collect();
    let mut resumed = Watched::start(&baton, cwd.path(), &args);
    resumed.wait_for("a phase run", |l| l.contains(" · run "));
    resumed.interrupt();
    let (code, stderr) = resumed.finish();
    assert_eq!(code, 130, "{stderr}");
    assert_eq!(continuation(&stderr), command, "{stderr}");

    let done = run_continuation(&baton, cwd.path(), &command);
    assert_eq!(done.code, 0, "{}{}", done.stdout, done.stderr);
    assert!(done.stdout.contains("epic-2 is done"), "{}", done.stdout);
    let board = baton
        .run_in(
            cwd.path(),
            &["epic", "status", "--project", "baton-demo-epic", "--json"],
        )
        .json();
    assert_eq!(board["epics"][0]["status"], "done", "{board}");
}

fn session_status(baton: &Baton, cwd: &Path, json: bool) -> common::Run {
    let mut args = vec!["session", "status", "--project", "baton-demo-session"];
    if json {
        args.push("--json");
    }
    baton.run_in(cwd, &args)
}

#[test]
fn ctrl_c_in_the_session_demo_shows_interrupted_and_the_printed_command_finishes_it() {
    let baton = Baton::new();
    let cwd = tempfile::tempdir().unwrap();
    let mut demo = Watched::start(&baton, cwd.path(), &["demo", "session"]);
    // The first step is recorded: the session is under way, a step ahead is claimed next.
    demo.wait_for("the first step's line", |l| l.starts_with("  [0/"));
    demo.interrupt();
    let (code, stderr) = demo.finish();
    assert_eq!(code, 130, "{stderr}");
    let command = continuation(&stderr);
    assert_eq!(
        command[..5],
        [
            "baton",
            "session",
            "continue",
            "--project",
            "baton-demo-session"
        ],
        "{stderr}"
    );

    // Nobody drives it: the board says so, and how to go on.
    let status = session_status(&baton, cwd.path(), false);
    assert_eq!(status.code, 0, "{}", status.stderr);
    let board = status.stdout;
    assert!(board.contains("Status:   interrupted"), "{board}");
    assert!(!board.contains("(running, claimed"), "{board}");
    assert!(
        !board.lines().any(|l| l.starts_with("Status:   running")),
        "{board}"
    );
    assert!(
        board.contains(
            "continue with `baton session continue --project baton-demo-session --replay "
        ),
        "{board}"
    );
    let v: Value = session_status(&baton, cwd.path(), true).json();
    assert_eq!(v["interrupted"], true, "{v}");
    assert_eq!(v["driver"], Value::Null, "{v}");
    assert_eq!(
        v["continue_with"].as_str().map(words),
        Some(command.clone())
    );

    // `baton session continue` stopped in turn names how to go on with this session.
    let args: Vec<&str> = command[1..].iter().map(String::as_str).collect();
    let mut resumed = Watched::start(&baton, cwd.path(), &args);
    resumed.wait_for("a step's line", |l| l.starts_with('['));
    resumed.interrupt();
    let (code, stderr) = resumed.finish();
    assert_eq!(code, 130, "{stderr}");
    let again = continuation(&stderr);
    let id = v["session_id"].as_str().unwrap();
    assert_eq!(again[..3], ["baton", "session", "continue"], "{stderr}");
    assert!(
        again.windows(2).any(|w| w == ["--session", id]),
        "{again:?}"
    );
    let project = cwd
        .path()
        .join("baton-demo-session")
        .canonicalize()
        .unwrap();
    assert!(
        again.windows(2).any(|w| w[0] == "--project"
            && Path::new(&w[1]).canonicalize().ok() == Some(project.clone())),
        "{again:?}"
    );

    // The session remembers its recorded model: no --replay needed to finish it.
    let done = run_continuation(&baton, cwd.path(), &again);
    assert_eq!(done.code, 0, "{}{}", done.stdout, done.stderr);
    let v: Value = session_status(&baton, cwd.path(), true).json();
    assert_eq!(v["status"], "completed", "{v}");
    assert_eq!(v["interrupted"], false, "{v}");
}

#[test]
fn ctrl_c_at_a_run_prompt_names_the_run_to_answer() {
    if tmux_missing() {
        eprintln!("tmux is not installed; skipping the terminal test");
        return;
    }
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = baton_testkit::sample_project(tmp.path());
    let trace = trace_until_question(tmp.path());
    let tmux = Tmux {
        socket: format!("baton-prompt-{}", std::process::id()),
        target: "prompt".into(),
    };
    let script = format!(
        "env -u OPENAI_API_KEY -u BATON_MODEL BATON_HOME={home} {bin} run {pkg} --project {project} --replay {trace}; echo RUN-ENDED $?; sleep 30",
        home = baton.home.path().display(),
        bin = env!("CARGO_BIN_EXE_baton"),
        pkg = example("create-story-micro").display(),
        project = project.display(),
        trace = trace.display(),
    );
    tmux.run(200, 50, &script);
    tmux.wait_for("> ");
    assert!(
        tmux.cmd(&["send-keys", "-t", "prompt", "C-c"])
            .status
            .success()
    );
    let screen = tmux.wait_for("RUN-ENDED");
    assert!(screen.contains("RUN-ENDED 130"), "{screen}");
    let id = baton.run(&["runs", "list", "--json"]).json()[0]["runId"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        screen.contains(&format!("continue with `baton answer {}", &id[..13])),
        "{screen}"
    );
    assert!(!screen.contains("<RUN>"), "{screen}");
}
