//! The verbs maestro leaves to hand edits of status.json, as commands: `new`, `skip`, `pause`,
//! `resume`, `abandon`, `release`, `insert`, `decide`, `status`, and `--expect-revision`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::ralph_support;

use ralph_support::*;
use serde_json::{Value, json};

const ID: &str = "ralph-20260524-101500";

fn decisions(fx: &Fx, id: &str) -> Vec<Value> {
    std::fs::read_to_string(fx.dir(id).join("decisions.ndjson"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Runs `next` and `complete --status DONE` for the next step; returns its index.
fn run_step(fx: &Fx, id: &str) -> u64 {
    let out = fx.ralph(&["next", "--session", id, "--json"]);
    out.code(0);
    let i = out.json()["index"].as_u64().unwrap();
    fx.ralph(&[
        "complete",
        &i.to_string(),
        "--status",
        "DONE",
        "--session",
        id,
    ])
    .code(0);
    i
}

fn labels(doc: &Value) -> Vec<String> {
    doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| match s["decision"].as_str() {
            Some(d) => format!("◆{d}"),
            None => s["skill"].as_str().unwrap().to_string(),
        })
        .collect()
}

#[test]
fn new_builds_the_chain_with_its_gates() {
    let fx = Fx::new();
    let out = fx.ralph(&[
        "new",
        "add CSV export",
        "--chain",
        "analyze,plan,execute,verify,review,test,goal-audit,milestone-complete",
        "--phase",
        "2",
        "--milestone",
        "M1",
        "--quality-mode",
        "quick",
    ]);
    out.code(0);
    assert!(out.stdout.starts_with("✓ Created ralph-"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("\n  3. maestro-verify [global]\n  4. ◆ post-verify [decision]\n")
    );
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    let id = fx.ralph(&["session", "--json"]).json()["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        id.len() == "ralph-20260524-101500".len() && id.starts_with("ralph-2"),
        "{id}"
    );
    let doc = fx.get(&id);
    assert_eq!(
        labels(&doc),
        [
            "maestro-analyze",
            "maestro-plan",
            "maestro-execute",
            "maestro-verify",
            "◆post-verify",
            "quality-review",
            "◆post-review",
            "quality-test",
            "◆post-test",
            "◆post-goal-audit",
            "maestro-milestone-complete",
            "◆post-milestone"
        ]
    );
    assert_eq!(
        keys(&doc["steps"][0]),
        [
            "index",
            "skill",
            "args",
            "stage",
            "scope",
            "decision",
            "retry_count",
            "max_retries",
            "command_scope",
            "command_path",
            "milestone_id",
            "source_artifact_ref",
            "status",
            "goal_ref",
            "completion_confirmed",
            "completion_status",
            "completion_evidence",
            "completed_at",
            "deferred_reads",
            "load"
        ]
    );
    assert_eq!(doc["steps"][5]["args"], "{phase} --tier quick");
    assert_eq!(doc["steps"][1]["scope"], "phase");
    assert_eq!(doc["steps"][1]["milestone_id"], "M1");
    assert_eq!(
        doc["steps"][1]["command_path"],
        fx.command_path("maestro-plan")
    );
    assert_eq!(doc["steps"][4]["command_path"], Value::Null);
    assert_eq!(doc["steps"][4]["max_retries"], 2);
    assert_eq!(doc["phase"], 2);
    assert_eq!(doc["status"], "running");
    assert_eq!(doc["lifecycle_position"], "analyze");
    assert_eq!(doc["revision"], 1);
    assert_eq!(
        &keys(&doc)[..4],
        ["session_id", "source", "status", "ralph_protocol_version"]
    );
    fx.ralph(&["check"]).code(0);
}

#[test]
fn new_refuses_missing_commands_unknown_stages_and_a_second_active_session() {
    let bare = Fx::bare();
    let out = bare.ralph(&["new", "x", "--chain", "plan,verify"]);
    out.code(1);
    assert_eq!(
        out.stderr.lines().next().unwrap(),
        "error[E006]: command file(s) not found for: maestro-plan, maestro-verify"
    );
    assert!(!bare.sessions().exists(), "nothing created");

    let fx = Fx::new();
    let out = fx.ralph(&["new", "x", "--chain", "plan,deploy"]);
    out.code(2);
    assert!(
        out.stderr
            .starts_with("error[STAGE_INVALID]: unknown stage \"deploy\"; stages: brainstorm, ")
    );
    let first = fx.created("plan,milestone-complete");
    let out = fx.ralph(&["new", "y", "--chain", "plan"]);
    out.code(1);
    assert_eq!(
        out.stderr.lines().next().unwrap(),
        format!("error[SESSION_ACTIVE]: an active session already exists: {first}")
    );
    let out = fx.ralph(&["new", "y", "--chain", "plan", "--force", "--json"]);
    out.code(0);
    assert_ne!(
        out.json()["session_id"],
        first.as_str(),
        "a second id in the same second"
    );
    assert!(out.stderr.contains("W008"));
}

#[test]
fn skip_pause_resume_abandon() {
    let fx = Fx::new();
    let id = fx.created("plan,execute,verify,milestone-complete");
    let out = fx.ralph(&["skip", "1", "--reason", "nothing to do"]);
    out.code(0);
    assert_eq!(out.stdout, "— skipped step 1: maestro-execute\n");
    let doc = fx.get(&id);
    assert_eq!(doc["steps"][1]["status"], "skipped");
    assert_eq!(doc["steps"][1]["concerns"], "nothing to do");
    // A gate is not skipped by accident.
    let out = fx.ralph(&["skip", "3"]);
    out.code(1);
    assert_eq!(
        out.stderr.lines().next().unwrap(),
        "error[STEP_STATE]: step 3 is a pending decision gate; cannot skip it without --force"
    );
    fx.ralph(&["pause"]).code(0);
    assert_eq!(fx.get(&id)["status"], "paused");
    fx.ralph(&["pause"]).code(0);
    fx.ralph(&["next"]).code(1);
    let out = fx.ralph(&["resume"]);
    out.code(0);
    assert_eq!(out.stdout, format!("↻ Resume {id}\n"));
    assert_eq!(fx.get(&id)["status"], "running");
    assert_eq!(run_step(&fx, &id), 0);
    assert_eq!(run_step(&fx, &id), 2, "the skipped step is not loaded");
    fx.ralph(&["decide", "3", "--verdict", "proceed", "--confidence", "90"])
        .code(0);
    fx.ralph(&["next"]).code(0);
    let out = fx.ralph(&["abandon", "--reason", "changed course"]);
    out.code(0);
    let doc = fx.get(&id);
    assert_eq!(doc["status"], "failed");
    // Nothing stays claimed in an abandoned session.
    assert_eq!(doc["steps"][4]["status"], "pending");
    assert_eq!(doc["active_step_index"], Value::Null);
    assert_eq!(doc["active_claim"], Value::Null);
    assert_eq!(doc["abandon_reason"], "changed course");
    assert!(doc["abandoned_at"].is_string());
    let out = fx.ralph(&["next"]);
    out.code(1);
    assert!(out.stderr.contains("SESSION_NOT_FOUND"));
    let out = fx.ralph(&["resume", "--session", &id]);
    out.code(1);
    assert!(out.stderr.starts_with("error[SESSION_NOT_ACTIVE]"));
}

#[test]
fn resume_repairs_the_deadlock_maestro_cannot_see() {
    let fx = Fx::new();
    let mut doc = simple(&fx, ID);
    set(&mut doc, "active_step_index", json!(0));
    set(&mut doc, "consec_exit2_count", json!(2));
    set(&mut doc, "status", json!("paused"));
    fx.put(ID, &doc);
    // A warning, as maestro's exit code stays 0 there (cli_ralph_slips).
    let out = fx.ralph(&["check"]);
    out.code(0);
    assert!(
        out.stdout
            .contains("  ! W011 [step 0]: active_step_index points to a pending step"),
        "{}",
        out.stdout
    );
    fx.ralph(&["complete", "0", "--status", "DONE"]).code(1);
    let out = fx.ralph(&["resume"]);
    out.code(0);
    assert_eq!(
        out.stdout,
        format!("↻ Resume {ID}\n  repaired: cleared active_step_index 0 (step was pending)\n")
    );
    let doc = fx.get(ID);
    assert_eq!(doc["active_step_index"], Value::Null);
    assert_eq!(doc["consec_exit2_count"], 0);
    assert_eq!(doc["status"], "running");
    fx.ralph(&["check"]).code(0);
    assert_eq!(run_step(&fx, ID), 0);
}

#[test]
fn resume_puts_an_orphan_running_step_back() {
    let fx = Fx::new();
    let mut doc = simple(&fx, ID);
    step_mut(&mut doc, 1).insert("status".into(), json!("running"));
    fx.put(ID, &doc);
    let out = fx.ralph(&["check"]);
    out.code(0);
    assert!(out.stdout.contains(
        "  ! W009 [step 1]: step.status=running but active_step_index does not point to it"
    ));
    let out = fx.ralph(&["resume"]);
    assert!(
        out.stdout
            .contains("  repaired: step 1 was running with no active pointer: back to pending\n")
    );
    assert_eq!(fx.get(ID)["steps"][1]["status"], "pending");
}

#[test]
fn insert_renumbers_and_moves_the_claim_with_its_step() {
    let fx = Fx::new();
    let id = fx.created("plan,execute,review,milestone-complete");
    run_step(&fx, &id);
    run_step(&fx, &id);
    fx.ralph(&["next"]).code(0); // review, step 2, claimed
    let out = fx.ralph(&[
        "insert",
        "--after",
        "1",
        "--template",
        "post-review",
        "--gap",
        "missing \"quotes\" test",
    ]);
    out.code(0);
    assert!(out.stdout.starts_with("+5 steps inserted after step 1 (template post-review)\n  2. quality-debug \"missing \\\"quotes\\\" test\"\n"), "{}", out.stdout);
    let doc = fx.get(&id);
    assert_eq!(
        labels(&doc),
        [
            "maestro-plan",
            "maestro-execute",
            "quality-debug",
            "maestro-plan",
            "maestro-execute",
            "quality-review",
            "◆post-review",
            "quality-review",
            "◆post-review",
            "maestro-milestone-complete",
            "◆post-milestone"
        ]
    );
    for (i, s) in doc["steps"].as_array().unwrap().iter().enumerate() {
        assert_eq!(s["index"], i);
    }
    assert_eq!(doc["active_step_index"], 7);
    assert_eq!(doc["active_claim"]["index"], 7);
    assert_eq!(doc["steps"][7]["status"], "running");
    assert_eq!(doc["steps"][6]["retry_count"], 0);
    fx.ralph(&["complete", "7", "--status", "DONE"]).code(0);
    // Bad template: exit 2, nothing written.
    let before = fx.raw(&id);
    let out = fx.ralph(&["insert", "--after", "1", "--template", "post-deploy"]);
    out.code(2);
    assert!(out.stderr.starts_with("error[TEMPLATE_INVALID]: --template must be one of: post-verify, post-business-test, post-review, post-test, post-goal-audit"));
    assert_eq!(fx.raw(&id), before);
}

#[test]
fn decide_proceed_consumes_the_gate_and_logs_it() {
    let fx = Fx::new();
    let id = fx.created("verify,milestone-complete");
    run_step(&fx, &id);
    let out = fx.ralph(&["next"]);
    out.code(2);
    let out = fx.ralph(&[
        "decide",
        "1",
        "--verdict",
        "proceed",
        "--confidence",
        "88",
        "--reason",
        "all green",
    ]);
    out.code(0);
    assert_eq!(
        out.stdout,
        "◆ Decision: post-verify [step 1] → proceed (all green)\n"
    );
    let doc = fx.get(&id);
    let gate = &doc["steps"][1];
    assert_eq!(gate["status"], "completed");
    assert_eq!(gate["completion_confirmed"], true);
    assert_eq!(gate["verdict"], "proceed");
    assert_eq!(doc["passed_gates"], json!(["post-verify"]));
    assert_eq!(doc["active_step_index"], Value::Null);
    let log = decisions(&fx, &id);
    assert_eq!(log.len(), 1);
    let d = &log[0];
    assert_eq!(
        &keys(d)[..8],
        [
            "id",
            "timestamp",
            "source",
            "node_id",
            "type",
            "verdict",
            "confidence_score",
            "close_call"
        ]
    );
    assert!(d["id"].as_str().unwrap().starts_with("DEC-"));
    assert_eq!(d["node_id"], "post-verify");
    assert_eq!(d["type"], "quality-gate");
    assert_eq!(d["summary"], "all green");
    assert_eq!(d["close_call"], false);
    assert_eq!(d["revision"], doc["revision"]);
    // The chain goes on.
    assert_eq!(run_step(&fx, &id), 2);
    // The last gate: the session is complete.
    let out = fx.ralph(&["decide", "3", "--verdict", "proceed", "--confidence", "90"]);
    out.code(0);
    assert!(out.stdout.contains("  session completed\n"));
    assert_eq!(fx.get(&id)["status"], "completed");
}

#[test]
fn decide_fix_inserts_the_template_once_with_one_follow_up_gate() {
    let fx = Fx::new();
    let id = fx.created("verify,milestone-complete");
    run_step(&fx, &id);
    let out = fx.ralph(&[
        "decide",
        "1",
        "--verdict",
        "fix",
        "--confidence",
        "75",
        "--gap",
        "export drops the header row",
    ]);
    out.code(0);
    assert_eq!(
        out.stdout,
        "◆ Decision: post-verify [step 1] → fix\n  +5 steps inserted after step 1\n"
    );
    let doc = fx.get(&id);
    assert_eq!(
        labels(&doc),
        [
            "maestro-verify",
            "◆post-verify",
            "quality-debug",
            "maestro-plan",
            "maestro-execute",
            "maestro-verify",
            "◆post-verify",
            "maestro-milestone-complete",
            "◆post-milestone"
        ]
    );
    // The consumed gate is settled; exactly one gate re-evaluates, after the fix, retry + 1.
    assert_eq!(doc["steps"][1]["status"], "completed");
    assert_eq!(doc["steps"][1]["verdict"], "fix");
    assert_eq!(doc["steps"][6]["status"], "pending");
    assert_eq!(doc["steps"][6]["retry_count"], 1);
    assert_eq!(doc["steps"][2]["args"], "\"export drops the header row\"");
    // next runs the fix, not the gate.
    let out = fx.ralph(&["next", "--json"]);
    out.code(0);
    assert_eq!(out.json()["skill"], "quality-debug");
}

#[test]
fn decide_applies_the_guards() {
    let fx = Fx::new();
    let id = fx.created("verify,milestone-complete");
    run_step(&fx, &id);
    // Dry run: the adjusted verdict, nothing written.
    let before = fx.raw(&id);
    let out = fx.ralph(&[
        "decide",
        "1",
        "--verdict",
        "proceed",
        "--confidence",
        "55",
        "--dry-run",
    ]);
    out.code(0);
    assert_eq!(
        out.stdout,
        "[dry-run] ◆ Decision: post-verify [step 1] → fix\n  requested: proceed\n  guard: confidence 55 < 60: proceed → fix\n  W004: low confidence (55)\n  close call (confidence 50–70)\n"
    );
    assert_eq!(fx.raw(&id), before);
    assert!(decisions(&fx, &id).is_empty());
    // Low confidence turns proceed into fix.
    fx.ralph(&["decide", "1", "--verdict", "proceed", "--confidence", "55"])
        .code(0);
    let d = &decisions(&fx, &id)[0];
    assert_eq!(
        (d["requested_verdict"].as_str(), d["verdict"].as_str()),
        (Some("proceed"), Some("fix"))
    );
    assert_eq!(d["close_call"], true);
    // Walk the fix loop to the follow-up gate (retry 1), then fix again at > 95: suggestion.
    for _ in 0..4 {
        run_step(&fx, &id);
    }
    let out = fx.ralph(&["decide", "6", "--verdict", "fix", "--confidence", "97"]);
    out.code(0);
    assert!(
        out.stdout
            .contains("  suggestion: proceed (confidence > 95 after a retry; not applied"),
        "{}",
        out.stdout
    );
    for _ in 0..4 {
        run_step(&fx, &id);
    }
    // retry 2 of 2: fix becomes escalate: debug, then a gate that stops for a person.
    let doc = fx.get(&id);
    assert_eq!(doc["steps"][11]["retry_count"], 2);
    let out = fx.ralph(&["decide", "11", "--verdict", "fix", "--confidence", "80"]);
    out.code(0);
    assert!(
        out.stdout.contains(
            "  guard: retries 2/2 reached: fix → escalate\n  W002: max retries, escalating\n"
        ),
        "{}",
        out.stdout
    );
    let doc = fx.get(&id);
    assert_eq!(
        labels(&doc)[12..14],
        ["quality-debug", "◆post-debug-escalate"]
    );
    run_step(&fx, &id);
    let out = fx.ralph(&[
        "decide",
        "13",
        "--verdict",
        "escalate",
        "--confidence",
        "50",
    ]);
    out.code(0);
    assert!(
        out.stdout
            .contains("  session paused — a person has to look at this gate\n")
    );
    let doc = fx.get(&id);
    assert_eq!(doc["status"], "paused");
    assert_eq!(doc["steps"][13]["status"], "pending");
    // A person looked: resume, proceed.
    fx.ralph(&["resume"]).code(0);
    fx.ralph(&[
        "decide",
        "13",
        "--verdict",
        "proceed",
        "--confidence",
        "100",
    ])
    .code(0);
    assert_eq!(run_step(&fx, &id), 14);
    assert_eq!(decisions(&fx, &id).len(), 5);
}

#[test]
fn decide_and_complete_keep_gates_and_steps_apart() {
    let fx = Fx::new();
    let id = fx.created("plan,verify,milestone-complete");
    let out = fx.ralph(&["decide", "2", "--verdict", "proceed", "--confidence", "90"]);
    out.code(1);
    assert_eq!(
        out.stderr.lines().next().unwrap(),
        "error[GATE_ORDER]: step 2 (post-verify) cannot be decided before step 0 (pending)"
    );
    let out = fx.ralph(&["decide", "0", "--verdict", "proceed", "--confidence", "90"]);
    out.code(1);
    assert!(
        out.stderr
            .starts_with("error[STEP_NOT_DECISION]: step 0 is not a decision node")
    );
    for (args, line) in [
        (
            vec!["decide", "2", "--verdict", "maybe", "--confidence", "9"],
            "error[VERDICT_INVALID]: --verdict must be one of: proceed, fix, escalate (got \"maybe\")",
        ),
        (
            vec!["decide", "2", "--verdict", "fix", "--confidence", "101"],
            "error[CONFIDENCE_INVALID]: --confidence must be an integer from 0 to 100 (got \"101\")",
        ),
        (
            vec!["decide", "2", "--verdict", "fix", "--confidence", "-3"],
            "error[CONFIDENCE_INVALID]: --confidence must be an integer from 0 to 100 (got \"-3\")",
        ),
    ] {
        let out = fx.ralph(&args);
        out.code(2);
        assert_eq!(out.stderr.lines().next().unwrap(), line);
    }
    // A claimed gate (maestro's skill claims by hand) is not completed by `complete`.
    let mut doc = fx.get(&id);
    step_mut(&mut doc, 0).insert("status".into(), json!("completed"));
    step_mut(&mut doc, 1).insert("status".into(), json!("completed"));
    step_mut(&mut doc, 2).insert("status".into(), json!("running"));
    set(&mut doc, "active_step_index", json!(2));
    fx.put(&id, &doc);
    let out = fx.ralph(&["complete", "2", "--status", "DONE"]);
    out.code(1);
    assert!(
        out.stderr.starts_with(
            "[ralph complete] STEP_IS_DECISION: step 2 is a decision node (post-verify)"
        )
    );
    fx.ralph(&["decide", "2", "--verdict", "proceed", "--confidence", "70"])
        .code(0);
    assert_eq!(fx.get(&id)["steps"][2]["status"], "completed");
}

#[test]
fn release_frees_only_the_claim_of_a_process_that_is_gone() {
    let fx = Fx::new();
    let id = fx.created("plan,execute,milestone-complete");
    // The caller of `next` is this test process: alive.
    fx.ralph(&["next"]).code(0);
    let owner = fx.get(&id)["active_claim"]["owner"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        owner.starts_with(&format!("{}@", std::process::id())),
        "{owner}"
    );
    let out = fx.ralph(&["release"]);
    out.code(3);
    assert!(
        out.stderr.starts_with(&format!(
            "error[CLAIM_HELD]: step 0 is claimed by {owner}, which is still running"
        )),
        "{}",
        out.stderr
    );
    let out = fx.ralph(&["release", "--force"]);
    out.code(0);
    assert_eq!(
        out.stdout,
        format!("released step 0 (was claimed by {owner}); it is pending again\n")
    );
    let doc = fx.get(&id);
    assert_eq!(doc["steps"][0]["status"], "pending");
    assert_eq!(doc["active_step_index"], Value::Null);
    assert_eq!(doc["active_claim"], Value::Null);
    // Claimed from a shell that has exited: its claim can be released without --force.
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "'{}' ralph next >/dev/null; exit $?",
            env!("CARGO_BIN_EXE_baton")
        ))
        .current_dir(&fx.project)
        .env("HOME", &fx.home)
        .env_remove("MAESTRO_HOME")
        .status()
        .unwrap();
    assert!(status.success());
    let claim = fx.get(&id)["active_claim"].clone();
    assert_ne!(claim["owner"], owner.as_str());
    let out = fx.ralph(&["release"]);
    out.code(0);
    // An owner that names another host is never judged gone.
    fx.ralph(&["next", "--owner", "4242@elsewhere"]).code(0);
    let out = fx.ralph(&["release"]);
    out.code(3);
    assert!(out.stderr.contains("not known to be gone"));
}

#[test]
fn expect_revision_makes_a_write_compare_and_swap() {
    let fx = Fx::new();
    let id = fx.created("plan,milestone-complete");
    let before = fx.raw(&id);
    let out = fx.ralph(&["next", "--expect-revision", "7"]);
    out.code(4);
    assert_eq!(
        out.stderr.lines().next().unwrap(),
        "[ralph next] REVISION_MISMATCH: expected revision 7, found 1"
    );
    assert_eq!(fx.raw(&id), before);
    let out = fx.ralph(&["next", "--expect-revision", "1", "--json"]);
    out.code(0);
    assert_eq!(out.json()["revision"], 2);
    fx.ralph(&[
        "complete",
        "0",
        "--status",
        "DONE",
        "--expect-revision",
        "1",
    ])
    .code(4);
    fx.ralph(&[
        "complete",
        "0",
        "--status",
        "DONE",
        "--expect-revision",
        "2",
    ])
    .code(0);
}

#[test]
fn status_board_shows_the_seed_icons() {
    let fx = Fx::new();
    let id = fx.created("plan,execute,verify,milestone-complete");
    run_step(&fx, &id);
    fx.ralph(&["skip", "1"]).code(0);
    fx.ralph(&["next"]).code(0);
    let out = fx.ralph(&["status"]);
    out.code(0);
    let cmd = |s: &str| fx.command_path(s);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines[0], format!("Session:  {id} [ralph]"));
    assert_eq!(lines[1], "Status:   running (revision 5)");
    assert_eq!(lines[2], "Position: plan");
    assert_eq!(lines[3], "Progress: 1/6 confirmed");
    assert!(
        lines[4].starts_with("Current:  [2/6] maestro-verify (running, claimed by "),
        "{}",
        lines[4]
    );
    assert_eq!(
        &lines[6..],
        [
            format!(
                "  [✓] 0. maestro-plan {{phase}} [global] {}",
                cmd("maestro-plan")
            ),
            format!(
                "  [—] 1. maestro-execute {{phase}} [global] {}",
                cmd("maestro-execute")
            ),
            format!(
                "  [▸] 2. maestro-verify {{phase}} [global] {}",
                cmd("maestro-verify")
            ),
            "  [ ] 3. ◆ post-verify [decision] retry 0/2".to_string(),
            format!(
                "  [ ] 4. maestro-milestone-complete [global] {}",
                cmd("maestro-milestone-complete")
            ),
            "  [ ] 5. ◆ post-milestone [decision] retry 0/2".to_string(),
        ]
    );
}

#[test]
fn every_verb_answers_json() {
    let fx = Fx::new();
    let id = fx.created("plan,verify,milestone-complete");
    let s = ["--session", id.as_str(), "--json"];
    let with = |args: &[&str]| -> Vec<String> {
        args.iter().chain(s.iter()).map(|a| a.to_string()).collect()
    };
    let run = |args: Vec<String>| {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = fx.ralph(&refs);
        let v = out.json();
        (out.code, v)
    };
    for args in [
        with(&["status"]),
        with(&["session"]),
        with(&["check"]),
        with(&["next"]),
        with(&["complete", "0", "--status", "DONE"]),
        with(&["next"]),
        with(&["retry", "1"]),
        with(&["skip", "1"]),
        with(&["decide", "2", "--verdict", "proceed", "--confidence", "90"]),
        with(&["insert", "--after", "2", "--template", "post-verify"]),
        with(&["pause"]),
        with(&["resume"]),
        with(&["abandon"]),
    ] {
        let (code, v) = run(args.clone());
        assert_eq!(code, 0, "{args:?}: {v}");
        assert_eq!(v["ok"], true, "{args:?}");
    }
    let (code, v) = run(with(&["next"]));
    assert_eq!(code, 1);
    assert_eq!(v["ok"], false);
    assert_eq!(v["error"]["code"], "SESSION_NOT_RUNNING");
    let skills = fx.ralph(&["skills", "--json"]);
    assert!(
        skills
            .stdout
            .lines()
            .all(|l| serde_json::from_str::<Value>(l).is_ok())
    );
}
