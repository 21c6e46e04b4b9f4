//! A session across two milestones: `.workflow/state.json` of the csvsum sample gets a second
//! milestone (M2, phase 2, standard); the session started for phase 1 runs M1's chain to its
//! milestone-complete, the `post-milestone` gate advances it to M2 (A_ADVANCE_MILESTONE: the
//! next milestone's chain inserted, milestone and phase moved on, `passed_gates` emptied, the
//! decision logged), M2's chain runs, and the second `post-milestone` ends the session.
//! Also: an adhoc milestone ends the session and clears state.json's `current_milestone`; a
//! multi-phase next milestone without `-y` asks how to plan it; `ralph advance` does the same
//! for a session a maestro agent drives.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::session_player;
use crate::session_world;

use baton_lifecycle::ralph::Context;
use baton_lifecycle::ralph::check::{self, Scope};
use baton_lifecycle::ralph::verbs::{self, decide};
use baton_lifecycle::session::intervene::{self, Choice, Pause};
use baton_lifecycle::session::milestone;
use baton_lifecycle::session::run::{RunSettings, SessionEnd, run};
use baton_lifecycle::session::start::{self, StartOptions, StartOutcome};
use baton_lifecycle::session::step_run::ModelSource;
use baton_store::Store;
use serde_json::{Value, json};
use session_player::SessionPlayer;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const INTENT: &str = "phase 1: add a --header flag that skips the first line";
const OWNER: &str = "milestones@test";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Copy {
    _tmp: tempfile::TempDir,
    project: PathBuf,
    store: Store,
    ctx: Context,
}

/// The csvsum sample with M2 after M1; only the bundled skills.
fn copy() -> Copy {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("csvsum");
    baton_testkit::copy_dir(&repo().join("examples/projects/csvsum"), &project);
    session_player::add_second_milestone(&project);
    let store = Store::new(tmp.path().join("baton-home"));
    let ctx = Context {
        project: project.clone(),
        home: None,
        maestro_home: None,
        cli: "baton ralph".into(),
        owner: OWNER.into(),
        lock_timeout: Duration::from_secs(5),
        bundled_commands: None,
        warnings: Default::default(),
    }
    .with_bundled_skills(store.home())
    .unwrap();
    Copy {
        _tmp: tmp,
        project,
        store,
        ctx,
    }
}

fn session_dir(project: &Path) -> PathBuf {
    std::fs::read_dir(project.join(".workflow/.maestro"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("status.json").is_file())
        .unwrap()
}

fn status(project: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(session_dir(project).join("status.json")).unwrap())
        .unwrap()
}

fn decisions(project: &Path) -> Vec<Value> {
    std::fs::read_to_string(session_dir(project).join("decisions.ndjson"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_completes_m1_advances_and_completes_m2() {
    let c = copy();
    let player = SessionPlayer::start(&c.project);
    let model = baton_llm::testing::played_model(player.base_url()).unwrap();
    let options = StartOptions {
        intent: INTENT.into(),
        quality: Some(baton_lifecycle::session::infer::QualityMode::Quick),
        auto: true,
        answers: BTreeMap::new(),
        platform: None,
    };
    let out = start::start(&c.ctx, &options, &model, &CancellationToken::new())
        .await
        .unwrap();
    assert!(matches!(out, StartOutcome::Created(_)), "{out:?}");
    let first_chain = status(&c.project)["steps"].as_array().unwrap().len();
    let settings = RunSettings::new(OWNER, &c.store, ModelSource::Live(&model));
    let report = run(&c.ctx, None, settings).await.unwrap();
    assert_eq!(report.end, SessionEnd::Completed, "{:?}", player.served());

    let doc = status(&c.project);
    let findings = check::check(&c.ctx, doc.as_object(), &[], Scope::All);
    assert!(!check::has_errors(&findings), "{findings:?}");
    assert_eq!(doc["status"], "completed");
    assert_eq!(doc["milestone"], "M2");
    assert_eq!(doc["phase"], 2);
    let steps = doc["steps"].as_array().unwrap();
    assert!(steps.len() > first_chain);
    assert!(
        steps
            .iter()
            .all(|s| s["status"] == "completed" || s["status"] == "skipped"),
        "{steps:#?}"
    );
    // Two milestone gates: the first advanced, the last one ended the session.
    let gates: Vec<usize> = steps
        .iter()
        .filter(|s| s["decision"] == "post-milestone")
        .map(|s| s["index"].as_u64().unwrap() as usize)
        .collect();
    assert_eq!(gates.len(), 2, "{steps:#?}");
    assert_eq!(gates[1], steps.len() - 1);
    // M2's steps: after the first gate, in M2, phase 2 (their args filled with it).
    let m2 = &steps[gates[0] + 1..];
    assert_eq!(m2[0]["skill"], "maestro-analyze");
    assert_eq!(m2[0]["args"], "2");
    assert_eq!(m2[0]["milestone_id"], "M2");
    assert_eq!(m2.last().unwrap()["decision"], "post-milestone");
    // Every sub-goal was met in M1: M2 has no goal audit, its steps keep the goal refs.
    assert!(!m2.iter().any(|s| s["decision"] == "post-goal-audit"));
    assert!(m2.iter().any(|s| s["goal_ref"] == "G1"));
    // M2 wrote its own phase's files and milestone records.
    for f in [
        ".workflow/scratch/P2/analysis.md",
        ".workflow/scratch/P2/plan.json",
        ".workflow/scratch/P2/verification.json",
        ".workflow/milestones/M1/summary.md",
        ".workflow/milestones/M2/summary.md",
    ] {
        assert!(c.project.join(f).is_file(), "{f}");
    }
    // The passed gates are M2's only: the advance emptied the list.
    assert_eq!(doc["passed_gates"], json!(["post-verify", "post-review"]));

    let d = decisions(&c.project);
    let milestone_lines: Vec<&Value> = d
        .iter()
        .filter(|l| l["node_id"] == "post-milestone")
        .collect();
    assert_eq!(milestone_lines.len(), 2);
    let advanced = milestone_lines[0];
    assert_eq!(advanced["effect"], "milestone-advanced");
    assert_eq!(advanced["milestone_from"], "M1");
    assert_eq!(advanced["milestone_to"], "M2");
    assert_eq!(advanced["milestone_type"], "standard");
    assert_eq!(advanced["inserted"], json!(m2.len()));
    assert_eq!(advanced["type"], "structural-gate");
    let ended = milestone_lines[1];
    assert_eq!(ended["effect"], "session-completed");
    assert_eq!(ended["milestone_from"], "M2");
    assert_eq!(ended["milestone_to"], Value::Null);
    // M2's chain passed on the first try: the fix in M1 is kept.
    let m2_verify = d.iter().rfind(|l| l["node_id"] == "post-verify").unwrap();
    assert_eq!(m2_verify["verdict"], "proceed");
    // The board groups the steps by milestone.
    let board = verbs::status::run(&c.ctx, None).unwrap().stdout;
    assert!(board.contains("Milestones: M1 ✓ → M2 ✓\n"), "{board}");
    let m1 = board.find("  ── milestone M1 ✓\n").unwrap();
    let m2 = board.find("  ── milestone M2 ✓\n").unwrap();
    assert!(board[..m1].contains("Progress:") && m1 < m2, "{board}");
    assert!(
        board[m2..].contains(&format!("{}. maestro-analyze 2", gates[0] + 1)),
        "{board}"
    );
    let summary = verbs::session::summary_json(
        &baton_lifecycle::ralph::discovery::find(
            &c.ctx,
            None,
            baton_lifecycle::ralph::discovery::Pick::Any,
        )
        .unwrap()
        .into_session()
        .unwrap(),
    );
    assert_eq!(
        summary["milestones"],
        json!([
            {"id": "M1", "first_step": 0, "last_step": gates[0], "done": true},
            {"id": "M2", "first_step": gates[0] + 1, "last_step": gates[1], "done": true}
        ])
    );
    // state.json: both milestones done, as the milestone-complete steps recorded.
    let state: Value =
        serde_json::from_slice(&std::fs::read(c.project.join(".workflow/state.json")).unwrap())
            .unwrap();
    assert_eq!(state["milestones"][0]["status"], "completed");
    assert_eq!(state["milestones"][1]["status"], "completed");
}

/// A `ralph new` session (a maestro agent's) at its milestone-complete, in a project whose
/// state.json `milestones` are given.
fn at_the_milestone_gate(milestones: Value, auto: bool) -> session_world::World {
    let w = session_world::world_with("milestone-complete", OWNER, auto);
    let workflow = w.ctx.project.join(".workflow");
    std::fs::create_dir_all(&workflow).unwrap();
    let state = json!({
        "version": "3.1",
        "current_milestone": "M1",
        "milestones": milestones,
        "artifacts": [],
        "extra": {"kept": true}
    });
    std::fs::write(
        workflow.join("state.json"),
        format!("{}\n", serde_json::to_string_pretty(&state).unwrap()),
    )
    .unwrap();
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&w.status).unwrap()).unwrap();
    doc["milestone"] = json!("M1");
    std::fs::write(&w.status, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let out = verbs::next::run(&w.ctx, None, Some(OWNER), None).unwrap();
    let i = out.json["index"].as_u64().unwrap().to_string();
    let done = verbs::complete::CompleteArgs {
        index: i,
        status: "DONE".into(),
        ..Default::default()
    };
    verbs::complete::run(&w.ctx, None, &done).unwrap();
    w
}

fn doc(w: &session_world::World) -> Value {
    serde_json::from_slice(&std::fs::read(&w.status).unwrap()).unwrap()
}

#[test]
fn an_adhoc_milestone_ends_the_session_and_clears_the_current_milestone() {
    let w = at_the_milestone_gate(
        json!([{"id": "M1", "type": "adhoc", "phases": [1]},
               {"id": "M2", "type": "standard", "phases": [2]}]),
        true,
    );
    let out = decide::advance(&w.ctx, None, None, false, None).unwrap();
    assert_eq!(out.json["effect"], "session-completed");
    assert_eq!(out.json["decision"]["milestone_type"], "adhoc");
    let d = doc(&w);
    assert_eq!(d["status"], "completed");
    assert_eq!(d["milestone"], "M1");
    let text = std::fs::read_to_string(w.ctx.project.join(".workflow/state.json")).unwrap();
    let state: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(state["current_milestone"], Value::Null);
    // Changed in place: keys in their order, unknown fields kept, the trailing newline too.
    let keys: Vec<&String> = state.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "version",
            "current_milestone",
            "milestones",
            "artifacts",
            "extra"
        ]
    );
    assert_eq!(state["extra"]["kept"], true);
    assert!(text.ends_with("}\n"));
}

#[test]
fn the_last_standard_milestone_ends_the_session() {
    let w = at_the_milestone_gate(
        json!([{"id": "M0", "status": "completed", "phases": []},
               {"id": "M1", "phases": [1]}]),
        true,
    );
    let out = decide::advance(&w.ctx, None, None, false, None).unwrap();
    assert_eq!(out.json["effect"], "session-completed");
    assert!(
        out.json["decision"]["milestone_end"]
            .as_str()
            .unwrap()
            .contains("was the last one")
    );
    let state: Value =
        serde_json::from_slice(&std::fs::read(w.ctx.project.join(".workflow/state.json")).unwrap())
            .unwrap();
    assert_eq!(state["current_milestone"], "M1", "standard: left alone");
}

#[test]
fn a_multi_phase_next_milestone_asks_how_to_plan_it_without_y() {
    let next = json!([{"id": "M1", "phases": [1]},
                      {"id": "M2", "status": "completed", "phases": [2]},
                      {"id": "M3", "phases": [3, 4]}]);
    // ralph's verb: refused without --planning-mode, nothing written.
    let w = at_the_milestone_gate(next.clone(), false);
    let before = std::fs::read(&w.status).unwrap();
    let err = decide::advance(&w.ctx, None, None, false, None).unwrap_err();
    assert_eq!(err.code(), "PLANNING_MODE_REQUIRED");
    assert!(err.to_string().contains("M3"), "{err}");
    assert_eq!(std::fs::read(&w.status).unwrap(), before);
    // Independent: each phase's own stages with its number, the milestone stages once.
    let out = decide::advance(&w.ctx, None, Some("independent".into()), false, None).unwrap();
    assert_eq!(out.json["effect"], "milestone-advanced");
    assert_eq!(out.json["decision"]["milestone_to"], "M3");
    let d = doc(&w);
    assert_eq!(d["milestone"], "M3");
    assert_eq!(d["phase"], 3);
    assert_eq!(d["planning_mode"], "independent");
    let inserted: Vec<(String, String)> = d["steps"].as_array().unwrap()[2..]
        .iter()
        .filter(|s| s["decision"].is_null())
        .map(|s| {
            (
                s["skill"].as_str().unwrap().to_string(),
                s["args"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let analyze: Vec<&str> = inserted
        .iter()
        .filter(|(s, _)| s == "maestro-analyze")
        .map(|(_, a)| a.as_str())
        .collect();
    assert_eq!(analyze, ["3", "4"]);
    assert_eq!(
        inserted
            .iter()
            .filter(|(s, _)| s == "maestro-milestone-complete")
            .count(),
        1
    );
    let findings = check::check(&w.ctx, d.as_object(), &[], Scope::All);
    assert!(!check::has_errors(&findings), "{findings:?}");

    // The session loop asks instead: paused with the question, answered `unified`.
    let w = at_the_milestone_gate(next, false);
    let gate = 1;
    let asked = milestone::settle(&w.ctx, None, gate).unwrap();
    assert!(matches!(asked, milestone::Settled::Asked));
    let d = doc(&w);
    assert_eq!(d["status"], "paused");
    assert_eq!(d["steps"][gate]["asked"], milestone::QUESTION);
    let s = baton_lifecycle::ralph::discovery::find(
        &w.ctx,
        None,
        baton_lifecycle::ralph::discovery::Pick::Active,
    )
    .unwrap()
    .into_session()
    .unwrap();
    let pause = intervene::why_paused(&s).unwrap();
    assert!(
        matches!(&pause, Pause::Question { index: 1, question, .. } if *question == milestone::QUESTION)
    );
    let words: Vec<&str> = pause.choices().iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(words, ["unified", "independent", "abort"]);
    intervene::decide(&w.ctx, None, Choice::Unified, "linked phases").unwrap();
    let d = doc(&w);
    assert_eq!(d["status"], "running");
    assert_eq!(d["milestone"], "M3");
    assert_eq!(d["planning_mode"], "unified");
    // Unified: the milestone's stages once, without a phase in the args.
    let analyze: Vec<&Value> = d["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["skill"] == "maestro-analyze")
        .collect();
    assert_eq!(analyze.len(), 1);
    assert_eq!(analyze[0]["args"], "");
}

#[test]
fn advance_refuses_when_the_milestone_gate_is_not_next() {
    let w = session_world::world("plan,milestone-complete", OWNER);
    let err = decide::advance(&w.ctx, None, None, false, None).unwrap_err();
    assert_eq!(err.code(), "NOT_AT_MILESTONE");
    assert!(err.to_string().contains("step 0 (maestro-plan)"), "{err}");
}
