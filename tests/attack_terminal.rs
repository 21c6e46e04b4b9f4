//! A model's text never reaches a person's terminal as escape sequences: a question carrying a
//! window-title write (OSC 0), a clipboard write (OSC 52), a screen clear (CSI 2J) and a C1
//! control is shown with visible escapes by `baton run`, `answer`, `runs show` and `runs log`
//! (also a refused call's path), while `--json` keeps the exact text.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;

use baton_testkit::{demo_trace, sample_project};
use common::{Baton, Run, example};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// What a hostile model asks: set the window title, write the clipboard, clear the screen,
/// then an 8-bit CSI (U+009B), on two lines.
const QUESTION: &str =
    "Which story?\u{1b}]0;owned\u{7}\u{1b}]52;c;ZWNobyBoaQ==\u{7}\u{1b}[2J\u{9b}31m\nGive its key.";
/// The same as the terminal shows it.
const SHOWN: &str =
    "Which story?\\x1b]0;owned\\x07\\x1b]52;c;ZWNobyBoaQ==\\x07\\x1b[2J\\u{9b}31m\nGive its key.";
/// A path the model asks to read: refused (no such file), and logged as it was asked.
const PATH: &str = "@project/\u{1b}]0;log\u{7}\u{1b}[2Jx\u{85}.md";
const PATH_SHOWN: &str = "@project/\\x1b]0;log\\x07\\x1b[2Jx\\u{85}.md";

/// The demo's trace up to its question, the question made hostile and, in the first call, a
/// read of a hostile path.
fn hostile_trace(dir: &Path) -> PathBuf {
    let mut trace: Value = serde_json::from_slice(&std::fs::read(demo_trace()).unwrap()).unwrap();
    let dialogues = trace["dialogues"].as_array_mut().unwrap();
    let asked = dialogues
        .iter()
        .position(|d| d["type"] == "user_input")
        .unwrap();
    dialogues.truncate(asked);
    dialogues[0]["response"]["assistant"]["toolCalls"]
        .as_array_mut()
        .unwrap()
        .push(
            serde_json::json!({"id": "tc-hostile", "name": "fs.read", "arguments": {"path": PATH}}),
        );
    let last = dialogues.len() - 1;
    dialogues[last]["response"]["assistant"]["content"] = Value::from(QUESTION);
    let path = dir.join("hostile.trace.json");
    std::fs::write(&path, serde_json::to_vec(&trace).unwrap()).unwrap();
    path
}

/// No byte a terminal would act on: C0 controls but newline and tab, DEL, C1 controls.
fn assert_inert(what: &str, text: &str) {
    let bad: Vec<char> = text
        .chars()
        .filter(|c| {
            (c.is_control() && !matches!(c, '\n' | '\t'))
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .collect();
    assert!(bad.is_empty(), "{what} carries raw {bad:?}:\n{text}");
}

fn assert_both_inert(what: &str, run: &Run) {
    assert_inert(&format!("{what} stdout"), &run.stdout);
    assert_inert(&format!("{what} stderr"), &run.stderr);
}

#[test]
fn a_hostile_question_is_shown_escaped_and_kept_exact_in_json() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let trace = hostile_trace(tmp.path());
    let pkg = example("create-story-micro");
    let project = sample_project(&tmp.path().join("a"));
    let start = |json: bool| {
        let mut args = vec![
            "run",
            pkg.to_str().unwrap(),
            "--project",
            project.to_str().unwrap(),
            "--replay",
            trace.to_str().unwrap(),
            "--non-interactive",
        ];
        if json {
            args.push("--json");
        }
        baton.run(&args)
    };

    // On a pipe (as a script, or a terminal's scrollback, reads it).
    let run = start(false);
    assert_eq!(run.code, 10, "{}\n{}", run.stdout, run.stderr);
    assert_both_inert("baton run", &run);
    assert!(run.stdout.contains(SHOWN), "{}", run.stdout);
    // The refused read's line on stderr names the path, escaped.
    assert!(run.stderr.contains(PATH_SHOWN), "{}", run.stderr);

    // JSON keeps the model's exact text.
    let json = start(true);
    assert_eq!(json.code, 10, "{}", json.stderr);
    let v = json.json();
    assert_eq!(v["waitingFor"]["question"], QUESTION, "{v:#}");
    let id = v["runId"].as_str().unwrap().to_string();

    let show = baton.run(&["runs", "show", &id]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert_both_inert("runs show", &show);
    assert!(
        show.stdout.contains(&format!("waiting   {SHOWN}")),
        "{}",
        show.stdout
    );
    let show_json = baton.run(&["runs", "show", &id, "--json"]);
    assert!(
        show_json
            .stdout
            .contains(&serde_json::to_string(QUESTION).unwrap()),
        "{}",
        show_json.stdout
    );

    let log = baton.run(&["runs", "log", &id]);
    assert_eq!(log.code, 0, "{}", log.stderr);
    assert_both_inert("runs log", &log);
    assert!(log.stdout.contains(PATH_SHOWN), "{}", log.stdout);
    let log_json = baton.run(&["runs", "log", &id, "--json"]);
    let paths: Vec<String> = log_json
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|r| r.pointer("/input/path")?.as_str().map(str::to_owned))
        .collect();
    assert!(paths.iter().any(|p| p == PATH), "{paths:?}");

    // Answering goes on with the hostile trace, which has nothing more to say: what the run
    // ends with is inert too.
    let answer = baton.run(&["answer", &id, "1-2-user-authentication"]);
    assert_eq!(answer.code, 1, "{}", answer.stderr);
    assert_both_inert("baton answer", &answer);
}

/// `baton` in `cwd` with its own store and `home` as HOME.
fn baton_at(store: &Path, home: &Path, cwd: &Path, args: &[&str]) -> Run {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(args)
        .current_dir(cwd)
        .env("BATON_HOME", store)
        .env("HOME", home)
        .env_remove("MAESTRO_HOME")
        .env_remove("BATON_RALPH_CLI")
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn hostile_project_text_on_the_epic_and_session_boards_is_shown_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, home) = (tmp.path().join("store"), tmp.path().join("home"));
    std::fs::create_dir_all(&home).unwrap();

    // A story's pending question (the model asked it; the agent-state file keeps it) and a
    // sprint-status value with a bidi override.
    let epic = tmp.path().join("epic");
    baton_testkit::copy_dir(
        &baton_testkit::repo().join("examples/projects/taskboard-epic"),
        &epic,
    );
    let artifacts = epic.join("_bmad-output/implementation-artifacts");
    std::fs::write(
        artifacts.join("2-1-create-board.agent-state.json"),
        serde_json::to_vec(&serde_json::json!({
            "storyKey": "2-1-create-board",
            "phase": "create-story",
            "questions": [{"id": "q1", "question": QUESTION}],
        }))
        .unwrap(),
    )
    .unwrap();
    let sprint = artifacts.join("sprint-status.yaml");
    let mut yaml = std::fs::read_to_string(&sprint).unwrap();
    yaml.push_str("  2-9-evil: done\u{202e}gnikcah\n");
    std::fs::write(&sprint, yaml).unwrap();
    let p = epic.to_str().unwrap();
    let board = baton_at(&store, &home, tmp.path(), &["epic", "status", "-p", p]);
    assert_eq!(board.code, 0, "{}", board.stderr);
    assert_both_inert("epic status", &board);
    assert!(
        board.stdout.contains(&format!("? q1: {SHOWN}")),
        "{}",
        board.stdout
    );
    assert!(
        board.stdout.contains("done\\u{202e}gnikcah"),
        "{}",
        board.stdout
    );
    let json = baton_at(
        &store,
        &home,
        tmp.path(),
        &["epic", "status", "-p", p, "--json"],
    );
    assert!(
        json.stdout
            .contains(&serde_json::to_string(QUESTION).unwrap()),
        "{}",
        json.stdout
    );

    // A lifecycle session whose step arguments (its status.json, in the project) are hostile.
    let skills = baton_testkit::repo().join("examples/skills");
    baton_testkit::copy_dir(&skills.join("claude"), &home.join(".claude"));
    baton_testkit::copy_dir(&skills.join("maestro"), &home.join(".maestro"));
    let project = tmp.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let new = baton_at(
        &store,
        &home,
        &project,
        &["ralph", "new", "add CSV export", "--chain", "plan,verify"],
    );
    assert_eq!(new.code, 0, "{}", new.stderr);
    let status_file = common::walk(&project.join(".workflow/.maestro"))
        .into_iter()
        .find(|f| f.ends_with("status.json"))
        .unwrap();
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&status_file).unwrap()).unwrap();
    doc["steps"][0]["args"] = Value::from(QUESTION);
    std::fs::write(&status_file, serde_json::to_vec(&doc).unwrap()).unwrap();
    let one_line = SHOWN.replace('\n', "\\n");
    for args in [&["session", "status"][..], &["ralph", "status"][..]] {
        let status = baton_at(&store, &home, &project, args);
        assert_eq!(status.code, 0, "{args:?}: {}", status.stderr);
        assert_both_inert(&args.join(" "), &status);
        assert!(
            status.stdout.contains(&one_line) || status.stdout.contains(SHOWN),
            "{args:?}: {}",
            status.stdout
        );
    }
    let json = baton_at(&store, &home, &project, &["session", "status", "--json"]);
    assert!(
        json.stdout
            .contains(&serde_json::to_string(QUESTION).unwrap()),
        "{}",
        json.stdout
    );
}
