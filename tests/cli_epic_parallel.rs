//! `baton epic run --parallel N` through the real binary, against the played model on
//! loopback: `--dry-run` says which stories start together and why the others wait, and
//! `baton epic status` shows the stories in flight with their phase, worktree branch and
//! folder, and the waiting ones with their reason (text and JSON).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;
use crate::player;

use common::{Baton, git, repo};
use player::{Player, Scenario};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const IMPL: &str = "_bmad-output/implementation-artifacts";
const A: &str = "1-1-project-scaffold";
const B: &str = "1-2-user-authentication";
const C: &str = "1-3-password-reset";

/// The sample project in a git repository, story B after story A.
fn sample(into: &Path) -> PathBuf {
    let project = into.join("project");
    baton_testkit::copy_dir(&repo().join("examples/projects/taskboard-epic"), &project);
    std::fs::write(
        project.join("baton.toml"),
        format!("[autopilot.git]\ncommit = true\n\n[autopilot.parallel]\nafter = {{ \"{B}\" = [\"{A}\"] }}\n"),
    )
    .unwrap();
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["add", "-A"]);
    git(
        &project,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "-m",
            "init",
        ],
    );
    project
}

fn s(x: &str) -> String {
    x.to_string()
}

#[test]
fn dry_run_and_status_show_which_stories_run_together_and_why_the_others_wait() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample(tmp.path());
    let p = project.to_str().unwrap();
    // A and C ask a question at dev: both stay in flight, paused, in their worktrees.
    let player = Player::start(
        &project,
        Scenario {
            questions: vec![
                (s(A), s("dev"), 1, s("Which port does the API listen on?")),
                (
                    s(C),
                    s("dev"),
                    1,
                    s("Which mail server sends the reset link?"),
                ),
            ],
            ..Scenario::default()
        },
    );

    // --dry-run: A and C start together, B waits for A; then B alone.
    let run = ["epic", "run", "epic-1", "-p", p, "--parallel", "2"];
    let dry = baton.played(&player.base_url(), &[&run[..], &["--dry-run"]].concat());
    assert_eq!(dry.code, 0, "{}{}", dry.stdout, dry.stderr);
    assert!(
        dry.stdout.contains("parallel: up to 2 stories in flight\n"),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout
            .contains(&format!("  start together: {A}, {C}\n")),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout
            .contains(&format!("    {B}: waits for {A} (not done)\n")),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout.contains(&format!("    2. {B}\n")),
        "{}",
        dry.stdout
    );
    let dry = baton.played(
        &player.base_url(),
        &[&run[..], &["--dry-run", "--json"]].concat(),
    );
    assert_eq!(dry.code, 0, "{}{}", dry.stdout, dry.stderr);
    let plan = &dry.json()["parallel"];
    assert_eq!(plan["slots"], 2, "{plan:#}");
    assert_eq!(plan["start"], json!([A, C]), "{plan:#}");
    assert_eq!(plan["inFlight"], json!([]), "{plan:#}");
    assert_eq!(
        plan["waiting"],
        json!([{"key": B, "why": "dependency", "on": [A], "reason": format!("waits for {A} (not done)")}]),
        "{plan:#}"
    );
    assert_eq!(plan["waves"], json!([[A, C], [B]]), "{plan:#}");
    // A dry run runs nothing and writes nothing.
    assert!(player.served().is_empty());
    assert!(
        !project
            .join(IMPL)
            .join(".baton-epic-parallel.json")
            .exists()
    );
    assert_eq!(
        git(&project, &["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );

    // The run: A and C both stop at their question (exit 10); B never started.
    let r = baton.played(
        &player.base_url(),
        &[&run[..], &["--non-interactive"]].concat(),
    );
    assert_eq!(r.code, 10, "{}{}", r.stdout, r.stderr);

    // The board: A and C in flight side by side, their phase, branch and worktree; B waits.
    let st = baton.played(&player.base_url(), &["epic", "status", "-p", p]);
    assert_eq!(st.code, 0, "{}{}", st.stdout, st.stderr);
    let text = &st.stdout;
    assert!(
        text.contains("\nparallel: up to 2 stories in flight, merged onto main\n"),
        "{text}"
    );
    for key in [A, C] {
        let at = text
            .find(&format!("    {key} "))
            .unwrap_or_else(|| panic!("{key} not in flight: {text}"));
        let lines: Vec<&str> = text[at..].lines().take(3).collect();
        assert!(
            lines[0].contains("question") && lines[0].ends_with("← dev"),
            "{text}"
        );
        assert_eq!(
            lines[1],
            format!("      branch baton/epic-1/{key}  worktree <worktrees>/epic-1/{key}"),
            "{text}"
        );
        assert!(lines[2].trim_start().starts_with("q1: Which "), "{text}");
    }
    assert!(
        text.contains(&format!("  waiting:\n    {B}: waits for {A} (not done)\n")),
        "{text}"
    );

    let st = baton.played(&player.base_url(), &["epic", "status", "-p", p, "--json"]);
    assert_eq!(st.code, 0, "{}{}", st.stdout, st.stderr);
    let board = st.json();
    let par = &board["parallel"];
    assert_eq!(par["epicId"], "epic-1");
    assert_eq!(par["branch"], "main");
    let flights = par["inFlight"].as_array().unwrap();
    let keys: Vec<&str> = flights.iter().map(|f| f["key"].as_str().unwrap()).collect();
    assert_eq!(keys, [A, C], "{par:#}");
    let worktrees = PathBuf::from(par["worktrees"].as_str().unwrap());
    for f in flights {
        let key = f["key"].as_str().unwrap();
        assert_eq!(f["state"], "question", "{f:#}");
        assert_eq!(f["phase"], "dev", "{f:#}");
        assert_eq!(f["branch"], format!("baton/epic-1/{key}"), "{f:#}");
        assert_eq!(f["worktree"], format!("<worktrees>/epic-1/{key}"), "{f:#}");
        // What the board names is the story's worktree, on its branch, outside the project.
        let dir = worktrees.join("epic-1").join(key);
        assert!(!dir.starts_with(&project), "{}", dir.display());
        assert_eq!(
            git(&dir, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
            format!("baton/epic-1/{key}")
        );
        // The dev run waiting there is the one the board links.
        let run_id = f["runId"].as_str().unwrap();
        let runs = baton.played(&player.base_url(), &["runs", "show", run_id, "--json"]);
        assert_eq!(runs.code, 0, "{}{}", runs.stdout, runs.stderr);
    }
    assert_eq!(
        par["waiting"],
        json!([{"key": B, "why": "dependency", "on": [A], "reason": format!("waits for {A} (not done)")}])
    );
    assert_eq!(par["start"], json!([]), "{par:#}");
    // The sprint columns show each story's phase too.
    let rows = board["epics"][0]["stories"].as_array().unwrap();
    let row = |k: &str| rows.iter().find(|r| r["key"] == k).unwrap().clone();
    assert_eq!(row(A)["phase"], "dev");
    assert_eq!(row(C)["phase"], "dev");
    assert_eq!(row(B)["phase"], Value::Null);
    assert!(
        !row(A)["runs"].as_array().unwrap().is_empty(),
        "{:#}",
        row(A)
    );

    // The stories' phase runs are the project's in the store (one project, not one per
    // worktree): `baton runs list` has them, each with its worktree; the board counts their
    // tokens.
    let list = baton.played(&player.base_url(), &["runs", "list", "--json"]);
    assert_eq!(list.code, 0, "{}{}", list.stdout, list.stderr);
    let rows = list.json();
    let rows = rows.as_array().unwrap();
    let projects: std::collections::BTreeSet<&str> = rows
        .iter()
        .map(|r| r["projectId"].as_str().unwrap())
        .collect();
    assert_eq!(projects.len(), 1, "{rows:#?}");
    for key in [A, C] {
        let here = rows
            .iter()
            .filter(|r| {
                r["workTree"]
                    .as_str()
                    .is_some_and(|w| w.ends_with(&format!("epic-1/{key}")))
            })
            .count();
        // create-story, validate, dev (waiting on its question)
        assert_eq!(here, 3, "{key}: {rows:#?}");
    }
    assert_eq!(rows.len(), 6, "{rows:#?}");
    assert!(
        board["epics"][0]["usage"]["totalTokens"].as_u64().unwrap() > 0,
        "{board:#}"
    );

    // A run whose worktree is gone (removed by hand here; a merged story's is removed by the
    // loop) is refused with what happened and a way on, before any model is looked at.
    let done = rows
        .iter()
        .find(|r| {
            r["phase"] == "completed"
                && r["workTree"]
                    .as_str()
                    .is_some_and(|w| w.ends_with(&format!("epic-1/{A}")))
        })
        .unwrap();
    let tree = PathBuf::from(done["workTree"].as_str().unwrap());
    assert!(tree.is_absolute() && tree.is_dir(), "{done:#}");
    std::fs::remove_dir_all(&tree).unwrap();
    let id = done["runId"].as_str().unwrap();
    let chat = baton.played(
        &player.base_url(),
        &["chat", id, "what did you change?", "--json"],
    );
    assert_eq!(chat.code, 2, "{}{}", chat.stdout, chat.stderr);
    let error = &chat.json()["error"];
    assert_eq!(error["code"], "RUN_WORK_TREE_GONE", "{error:#}");
    assert!(
        error["hint"].as_str().unwrap().contains("baton runs log"),
        "{error:#}"
    );
}
