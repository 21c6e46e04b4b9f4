//! The two questions a session asks a person mid-way, answered on the command line with
//! `baton session answer` (the real binary, a played model, no terminal): an unknown scope
//! verdict of the macro analysis (*large / small / abort*) and how to plan a next milestone of
//! several phases (*unified / independent / abort*). Each stops `continue` with exit code 10
//! and the question; the answer is applied and the session goes on from there.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::ralph_support;
use crate::session_player;

use ralph_support::{Fx, Out};
use serde_json::{Value, json};
use session_player::{Player, Scenario};
use std::process::{Command, Stdio};

const INTENT: &str = "add a header row to the csvsum output";
const CONCLUSIONS: &str = ".workflow/scratch/ANL-001/conclusions.json";

/// The csvsum sample, the sample command files in HOME.
fn csvsum() -> Fx {
    let fx = Fx::new();
    std::fs::remove_dir_all(&fx.project).unwrap();
    baton_testkit::copy_dir(
        &baton_testkit::repo().join("examples/projects/csvsum"),
        &fx.project,
    );
    fx
}

fn played(fx: &Fx, player: &Player, args: &[&str]) -> Out {
    let o = Command::new(env!("CARGO_BIN_EXE_baton"))
        .arg("session")
        .args(args)
        .current_dir(&fx.project)
        .env("HOME", &fx.home)
        .env("BATON_HOME", fx.tmp.path().join("baton-home"))
        .env_remove("MAESTRO_HOME")
        .env("OPENAI_BASE_URL", player.base_url())
        .env("BATON_MODEL", "played")
        .env("OPENAI_API_KEY", "sk-test")
        .stdin(Stdio::null())
        .output()
        .expect("baton runs");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// The session's status.json.
fn status(fx: &Fx) -> Value {
    let dir = std::fs::read_dir(fx.sessions())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("status.json").is_file())
        .unwrap();
    serde_json::from_slice(&std::fs::read(dir.join("status.json")).unwrap()).unwrap()
}

fn steps(doc: &Value) -> Vec<Value> {
    doc["steps"].as_array().unwrap().clone()
}

/// `continue` stopped on the question of `gate`, with exit 10, these choices and the command
/// to answer it.
fn asked(run: &Out, gate: &str, choices: Value) {
    run.code(10);
    let v = run.json();
    assert_eq!(v["outcome"], "waiting", "{v:#}");
    let w = &v["waiting"];
    assert_eq!(w["kind"], "question", "{v:#}");
    assert_eq!(w["gate"], gate, "{v:#}");
    assert_eq!(w["choices"], choices, "{v:#}");
    assert_eq!(v["session"]["status"], "paused", "{v:#}");
}

#[test]
fn an_unknown_scope_is_asked_and_session_answer_small_goes_on_from_the_analysis() {
    let fx = csvsum();
    // The macro analysis cites conclusions whose verdict is none of small, medium, large.
    fx.file(
        CONCLUSIONS,
        r#"{"id": "ANL-001", "scope_verdict": "enormous"}"#,
    );
    let player = Player::start(Scenario {
        evidence: vec![("maestro-analyze".into(), CONCLUSIONS.into())],
        ..Scenario::default()
    });
    // Interactive mode (no --auto), driven where nobody can be asked.
    fx.ralph(&[
        "new",
        INTENT,
        "--chain",
        "analyze-macro,roadmap,analyze,plan,execute,milestone-complete",
    ])
    .code(0);
    let run = played(&fx, &player, &["continue", "--json"]);
    asked(
        &run,
        "post-analyze-scope",
        json!(["large", "small", "abort"]),
    );
    let text = played(&fx, &player, &["continue"]);
    text.code(10);
    assert!(
        text.stderr.contains("baton session answer") && text.stderr.contains("large|small|abort"),
        "{}",
        text.stderr
    );

    let go = played(&fx, &player, &["answer", "small scoped by hand", "--json"]);
    let v = go.json();
    assert_ne!(
        v["waiting"]["gate"], "post-analyze-scope",
        "asked again: {v:#}"
    );
    let doc = status(&fx);
    assert_eq!(doc["scope_verdict"], "small", "{doc:#}");
    let all = steps(&doc);
    let of = |stage: &str| {
        all.iter()
            .find(|s| s["stage"] == stage && s["decision"].is_null())
            .unwrap()
            .clone()
    };
    // Small: roadmap and the phase analysis are skipped, the plan starts from the analysis.
    assert_eq!(of("roadmap")["status"], "skipped", "{doc:#}");
    assert_eq!(of("analyze")["status"], "skipped", "{doc:#}");
    assert!(
        of("plan")["args"]
            .as_str()
            .unwrap()
            .contains("--from analyze:ANL-001"),
        "{doc:#}"
    );
    // The decision says a person chose it, with the note given after the word.
    let decisions = v["session"]["decisions"].as_array().unwrap();
    let scope = decisions
        .iter()
        .find(|d| d["node_id"] == "post-analyze-scope")
        .unwrap();
    let summary = scope["summary"].as_str().unwrap();
    assert!(
        summary.contains("a person chose small") && summary.contains("scoped by hand"),
        "{summary}"
    );
    // And the session went on past the question: the plan step ran.
    assert!(player.step_calls("maestro-plan") >= 1, "{v:#}");
}

#[test]
fn a_multi_phase_next_milestone_is_asked_and_session_answer_independent_goes_on() {
    let fx = csvsum();
    let state = fx.project.join(".workflow/state.json");
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    doc["milestones"].as_array_mut().unwrap().push(json!({
        "id": "M2", "name": "Empty input", "type": "standard", "status": "planned",
        "phases": [2, 3], "phase_slugs": {"2": "empty-input", "3": "bad-rows"}
    }));
    std::fs::write(&state, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let player = Player::start(Scenario::default());
    fx.ralph(&[
        "new",
        INTENT,
        "--chain",
        "milestone-complete",
        "--phase",
        "1",
    ])
    .code(0);
    let run = played(&fx, &player, &["continue", "--json"]);
    asked(
        &run,
        "post-milestone",
        json!(["unified", "independent", "abort"]),
    );
    let before = steps(&status(&fx)).len();

    let go = played(
        &fx,
        &player,
        &["answer", "independent two separate fixes", "--json"],
    );
    let v = go.json();
    assert_ne!(v["waiting"]["gate"], "post-milestone", "asked again: {v:#}");
    let decisions = v["session"]["decisions"].as_array().unwrap();
    let gate = decisions
        .iter()
        .find(|d| d["node_id"] == "post-milestone")
        .unwrap();
    let summary = gate["summary"].as_str().unwrap();
    assert!(
        summary.contains("a person chose independent") && summary.contains("two separate fixes"),
        "{summary}"
    );
    let doc = status(&fx);
    assert_eq!(doc["milestone"], "M2", "{doc:#}");
    assert_eq!(doc["phase"], 2, "{doc:#}");
    assert_eq!(doc["planning_mode"], "independent", "{doc:#}");
    let all = steps(&doc);
    assert!(all.len() > before, "M2's chain was inserted: {doc:#}");
    // Independent: each phase's own stages, its number in the args.
    let analyze: Vec<&str> = all
        .iter()
        .filter(|s| s["skill"] == "maestro-analyze")
        .map(|s| s["args"].as_str().unwrap())
        .collect();
    assert_eq!(analyze, ["2", "3"], "{doc:#}");
    // And the session went on into M2: its first step ran.
    assert_eq!(all[before]["status"], "completed", "{doc:#}");
    assert!(player.step_calls("maestro-analyze") >= 1, "{v:#}");
}
