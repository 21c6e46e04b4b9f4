//! What `baton` prints for people: colour only where it belongs (a terminal, unless NO_COLOR
//! or `--color never`; `--color always` anywhere), a failed tool call's code and target on its
//! progress line without a terminal, and tables whose columns hold with long names.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;

use baton_llm::testing::{Reply, ScriptedServer};
use common::{Baton, Tmux, example, repo, tmux_missing};
use std::process::{Command, Stdio};

/// A package that fails validation: its manifest is not JSON.
fn broken_package(dir: &std::path::Path) -> std::path::PathBuf {
    let pkg = dir.join("broken");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join("bmad.json"), "{ not json").unwrap();
    pkg
}

const RED: &str = "\x1b[1;31m";

#[test]
fn colour_is_for_terminals_and_the_flag_decides() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let pkg = broken_package(tmp.path());
    let p = pkg.to_str().unwrap();
    // Piped: never an escape sequence, whatever the environment says.
    let piped = baton.run(&["validate", p]);
    assert_eq!(piped.code, 2, "{}", piped.stderr);
    assert!(piped.stderr.contains("error["), "{}", piped.stderr);
    assert!(!piped.stderr.contains('\x1b'), "{:?}", piped.stderr);
    // Asked for: colour even into a pipe, NO_COLOR notwithstanding (the flag wins).
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["--color", "always", "validate", p])
        .env("BATON_HOME", baton.home.path())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("{RED}error[")), "{stderr:?}");
    // The flag after the subcommand works too, and `never` is plain.
    let never = baton.run(&["validate", p, "--color", "never"]);
    assert!(!never.stderr.contains('\x1b'), "{:?}", never.stderr);
    let bad = baton.run(&["--color", "sometimes", "validate", p]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
}

/// The screen of a tmux pane with its escape sequences.
fn screen_with_escapes(tmux: &Tmux) -> String {
    let out = tmux.cmd(&["capture-pane", "-p", "-e", "-J", "-t", &tmux.target]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_terminal_gets_colour_unless_no_color_is_set() {
    if tmux_missing() {
        eprintln!("tmux is not installed; skipping the terminal colour test");
        return;
    }
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let pkg = broken_package(tmp.path());
    for (no_color, coloured) in [(false, true), (true, false)] {
        let tmux = Tmux {
            socket: format!("baton-colour-{}-{no_color}", std::process::id()),
            target: "colour".into(),
        };
        let env = if no_color {
            "env NO_COLOR=1"
        } else {
            "env -u NO_COLOR"
        };
        let script = format!(
            "{env} TERM=xterm-256color BATON_HOME={home} {bin} validate {pkg}; echo VALIDATE-ENDED $?; sleep 30",
            home = baton.home.path().display(),
            bin = env!("CARGO_BIN_EXE_baton"),
            pkg = pkg.display(),
        );
        tmux.run(160, 30, &script);
        tmux.wait_for("VALIDATE-ENDED");
        let screen = screen_with_escapes(&tmux);
        assert!(screen.contains("VALIDATE-ENDED 2"), "{screen}");
        // tmux redraws the colour its own way; any SGR escape before `error[` is colour.
        let before = &screen[..screen.find("error[").unwrap()];
        let last_line = before.rsplit('\n').next().unwrap_or("");
        assert_eq!(
            last_line.contains("\x1b["),
            coloured,
            "NO_COLOR set: {no_color}; screen: {screen:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_tool_call_shows_its_code_and_target_without_a_terminal() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = baton_testkit::sample_project(tmp.path());
    let server = ScriptedServer::start(vec![
        Reply::tool_calls(&[
            ("c1", "fs_read", r#"{"path": "@project/no-such-file.md"}"#),
            ("c2", "fs_list", r#"{"path": "@project"}"#),
        ]),
        Reply::text("Which story should I prepare?"),
    ])
    .await
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args([
            "run",
            example("create-story-micro").to_str().unwrap(),
            "--project",
            project.to_str().unwrap(),
            "--non-interactive",
        ])
        .current_dir(repo())
        .env("BATON_HOME", baton.home.path())
        .env("OPENAI_BASE_URL", server.base_url())
        .env("BATON_MODEL", "scripted")
        .env("OPENAI_API_KEY", "sk-test")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.trim() == "✗ fs.read ENOENT @project/no-such-file.md"),
        "{stderr}"
    );
    assert!(
        lines.iter().any(|l| l.trim() == "✓ fs.list @project"),
        "{stderr}"
    );
    assert!(!stderr.contains('\x1b'), "{stderr:?}");
}

/// The character offset where `header` starts in the table's heading line.
fn column_start(heading: &str, header: &str) -> usize {
    heading[..heading.find(header).unwrap()].chars().count()
}

#[test]
fn tables_keep_their_columns_with_long_names() {
    let baton = Baton::new();
    let work = tempfile::tempdir().unwrap();
    let long = "a-package-with-a-name-far-longer-than-any-table-column-would-hold";
    let made = baton.run_in(work.path(), &["new", "long", "--name", long]);
    assert_eq!(made.code, 0, "{}{}", made.stdout, made.stderr);
    let project = baton_testkit::sample_project(work.path());
    let p = project.to_str().unwrap();
    for pkg in [work.path().join("long"), example("create-story-micro")] {
        let installed = baton.run(&["package", "install", pkg.to_str().unwrap()]);
        assert_eq!(installed.code, 0, "{}", installed.stderr);
    }
    let trace = work.path().join("long/first-run.trace.json");
    let micro = example("create-story-micro");
    let demo_trace = baton_testkit::demo_trace();
    for (pkg, trace) in [(work.path().join("long"), trace), (micro, demo_trace)] {
        let run = baton.run(&[
            "run",
            pkg.to_str().unwrap(),
            "--project",
            p,
            "--replay",
            trace.to_str().unwrap(),
            "--non-interactive",
        ]);
        assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    }

    let list = baton.run(&["package", "list"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    let lines: Vec<&str> = list.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", list.stdout);
    let installed_at = column_start(lines[0], "INSTALLED");
    for l in &lines[1..] {
        // Every row's timestamp starts under its heading.
        let chars: Vec<char> = l.chars().collect();
        assert!(chars[installed_at].is_ascii_digit(), "{}", list.stdout);
        assert_eq!(chars[installed_at - 1], ' ', "{}", list.stdout);
    }
    assert!(
        list.stdout
            .contains("a-package-with-a-name-far-longer-than-any-table…"),
        "{}",
        list.stdout
    );

    let runs = baton.run(&["runs", "list", "-p", p]);
    assert_eq!(runs.code, 0, "{}", runs.stderr);
    let lines: Vec<&str> = runs.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", runs.stdout);
    let node = column_start(lines[0], "NODE");
    for l in &lines[1..] {
        let chars: Vec<char> = l.chars().collect();
        assert_eq!(chars[node - 1], ' ', "{}", runs.stdout);
        assert_ne!(chars[node], ' ', "{}", runs.stdout);
    }
    assert!(runs.stdout.contains('…'), "{}", runs.stdout);
    // Same width up to the end of the (right-aligned) AGE column.
    let widths: Vec<usize> = lines.iter().map(|l| l.chars().count()).collect();
    assert!(widths.iter().all(|w| *w == widths[0]), "{}", runs.stdout);
}
