//! `baton epic … --stories` through the real binary, on the `f1s-stories` fixture (a BMAD 6.12
//! spec folder): the board as JSON and text, the dry-run plan, a refusal with its line (exit 2),
//! and a walk to the spec checkpoint (exit 10) whose board `baton epic status` then shows without
//! being told the folder.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;
use crate::player;

use common::{Baton, repo};
use player::{Player, Scenario};
use std::path::{Path, PathBuf};

const SPEC: &str = "_bmad-output/planning-artifacts/specs/kite-v1";

fn project(into: &Path) -> PathBuf {
    let project = into.join("project");
    baton_testkit::copy_dir(
        &repo().join("crates/baton-epic/tests/fixtures/generations/f1s-stories"),
        &project,
    );
    project
}

#[test]
fn the_stories_board_and_plan_as_json_and_a_located_refusal() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = project(tmp.path());
    let p = project.to_str().unwrap();

    let status = baton.run(&["epic", "status", "-p", p, "--stories", SPEC, "--json"]);
    assert_eq!(status.code, 0, "{}{}", status.stdout, status.stderr);
    let board = status.json();
    assert_eq!(board["mode"], "stories");
    assert_eq!(board["storiesFolder"], SPEC);
    assert_eq!(board["epicId"], format!("stories:{SPEC}"));
    assert_eq!(board["standing"], "not-started");
    assert_eq!(board["status"], "in-progress");
    assert_eq!(
        board["implementationArtifacts"],
        "_bmad-output/implementation-artifacts"
    );
    let stories = board["stories"].as_array().unwrap();
    let rows: Vec<(&str, &str, Option<&str>)> = stories
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap(),
                s["status"].as_str().unwrap(),
                s["startsAt"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("1", "done", None),
            ("2", "draft", Some("create-story")),
            ("3-1", "not-started", Some("create-story")),
        ]
    );
    assert_eq!(
        stories[1]["file"],
        format!("{SPEC}/stories/2-sail-panel.md")
    );
    assert_eq!(stories[1]["specCheckpoint"], true);
    assert_eq!(stories[1]["doneCheckpoint"], true);
    assert_eq!(stories[1]["line"], 6);
    assert!(stories[2]["file"].is_null());
    assert_eq!(
        stories[2]["invokeDevWith"],
        "Reuse the clip from the sail panel; no knots."
    );

    let text = baton.run(&["epic", "status", "-p", p, "--stories", SPEC]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(text.stdout.contains("stories mode"), "{}", text.stdout);
    assert!(
        text.stdout.contains("[spec checkpoint, done checkpoint]"),
        "{}",
        text.stdout
    );

    let dry = baton.run(&[
        "epic",
        "run",
        "--stories",
        SPEC,
        "-p",
        p,
        "--dry-run",
        "--json",
    ]);
    assert_eq!(dry.code, 0, "{}{}", dry.stdout, dry.stderr);
    let plan = dry.json();
    assert_eq!(plan["outcome"], "planned");
    let keys: Vec<&str> = plan["plan"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["storyKey"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["2", "3-1"]);

    // Two files for story 2: the board shows the problem, a run is refused before anything.
    std::fs::write(
        project.join(SPEC).join("stories/2-sail-panel-copy.md"),
        "---\nstatus: draft\n---\n",
    )
    .unwrap();
    let board = baton
        .run(&["epic", "status", "-p", p, "--stories", SPEC, "--json"])
        .json();
    assert!(
        board["stories"][1]["problem"]
            .as_str()
            .unwrap()
            .starts_with("STORY_FILE_AMBIGUOUS"),
        "{board}"
    );
    let refused = baton.run(&["epic", "run", "--stories", SPEC, "-p", p, "--json"]);
    assert_eq!(refused.code, 2, "{}{}", refused.stdout, refused.stderr);
    let error = &refused.json()["error"];
    assert_eq!(error["code"], "STORY_FILE_AMBIGUOUS");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains(&format!("{SPEC}/stories.yaml (line 6)")),
        "{error}"
    );
    assert!(
        !project
            .join("_bmad-output/implementation-artifacts")
            .exists()
    );

    // An epic and --stories together are refused by the parser.
    let both = baton.run(&["epic", "run", "epic-1", "--stories", SPEC, "-p", p]);
    assert_eq!(both.code, 2, "{}", both.stderr);
}

#[test]
fn a_walk_pauses_at_the_spec_checkpoint_and_status_shows_the_stories_board() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = project(tmp.path());
    let p = project.to_str().unwrap();
    let player = Player::start(&project, Scenario::default());

    let run = baton.played(
        &player.base_url(),
        &["epic", "run", "--stories", SPEC, "-p", p, "--json"],
    );
    assert_eq!(run.code, 10, "{}{}", run.stdout, run.stderr);
    assert_eq!(run.json()["outcome"], "waiting");

    // No --stories: the project's epic runs in stories mode, so that is the board shown.
    let board = baton.run(&["epic", "status", "-p", p, "--json"]).json();
    assert_eq!(board["mode"], "stories", "{board}");
    assert_eq!(board["standing"], "waiting");
    assert_eq!(board["currentStory"], "2");
    assert_eq!(board["stories"][1]["status"], "ready-for-dev");
    assert_eq!(board["stories"][1]["phase"], "dev");
    let question = board["stories"][1]["questions"][0]["question"]
        .as_str()
        .unwrap();
    assert!(question.contains("spec_checkpoint"), "{question}");
    assert!(
        !project
            .join("_bmad-output/implementation-artifacts/sprint-status.yaml")
            .exists()
    );

    // The answer goes on in stories mode, to the done checkpoint before story 3-1.
    let answered = baton.played(
        &player.base_url(),
        &["epic", "answer", "2", "reviewed", "-p", p, "--json"],
    );
    assert_eq!(answered.code, 10, "{}{}", answered.stdout, answered.stderr);
    let out = answered.json();
    assert_eq!(out["outcome"], "waiting");
    assert_eq!(out["storiesCompleted"], serde_json::json!(["2"]));
}
