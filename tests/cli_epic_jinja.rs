//! A project on BMAD after 6.12, whose skill sources are Jinja templates, through the real
//! binary: `baton validate` and `baton epic run --dry-run` say baton's Jinja renderer renders
//! the build skill and nothing of the template language reaches the model; a `halt` the
//! configuration reaches refuses the epic before any model request, with BMAD's message, and
//! leaves the project as it was.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;
use crate::player;

use common::Baton;
use player::{Player, Scenario};
use std::path::{Path, PathBuf};

const SKILL: &str = ".claude/skills/bmad-build-auto";
const IMPL: &str = "_bmad-output/implementation-artifacts";

fn write(root: &Path, rel: &str, text: &str) {
    baton_testkit::write_file(root, rel, text);
}

/// A project as BMAD's post-6.12 installer leaves it, without `_bmad/scripts/` (so baton
/// renders the skill itself, whatever is on PATH).
fn project(into: &Path) -> PathBuf {
    let root = into.join("lighthouse");
    write(
        &root,
        "_bmad/config.toml",
        "[core]\nuser_name = \"Mara\"\ncommunication_language = \"Deutsch\"\n\n[modules.bmm]\nplanning_artifacts = \"{project-root}/_bmad-output/planning-artifacts\"\nimplementation_artifacts = \"{project-root}/_bmad-output/implementation-artifacts\"\n",
    );
    write(
        &root,
        &format!("{IMPL}/sprint-status.yaml"),
        "project: lighthouse\ntracking_system: file-system\nstory_location: \"{project-root}/_bmad-output/implementation-artifacts\"\n\ndevelopment_status:\n  epic-1: in-progress\n  1-1-beam-rotation: ready-for-dev\n  1-2-fog-horn: backlog\n  epic-1-retrospective: optional\n",
    );
    write(
        &root,
        "_bmad-output/planning-artifacts/epics.md",
        "# Epics\n\n## Epic 1: The light\n\n### Story 1.1: Beam rotation\nThe beam turns once every ten seconds.\n\n### Story 1.2: Fog horn\nThe horn sounds when visibility drops.\n",
    );
    write(
        &root,
        &format!("{IMPL}/1-1-beam-rotation.md"),
        "# Story 1.1: Beam rotation\n\nStatus: ready-for-dev\n\n## Tasks\n- [ ] turn the beam\n",
    );
    write(
        &root,
        &format!("{SKILL}/SKILL.md"),
        "---\nname: bmad-build-auto\ndescription: Builds a story unattended.\n---\nRun `uv run {project-root}/_bmad/scripts/render_skill.py --project-root {project-root} --skill {skill-root}` once, then read and follow the workflow.md it prints. If it fails, HALT.\n",
    );
    write(
        &root,
        &format!("{SKILL}/customize.toml"),
        "[workflow]\nroute = \"auto\"\ncommit = \"stage\"\nspec_layout = \"flat\"\npersistent_facts = [\"Tests live beside the code.\"]\non_complete = \"\"\n\n[[workflow.review_layers]]\nid = \"edge-cases\"\nname = \"Edge Case Hunter\"\ninstruction = \"Read {skill-root}/review-prompts/edge-cases.md and follow it.\"\n",
    );
    write(
        &root,
        "_bmad/custom/bmad-build-auto.toml",
        "[workflow]\nroute = \"full\"\npersistent_facts = [\"The lamp is 1000 W.\"]\n",
    );
    write(
        &root,
        &format!("{SKILL}/workflow.md"),
        "# Build, unattended ({{ workflow.route }} route)\n\
         {% if workflow.route not in [\"oneshot\", \"full\", \"auto\"] %}\n\
         {{ halt(\"workflow.route must be oneshot, full or auto, not `\" ~ workflow.route ~ \"`\") }}\n\
         {% endif %}\n\
         {% if workflow.spec_layout != \"flat\" %}\n\
         {{ halt(\"spec_layout `\" ~ workflow.spec_layout ~ \"` is not supported by this build: keep `flat`\") }}\n\
         {% endif %}\n\
         Speak {{ config.core.communication_language }} with {{ config.core.user_name }}.\n\
         Specs go to {{ config.modules.bmm.implementation_artifacts }}.\n\
         \n\
         ## Facts\n\
         {{ workflow.persistent_facts }}\n\
         \n\
         {% if workflow.route == \"oneshot\" %}\n\
         Go straight to {{ rendered(\"step-03-implement.md\") }}.\n\
         {% else %}\n\
         Read fully and follow {{ rendered(\"step-01-clarify.md\") }}.\n\
         {% endif %}\n",
    );
    write(
        &root,
        &format!("{SKILL}/step-01-clarify.md"),
        "# Step 1\n\
         {% for fact in workflow.persistent_facts %}\n\
         - remember: {{ fact }}\n\
         {% endfor %}\n\
         Write the spec to `{spec_file}`, then follow {{ snapshot(\"step-03-implement.md\") }}.\n",
    );
    write(
        &root,
        &format!("{SKILL}/step-03-implement.md"),
        "# Step 3\nImplement, then stage ({{ workflow.commit }}).\n\n## Review layers\n{{ workflow.review_layers }}\n",
    );
    write(
        &root,
        &format!("{SKILL}/review-prompts/edge-cases.md"),
        "Hunt the edge cases of the diff at `{diff_file}`.\n",
    );
    root
}

/// The phase of the dry run that runs the build skill.
fn build_phase(dry: &serde_json::Value) -> serde_json::Value {
    dry["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p.to_string().contains("bmad-build-auto"))
        .cloned()
        .unwrap_or_else(|| panic!("no phase runs bmad-build-auto: {dry}"))
}

#[test]
fn a_jinja_skill_is_rendered_by_baton_and_nothing_of_the_template_language_reaches_the_model() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let root = project(tmp.path());
    let skill = root.join(SKILL);
    let out_dir = tmp.path().join("rendered");

    let v = baton
        .run(&[
            "validate",
            skill.to_str().unwrap(),
            "--json",
            "--out",
            out_dir.to_str().unwrap(),
        ])
        .json();
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["renderer"], "baton", "{v}");
    let how = v["rendered"].as_str().unwrap();
    assert!(how.contains("baton's Jinja renderer"), "{how}");
    assert!(how.contains("_bmad/custom/bmad-build-auto.toml"), "{how}");

    // What a phase run gets: every rendered file, without a trace of the template language.
    let written: Vec<&str> = v["written"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    for f in [
        "workflow.md",
        "step-01-clarify.md",
        "step-03-implement.md",
        "review-prompts/edge-cases.md",
    ] {
        assert!(written.contains(&f), "{f} not in {written:?}");
    }
    for f in &written {
        let text = std::fs::read_to_string(out_dir.join(f)).unwrap();
        assert!(
            !text.contains("{%") && !text.contains("{{") && !text.contains("halt("),
            "{f} still holds template language:\n{text}"
        );
    }
    let workflow = std::fs::read_to_string(out_dir.join("workflow.md")).unwrap();
    assert_eq!(
        workflow,
        "# Build, unattended (full route)\n\
         Speak Deutsch with Mara.\n\
         Specs go to @project/_bmad-output/implementation-artifacts.\n\
         \n\
         ## Facts\n\
         - Tests live beside the code.\n\
         - The lamp is 1000 W.\n\
         \n\
         Read fully and follow @pkg/step-01-clarify.md.\n"
    );
    let step1 = std::fs::read_to_string(out_dir.join("step-01-clarify.md")).unwrap();
    assert!(
        step1.contains("- remember: The lamp is 1000 W.\nWrite the spec to `{spec_file}`, then follow @pkg/step-03-implement.md.\n"),
        "{step1}"
    );
    let step3 = std::fs::read_to_string(out_dir.join("step-03-implement.md")).unwrap();
    assert!(
        step3.contains("#### Edge Case Hunter (`edge-cases`)\n\nRead @pkg/review-prompts/edge-cases.md and follow it.\n"),
        "{step3}"
    );

    // The dry run names the renderer for the phase, and asks nothing of the model.
    let player = Player::start(&root, Scenario::default());
    let p = root.to_str().unwrap();
    let dry = baton.played(
        &player.base_url(),
        &["epic", "run", "epic-1", "-p", p, "--dry-run", "--json"],
    );
    assert_eq!(dry.code, 0, "{}{}", dry.stdout, dry.stderr);
    let dry = dry.json();
    let build = build_phase(&dry);
    let rendered = build["rendered"].as_str().unwrap_or_default();
    assert!(rendered.contains("baton's Jinja renderer"), "{build}");
    assert!(
        rendered.contains("_bmad/scripts/render_skill.py is missing"),
        "{build}"
    );
    let text = baton.played(
        &player.base_url(),
        &["epic", "run", "epic-1", "-p", p, "--dry-run"],
    );
    assert!(
        text.stdout.contains("baton's Jinja renderer"),
        "{}",
        text.stdout
    );
    // A dry run may check the model is there; it runs no phase.
    assert!(player.served().is_empty(), "{:?}", player.served());
    assert_eq!(player.requests(), player.checks());
}

#[test]
fn a_halt_the_configuration_reaches_refuses_the_epic_before_any_model_request() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let root = project(tmp.path());
    // The user's own layer sets a value the skill refuses.
    write(
        &root,
        "_bmad/custom/bmad-build-auto.user.toml",
        "[workflow]\nspec_layout = \"nested\"\n",
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
    assert_eq!(e["code"], "EPIC_SKILL_HALTED", "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("spec_layout `nested` is not supported by this build: keep `flat`"),
        "{message}"
    );
    assert!(
        message.contains(&format!("{SKILL}/workflow.md:6")),
        "{message}"
    );
    assert!(
        e["hint"]
            .as_str()
            .unwrap()
            .contains("_bmad/custom/bmad-build-auto.user.toml"),
        "{e}"
    );
    // Refused before the model was asked anything, even whether it answers.
    assert!(player.served().is_empty(), "{:?}", player.served());
    assert_eq!(player.requests(), 0, "{} checks", player.checks());
    assert_eq!(common::files(&root), before, "the project changed");

    // The same in words, and from `baton validate`, which no longer says ok.
    let text = baton.played(&player.base_url(), &["epic", "run", "epic-1", "-p", p]);
    assert_eq!(text.code, 2);
    assert!(text.stderr.contains("EPIC_SKILL_HALTED"), "{}", text.stderr);
    assert!(
        text.stderr
            .contains("help: the skill refuses this configuration"),
        "{}",
        text.stderr
    );
    let v = baton.run(&["validate", root.join(SKILL).to_str().unwrap(), "--json"]);
    assert_eq!(v.code, 2, "{}", v.stdout);
    assert_eq!(v.json()["error"]["code"], "EPIC_SKILL_HALTED");
    assert!(!v.stdout.contains("\"ok\": true"), "{}", v.stdout);
    assert!(player.served().is_empty(), "{:?}", player.served());
    assert_eq!(player.requests(), player.checks());
    assert_eq!(common::files(&root), before, "the project changed");
}
