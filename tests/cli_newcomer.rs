//! Slips a person trying baton for the first time met: each test drives the real binary.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;

use common::{Baton, example};
use std::fs;
use std::path::Path;

/// `baton <path> -h`, checked: every argument and option has a help text; returns the
/// subcommands listed.
fn undocumented(baton: &Baton, path: &[&str], missing: &mut Vec<String>) -> Vec<String> {
    let mut args: Vec<&str> = path.to_vec();
    args.push("-h");
    let out = baton.run(&args);
    assert_eq!(out.code, 0, "baton {args:?}: {}", out.stderr);
    let mut section = "";
    let mut subcommands = Vec::new();
    for line in out.stdout.lines() {
        if !line.starts_with(' ') {
            section = line.trim_end_matches(':');
            continue;
        }
        let text = line.trim();
        let parts: Vec<&str> = text.split("  ").filter(|p| !p.trim().is_empty()).collect();
        match section {
            "Commands" => {
                if parts[0] != "help" {
                    subcommands.push(parts[0].to_string());
                }
                if parts.len() < 2 {
                    missing.push(format!("baton {} {}", path.join(" "), parts[0]));
                }
            }
            // `[default: …]` or `[possible values: …]` alone is not a help text.
            "Arguments" | "Options" if parts.len() < 2 || parts[1].starts_with('[') => {
                missing.push(format!("baton {} {}", path.join(" "), parts[0]));
            }
            _ => {}
        }
    }
    subcommands
}

#[test]
fn every_argument_of_every_command_has_a_help_text() {
    let baton = Baton::new();
    let mut missing = Vec::new();
    let mut todo: Vec<Vec<String>> = vec![Vec::new()];
    let mut seen = 0;
    while let Some(path) = todo.pop() {
        seen += 1;
        let refs: Vec<&str> = path.iter().map(String::as_str).collect();
        for sub in undocumented(&baton, &refs, &mut missing) {
            let mut next = path.clone();
            next.push(sub);
            todo.push(next);
        }
    }
    assert!(seen > 40, "only {seen} commands were looked at");
    assert!(missing.is_empty(), "no help text:\n{}", missing.join("\n"));
}

/// The starter package, run once with its scripted model in a new project.
fn one_run(baton: &Baton, work: &Path) -> std::path::PathBuf {
    assert_eq!(baton.run_in(work, &["new", "hello"]).code, 0);
    let project = work.join("hello-project");
    fs::create_dir(&project).unwrap();
    let run = baton.run_in(
        work,
        &[
            "run",
            "hello",
            "--project",
            "hello-project",
            "--replay",
            "hello/first-run.trace.json",
            "--non-interactive",
        ],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    project
}

#[test]
fn demo_epic_counts_its_phase_runs_and_installs_the_whole_phase_package() {
    let baton = Baton::new();
    let work = tempfile::tempdir().unwrap();
    let out = baton.run_in(work.path(), &["demo", "epic", "--dir", "de"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let runs = baton.run_in(
        work.path(),
        &["runs", "list", "--project", "de", "--all", "--json"],
    );
    let made = runs.json().as_array().unwrap().len();
    assert_eq!(made, 13, "{}", runs.stdout);
    assert!(
        out.stdout.contains(&format!("({made} phase runs)")),
        "{}",
        out.stdout
    );

    let listed = baton.run(&["package", "list", "--json"]).json();
    let phase4 = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "bmad-phase4")
        .unwrap()
        .clone();
    assert_eq!(
        phase4["workflows"],
        serde_json::json!([
            "create-story",
            "validate-story",
            "dev-story",
            "revision",
            "code-review"
        ])
    );

    // A copy that lost a file is not "already installed": installing again repairs it.
    let dir = Path::new(phase4["path"].as_str().unwrap());
    fs::remove_file(dir.join("workflows/revision/workflow.md")).unwrap();
    let again = baton.run(&["package", "install", "examples/packages/bmad-phase4"]);
    assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
    assert!(again.stdout.starts_with("installed "), "{}", again.stdout);
    assert!(
        again.stderr.contains("damaged or incomplete"),
        "{}",
        again.stderr
    );
    assert!(dir.join("workflows/revision/workflow.md").is_file());
    let same = baton.run(&["package", "install", "examples/packages/bmad-phase4"]);
    assert!(
        same.stdout.starts_with("already installed"),
        "{}",
        same.stdout
    );
}

#[test]
fn a_demo_dir_that_cannot_be_made_is_named_with_a_hint() {
    let baton = Baton::new();
    for demo in [&["demo"][..], &["demo", "epic"], &["demo", "session"]] {
        let mut args = demo.to_vec();
        args.extend(["--dir", "/proc/nope/x"]);
        let out = baton.run(&args);
        assert_eq!(out.code, 1, "{args:?}: {}{}", out.stdout, out.stderr);
        assert!(
            out.stderr.contains(
                "error[DEMO_DIR_UNUSABLE]: cannot write the sample project to /proc/nope/x"
            ),
            "{args:?}: {}",
            out.stderr
        );
        assert!(out.stderr.contains("help: pass --dir"), "{}", out.stderr);
    }
}

/// Wrong paths are said before the model is asked for (no model is configured here).
#[test]
fn files_are_checked_before_the_model() {
    let baton = Baton::new();
    let work = tempfile::tempdir().unwrap();
    let pkg = example("bug-triage");
    let pkg = pkg.to_str().unwrap();

    let out = baton.run_in(work.path(), &["run", pkg, "--project", "missing"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("error[PROJECT_ROOT_INVALID]: project root missing"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("help: --project takes the directory the workflow works on"),
        "{}",
        out.stderr
    );
    let out = baton.run_in(work.path(), &["run", "no-such-package", "--project", "."]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("PACKAGE_NOT_FOUND"), "{}", out.stderr);

    let out = baton.run_in(work.path(), &["epic", "run", "epic-1"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("error[SPRINT_STATUS_MISSING]"),
        "{}",
        out.stderr
    );
    let out = baton.run_in(work.path(), &["epic", "resume"]);
    assert!(
        out.stderr.contains("error[SPRINT_STATUS_MISSING]"),
        "{}",
        out.stderr
    );

    let out = baton.run_in(work.path(), &["session", "continue"]);
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("SESSION_NOT_FOUND"), "{}", out.stderr);
    assert!(!out.stderr.contains("LLM_CONFIG_INVALID"), "{}", out.stderr);
}

#[test]
fn reindex_says_1_run() {
    let baton = Baton::new();
    let work = tempfile::tempdir().unwrap();
    one_run(&baton, work.path());
    let out = baton.run_in(
        work.path(),
        &["runs", "reindex", "--project", "hello-project"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains(": 1 run (1 from run.json"),
        "{}",
        out.stdout
    );
}

/// maestro's verbs keep maestro's refusal lines (skills parse them); the verbs baton added
/// report as the rest of baton does.
#[test]
fn ralph_errors_are_baton_errors_except_for_maestros_verbs() {
    let baton = Baton::new();
    let work = tempfile::tempdir().unwrap();
    let out = baton.run_in(work.path(), &["ralph", "pause"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.starts_with("error[SESSION_NOT_FOUND]: "),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("\n  help: "), "{}", out.stderr);
    let out = baton.run_in(work.path(), &["ralph", "next"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.starts_with("[ralph next] SESSION_NOT_FOUND: "),
        "{}",
        out.stderr
    );
}

/// A completed session is not shown at the position it was built at.
#[test]
fn a_completed_session_says_done_not_where_it_started() {
    let baton = Baton::new();
    let work = tempfile::tempdir().unwrap();
    let demo = baton.run_in(work.path(), &["demo", "session", "--dir", "ds"]);
    assert_eq!(demo.code, 0, "{}{}", demo.stdout, demo.stderr);
    let status = baton.run_in(work.path(), &["session", "status", "--project", "ds"]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    assert!(
        status.stdout.contains("Status:   completed"),
        "{}",
        status.stdout
    );
    assert!(
        status
            .stdout
            .contains("Position: done (started at analyze)\n"),
        "{}",
        status.stdout
    );
}

/// `baton … | head`: the reader goes away before baton writes. Every command that prints
/// ends quietly with exit 0 — no panic, no backtrace, no `Broken pipe` error.
#[test]
fn a_reader_that_went_away_ends_the_command_quietly() {
    let baton = Baton::new();
    let work = tempfile::tempdir().unwrap();
    let project = one_run(&baton, work.path());
    let listed = baton.run(&["runs", "list", "--json"]).json();
    let id = listed[0]["runId"].as_str().unwrap().to_string();
    let package = example("create-story-micro");
    let commands: Vec<Vec<&str>> = vec![
        vec!["doctor"],
        vec!["package", "list"],
        vec!["validate", package.to_str().unwrap()],
        vec!["graph", package.to_str().unwrap()],
        vec!["runs", "list"],
        vec!["runs", "list", "--json"],
        vec!["runs", "show", &id],
        vec!["runs", "log", &id],
        vec!["--help"],
    ];
    for args in commands {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
            .args(&args)
            .current_dir(&project)
            .env("BATON_HOME", baton.home.path())
            .env_remove("RUST_BACKTRACE")
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "baton {args:?}: {stderr}");
        assert!(stderr.is_empty(), "baton {args:?} said: {stderr}");
    }
}
