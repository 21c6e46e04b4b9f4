//! `baton epic` on BMAD 7's ticket tree (experimental) through the real binary: a project
//! without sprint-status.yaml whose output folder holds an initiative with a done, a built and a
//! blocked ticket and one ready to build. `epic status --json` shows the four with the blocked
//! reason and which is next; `epic run` builds only the ready ticket through the pipeline, ends
//! it `done` in its file, and leaves every other ticket file byte for byte as it was (the built
//! one is never made done without its review).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;
use crate::player;

use common::Baton;
use player::{Player, Scenario};
use std::path::{Path, PathBuf};

const EPIC: &str = "_bmad-output/initiative-kite/epic-frame";

fn put(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A kite's frame, planned as four tickets by BMAD's ticketing skill.
fn project(into: &Path) -> PathBuf {
    let root = into.join("project");
    put(
        &root,
        "_bmad/config.toml",
        "[core]\nproject_name = \"kite\"\noutput_folder = \"{project-root}/_bmad-output\"\n",
    );
    put(
        &root,
        "_bmad-output/initiative-kite/tickets.toml",
        "# epics in build order\n[[epic]]\nid = 1\nslug = \"frame\"\n",
    );
    put(
        &root,
        &format!("{EPIC}/tickets.toml"),
        "[[entry]]\nid = 1\ntitle = \"Cut the spar\"\n\n[[entry]]\nid = 2\ntitle = \"Glue the spine\"\n\n[[entry]]\nid = 3\ntitle = \"Tie the bridle\"\n\n[[entry]]\nid = 4\ntitle = \"Wind the line\"\nafter = [1] # the spar must exist\n",
    );
    put(
        &root,
        &format!("{EPIC}/epic-frame.md"),
        "---\nid: 1\n---\n# The frame\n",
    );
    put(
        &root,
        &format!("{EPIC}/story-cut-the-spar.md"),
        "---\nid: 1\nstatus: done\n---\n# Cut the spar\n",
    );
    put(
        &root,
        &format!("{EPIC}/story-glue-the-spine.md"),
        "---\nid: 2\nstatus: built\n---\n# Glue the spine\n\nBuilt; nobody reviewed it yet.\n",
    );
    put(
        &root,
        &format!("{EPIC}/story-tie-the-bridle.md"),
        "---\nid: 3\nstatus: blocked\nblocked_at: 2026-11-20T09:00:00Z\nblocked_reason: which knot does the flyer want?\n---\n# Tie the bridle\n",
    );
    put(
        &root,
        &format!("{EPIC}/story-wind-the-line-plan.md"),
        "---\n# pulled by tickets.py\nid: 4\ntype: story\nstatus: ready-for-dev\nverify: the line unwinds\n---\n# Wind the line\n\nWind 30 m of line on the reel.\n",
    );
    put(&root, "src/kite.txt", "a kite\n");
    root
}

fn tickets(board: &serde_json::Value) -> Vec<serde_json::Value> {
    board["initiatives"][0]["epics"][0]["tickets"]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn the_ticket_tree_is_shown_and_only_the_runnable_ticket_is_built_to_done() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = project(tmp.path());
    let p = project.to_str().unwrap();

    let status = baton.run(&["epic", "status", "-p", p, "--json"]);
    assert_eq!(status.code, 0, "{}{}", status.stdout, status.stderr);
    let board = status.json();
    assert_eq!(board["mode"], "tickets", "{board}");
    assert_eq!(board["experimental"], true);
    assert_eq!(board["outputFolder"], "_bmad-output");
    assert_eq!(board["initiatives"][0]["next"], "epic-frame.4");
    let rows: Vec<(String, String, String, bool)> = tickets(&board)
        .iter()
        .map(|t| {
            (
                t["key"].as_str().unwrap().to_string(),
                t["status"].as_str().unwrap().to_string(),
                t["state"].as_str().unwrap().to_string(),
                t["next"].as_bool().unwrap(),
            )
        })
        .collect();
    let row =
        |k: &str, s: &str, st: &str, n: bool| (k.to_string(), s.to_string(), st.to_string(), n);
    assert_eq!(
        rows,
        [
            row("epic-frame.1", "done", "done", false),
            row("epic-frame.2", "built", "built", false),
            row("epic-frame.3", "blocked", "blocked", false),
            row("epic-frame.4", "ready-for-dev", "runnable", true),
        ]
    );
    let t = tickets(&board);
    assert_eq!(t[2]["blockedReason"], "which knot does the flyer want?");
    assert_eq!(t[3]["file"], format!("{EPIC}/story-wind-the-line-plan.md"));
    let text = baton.run(&["epic", "status", "-p", p]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout
            .contains("blocked: which knot does the flyer want?"),
        "{}",
        text.stdout
    );

    let others = [
        "story-cut-the-spar.md",
        "story-glue-the-spine.md",
        "story-tie-the-bridle.md",
        "tickets.toml",
        "epic-frame.md",
    ];
    let before: Vec<Vec<u8>> = others
        .iter()
        .map(|f| std::fs::read(project.join(EPIC).join(f)).unwrap())
        .collect();

    let player = Player::start(&project, Scenario::default());
    let run = baton.played(
        &player.base_url(),
        &["epic", "run", "initiative-kite", "-p", p, "--json"],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let out = run.json();
    assert_eq!(out["outcome"], "done", "{out}");
    assert_eq!(out["storiesCompleted"], serde_json::json!(["epic-frame.4"]));
    // Only the ready ticket ran, through the pipeline from validate on.
    let served: Vec<String> = player
        .served()
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect();
    assert!(served.iter().any(|s| s == "code-review"), "{served:?}");
    assert!(!served.iter().any(|s| s == "create-story"), "{served:?}");
    assert!(project.join("src/epic-frame.4.txt").exists());
    assert!(!project.join("src/epic-frame.2.txt").exists());

    // The built ticket is done by its file: in place, every other byte kept.
    let built =
        std::fs::read_to_string(project.join(EPIC).join("story-wind-the-line-plan.md")).unwrap();
    assert!(
        built.starts_with("---\n# pulled by tickets.py\nid: 4\ntype: story\nstatus: done\nverify: the line unwinds\n---\n# Wind the line\n"),
        "{built}"
    );
    for (f, b) in others.iter().zip(&before) {
        assert_eq!(
            &std::fs::read(project.join(EPIC).join(f)).unwrap(),
            b,
            "{f} changed"
        );
    }
    assert!(
        !project
            .join("_bmad-output/implementation-artifacts/sprint-status.yaml")
            .exists()
    );

    // Nothing left to start: the board says so, and another run runs nothing.
    let board = baton.run(&["epic", "status", "-p", p, "--json"]).json();
    assert!(board["initiatives"][0]["next"].is_null(), "{board}");
    assert_eq!(tickets(&board)[3]["status"], "done");
    let again = baton.played(
        &player.base_url(),
        &["epic", "run", "initiative-kite", "-p", p, "--json"],
    );
    assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
    assert_eq!(again.json()["storiesCompleted"], serde_json::json!([]));
    assert_eq!(
        std::fs::read(project.join(EPIC).join("story-glue-the-spine.md")).unwrap(),
        before[1]
    );
}
