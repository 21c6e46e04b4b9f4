//! The pipeline of the user's own BMAD, through the real binary. Projects written here in each
//! generation's layout: BMAD 6.12 (`bmad-build-auto` and `bmad-code-review` installed, no
//! create-story or dev-story), the classic 6.0–6.10 cycle (`bmad-create-story` with its
//! validate action listed in `module-help.csv`, `bmad-dev-story`, `bmad-code-review`), and no
//! method at all. `epic run --dry-run --json` and `epic status --json` say which pipeline runs
//! and why; a configured pipeline overrides it; a pipeline or a build setting BMAD would refuse
//! is refused before anything is written.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;
use crate::player;

use common::Baton;
use player::{Player, Scenario};
use serde_json::Value;
use std::path::{Path, PathBuf};

const IMPL: &str = "_bmad-output/implementation-artifacts";

fn write(root: &Path, rel: &str, text: &str) {
    baton_testkit::write_file(root, rel, text);
}

/// What every generation shares: the configuration naming the artifacts folder and a sprint
/// status with two stories in the backlog.
fn base(into: &Path, name: &str) -> PathBuf {
    let root = into.join(name);
    write(
        &root,
        "_bmad/bmm/config.yaml",
        "project_name: harbor\nimplementation_artifacts: \"{project-root}/_bmad-output/implementation-artifacts\"\n",
    );
    write(
        &root,
        &format!("{IMPL}/sprint-status.yaml"),
        "# the harbor's sprint\nproject: harbor\ntracking_system: file-system\n\ndevelopment_status:\n  epic-1: in-progress\n  1-1-tide-table: backlog\n  1-2-mooring-map: backlog\n  epic-1-retrospective: optional\n",
    );
    root
}

fn skill(root: &Path, name: &str, body: &str) {
    write(
        root,
        &format!(".claude/skills/{name}/SKILL.md"),
        &format!("---\nname: {name}\ndescription: {name} for the harbor.\n---\n{body}\n"),
    );
}

/// BMAD 6.12 as `install --yes` leaves it: the build skills and the review, no story skills.
fn bmad_612(into: &Path) -> PathBuf {
    let root = base(into, "harbor-612");
    write(
        &root,
        "_bmad/bmm/module-help.csv",
        "module,skill,display-name,menu-code,description,action,args,phase,preceded-by,followed-by,required,output-location,outputs\nBMad Method,bmad-build,Build,BD,The standard implementation flow.,,,ship,bmad-sprint-planning,bmad-code-review,true,implementation_artifacts,spec\nBMad Method,bmad-code-review,Code Review,CR,An optional extra check after Build's built-in review.,,,ship,bmad-build,,false,,\n",
    );
    skill(
        &root,
        "bmad-build-auto",
        "Build the story without stopping: plan it in a spec, implement it, review it, set the spec's status.",
    );
    write(
        &root,
        ".claude/skills/bmad-build-auto/customize.toml",
        "[workflow]\nroute = \"auto\"\nreview = \"quick\"\non_complete = \"\"\n",
    );
    skill(
        &root,
        "bmad-build",
        "Build the story with the user at each checkpoint.",
    );
    skill(
        &root,
        "bmad-code-review",
        "Review the change and record the findings.",
    );
    skill(
        &root,
        "bmad-retrospective",
        "Look back on the finished epic.",
    );
    root
}

/// The classic cycle of BMAD 6.0–6.10 as skills, with create-story's validate action listed.
fn bmad_classic(into: &Path) -> PathBuf {
    let root = base(into, "harbor-classic");
    write(
        &root,
        "_bmad/bmm/module-help.csv",
        "module,skill,display-name,menu-code,description,action,args,phase,preceded-by,followed-by,required,output-location,outputs\nBMad Method,bmad-create-story,Create Story,CS,Prepare the next story.,create,,4-implementation,bmad-sprint-planning,bmad-create-story:validate,true,implementation_artifacts,story\nBMad Method,bmad-create-story,Validate Story,VS,Check the story is ready.,validate,,4-implementation,bmad-create-story:create,bmad-dev-story,false,implementation_artifacts,report\nBMad Method,bmad-dev-story,Dev Story,DS,Implement the story.,,,4-implementation,bmad-create-story:validate,,true,,\n",
    );
    skill(
        &root,
        "bmad-create-story",
        "Write the next story file; with the validate action, check it instead.",
    );
    skill(
        &root,
        "bmad-dev-story",
        "Implement the story's tasks and tests.",
    );
    skill(
        &root,
        "bmad-code-review",
        "Review the change and record the findings.",
    );
    root
}

fn names(pipeline: &Value) -> Vec<String> {
    pipeline["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect()
}

/// `epic run --dry-run --json` and `epic status --json` of `root`, both checked to say the
/// same pipeline.
fn planned(baton: &Baton, root: &Path) -> (Value, Value) {
    let player = Player::start(root, Scenario::default());
    let p = root.to_str().unwrap();
    let dry = baton.played(
        &player.base_url(),
        &["epic", "run", "epic-1", "-p", p, "--dry-run", "--json"],
    );
    assert_eq!(dry.code, 0, "{}{}", dry.stdout, dry.stderr);
    let dry = dry.json();
    let status = baton.played(&player.base_url(), &["epic", "status", "-p", p, "--json"]);
    assert_eq!(status.code, 0, "{}{}", status.stdout, status.stderr);
    let status = status.json();
    assert_eq!(
        names(&status["pipeline"]),
        names(&dry["pipeline"]),
        "{status}"
    );
    assert_eq!(status["pipeline"]["source"], dry["pipeline"]["source"]);
    // The report's phases[] list the same phases, in run order.
    let listed: Vec<String> = dry["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["phase"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(listed, names(&dry["pipeline"]));
    assert!(player.served().is_empty(), "{:?}", player.served());
    (dry, status)
}

fn phase<'a>(pipeline: &'a Value, name: &str) -> &'a Value {
    pipeline["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {pipeline}"))
}

#[test]
fn each_bmad_generation_gets_the_pipeline_of_its_method() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();

    // BMAD 6.12: build then code review, the unattended build skill, nothing bundled.
    let (dry, _) = planned(&baton, &bmad_612(tmp.path()));
    let pipeline = &dry["pipeline"];
    assert_eq!(pipeline["source"], "bmad-6.11+", "{pipeline}");
    assert_eq!(names(pipeline), ["build", "code-review"]);
    let build = phase(pipeline, "build");
    assert_eq!(build["runs"]["kind"], "skill");
    assert_eq!(build["runs"]["name"], "bmad-build-auto");
    assert_eq!(build["runs"]["path"], ".claude/skills/bmad-build-auto");
    assert!(
        build["render"].as_str().unwrap().contains("baton"),
        "{build}"
    );
    assert_eq!(
        build["settings"],
        serde_json::json!([["route", "auto"], ["review", "quick"]])
    );
    assert_eq!(phase(pipeline, "code-review")["backTo"], "build");
    assert_eq!(
        phase(pipeline, "code-review")["runs"]["name"],
        "bmad-code-review"
    );
    assert!(
        pipeline["reason"]
            .as_str()
            .unwrap()
            .contains("bmad-build-auto"),
        "{pipeline}"
    );
    // A backlog story starts at build: no create-story in front of BMAD's own.
    assert_eq!(dry["plan"][0]["storyKey"], "1-1-tide-table");
    assert_eq!(dry["plan"][0]["startsAt"], "build");

    // The classic cycle: create-story, its validate action, dev-story, code review.
    let (dry, _) = planned(&baton, &bmad_classic(tmp.path()));
    let pipeline = &dry["pipeline"];
    assert_eq!(pipeline["source"], "bmad-classic", "{pipeline}");
    assert_eq!(
        names(pipeline),
        ["create-story", "validate", "dev", "code-review"]
    );
    let validate = phase(pipeline, "validate");
    assert_eq!(validate["runs"]["name"], "bmad-create-story");
    assert_eq!(validate["action"], "validate");
    assert_eq!(phase(pipeline, "dev")["runs"]["name"], "bmad-dev-story");
    assert_eq!(phase(pipeline, "code-review")["backTo"], "dev");
    assert_eq!(dry["plan"][0]["startsAt"], "create-story");

    // No method installed: seed 004's five phases, baton's bundled package.
    let (dry, _) = planned(&baton, &base(tmp.path(), "harbor-bare"));
    let pipeline = &dry["pipeline"];
    assert_eq!(pipeline["source"], "bundled", "{pipeline}");
    assert_eq!(
        names(pipeline),
        ["create-story", "validate", "dev", "revision", "code-review"]
    );
    for p in pipeline["phases"].as_array().unwrap() {
        assert_eq!(p["runs"]["kind"], "package", "{p}");
    }
}

#[test]
fn the_text_views_name_the_pipeline_and_why() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let root = bmad_612(tmp.path());
    let player = Player::start(&root, Scenario::default());
    let p = root.to_str().unwrap();
    let dry = baton.played(
        &player.base_url(),
        &["epic", "run", "epic-1", "-p", p, "--dry-run"],
    );
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(
        dry.stdout
            .contains("pipeline: build → code-review (bmad-6.11+)"),
        "{}",
        dry.stdout
    );
    assert!(dry.stdout.contains("starts at build"), "{}", dry.stdout);
    let status = baton.played(&player.base_url(), &["epic", "status", "-p", p]);
    assert!(
        status
            .stdout
            .contains("pipeline: build → code-review (bmad-6.11+)"),
        "{}",
        status.stdout
    );
}

#[test]
fn a_configured_pipeline_overrides_the_method_and_a_bad_one_is_refused_before_any_write() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let root = bmad_612(tmp.path());
    write(
        &root,
        "baton.toml",
        "[autopilot]\npipeline = [\"create-story\", \"dev\", \"code-review\"]\n",
    );
    let (dry, _) = planned(&baton, &root);
    let pipeline = &dry["pipeline"];
    assert_eq!(pipeline["source"], "config");
    assert_eq!(names(pipeline), ["create-story", "dev", "code-review"]);
    // No dev skill is installed on 6.12: the bundled workflow develops.
    assert_eq!(phase(pipeline, "dev")["runs"]["kind"], "package");
    assert_eq!(
        phase(pipeline, "code-review")["runs"]["name"],
        "bmad-code-review"
    );

    let player = Player::start(&root, Scenario::default());
    let p = root.to_str().unwrap();
    for (toml, code) in [
        (
            "[autopilot]\npipeline = [\"build\"]\n",
            "EPIC_PIPELINE_INVALID",
        ),
        (
            "[autopilot]\npipeline = [\"dev\", \"build\", \"code-review\"]\n",
            "EPIC_PIPELINE_INVALID",
        ),
        // dev is not a phase of BMAD 6.11+'s pipeline: configuring it is refused, not ignored.
        (
            "[autopilot.phases.dev]\nskill = \"bmad-build-auto\"\n",
            "EPIC_PIPELINE_INVALID",
        ),
    ] {
        write(&root, "baton.toml", toml);
        let before = common::files(&root);
        let run = baton.played(
            &player.base_url(),
            &["epic", "run", "epic-1", "-p", p, "--json"],
        );
        assert_eq!(run.code, 2, "{toml}: {}{}", run.stdout, run.stderr);
        assert_eq!(run.json()["error"]["code"], code, "{toml}: {}", run.stdout);
        assert_eq!(common::files(&root), before, "{toml}: the project changed");
    }
    assert_eq!(player.requests(), 0, "{:?}", player.served());
}

#[test]
fn a_build_setting_bmad_would_halt_on_is_refused_before_anything_runs() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let root = bmad_612(tmp.path());
    // The team's layer asks for a review depth BMAD's build does not know.
    write(
        &root,
        "_bmad/custom/bmad-build-auto.toml",
        "[workflow]\nreview = \"paranoid\"\n",
    );
    let before = common::files(&root);
    let player = Player::start(&root, Scenario::default());
    let p = root.to_str().unwrap();
    let run = baton.played(
        &player.base_url(),
        &["epic", "run", "epic-1", "-p", p, "--json"],
    );
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    let e = &run.json()["error"];
    assert_eq!(e["code"], "EPIC_BUILD_SETTING_INVALID", "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(message.contains("workflow.review"), "{message}");
    assert!(
        message.contains("_bmad/custom/bmad-build-auto.toml"),
        "{message}"
    );
    assert!(e["hint"].as_str().unwrap().contains("thorough"), "{e}");
    // Refused before the model was asked anything, even whether it answers.
    assert_eq!(player.requests(), 0, "{:?}", player.served());
    assert_eq!(common::files(&root), before, "the project changed");
}
