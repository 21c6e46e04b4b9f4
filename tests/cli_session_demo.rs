//! `baton demo session` through the real binary: offline, with no key and no model, the
//! session on the csvsum sample completes; its status.json holds the inserted post-verify fix
//! loop, decisions.ndjson one record per gate, the sample's tests pass, `baton ralph check`
//! finds no error, and a second demo replaces the first one's files.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

#[allow(unused_imports)]
mod common;

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
