//! `baton validate`, `baton graph` and `baton package …` driven as a user would.

use crate::common;

use baton_testkit::copy_dir;
use common::{Baton, example};
use std::fs;

#[test]
fn validate_examples_exit_zero_with_a_summary() {
    let baton = Baton::new();
    for name in ["create-story-micro", "bug-triage", "docs-kit"] {
        let path = example(name);
        let run = baton.run(&["validate", path.to_str().unwrap()]);
        assert_eq!(run.code, 0, "{name}: {}{}", run.stdout, run.stderr);
        assert!(
            run.stdout.starts_with(&format!("ok: {name} ")),
            "{}",
            run.stdout
        );
    }
}

#[test]
fn validate_json_has_the_documented_shape() {
    let baton = Baton::new();
    let path = example("docs-kit");
    let run = baton.run(&["validate", path.to_str().unwrap(), "--json"]);
    assert_eq!(run.code, 0);
    let v = run.json();
    assert_eq!(v["ok"], true);
    assert_eq!(v["package"]["name"], "docs-kit");
    assert_eq!(v["package"]["version"], "0.3.0");
    assert_eq!(
        v["package"]["workflows"],
        serde_json::json!(["write-readme", "write-adr"])
    );
    assert_eq!(v["errors"], serde_json::json!([]));
    assert_eq!(v["warnings"], serde_json::json!([]));
}

#[test]
fn invalid_package_exits_two_with_located_errors() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("pkg");
    copy_dir(&example("create-story-micro"), &pkg);
    let graph = pkg.join("workflow.graph.json");
    let text = fs::read_to_string(&graph)
        .unwrap()
        .replace("\"agentId\": \"summarizer\"", "\"agentId\": \"ghost\"");
    fs::write(&graph, text).unwrap();
    fs::remove_file(pkg.join("steps/step-02-discover-inputs.md")).unwrap();

    let run = baton.run(&["validate", pkg.to_str().unwrap(), "--json"]);
    assert_eq!(run.code, 2);
    let v = run.json();
    assert_eq!(v["ok"], false);
    let errors = v["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 2, "{errors:#?}");
    for e in errors {
        for key in ["code", "file", "pointer", "line", "message", "hint"] {
            assert!(
                e.get(key).is_some_and(|x| !x.is_null()),
                "{key} missing in {e}"
            );
        }
    }
    let codes: Vec<&str> = errors.iter().map(|e| e["code"].as_str().unwrap()).collect();
    assert!(
        codes.contains(&"AGENT_NOT_FOUND") && codes.contains(&"STEP_FILE_NOT_FOUND"),
        "{codes:?}"
    );

    let text = baton.run(&["validate", pkg.to_str().unwrap()]);
    assert_eq!(text.code, 2);
    assert!(
        text.stderr.contains("error[AGENT_NOT_FOUND]"),
        "{}",
        text.stderr
    );
    assert!(
        text.stderr.contains("--> workflow.graph.json:"),
        "{}",
        text.stderr
    );
    assert!(
        text.stderr.contains("help: use one of: sm, summarizer"),
        "{}",
        text.stderr
    );
}

#[test]
fn workflow_selection_errors_exit_two() {
    let baton = Baton::new();
    let path = example("docs-kit");
    let run = baton.run(&[
        "validate",
        path.to_str().unwrap(),
        "--workflow",
        "nope",
        "--json",
    ]);
    assert_eq!(run.code, 2);
    assert_eq!(run.json()["errors"][0]["code"], "WORKFLOW_REF_UNKNOWN");
    let run = baton.run(&["graph", path.to_str().unwrap()]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("WORKFLOW_REF_REQUIRED"),
        "{}",
        run.stderr
    );
}

#[test]
fn graph_renders_three_formats() {
    let baton = Baton::new();
    let path = example("bug-triage");
    let p = path.to_str().unwrap();
    let mermaid = baton.run(&["graph", p]);
    assert_eq!(mermaid.code, 0);
    assert!(mermaid.stdout.starts_with("flowchart TD"));
    assert!(mermaid.stdout.contains("-->|\"normal (default)\"|"));
    let dot = baton.run(&["graph", p, "--format", "dot"]);
    assert!(dot.stdout.starts_with("digraph workflow {"));
    assert!(dot.stdout.contains("\"decide-02-severity\" [shape=diamond"));
    let json = baton.run(&["graph", p, "--format", "json"]).json();
    assert_eq!(json["entryNodeId"], "step-01-collect-facts");
    let decision = &json["nodes"][1];
    assert_eq!(decision["type"], "decision");
    assert_eq!(decision["successors"].as_array().unwrap().len(), 3);
    let adr = baton
        .run(&[
            "graph",
            example("docs-kit").to_str().unwrap(),
            "-w",
            "write-adr",
            "-f",
            "json",
        ])
        .json();
    assert_eq!(adr["entryNodeId"], "step-01-frame");
}

#[test]
fn pack_then_install_is_content_addressed_and_idempotent() {
    let baton = Baton::new();
    let out = tempfile::tempdir().unwrap();
    let src = example("create-story-micro");
    let pack = baton.run_in(
        out.path(),
        &["package", "pack", src.to_str().unwrap(), "--json"],
    );
    assert_eq!(pack.code, 0, "{}", pack.stderr);
    let packed = pack.json();
    let file = out.path().join("create-story-micro-1.0.0.bmad");
    assert!(file.is_file());
    let sha = packed["sha256"].as_str().unwrap().to_string();

    let check = baton.run(&["validate", file.to_str().unwrap(), "--json"]);
    assert_eq!(check.code, 0, "{}", check.stdout);
    assert_eq!(check.json()["package"]["sha256"], sha.as_str());

    let first = baton
        .run(&["package", "install", file.to_str().unwrap(), "--json"])
        .json();
    assert_eq!(first["fresh"], true);
    assert_eq!(first["sha256"], sha.as_str());
    let again = baton
        .run(&["package", "install", src.to_str().unwrap(), "--json"])
        .json();
    assert_eq!(
        again["fresh"], false,
        "the directory has the same content as its .bmad"
    );
    assert_eq!(again["id"], first["id"]);

    let list = baton.run(&["package", "list", "--json"]).json();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["id"], first["id"]);
    assert_eq!(
        list[0]["workflows"],
        serde_json::json!(["create-story-micro"])
    );
    let installed = std::path::PathBuf::from(list[0]["path"].as_str().unwrap());
    assert!(installed.starts_with(baton.home.path().join("packages")));
    let installed_check = baton.run(&["validate", installed.to_str().unwrap()]);
    assert_eq!(
        installed_check.code, 0,
        "an installed package is a valid package"
    );
}

#[test]
fn pack_refuses_an_invalid_package_and_writes_nothing() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("pkg");
    copy_dir(&example("bug-triage"), &pkg);
    fs::remove_file(pkg.join("agents.json")).unwrap();
    let run = baton.run_in(
        tmp.path(),
        &["package", "pack", pkg.to_str().unwrap(), "-o", "out.bmad"],
    );
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("AGENTS_FILE_NOT_FOUND"));
    assert!(!tmp.path().join("out.bmad").exists());
    let install = baton.run(&["package", "install", pkg.to_str().unwrap()]);
    assert_eq!(install.code, 2);
    assert_eq!(
        baton.run(&["package", "list", "--json"]).json(),
        serde_json::json!([])
    );
}

#[test]
fn usage_errors_exit_two() {
    let baton = Baton::new();
    assert_eq!(baton.run(&["validate"]).code, 2);
    assert_eq!(baton.run(&["graph", "x", "--format", "png"]).code, 2);
    assert_eq!(baton.run(&["frobnicate"]).code, 2);
}

/// A fixture project of the epic tests, copied.
#[allow(clippy::unwrap_used)] // test code: a failed setup step fails the test
fn bmad_project(generation: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    copy_dir(
        &baton_testkit::repo()
            .join("crates/baton-epic/tests/fixtures/generations")
            .join(generation),
        &project,
    );
    (tmp, project)
}

#[test]
fn validate_on_a_bmad_skill_folder_says_what_baton_would_run() {
    let baton = Baton::new();
    let (_tmp, project) = bmad_project("f1-bmad612");
    let skill = project.join(".claude/skills/bmad-build-auto");
    let run = baton.run(&["validate", skill.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    for said in [
        ".claude/skills/bmad-build-auto — BMAD skill, rendered `bmad-build-auto`",
        "phase     build (the project's default for it)",
        "a baton task run",
        "resolved by baton",
        "_bmad/custom/bmad-build-auto.toml",
        "spec frontmatter",
        "ok: baton runs it as an epic phase",
    ] {
        assert!(run.stdout.contains(said), "{said:?} not in {}", run.stdout);
    }
    assert!(!run.stderr.contains("MANIFEST_NOT_FOUND"), "{}", run.stderr);

    let review = project.join(".claude/skills/bmad-code-review");
    let v = baton
        .run(&["validate", review.to_str().unwrap(), "--json"])
        .json();
    assert_eq!(v["ok"], true);
    assert_eq!(v["kind"], "skill");
    assert_eq!(v["name"], "bmad-code-review");
    assert_eq!(v["defaultFor"], serde_json::json!(["code-review"]));
    assert_eq!(v["isProjectsDefault"], true);
    assert_eq!(v["renderer"], "baton");
    assert!(v["snapshotFiles"].as_u64().unwrap() >= 2, "{v}");

    // A skill whose values the project lacks is refused with the reason, as BMAD's renderer
    // would refuse it.
    fs::write(
        skill.join("step-02-plan.md"),
        "Plans go to {{.plans_folder}}.\n",
    )
    .unwrap();
    let refused = baton.run(&["validate", skill.to_str().unwrap(), "--json"]);
    assert_eq!(refused.code, 2, "{}", refused.stdout);
    let v = refused.json();
    assert_eq!(v["error"]["code"], "EPIC_SKILL_RENDER_FAILED");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("plans_folder"),
        "{v}"
    );
}

#[test]
fn validate_on_a_classic_workflow_says_what_baton_would_run() {
    let baton = Baton::new();
    let (_tmp, project) = bmad_project("f2-bmad60");
    let wf = project.join("_bmad/bmm/workflows/4-implementation/dev-story");
    let run = baton.run(&["validate", wf.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("classic BMAD workflow `dev-story`"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("workflow.yaml variables from _bmad/bmm/config.yaml, then instructions.xml"),
        "{}",
        run.stdout
    );
    assert!(!run.stderr.contains("NOT_SUPPORTED_CLASSIC_WORKFLOW"));
    let v = baton
        .run(&["validate", wf.to_str().unwrap(), "--json"])
        .json();
    assert_eq!(v["ok"], true);
    assert_eq!(v["kind"], "classic-workflow");
    assert_eq!(v["defaultFor"], serde_json::json!(["dev"]));
    assert_eq!(
        v["applied"],
        serde_json::json!([
            "_bmad/bmm/workflows/4-implementation/dev-story/workflow.yaml",
            "_bmad/bmm/config.yaml"
        ])
    );
    // An alpha workflow no phase runs by default is described too, with how to name it.
    let (_tmp4, alpha) = bmad_project("f4-alpha");
    let ctx = alpha.join("bmad/bmm/workflows/4-implementation/story-context");
    let run = baton.run(&["validate", ctx.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("no phase runs it by default"),
        "{}",
        run.stdout
    );
}
