//! `baton epic` and `baton demo epic` through the real binary, against the played model on
//! loopback: exit codes (0 done, 10 waiting, 1 paused on a failure, 2 bad input, 130 stopped),
//! JSON for scripts, the board, a question answered from the command line, `stop`, and two
//! orchestrators started at once on one project.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;
use crate::player;

use common::{Baton, Run, example, repo};
use player::{Player, Scenario};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const IMPL: &str = "_bmad-output/implementation-artifacts";

fn sample(into: &Path) -> PathBuf {
    let project = into.join("project");
    baton_testkit::copy_dir(&repo().join("examples/projects/taskboard-epic"), &project);
    project
}

fn epic_cmd(baton: &Baton, player: &Player, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
    cmd.args(args)
        .env("BATON_HOME", baton.home.path())
        .env("OPENAI_BASE_URL", player.base_url())
        .env("BATON_MODEL", "played")
        .env("OPENAI_API_KEY", "sk-test")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn output(cmd: &mut Command) -> Run {
    let out = cmd.output().expect("baton runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn epic(baton: &Baton, player: &Player, args: &[&str]) -> Run {
    output(&mut epic_cmd(baton, player, args))
}

fn state(project: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(project.join(IMPL).join(".run-epic-state.json")).unwrap())
        .unwrap()
}

#[test]
fn an_epic_runs_to_done_with_json_and_a_board() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample(tmp.path());
    let p = project.to_str().unwrap();
    let player = Player::start(&project, Scenario::default());
    let dry = epic(
        &baton,
        &player,
        &["epic", "run", "epic-2", "-p", p, "--dry-run", "--json"],
    );
    assert_eq!(dry.code, 0, "{}{}", dry.stdout, dry.stderr);
    assert_eq!(dry.json()["outcome"], "planned");
    assert_eq!(dry.json()["plan"].as_array().unwrap().len(), 2);
    assert!(player.served().is_empty());

    let run = epic(
        &baton,
        &player,
        &["epic", "run", "epic-2", "-p", p, "--json"],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let out = run.json();
    assert_eq!(out["outcome"], "done");
    assert_eq!(out["epicDone"], true);
    assert_eq!(out["phasesRun"], 10);

    let board = epic(&baton, &player, &["epic", "status", "-p", p, "--json"]).json();
    assert_eq!(board["epicId"], "epic-2");
    assert_eq!(board["state"], "paused");
    // The file says paused; what the epic is, is done.
    assert_eq!(board["standing"], "done");
    assert_eq!(board["live"], false);
    let stories = board["epics"][0]["stories"].as_array().unwrap();
    assert!(
        stories
            .iter()
            .all(|s| s["status"] == "done" && s["review"] == "approved")
    );
    let text = epic(&baton, &player, &["epic", "status", "-p", p]);
    assert!(text.stdout.contains("2-2-move-task"), "{}", text.stdout);
    assert!(text.stdout.contains("epic-2 [done]"), "{}", text.stdout);
    assert!(text.stdout.starts_with("epic-2 · done"), "{}", text.stdout);
    // Human progress goes to stderr: story i/N, phase and run id.
    let story = epic(
        &baton,
        &player,
        &["epic", "story", "1-1-project-scaffold", "-p", p],
    );
    assert_eq!(story.code, 0, "{}", story.stderr);
    assert!(
        story.stderr.contains("story 1/3 · 1-1-project-scaffold"),
        "{}",
        story.stderr
    );
    assert!(story.stderr.contains("  dev · run "), "{}", story.stderr);
    assert_eq!(
        state(&project)["lastStoryCompleted"],
        "1-1-project-scaffold"
    );
}

#[test]
fn a_question_exits_10_and_epic_answer_continues() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample(tmp.path());
    let p = project.to_str().unwrap();
    let player = Player::start(
        &project,
        Scenario {
            questions: vec![(
                "2-1-create-board".into(),
                "validate".into(),
                1,
                "Kanban or list?".into(),
            )],
            ..Default::default()
        },
    );
    let run = epic(&baton, &player, &["epic", "run", "2", "-p", p, "--json"]);
    assert_eq!(run.code, 10, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.json()["question"]["question"], "Kanban or list?");
    assert_eq!(run.json()["question"]["id"], "q1");
    let board = epic(&baton, &player, &["epic", "status", "-p", p, "--json"]).json();
    let first = &board["epics"][0]["stories"][0];
    assert_eq!(first["phase"], "validate");
    assert_eq!(first["questions"][0]["question"], "Kanban or list?");
    let text = epic(&baton, &player, &["epic", "run", "2", "-p", p]);
    assert_eq!(text.code, 10);
    assert!(
        text.stdout.contains("baton epic answer 2-1-create-board"),
        "{}",
        text.stdout
    );

    let answer = epic(
        &baton,
        &player,
        &[
            "epic",
            "answer",
            "2-1-create-board",
            "Kanban",
            "-p",
            p,
            "--json",
        ],
    );
    assert_eq!(answer.code, 0, "{}{}", answer.stdout, answer.stderr);
    assert_eq!(answer.json()["epicDone"], true);
    let again = epic(
        &baton,
        &player,
        &["epic", "answer", "2-1-create-board", "x", "-p", p, "--json"],
    );
    assert_eq!(again.code, 2);
    assert_eq!(again.json()["error"]["code"], "EPIC_NO_QUESTION");
}

#[test]
fn failures_exit_1_and_bad_input_exits_2_with_json_errors() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample(tmp.path());
    let p = project.to_str().unwrap();
    let player = Player::start(
        &project,
        Scenario {
            failures: vec![("2-1-create-board".into(), "create-story".into(), 2)],
            ..Default::default()
        },
    );
    let run = epic(
        &baton,
        &player,
        &["epic", "run", "epic-2", "-p", p, "--json"],
    );
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.json()["outcome"], "paused");
    assert_eq!(run.json()["failure"]["phase"], "create-story");
    assert_eq!(state(&project)["lastFailure"]["phase"], "create-story");
    let text = epic(&baton, &player, &["epic", "status", "-p", p]);
    assert!(
        text.stdout.contains("paused on a failure"),
        "{}",
        text.stdout
    );

    let bad = epic(
        &baton,
        &player,
        &["epic", "run", "epic-7", "-p", p, "--json"],
    );
    assert_eq!(bad.code, 2);
    assert_eq!(bad.json()["error"]["code"], "EPIC_NOT_FOUND");
    let bad = epic(&baton, &player, &["epic", "story", "9-9-x", "-p", p]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr.contains("error[STORY_NOT_FOUND]"),
        "{}",
        bad.stderr
    );
    let empty = tempfile::tempdir().unwrap();
    let bad = epic(
        &baton,
        &player,
        &[
            "epic",
            "status",
            "-p",
            empty.path().to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(bad.code, 2);
    assert_eq!(bad.json()["error"]["code"], "SPRINT_STATUS_MISSING");
    let stop = epic(&baton, &player, &["epic", "stop", "-p", p, "--json"]);
    assert_eq!(stop.code, 1);
    assert_eq!(stop.json()["error"]["code"], "EPIC_NOT_RUNNING");
}

/// A child that does not outlive a failed test.
struct Killed(Option<Child>);

impl Drop for Killed {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
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

fn finish(child: Child) -> Run {
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn two_orchestrators_at_once_one_runs_the_other_is_refused() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample(tmp.path());
    let p = project.to_str().unwrap();
    let player = Player::start(
        &project,
        Scenario {
            delay: Duration::from_millis(20),
            ..Default::default()
        },
    );
    let args = ["epic", "run", "epic-2", "-p", p, "--json"];
    let a = epic_cmd(&baton, &player, &args).spawn().unwrap();
    let b = epic_cmd(&baton, &player, &args).spawn().unwrap();
    let (a, b) = (finish(a), finish(b));
    let mut codes = [a.code, b.code];
    codes.sort();
    assert_eq!(
        codes,
        [0, 1],
        "{}{}\n{}{}",
        a.stdout,
        a.stderr,
        b.stdout,
        b.stderr
    );
    let refused = if a.code == 1 { &a } else { &b };
    assert_eq!(refused.json()["error"]["code"], "EPIC_BUSY");
    assert!(
        refused.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("another `baton epic` process"),
        "{}",
        refused.stdout
    );
    // Nothing was corrupted: the winner finished the epic, once.
    let board = epic(&baton, &player, &["epic", "status", "-p", p, "--json"]).json();
    assert_eq!(board["epics"][0]["status"], "done");
    let s = state(&project);
    assert_eq!(s["lastSteps"].as_array().unwrap().len(), 10);
}

#[test]
fn stop_pauses_the_running_loop_at_a_phase_boundary_and_resume_finishes() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample(tmp.path());
    let p = project.to_str().unwrap();
    let player = Player::start(
        &project,
        Scenario {
            delay: Duration::from_millis(30),
            ..Default::default()
        },
    );
    let mut running = Killed(Some(
        epic_cmd(
            &baton,
            &player,
            &["epic", "run", "epic-2", "-p", p, "--json"],
        )
        .spawn()
        .unwrap(),
    ));
    wait_for("the loop holds the project", || {
        let b = epic(&baton, &player, &["epic", "status", "-p", p, "--json"]);
        b.code == 0 && b.json()["live"] == true
    });
    let stop = epic(&baton, &player, &["epic", "stop", "-p", p]);
    assert_eq!(stop.code, 0, "{}", stop.stderr);
    let stopped = finish(running.0.take().unwrap());
    assert_eq!(stopped.code, 130, "{}{}", stopped.stdout, stopped.stderr);
    assert_eq!(stopped.json()["outcome"], "stopped");
    assert_eq!(state(&project)["status"], "paused");
    let resumed = epic(&baton, &player, &["epic", "resume", "-p", p, "--json"]);
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    assert_eq!(resumed.json()["epicDone"], true);
}

#[test]
fn demo_epic_runs_offline_and_cleans_up_after_itself() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let run = baton.run_in(tmp.path(), &["demo", "epic", "--json"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.json()["outcome"], "done");
    assert_eq!(run.json()["storiesCompleted"].as_array().unwrap().len(), 2);
    let dir = tmp.path().join("baton-demo-epic");
    let code = std::fs::read_to_string(dir.join("src/2-2-move-task.txt")).unwrap();
    assert!(code.contains("answer: Yes"), "{code}");
    // Again in the same place: the first demo's files are replaced, not refused.
    let text = baton.run_in(tmp.path(), &["demo", "epic"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(text.stdout.contains("epic-2 is done"), "{}", text.stdout);
    assert!(
        text.stderr.contains("asked: Should a task moved into Done"),
        "{}",
        text.stderr
    );
    // A directory the demo did not make is left alone.
    std::fs::create_dir_all(tmp.path().join("mine")).unwrap();
    std::fs::write(tmp.path().join("mine/notes.txt"), "keep").unwrap();
    let refused = baton.run_in(tmp.path(), &["demo", "epic", "--dir", "mine", "--json"]);
    assert_eq!(refused.code, 2);
    assert_eq!(refused.json()["error"]["code"], "DEMO_DIR_IN_USE");
}

#[test]
fn run_var_sets_state_variables_at_creation() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = baton_testkit::sample_project(tmp.path());
    let pkg = example("create-story-micro");
    let run = baton.run(&[
        "run",
        pkg.to_str().unwrap(),
        "--project",
        project.to_str().unwrap(),
        "--replay",
        baton_testkit::demo_trace().to_str().unwrap(),
        "--var",
        "epicId=epic-1",
        "--var",
        "note=a=b",
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let id = run.json()["runId"].as_str().unwrap().to_string();
    let shown = baton.run(&["runs", "show", &id, "--json"]).json();
    assert_eq!(shown["state"]["variables"]["epicId"], "epic-1");
    assert_eq!(shown["state"]["variables"]["note"], "a=b");
    let bad = baton.run(&["run", pkg.to_str().unwrap(), "--var", "novalue"]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("KEY=VALUE"), "{}", bad.stderr);
}

#[test]
fn ctrl_c_stops_between_steps_with_130_and_resume_finishes() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample(tmp.path());
    let p = project.to_str().unwrap();
    let player = Player::start(
        &project,
        Scenario {
            delay: Duration::from_millis(30),
            ..Default::default()
        },
    );
    let mut running = Killed(Some(
        epic_cmd(
            &baton,
            &player,
            &["epic", "run", "epic-2", "-p", p, "--json"],
        )
        .spawn()
        .unwrap(),
    ));
    wait_for("a phase run is under way", || !player.served().is_empty());
    let pid = running.0.as_ref().unwrap().id().to_string();
    let sent = Command::new("kill").args(["-INT", &pid]).status().unwrap();
    assert!(sent.success());
    let stopped = finish(running.0.take().unwrap());
    assert_eq!(stopped.code, 130, "{}{}", stopped.stdout, stopped.stderr);
    assert_eq!(stopped.json()["outcome"], "interrupted");
    assert_eq!(state(&project)["status"], "paused");
    let resumed = epic(&baton, &player, &["epic", "resume", "-p", p, "--json"]);
    assert_eq!(resumed.code, 0, "{}{}", resumed.stdout, resumed.stderr);
    assert_eq!(resumed.json()["epicDone"], true);
    // The interrupted phase run was resumed, not made again.
    let board = epic(&baton, &player, &["epic", "status", "-p", p, "--json"]).json();
    assert_eq!(board["epics"][0]["status"], "done");
    assert_eq!(state(&project)["lastSteps"].as_array().unwrap().len(), 10);
    let runs = baton_store::Store::new(baton.home.path())
        .project(&project)
        .unwrap()
        .list_runs()
        .unwrap();
    assert_eq!(runs.len(), 10);
}

#[test]
fn values_bmad_does_not_define_wait_for_a_person_and_keys_outside_the_grammar_are_named() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample(tmp.path());
    let p = project.to_str().unwrap();
    let sprint_path = project.join(IMPL).join("sprint-status.yaml");
    let original = std::fs::read_to_string(&sprint_path)
        .unwrap()
        .replace("  epic-2: backlog", "  epic-2: blocked")
        .replace(
            "  epic-2-retrospective: optional",
            "  epic-2-retrospective: optional\n  epic-3a: backlog\n  3a-1-perch: backlog",
        );
    std::fs::write(&sprint_path, &original).unwrap();
    let line = |key: &str| {
        original
            .lines()
            .position(|l| l.starts_with(&format!("  {key}:")))
            .unwrap()
            + 1
    };
    let player = Player::start(&project, Scenario::default());

    // The plan names what it will not run, and why.
    let dry = epic(
        &baton,
        &player,
        &["epic", "run", "epic-2", "-p", p, "--dry-run"],
    );
    assert_eq!(dry.code, 0, "{}{}", dry.stdout, dry.stderr);
    assert!(
        dry.stdout
            .contains(&format!("line {:>4}  epic-2: blocked — ", line("epic-2"))),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout
            .contains(&format!("line {:>4}  epic-3a: backlog", line("epic-3a"))),
        "{}",
        dry.stdout
    );

    // --non-interactive: exit 10 with the reason; nothing written, no model asked.
    let run = epic(
        &baton,
        &player,
        &["epic", "run", "epic-2", "-p", p, "--non-interactive"],
    );
    assert_eq!(run.code, 10, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("epic-2 is `blocked`"), "{}", run.stdout);
    assert!(
        run.stdout.contains("baton epic answer 2-1-create-board"),
        "{}",
        run.stdout
    );
    let json = epic(
        &baton,
        &player,
        &["epic", "run", "epic-2", "-p", p, "--json"],
    );
    assert_eq!(json.code, 10, "{}{}", json.stdout, json.stderr);
    let out = json.json();
    assert!(
        out["question"]["question"]
            .as_str()
            .unwrap()
            .contains("`blocked`")
    );
    assert_eq!(out["notRunnable"][0]["key"], "epic-2");
    assert_eq!(out["unrecognized"][0]["key"], "epic-3a");
    assert_eq!(std::fs::read_to_string(&sprint_path).unwrap(), original);
    assert!(player.served().is_empty());

    // The board says why it waits, and lists every key with its line.
    let board = epic(&baton, &player, &["epic", "status", "-p", p, "--json"]).json();
    assert_eq!(board["standing"], "waiting");
    assert_eq!(board["notRunnable"][0]["status"], "blocked");
    assert!(board["notRunnable"][0]["reason"].is_string());
    assert_eq!(board["unrecognized"][1]["key"], "3a-1-perch");
    assert_eq!(board["unrecognized"][1]["status"], "backlog");
    assert_eq!(board["unrecognized"][1]["line"], line("3a-1-perch"));
    let text = epic(&baton, &player, &["epic", "status", "-p", p]);
    assert!(
        text.stdout.contains("? q1: epic-2 is `blocked`"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("outside BMAD's key grammar, never run"),
        "{}",
        text.stdout
    );

    // A key outside the grammar, named: refused with its line and the grammar.
    let bad = epic(&baton, &player, &["epic", "run", "3a", "-p", p, "--json"]);
    assert_eq!(bad.code, 2);
    assert_eq!(bad.json()["error"]["code"], "EPIC_KEY_OUTSIDE_GRAMMAR");
    let bad = epic(&baton, &player, &["epic", "story", "3a-1-perch", "-p", p]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr.contains(&format!(
            "3a-1-perch is in {IMPL}/sprint-status.yaml line {} but outside BMAD's key grammar",
            line("3a-1-perch")
        )),
        "{}",
        bad.stderr
    );
    assert!(
        bad.stderr.contains("epic-N-retrospective"),
        "{}",
        bad.stderr
    );

    // `leave`: nothing changes, and no command that would do nothing is suggested.
    let left = epic(
        &baton,
        &player,
        &["epic", "answer", "2-1-create-board", "leave", "-p", p],
    );
    assert_eq!(left.code, 0, "{}{}", left.stdout, left.stderr);
    assert!(
        left.stdout.contains("stopped with epic-2 not done"),
        "{}",
        left.stdout
    );
    assert!(!left.stdout.contains("continue with"), "{}", left.stdout);
    assert!(
        left.stdout.contains("no story of epic-2 is left"),
        "{}",
        left.stdout
    );
    assert_eq!(std::fs::read_to_string(&sprint_path).unwrap(), original);
    assert!(player.served().is_empty());
}

/// A copy of one of the BMAD-generation fixtures of baton-epic.
fn generation(into: &Path, name: &str) -> PathBuf {
    let project = into.join(name);
    baton_testkit::copy_dir(
        &repo()
            .join("crates/baton-epic/tests/fixtures/generations")
            .join(name),
        &project,
    );
    project
}

#[test]
fn epic_status_names_the_sprint_file_the_rule_and_each_story_file() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    // BMAD 6.0: the configured file, a leftover one, a story_location from another machine.
    let project = generation(tmp.path(), "f2-bmad60");
    let p = project.to_str().unwrap();
    let run = baton.run(&["epic", "status", "-p", p, "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let board = run.json();
    let art = "_bmad-output/implementation-artifacts";
    assert_eq!(
        board["sprintStatus"]["path"],
        format!("{art}/sprint-status.yaml")
    );
    assert_eq!(
        board["sprintStatus"]["rule"],
        "_bmad/bmm/config.yaml implementation_artifacts"
    );
    assert_eq!(
        board["sprintStatus"]["others"][0]["path"],
        "docs/sprint-status.yaml"
    );
    let story = |key: &str| {
        board["epics"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|e| e["stories"].as_array().unwrap())
            .find(|s| s["key"] == key)
            .unwrap_or_else(|| panic!("{key}: {board}"))
            .clone()
    };
    assert_eq!(
        story("2-1-irrigation-map")["file"],
        format!("{art}/stories/2-1-irrigation-map.md")
    );
    assert_eq!(story("2-2-pest-log")["file"], format!("{art}/story-2.2.md"));
    assert_eq!(story("2-2-pest-log")["fileStatus"], "in-progress");
    let notes = board["storyFiles"]["notes"].to_string();
    assert!(notes.contains("/home/someone-else/orchard"), "{notes}");
    let text = baton.run(&["epic", "status", "-p", p]);
    assert_eq!(text.code, 0);
    assert!(
        text.stdout.contains(&format!(
            "sprint status: {art}/sprint-status.yaml (rule: _bmad/bmm/config.yaml implementation_artifacts)"
        )),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("also found, not used: docs/sprint-status.yaml (search: docs)"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains(&format!("{art}/story-2.2.md")),
        "{}",
        text.stdout
    );

    // BMAD 6.12: the team layer's folder; the spec further along than sprint-status moves the
    // plan's start to code-review, and the line says why.
    let project = generation(tmp.path(), "f1-bmad612");
    let p = project.to_str().unwrap();
    let board = baton.run(&["epic", "status", "-p", p, "--json"]).json();
    assert_eq!(
        board["sprintStatus"]["rule"],
        "_bmad/custom/config.toml [modules.bmm] implementation_artifacts"
    );
    let text = baton.run(&["epic", "status", "-p", p]);
    assert!(
        text.stdout
            .contains("delivery/impl/spec-1-2-glass-chimney.md (file: in-review)"),
        "{}",
        text.stdout
    );
    let plan = baton.run(&["epic", "run", "epic-1", "-p", p, "--dry-run"]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    let line = plan
        .stdout
        .lines()
        .position(|l| l.contains("1-2-glass-chimney"))
        .unwrap_or_else(|| panic!("{}", plan.stdout));
    let lines: Vec<&str> = plan.stdout.lines().collect();
    assert!(
        lines[line].ends_with("starts at code-review"),
        "{}",
        plan.stdout
    );
    assert!(
        lines[line + 1].contains("spec-1-2-glass-chimney.md says in-review"),
        "{}",
        plan.stdout
    );
}
