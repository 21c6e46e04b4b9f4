//! `baton demo session` through the real binary: offline, with no key and no model, the
//! session on the csvsum sample completes; its status.json holds the inserted post-verify fix
//! loop, decisions.ndjson one record per gate, the sample's tests pass, `baton ralph check`
//! finds no error, and a second demo replaces the first one's files.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;

use common::{Baton, Run};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn demo(baton: &Baton, cwd: &Path, extra: &[&str]) -> Run {
    let mut args = vec!["demo", "session"];
    args.extend(extra);
    baton.run_in(cwd, &args)
}

fn session_dir(project: &Path) -> PathBuf {
    let root = project.join(".workflow/.maestro");
    let dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(dirs.len(), 1, "one session: {dirs:?}");
    dirs[0].clone()
}

/// A step as `(skill or gate, args, retry_count, status, verdict)`.
fn outline(doc: &Value) -> Vec<(String, String, u64, String, String)> {
    let text = |v: &Value| v.as_str().unwrap_or("").to_string();
    doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let name = match s["decision"].as_str() {
                Some(d) => d.to_string(),
                None => text(&s["skill"]),
            };
            (
                name,
                text(&s["args"]),
                s["retry_count"].as_u64().unwrap_or(0),
                text(&s["status"]),
                text(&s["verdict"]),
            )
        })
        .collect()
}

#[test]
fn demo_session_runs_offline_with_one_fix_loop_to_completed() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let run = demo(&baton, tmp.path(), &["--json"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let out = run.json();
    assert_eq!(out["ok"], true);
    assert_eq!(out["status"], "completed");

    let project = tmp.path().join("baton-demo-session");
    let dir = session_dir(&project);
    let doc: Value =
        serde_json::from_slice(&std::fs::read(dir.join("status.json")).unwrap()).unwrap();
    assert_eq!(doc["status"], "completed");
    assert_eq!(doc["task_decomposition_all_done"], true);
    let steps = outline(&doc);
    let names: Vec<&str> = steps.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(
        names,
        [
            "maestro-analyze",
            "maestro-plan",
            "maestro-execute",
            "maestro-verify",
            "post-verify",
            // The fix loop the first post-verify inserted.
            "quality-debug",
            "maestro-plan",
            "maestro-execute",
            "maestro-verify",
            "post-verify",
            "quality-review",
            "post-review",
            "maestro-milestone-audit",
            "post-goal-audit",
            "maestro-milestone-complete",
            "post-milestone",
        ]
    );
    assert!(steps.iter().all(|s| s.3 == "completed"), "{steps:#?}");
    assert_eq!((steps[4].2, steps[4].4.as_str()), (0, "fix"));
    assert!(
        steps[5].1.contains("header-only file prints 0"),
        "{:?}",
        steps[5]
    );
    // The phase placeholder was filled from the session before the step ran.
    assert_eq!(steps[6].1, "--gaps 1");
    assert_eq!((steps[9].2, steps[9].4.as_str()), (1, "proceed"));
    // Every execution step's command file is the bundled one, a real file.
    for s in doc["steps"].as_array().unwrap() {
        if s["decision"].is_null() {
            assert_eq!(s["command_scope"], "bundled", "{s}");
            assert!(Path::new(s["command_path"].as_str().unwrap()).is_file());
        }
    }

    let decisions: Vec<Value> = std::fs::read_to_string(dir.join("decisions.ndjson"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let gates: Vec<(&str, &str, &str)> = decisions
        .iter()
        .map(|d| {
            (
                d["node_id"].as_str().unwrap(),
                d["verdict"].as_str().unwrap(),
                d["effect"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        gates,
        [
            ("post-verify", "fix", "inserted"),
            ("post-verify", "proceed", "completed"),
            ("post-review", "proceed", "completed"),
            ("post-goal-audit", "proceed", "completed"),
            ("post-milestone", "proceed", "session-completed"),
        ]
    );
    assert_eq!(decisions[0]["inserted"], 5);
    let ids: std::collections::BTreeSet<&str> = decisions
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), decisions.len(), "no decision twice");

    // The work is real: the sample's tests pass on the result, and the files are in place.
    let tests = std::process::Command::new("sh")
        .arg("test.sh")
        .current_dir(&project)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&tests.stdout);
    assert!(tests.status.success(), "{said}");
    assert!(
        said.contains("ok   --header on a header-only file prints 0"),
        "{said}"
    );
    let verification: Value = serde_json::from_slice(
        &std::fs::read(project.join(".workflow/scratch/P1/verification.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(verification["status"], "passed");
    assert!(project.join(".workflow/milestones/M1/summary.md").is_file());

    // The part-1 verbs read the files: no error finding.
    let check = baton.run_in(&project, &["ralph", "check", "--json"]);
    let findings: Value = serde_json::from_str(&check.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", check.stdout, check.stderr));
    let errors: Vec<&Value> = findings["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["level"] == "E")
        .collect();
    assert!(errors.is_empty(), "{findings}");
    assert_eq!(
        (findings["ok"].clone(), findings["errors"].clone()),
        (true.into(), 0.into())
    );
}

#[test]
fn a_second_demo_session_replaces_the_first_and_a_foreign_directory_is_refused() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let first = demo(&baton, tmp.path(), &["--json"]);
    assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
    let text = demo(&baton, tmp.path(), &[]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stderr.contains("◆ post-verify → fix (retry 0)"),
        "{}",
        text.stderr
    );
    assert!(text.stdout.contains(": completed"), "{}", text.stdout);
    // One session: the first demo's were removed with its files.
    session_dir(&tmp.path().join("baton-demo-session"));

    std::fs::create_dir_all(tmp.path().join("mine")).unwrap();
    std::fs::write(tmp.path().join("mine/notes.txt"), "keep").unwrap();
    let refused = demo(&baton, tmp.path(), &["--dir", "mine", "--json"]);
    assert_eq!(refused.code, 2);
    assert_eq!(refused.json()["error"]["code"], "DEMO_DIR_IN_USE");
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("mine/notes.txt")).unwrap(),
        "keep"
    );
}

use crate::csvsum_player;

/// A step as maestro's skill builds it, its command file in a maestro install that is gone.
fn maestro_step(i: usize, skill: &str, args: &str, stage: &str, status: &str) -> Value {
    serde_json::json!({
        "index": i, "skill": skill, "args": args, "stage": stage, "scope": null,
        "decision": null, "retry_count": 0, "max_retries": 2, "command_scope": "global",
        "command_path": format!("/nonexistent/maestro-home/.claude/commands/{skill}.md"),
        "milestone_id": null, "source_artifact_ref": null, "status": status, "goal_ref": null,
        "completion_confirmed": status == "completed",
        "completion_status": if status == "completed" { Value::from("DONE") } else { Value::Null },
        "completion_evidence": if status == "completed" {
            Value::from(".workflow/scratch/P1/analysis.md")
        } else {
            Value::Null
        },
        "completion_summary": if status == "completed" { Value::from("Analyzed phase 1") } else { Value::Null },
        "completed_at": if status == "completed" { Value::from("2026-11-20T10:00:00.000Z") } else { Value::Null },
        "deferred_reads": [], "load": null
    })
}

fn maestro_gate(i: usize, gate: &str) -> Value {
    serde_json::json!({
        "index": i, "skill": "", "args": "", "stage": gate.trim_start_matches("post-"),
        "scope": null, "decision": gate, "retry_count": 0, "max_retries": 2,
        "command_scope": null, "command_path": null, "milestone_id": null,
        "source_artifact_ref": null, "status": "pending", "goal_ref": null,
        "completion_confirmed": false, "completion_status": null, "completion_evidence": null,
        "completed_at": null, "deferred_reads": [], "load": null
    })
}

/// A session maestro v0.5.50 started on the csvsum sample and left mid-step (its agent gone,
/// its lease still recorded, its command files uninstalled): `baton session adopt` takes it
/// over in place and `baton session continue` drives it to the end against the played model.
#[test]
fn adopt_takes_over_a_session_maestro_started_and_continue_finishes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("csvsum");
    baton_testkit::copy_dir(&common::repo().join("examples/projects/csvsum"), &project);
    std::fs::create_dir_all(tmp.path().join("home")).unwrap();
    let id = "ralph-20261120-100000";
    let dir = project.join(".workflow/.maestro").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let steps = vec![
        maestro_step(0, "maestro-analyze", "1", "analyze", "completed"),
        maestro_step(1, "maestro-plan", "1", "plan", "running"),
        maestro_step(2, "maestro-execute", "1", "execute", "pending"),
        maestro_step(3, "maestro-verify", "1", "verify", "pending"),
        maestro_gate(4, "post-verify"),
        maestro_step(5, "quality-review", "1 --tier quick", "review", "pending"),
        maestro_gate(6, "post-review"),
        maestro_step(
            7,
            "maestro-milestone-audit",
            "",
            "milestone-audit",
            "pending",
        ),
        maestro_step(
            8,
            "maestro-milestone-complete",
            "",
            "milestone-complete",
            "pending",
        ),
        maestro_gate(9, "post-milestone"),
    ];
    let doc = serde_json::json!({
        "session_id": id, "source": "ralph", "status": "running", "ralph_protocol_version": "2",
        "active_step_index": 1,
        "intent": "phase 1: add a --header flag that skips the first line",
        "lifecycle_position": "analyze", "phase": 1, "phase_is_new": false, "milestone": "M1",
        "auto_mode": true, "quality_mode": "quick", "planning_mode": "independent",
        "scope_verdict": null, "analyze_macro_id": null, "blueprint_id": null,
        "cli_tool": "claude", "passed_gates": [], "consec_exit2_count": 1,
        "context": {"issue_id": null, "scratch_dir": null}, "steps": steps,
        "current_step": 1, "execution_owner": "ralph-execute", "lease_id": "L7",
        "owner_epoch": 2, "maestro_only_field": {"kept": true}
    });
    std::fs::write(
        dir.join("status.json"),
        serde_json::to_string_pretty(&doc).unwrap(),
    )
    .unwrap();
    let maestro_line = r#"{"id":"DEC-1","source":"ralph","node_id":"post-analyze","type":"routing","verdict":"proceed"}"#;
    std::fs::write(dir.join("decisions.ndjson"), format!("{maestro_line}\n")).unwrap();
    std::fs::create_dir_all(project.join(".workflow/scratch/P1")).unwrap();
    std::fs::write(
        project.join(".workflow/scratch/P1/analysis.md"),
        "# maestro's analysis\n",
    )
    .unwrap();

    let player = csvsum_player::SessionPlayer::start(&project);
    let baton = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
            .args(args)
            .current_dir(&project)
            .env("HOME", tmp.path().join("home"))
            .env("BATON_HOME", tmp.path().join("baton-home"))
            .env("OPENAI_BASE_URL", player.base_url())
            .env("BATON_MODEL", "played")
            .env("OPENAI_API_KEY", "sk-test")
            .env_remove("MAESTRO_HOME")
            .env_remove("BATON_RALPH_CLI")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // maestro's agent may still hold the lease: refused without --force, nothing written.
    let before = std::fs::read(dir.join("status.json")).unwrap();
    let (code, stdout, _) = baton(&["session", "adopt", "--json"]);
    assert_eq!(code, 1, "{stdout}");
    let refused: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(refused["error"]["code"], "SESSION_LEASED");
    assert_eq!(std::fs::read(dir.join("status.json")).unwrap(), before);

    let (code, stdout, stderr) = baton(&["session", "adopt", "--force"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.starts_with(&format!("adopted {id} (running)\n")),
        "{stdout}"
    );
    assert!(stdout.contains("released the lease"), "{stdout}");
    assert!(
        stdout
            .contains("step 1 (maestro-plan) was running under the previous driver: pending again"),
        "{stdout}"
    );
    assert!(
        stdout.contains("step 2 (maestro-execute): command file found (bundled)"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with(&format!(
            "go on with: baton session continue --session {id}\n"
        )),
        "{stdout}"
    );
    let adopted: Value =
        serde_json::from_slice(&std::fs::read(dir.join("status.json")).unwrap()).unwrap();
    assert_eq!(adopted["active_step_index"], Value::Null);
    assert_eq!(adopted["execution_owner"], Value::Null);
    assert_eq!(adopted["owner_epoch"], 2);
    assert_eq!(adopted["consec_exit2_count"], 0);
    assert_eq!(adopted["adopted_from"], "ralph");
    // maestro's finished step is kept as it was, its (gone) command file included.
    assert_eq!(adopted["steps"][0], doc["steps"][0]);

    let (code, stdout, stderr) = baton(&["session", "continue", "--json"]);
    assert_eq!(code, 0, "{stdout}{stderr}\n{:?}", player.served());
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["outcome"], "completed");
    let done: Value =
        serde_json::from_slice(&std::fs::read(dir.join("status.json")).unwrap()).unwrap();
    assert_eq!(done["status"], "completed");
    assert_eq!(done["steps"][0]["completion_summary"], "Analyzed phase 1");
    assert_eq!(
        done["maestro_only_field"],
        serde_json::json!({"kept": true})
    );
    assert_eq!(done["session_id"], id);
    // maestro's decision is still the first line; baton's follow it.
    let log = std::fs::read_to_string(dir.join("decisions.ndjson")).unwrap();
    assert_eq!(log.lines().next().unwrap(), maestro_line);
    assert!(
        log.lines()
            .any(|l| l.contains("\"node_id\":\"post-milestone\"")),
        "{log}"
    );
    // The sample's tests pass: the session did the work.
    let tests = std::process::Command::new("sh")
        .arg("test.sh")
        .current_dir(&project)
        .output()
        .unwrap();
    assert!(
        tests.status.success(),
        "{}",
        String::from_utf8_lossy(&tests.stdout)
    );
    // A finished session is not taken over again (ralph import says the same).
    let (code, _, stderr) = baton(&["ralph", "import", "--session", id]);
    assert_eq!(code, 1);
    assert!(stderr.starts_with("error[SESSION_NOT_ACTIVE]"), "{stderr}");
}
