//! `baton session` through the real binary: the board and its JSON, usage errors with their
//! codes and exit status.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;
use crate::ralph_support;

use common::{Tmux, tmux_missing};
use ralph_support::{Fx, Out};
use serde_json::{Value, json};
use std::process::{Command, Stdio};

fn session_cmd(fx: &Fx, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
    cmd.arg("session")
        .args(args)
        .current_dir(&fx.project)
        .env("HOME", &fx.home)
        .env("BATON_HOME", fx.tmp.path().join("baton-home"))
        .env_remove("MAESTRO_HOME")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("BATON_MODEL")
        .stdin(Stdio::null());
    cmd
}

fn out(cmd: &mut Command) -> Out {
    let o = cmd.output().expect("baton runs");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn session(fx: &Fx, args: &[&str]) -> Out {
    out(&mut session_cmd(fx, args))
}

#[test]
fn status_shows_the_board_sub_goals_and_latest_decisions() {
    let fx = Fx::new();
    let id = fx.created("plan,verify,milestone-complete");
    let mut doc = fx.get(&id);
    doc["task_decomposition"] = json!([
        {"id": "G1", "goal": "export rows", "status": "done", "done_when": "a test passes",
         "evidence": "src/export.rs", "completion_confirmed": true},
        {"id": "G2", "goal": "header row", "status": "pending", "done_when": "a header",
         "evidence": "src/header.rs"}
    ]);
    fx.put(&id, &doc);
    let decision = json!({
        "id": "DEC-1-4", "node_id": "post-verify", "type": "quality-gate", "verdict": "fix",
        "requested_verdict": "proceed", "confidence_score": 55, "step_index": 2,
        "summary": "the header row is missing\nsecond line"
    });
    std::fs::write(
        fx.dir(&id).join("decisions.ndjson"),
        format!("{decision}\n{{torn"),
    )
    .unwrap();

    let text = session(&fx, &["status"]);
    text.code(0);
    assert!(
        text.stdout.contains(&format!("Session:  {id}")),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains("◆ post-verify [decision]"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("Sub-goals (1/2)"), "{}", text.stdout);
    assert!(
        text.stdout.contains(
            "[2] post-verify → fix · confidence 55 (asked proceed) — the header row is missing\n"
        ),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("1 damaged line"), "{}", text.stdout);

    let json = session(&fx, &["status", "--session", &id, "--json"]);
    json.code(0);
    let v = json.json();
    assert_eq!(v["session_id"], id.as_str());
    assert_eq!(v["status"], "running");
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(
        v["progress"],
        json!({"completed": 0, "confirmed": 0, "total": steps.len()})
    );
    assert_eq!(steps[1]["kind"], "exec");
    assert_eq!(steps[2]["decision"], "post-verify");
    assert_eq!(v["sub_goals"][1]["id"], "G2");
    assert_eq!(v["decisions"][0]["id"], "DEC-1-4");
    assert_eq!(v["decisions_skipped_lines"], 1);
    assert_eq!(v["decisions_truncated"], false);
}

#[test]
fn status_usage_errors_have_codes_and_exit_2() {
    let fx = Fx::new();
    let none = session(&fx, &["status", "--json"]);
    none.code(2);
    assert_eq!(none.json()["error"]["code"], "SESSION_NOT_FOUND");
    assert!(
        none.json()["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("baton session start"),
        "{}",
        none.stdout
    );
    fx.created("plan");
    let unknown = session(&fx, &["status", "--session", "ralph-nope"]);
    unknown.code(2);
    assert!(
        unknown
            .stderr
            .starts_with("error[SESSION_NOT_FOUND]: session not found: ralph-nope"),
        "{}",
        unknown.stderr
    );
    let bad = session(&fx, &["status", "--session", "../x", "--json"]);
    bad.code(2);
    assert_eq!(bad.json()["error"]["code"], "SESSION_ID_INVALID");
    let v: Value = bad.json();
    assert!(v["error"]["message"].as_str().unwrap().contains("../x"));
}

use crate::session_player;
use session_player::{Player, Scenario};

const INTENT: &str = "add a header row to the csvsum output";
const VERIFICATION: &str = ".workflow/scratch/verification.json";
/// What the review and test steps write: a quality gate without its result file is a fix.
const REVIEW: &str = ".workflow/scratch/review.json";
const UAT: &str = ".workflow/scratch/uat.md";
const REPORT: &str = ".workflow/scratch/report.json";

/// A copy of the csvsum sample with the passing verification, review and test files the
/// verify, review and test steps cite, and a HOME without command files (the bundled lifecycle skills are used).
fn csvsum() -> Fx {
    let fx = Fx::bare();
    std::fs::remove_dir_all(&fx.project).unwrap();
    baton_testkit::copy_dir(
        &baton_testkit::repo().join("examples/projects/csvsum"),
        &fx.project,
    );
    fx.file(VERIFICATION, r#"{"status":"passed","gaps":[]}"#);
    fx.file(REVIEW, r#"{"status":"approved","findings":[]}"#);
    fx.file(UAT, "# UAT\n\nAll scenarios pass.\n");
    fx.file(REPORT, r#"{"status":"passed","failures":[]}"#);
    fx
}

fn played(fx: &Fx, player: &Player, args: &[&str]) -> Out {
    let mut cmd = session_cmd(fx, args);
    cmd.env("OPENAI_BASE_URL", player.base_url())
        .env("BATON_MODEL", "played")
        .env("OPENAI_API_KEY", "sk-test");
    out(&mut cmd)
}

fn scenario() -> Scenario {
    Scenario {
        evidence: vec![
            ("maestro-verify".into(), VERIFICATION.into()),
            ("quality-review".into(), REVIEW.into()),
            ("quality-test".into(), UAT.into()),
            ("quality-auto-test".into(), REPORT.into()),
        ],
        ..Scenario::default()
    }
}

#[test]
fn start_y_runs_a_session_to_completed() {
    let fx = csvsum();
    let player = Player::start(scenario());
    let run = played(&fx, &player, &["start", INTENT, "-y", "--json"]);
    run.code(0);
    let v = run.json();
    assert_eq!(v["outcome"], "completed", "{v:#}");
    assert_eq!(v["session"]["status"], "completed");
    let steps = v["session"]["steps"].as_array().unwrap();
    assert!(
        steps
            .iter()
            .all(|s| s["status"] == "completed" && s["completion_confirmed"] == true),
        "{v:#}"
    );
    assert_eq!(
        player
            .served()
            .iter()
            .filter(|(k, _)| k == "decompose")
            .count(),
        1
    );
    // Every request the model answered is counted: decomposition, step runs, gates.
    assert_eq!(v["model_calls"], player.served().len(), "{v:#}");
    assert!(v["usage"]["totalTokens"].as_u64().unwrap() > 0, "{v:#}");
    assert!(player.step_calls("maestro-verify") >= 1);
    assert!(!v["session"]["decisions"].as_array().unwrap().is_empty());
    let check = fx.ralph(&["check", "--json"]);
    check.code(0);
}

#[test]
fn a_steps_question_exits_10_and_answer_continues_the_step() {
    let fx = csvsum();
    let player = Player::start(Scenario {
        questions: vec![(
            "maestro-plan".into(),
            "Should the header row be optional?".into(),
        )],
        ..scenario()
    });
    let run = played(&fx, &player, &["start", INTENT, "-y", "--json"]);
    run.code(10);
    let v = run.json();
    assert_eq!(v["outcome"], "waiting", "{v:#}");
    assert_eq!(v["waiting"]["kind"], "step-question");
    assert_eq!(v["waiting"]["index"], 1);
    assert_eq!(
        v["waiting"]["question"],
        "Should the header row be optional?"
    );
    assert_eq!(v["session"]["status"], "running");
    let plan_calls = player.step_calls("maestro-plan");

    // The text form names the command that answers.
    let text = played(&fx, &player, &["continue"]);
    text.code(10);
    assert!(
        text.stdout.contains("answer with: baton session answer"),
        "{}",
        text.stdout
    );

    // The board says what the step asks.
    let board = session(&fx, &["status", "--json"]).json();
    assert_eq!(
        board["waiting_question"],
        json!({"index": 1, "question": "Should the header row be optional?"})
    );
    assert_eq!(board["driver"], Value::Null);
    let text = session(&fx, &["status"]);
    assert!(
        text.stdout
            .contains("Waiting:  step 1 asks: Should the header row be optional?"),
        "{}",
        text.stdout
    );

    // A new intent while this session waits is refused.
    let again = played(&fx, &player, &["start", "another intent", "-y", "--json"]);
    again.code(2);
    assert_eq!(again.json()["error"]["code"], "SESSION_ACTIVE");
    assert!(
        again.json()["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("baton session continue"),
        "{}",
        again.stdout
    );

    let answered = played(&fx, &player, &["answer", "no, always on", "--json"]);
    answered.code(0);
    assert_eq!(answered.json()["outcome"], "completed");
    // The waiting run was continued with the answer, not started again: one more call, the
    // one that sees the answer (`continue` above reported the question without a call).
    assert_eq!(player.step_calls("maestro-plan"), plan_calls + 1);
    fx.ralph(&["check", "--json"]).code(0);

    let nothing = played(&fx, &player, &["answer", "hello", "--json"]);
    nothing.code(2);
    assert_eq!(nothing.json()["error"]["code"], "SESSION_NOT_FOUND");
    // The session finished: the hint says where it is, not only to start another.
    let hint = nothing.json()["error"]["hint"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(hint.contains("baton session status"), "{hint}");
}

#[test]
fn a_build_question_without_a_terminal_exits_10_and_answer_flags_go_on() {
    let fx = csvsum();
    let player = Player::start(scenario());
    let intent = "rewrite the csvsum output format";
    let mut args: Vec<String> = vec!["start".into(), intent.into(), "-y".into(), "--json".into()];
    let mut rounds = 0;
    let v = loop {
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = played(&fx, &player, &argv);
        let v = run.json();
        if run.code != 10 {
            run.code(0);
            break v;
        }
        rounds += 1;
        assert!(rounds <= 5, "questions never end: {v:#}");
        assert_eq!(v["outcome"], "questions", "{v:#}");
        assert!(
            !fx.sessions().exists(),
            "nothing is created while questions remain"
        );
        for q in v["questions"].as_array().unwrap() {
            let id = q["id"].as_str().unwrap();
            let answer = q["options"][0]["value"].as_str().unwrap_or("keep it small");
            args.push(format!("--answer={id}={answer}"));
        }
    };
    assert!(rounds >= 1, "a broad intent is clarified even with -y");
    assert_eq!(v["outcome"], "completed", "{v:#}");
}

#[test]
fn without_y_and_without_a_terminal_the_chain_waits_for_a_yes() {
    let fx = csvsum();
    let player = Player::start(scenario());
    let run = played(&fx, &player, &["start", INTENT, "--json"]);
    run.code(10);
    let v = run.json();
    assert_eq!(v["outcome"], "confirm");
    assert!(v["chain"].as_array().unwrap().len() > 3, "{v:#}");
    assert!(!fx.sessions().exists(), "nothing was created");
    let text = played(&fx, &player, &["start", INTENT]);
    text.code(10);
    assert!(text.stdout.contains("add -y"), "{}", text.stdout);
    assert!(text.stdout.contains("◆ post-verify"), "{}", text.stdout);
}

#[test]
fn a_blocked_step_pauses_and_answer_retries_or_skips_it() {
    let fx = csvsum();
    let player = Player::start(Scenario {
        // A step no gate needs the result of: skipping the review would leave post-review
        // without review.json, which is a fix, not a proceed.
        blocked: vec![("maestro-plan".into(), "the planner is away".into())],
        ..scenario()
    });
    let run = played(&fx, &player, &["start", INTENT, "-y", "--json"]);
    // An auto-mode session pauses on a failed step without asking: exit 1.
    run.code(1);
    let v = run.json();
    assert_eq!(v["outcome"], "paused", "{v:#}");
    assert_eq!(v["waiting"]["kind"], "failed-step");
    assert_eq!(v["waiting"]["reason"], "the planner is away");
    assert_eq!(v["waiting"]["choices"], json!(["retry", "skip", "abort"]));
    let index = v["waiting"]["index"].as_u64().unwrap() as usize;
    assert_eq!(player.step_calls("maestro-plan"), 1);

    let bad = played(&fx, &player, &["answer", "proceed", "--json"]);
    bad.code(2);
    assert_eq!(bad.json()["error"]["code"], "CHOICE_NOT_APPLICABLE");
    let unknown = played(&fx, &player, &["answer", "later"]);
    unknown.code(2);
    assert!(
        unknown.stderr.contains("CHOICE_INVALID"),
        "{}",
        unknown.stderr
    );

    let retried = played(&fx, &player, &["answer", "retry", "--json"]);
    retried.code(1);
    assert_eq!(player.step_calls("maestro-plan"), 2, "the step ran again");

    let skipped = played(
        &fx,
        &player,
        &["answer", "skip", "planned by hand", "--json"],
    );
    // `answer` takes one TEXT; the note is part of it.
    skipped.code(2);
    let skipped = played(&fx, &player, &["answer", "skip planned by hand", "--json"]);
    skipped.code(0);
    let v = skipped.json();
    assert_eq!(v["outcome"], "completed", "{v:#}");
    assert_eq!(v["session"]["steps"][index]["status"], "skipped");
    fx.ralph(&["check", "--json"]).code(0);
}

#[test]
fn continue_usage_errors_have_codes() {
    let fx = csvsum();
    let player = Player::start(scenario());
    let none = played(&fx, &player, &["continue", "--json"]);
    none.code(2);
    assert_eq!(none.json()["error"]["code"], "SESSION_NOT_FOUND");
    let unknown = played(&fx, &player, &["continue", "--session", "ralph-nope"]);
    unknown.code(2);
    assert!(
        unknown.stderr.contains("SESSION_NOT_FOUND"),
        "{}",
        unknown.stderr
    );
    let empty = played(&fx, &player, &["start", "  ", "-y", "--json"]);
    empty.code(2);
    assert_eq!(empty.json()["error"]["code"], "INTENT_EMPTY");
    let no_model = session(&fx, &["continue", "--json"]);
    no_model.code(2);
    let bad_answer = played(
        &fx,
        &player,
        &["start", INTENT, "--answer", "phase", "--json"],
    );
    bad_answer.code(2);
    assert_eq!(bad_answer.json()["error"]["code"], "USAGE");
    let missing = played(
        &fx,
        &player,
        &["start", INTENT, "-y", "--replay", "/nonexistent/dir"],
    );
    missing.code(2);
    assert!(
        missing.stderr.contains("REPLAY_DIR_INVALID") || missing.stderr.contains("error"),
        "{}",
        missing.stderr
    );
    assert!(!fx.sessions().exists(), "nothing was created");
}

fn verdict(gate: &str, retry: u64, status: &str, score: u8) -> (String, u64, String, u8) {
    (gate.into(), retry, status.into(), score)
}

#[test]
fn a_fix_loop_then_an_escalation_waits_for_a_person_and_proceed_goes_on() {
    let fx = csvsum();
    let player = Player::start(Scenario {
        verdicts: vec![
            verdict("post-verify", 0, "fix", 80),
            verdict("post-verify", 1, "escalate", 80),
        ],
        ..scenario()
    });
    let run = played(&fx, &player, &["start", INTENT, "-y"]);
    run.code(10);
    // One line per tick: the gate's recorded verdict, the inserted loop's steps.
    assert!(
        run.stderr.contains("◆ post-verify → fix (retry 0)"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("◆ post-verify → escalate (retry 1)"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("◆ post-debug-escalate → paused for a person"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("decide with: baton session answer --session"),
        "{}",
        run.stderr
    );
    let board = session(&fx, &["status", "--json"]).json();
    assert_eq!(board["status"], "paused");
    let decisions: Vec<&str> = board["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(decisions, ["fix", "escalate", "escalate"]);

    // `continue` has nothing to do without a person's word.
    let waiting = played(&fx, &player, &["continue", "--json"]);
    waiting.code(10);
    assert_eq!(waiting.json()["waiting"]["kind"], "escalation");
    assert_eq!(
        waiting.json()["waiting"]["choices"],
        json!(["proceed", "abort"])
    );

    let go = played(
        &fx,
        &player,
        &["answer", "proceed the header is fixed", "--json"],
    );
    go.code(0);
    let v = go.json();
    assert_eq!(v["outcome"], "completed", "{v:#}");
    let last_escalation = v["session"]["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|d| d["node_id"] == "post-debug-escalate")
        .unwrap()
        .clone();
    assert_eq!(last_escalation["verdict"], "proceed");
    assert!(
        last_escalation["summary"]
            .as_str()
            .unwrap()
            .ends_with("the header is fixed")
    );
    fx.ralph(&["check", "--json"]).code(0);
}

/// Starts `baton session …` in the background against the player.
fn spawn(fx: &Fx, player: &Player, args: &[&str]) -> std::process::Child {
    let mut cmd = session_cmd(fx, args);
    cmd.env("OPENAI_BASE_URL", player.base_url())
        .env("BATON_MODEL", "played")
        .env("OPENAI_API_KEY", "sk-test")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().expect("baton starts")
}

fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn ctrl_c_exits_130_a_second_driver_is_refused_and_continue_finishes() {
    let fx = csvsum();
    let player = Player::start(Scenario {
        slow_skill: Some("maestro-execute".into()),
        delay: std::time::Duration::from_millis(1500),
        ..scenario()
    });
    let child = spawn(&fx, &player, &["start", INTENT, "-y", "--json"]);
    wait_for("the execute step", || {
        player.step_calls("maestro-execute") > 0
    });

    let board = session(&fx, &["status", "--json"]).json();
    assert_eq!(
        board["driver"]["command"], "baton session start",
        "{board:#}"
    );
    assert_eq!(board["driver"]["pid"], child.id());

    let busy = played(&fx, &player, &["continue", "--json"]);
    busy.code(1);
    assert_eq!(busy.json()["error"]["code"], "SESSION_BUSY");
    assert!(
        busy.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("baton session start"),
        "{}",
        busy.stdout
    );

    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["outcome"], "interrupted");

    let done = played(&fx, &player, &["continue", "--json"]);
    done.code(0);
    assert_eq!(done.json()["outcome"], "completed");
    fx.ralph(&["check", "--json"]).code(0);
}

#[test]
fn a_recorded_session_replays_offline() {
    let fx = csvsum();
    let traces = fx.tmp.path().join("traces");
    let player = Player::start(scenario());
    let live = played(
        &fx,
        &player,
        &[
            "start",
            INTENT,
            "-y",
            "--json",
            "--record",
            traces.to_str().unwrap(),
        ],
    );
    live.code(0);
    let served = player.served().len();
    assert!(traces.join(START_TRACE).is_file());

    let again = csvsum();
    let replayed = session(
        &again,
        &[
            "start",
            INTENT,
            "-y",
            "--json",
            "--replay",
            traces.to_str().unwrap(),
        ],
    );
    replayed.code(0);
    assert_eq!(replayed.json()["outcome"], "completed");
    assert_eq!(player.served().len(), served, "the replay asked no model");
    let steps = |o: &Out| -> Vec<(String, String)> {
        o.json()["session"]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["skill"].as_str().unwrap().to_string(),
                    s["status"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    assert_eq!(steps(&live), steps(&replayed));
}

const START_TRACE: &str = "start.trace.json";

/// `baton session <args>` running in a terminal of its own (tmux) against the player; the
/// window shows `SESSION-ENDED <exit code>` when it ends.
fn terminal(fx: &Fx, player: &Player, name: &str, args: &str) -> Tmux {
    let tmux = Tmux {
        socket: format!("baton-session-{name}-{}", std::process::id()),
        target: "s".into(),
    };
    let script = format!(
        "cd {project} && env HOME={home} BATON_HOME={baton_home} OPENAI_BASE_URL={url} \
         BATON_MODEL=played OPENAI_API_KEY=sk-test {bin} session {args}; \
         echo SESSION-ENDED $?; sleep 30",
        project = fx.project.display(),
        home = fx.home.display(),
        baton_home = fx.tmp.path().join("baton-home").display(),
        url = player.base_url(),
        bin = env!("CARGO_BIN_EXE_baton"),
    );
    tmux.run(200, 60, &script);
    tmux
}

#[test]
fn on_a_terminal_the_chain_a_steps_question_and_a_failed_step_are_asked() {
    if tmux_missing() {
        eprintln!("tmux is not installed; skipping the terminal test");
        return;
    }
    let fx = csvsum();
    let player = Player::start(Scenario {
        questions: vec![(
            "maestro-plan".into(),
            "Should the header be optional?".into(),
        )],
        blocked: vec![("quality-review".into(), "the reviewer is away".into())],
        ..scenario()
    });
    let tmux = terminal(&fx, &player, "chain", &format!("start '{INTENT}'"));

    let screen = tmux.wait_for("Create this session and run it?");
    assert!(screen.contains("◆ post-verify"), "{screen}");
    tmux.type_line("1");
    tmux.wait_for("Should the header be optional?");
    tmux.type_line("yes, behind a flag");
    // Without -y the person confirms each verdict a model gives.
    let screen = tmux.wait_for("the model says proceed (confidence 90)");
    assert!(screen.contains("gate post-verify (step 4)"), "{screen}");
    assert!(screen.contains("accept — settle the gate"), "{screen}");
    tmux.type_line("accept");
    let screen = tmux.wait_for("failed: the reviewer is away. What now?");
    assert!(
        screen
            .lines()
            .any(|l| l.starts_with("[1/") && l.contains("maestro-plan") && l.contains("· DONE")),
        "{screen}"
    );
    tmux.type_line("skip");
    tmux.wait_for_change(&screen);
    // The gates after it (review, test, goal audit) are confirmed the same way.
    let mut accepted = 0;
    let screen = loop {
        let screen = tmux.screen();
        if screen.contains("SESSION-ENDED") {
            break screen;
        }
        if screen.trim_end().ends_with('>') {
            accepted += 1;
            assert!(accepted <= 5, "verdicts never end:\n{screen}");
            assert!(screen.contains("the model says"), "{screen}");
            tmux.type_line("accept");
            // The prompt answered is gone before the screen is looked at again.
            tmux.wait_for_change(&screen);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(accepted >= 1, "{screen}");
    assert!(screen.contains("SESSION-ENDED 0"), "{screen}");
    assert!(screen.contains("completed: session"), "{screen}");
    let board = session(&fx, &["status", "--json"]).json();
    assert_eq!(board["status"], "completed");
    let skipped: Vec<&str> = board["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["status"] == "skipped")
        .map(|s| s["skill"].as_str().unwrap())
        .collect();
    assert_eq!(skipped, ["quality-review"]);
}

#[test]
fn on_a_terminal_the_build_questions_are_asked_even_with_y() {
    if tmux_missing() {
        eprintln!("tmux is not installed; skipping the terminal test");
        return;
    }
    let fx = csvsum();
    let player = Player::start(scenario());
    let tmux = terminal(
        &fx,
        &player,
        "questions",
        "start 'rewrite the csvsum output format' -y",
    );
    let screen = tmux.wait_for("Which folders, files or layers are in scope");
    assert!(screen.contains("  1) "), "{screen}");
    let mut answered = 0;
    let screen = loop {
        let screen = tmux.screen();
        if screen.contains("SESSION-ENDED") {
            break screen;
        }
        if screen.trim_end().ends_with('>') {
            answered += 1;
            assert!(answered <= 6, "questions never end:\n{screen}");
            tmux.type_line("1");
            // The prompt answered is gone before the screen is looked at again.
            tmux.wait_for_change(&screen);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(answered >= 1, "{screen}");
    assert!(screen.contains("SESSION-ENDED 0"), "{screen}");
    assert!(screen.contains("completed: session"), "{screen}");
}

#[test]
fn an_abandoned_session_is_not_continued() {
    let fx = csvsum();
    let player = Player::start(Scenario {
        questions: vec![("maestro-analyze".into(), "Which column?".into())],
        ..scenario()
    });
    let run = played(&fx, &player, &["start", INTENT, "-y", "--json"]);
    run.code(10);
    let id = run.json()["session_id"].as_str().unwrap().to_string();
    fx.ralph(&["abandon", "--session", &id]).code(0);
    for verb in [
        &["continue", "--session", &id][..],
        &["answer", "x", "--session", &id],
    ] {
        let mut args = verb.to_vec();
        args.push("--json");
        let o = played(&fx, &player, &args);
        o.code(2);
        assert_eq!(o.json()["error"]["code"], "SESSION_NOT_ACTIVE", "{verb:?}");
    }
}

#[test]
fn ctrl_c_at_a_session_prompt_names_the_session_commands() {
    if tmux_missing() {
        eprintln!("tmux is not installed; skipping the terminal test");
        return;
    }
    let fx = csvsum();
    let player = Player::start(scenario());
    let tmux = terminal(&fx, &player, "ctrl-c", &format!("start '{INTENT}'"));
    tmux.wait_for("Create this session and run it?");
    assert!(tmux.cmd(&["send-keys", "-t", "s", "C-c"]).status.success());
    let screen = tmux.wait_for("SESSION-ENDED");
    assert!(screen.contains("SESSION-ENDED 130"), "{screen}");
    assert!(
        screen.contains("`baton session continue` goes on"),
        "{screen}"
    );
    assert!(!screen.contains("baton answer <RUN>"), "{screen}");
}

#[test]
fn what_a_model_wrote_is_printed_with_its_control_characters_escaped() {
    let fx = csvsum();
    // Long but within what session.complete accepts (4,000 characters).
    let reason = format!("away\u{1b}[2J\u{7}{}", "x".repeat(3000));
    let player = Player::start(Scenario {
        blocked: vec![("quality-review".into(), reason.clone())],
        questions: vec![("maestro-plan".into(), "Which\u{1b}[31m header?".into())],
        ..scenario()
    });
    let asked = played(&fx, &player, &["start", INTENT, "-y"]);
    asked.code(10);
    assert!(
        asked.stdout.contains("Which\\x1b[31m header?"),
        "{}",
        asked.stdout
    );
    let paused = played(&fx, &player, &["answer", "the first line"]);
    paused.code(1);
    let all = format!("{}{}", paused.stdout, paused.stderr);
    // Shown as visible escapes, never sent to the terminal.
    assert!(all.contains("failed: away\\x1b[2J\\x07"), "{all}");
    assert!(!all.contains('\u{1b}') && !all.contains('\u{7}'), "{all}");
    assert!(all.len() < 2000, "the reason is cut: {} bytes", all.len());
    // JSON keeps the text as the model wrote it (escaped by JSON itself).
    let json = played(&fx, &player, &["continue", "--json"]);
    json.code(1);
    assert_eq!(json.json()["waiting"]["reason"], reason.as_str());
}

#[test]
fn a_step_that_never_completes_is_retried_once_then_blocked() {
    let fx = csvsum();
    let player = Player::start(Scenario {
        busy: vec!["maestro-plan".into()],
        ..scenario()
    });
    let run = played(
        &fx,
        &player,
        &["start", INTENT, "-y", "--max-turns", "2", "--json"],
    );
    run.code(1);
    let v = run.json();
    assert_eq!(v["waiting"]["kind"], "failed-step", "{v:#}");
    assert_eq!(v["waiting"]["index"], 1);
    assert_eq!(v["session"]["steps"][1]["completion_status"], "BLOCKED");
    // Two turns per invocation, two invocations (NEEDS_RETRY, then BLOCKED).
    assert_eq!(player.step_calls("maestro-plan"), 4);
    let bad = played(&fx, &player, &["continue", "--max-turns", "0"]);
    bad.code(2);
}

/// Gates judged by the model whose request was served, in order.
fn gate_calls(player: &Player) -> Vec<String> {
    player
        .served()
        .into_iter()
        .filter(|(k, _)| k == "gate")
        .map(|(_, g)| g)
        .collect()
}

#[test]
fn without_y_a_gate_verdict_stops_with_exit_10_and_answer_accept_goes_on() {
    let fx = csvsum();
    let player = Player::start(Scenario {
        verdicts: vec![verdict("post-verify", 0, "fix", 80)],
        ..scenario()
    });
    // Made by `ralph new` without --auto (interactive mode), with the sample command files,
    // and driven where nobody can be asked.
    let skills = baton_testkit::repo().join("examples/skills");
    baton_testkit::copy_dir(&skills.join("claude"), &fx.home.join(".claude"));
    baton_testkit::copy_dir(&skills.join("maestro"), &fx.home.join(".maestro"));
    fx.ralph(&["new", INTENT, "--chain", "plan,verify,milestone-complete"])
        .code(0);
    let run = played(&fx, &player, &["continue", "--json"]);
    run.code(10);
    let v = run.json();
    assert_eq!(v["outcome"], "waiting", "{v:#}");
    let w = &v["waiting"];
    assert_eq!(w["kind"], "gate-review", "{v:#}");
    assert_eq!(w["gate"], "post-verify");
    assert_eq!(w["verdict"], "fix");
    assert_eq!(w["confidence"], 80);
    assert_eq!(w["reason"], "played verdict for post-verify at retry 0");
    assert_eq!(
        w["choices"],
        json!(["accept", "proceed", "fix", "escalate", "abort"])
    );
    assert_eq!(v["session"]["status"], "paused");
    assert!(v["session"]["decisions"].as_array().unwrap().is_empty());

    // The text form says what the model said and how to decide; the model is not asked again.
    let text = played(&fx, &player, &["continue"]);
    text.code(10);
    assert!(
        text.stderr
            .contains("gate post-verify (step 2): the model says fix (confidence 80)"),
        "{}",
        text.stderr
    );
    assert!(
        text.stderr.contains("baton session answer --session")
            && text.stderr.contains("accept|proceed|fix|escalate|abort"),
        "{}",
        text.stderr
    );
    assert_eq!(gate_calls(&player), ["post-verify"]);

    // Accepted: the fix loop runs; the follow-up gate's proceed waits for a person too.
    let go = played(&fx, &player, &["answer", "accept", "--json"]);
    go.code(10);
    let v = go.json();
    assert_eq!(v["waiting"]["kind"], "gate-review", "{v:#}");
    assert_eq!(v["waiting"]["verdict"], "proceed");
    assert_eq!(gate_calls(&player), ["post-verify", "post-verify"]);

    let done = played(
        &fx,
        &player,
        &["answer", "fix the header is still wrong", "--json"],
    );
    done.code(10);
    let v = done.json();
    let decisions = v["session"]["decisions"].as_array().unwrap();
    let verdicts: Vec<&str> = decisions
        .iter()
        .filter(|d| d["node_id"] == "post-verify")
        .map(|d| d["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts, ["fix", "fix"], "{v:#}");
    let overridden = decisions
        .iter()
        .rev()
        .find(|d| d["node_id"] == "post-verify")
        .unwrap();
    let summary = overridden["summary"].as_str().unwrap();
    assert!(
        summary.contains("a person chose fix over the model's proceed"),
        "{summary}"
    );
    fx.ralph(&["check", "--json"]).code(0);
}

/// Without a terminal and without -y the chain is printed once, as it will run (no
/// `{intent}` or `{phase}` left), and the command to go on is the real one, ready to paste.
#[test]
fn the_chain_to_confirm_is_shown_once_filled_in_with_a_command_to_paste() {
    let fx = csvsum();
    let player = Player::start(scenario());
    let text = played(&fx, &player, &["start", INTENT, "--non-interactive"]);
    text.code(10);
    let all = format!("{}{}", text.stdout, text.stderr);
    assert_eq!(all.matches("◆ post-verify").count(), 1, "{all}");
    assert!(
        !all.contains("{intent}") && !all.contains("{phase}"),
        "{all}"
    );
    assert!(
        text.stdout
            .contains("add -y: baton session start 'add a header row to the csvsum output'"),
        "{}",
        text.stdout
    );
    assert!(!all.contains("<intent>"), "{all}");
}

/// A build-phase question names the intent (and the flags given) in its hint.
#[test]
fn a_build_question_hint_is_the_command_with_the_real_intent() {
    let fx = csvsum();
    let player = Player::start(scenario());
    let intent = "rewrite the csvsum output format";
    let text = played(&fx, &player, &["start", intent, "--quality", "quick"]);
    text.code(10);
    assert!(
        text.stdout.contains(
            "answer on the command line: baton session start 'rewrite the csvsum output format' --quality quick --answer "
        ),
        "{}",
        text.stdout
    );
    assert!(!text.stdout.contains("<intent>"), "{}", text.stdout);
}

/// While a step's run waits on a question the board says so, not `running`; a completed
/// session is not shown at the position it started from.
#[test]
fn status_says_waiting_while_a_question_waits_and_done_when_completed() {
    let fx = csvsum();
    let player = Player::start(Scenario {
        questions: vec![(
            "maestro-plan".into(),
            "Should the header row be optional?".into(),
        )],
        ..scenario()
    });
    played(&fx, &player, &["start", INTENT, "-y", "--json"]).code(10);
    let board = session(&fx, &["status"]);
    board.code(0);
    assert!(
        board.stdout.contains("Status:   waiting for an answer"),
        "{}",
        board.stdout
    );
    assert!(
        !board.stdout.contains("Status:   running"),
        "{}",
        board.stdout
    );

    played(&fx, &player, &["answer", "yes, optional", "--json"]).code(0);
    let board = session(&fx, &["status"]);
    assert!(
        board.stdout.contains("Status:   completed"),
        "{}",
        board.stdout
    );
    let position = board
        .stdout
        .lines()
        .find(|l| l.starts_with("Position:"))
        .unwrap();
    assert!(
        position.starts_with("Position: done (started at "),
        "{position}"
    );
}

#[test]
fn a_session_budget_stops_with_exit_12_and_continue_with_a_larger_one_finishes() {
    let fx = csvsum();
    let player = Player::start(scenario());
    // A budget of 0: not even the decomposition is asked, nothing is created.
    let zero = played(
        &fx,
        &player,
        &["start", INTENT, "-y", "--json", "--budget-tokens", "0"],
    );
    zero.code(12);
    assert_eq!(zero.json()["error"]["code"], "BUDGET_EXCEEDED");
    assert!(player.served().is_empty());
    // Each call is estimated at its counted prompt plus the 8,192-token cap: about 10,000
    // tokens for the decomposition, about 10,800 for a step. 10,500 pays for the first only.
    let budget = ["--budget-tokens", "10500"];
    let run = played(
        &fx,
        &player,
        &[&["start", INTENT, "-y", "--json"][..], &budget].concat(),
    );
    run.code(12);
    let v = run.json();
    assert_eq!(v["error"]["code"], "BUDGET_EXCEEDED", "{v:#}");
    assert_eq!(player.served().len(), 1, "the decomposition only");
    // The same budget again: the decomposition's tokens count, no step call is sent.
    let again = played(
        &fx,
        &player,
        &[&["continue", "--json"][..], &budget].concat(),
    );
    again.code(12);
    assert_eq!(player.served().len(), 1);
    // A larger one finishes the session.
    let done = played(
        &fx,
        &player,
        &["continue", "--json", "--budget-tokens", "100000000"],
    );
    done.code(0);
    assert_eq!(done.json()["outcome"], "completed");
    // status --json sums the usage per step and for the session (decomposition and gates
    // under `gates`).
    let status = played(&fx, &player, &["status", "--json"]);
    status.code(0);
    let s = status.json();
    let total = s["usage"]["total"]["totalTokens"].as_u64().unwrap();
    let steps: u64 = s["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|st| st["usage"]["totalTokens"].as_u64())
        .sum();
    let outside = s["usage"]["gates"]["totalTokens"].as_u64().unwrap();
    assert!(steps > 0 && outside > 0, "{s:#}");
    assert_eq!(total, steps + outside, "{s:#}");
}
