//! The reference conversation (seed 000) replayed through the engine, the ToolHost and the
//! store, on a copy of the sample project.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_engine::{Composer, ContextPolicy, DEFAULT_MAX_TURNS, Driver, Intent, Machine, Outcome};
use baton_llm::{ReplayModel, Trace};
use baton_package::Package;
use baton_store::{NewRun, Store};
use baton_testkit::{copy_dir, repo, seed_000};
use baton_tools::{RunBinding, SystemToolSettings, ToolHost};
use serde_json::json;
use std::fs;
use std::path::Path;

fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.push((
                    e.path().strip_prefix(dir).unwrap().display().to_string(),
                    fs::read(e.path()).unwrap(),
                ));
            }
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn the_reference_conversation_replays_end_to_end() {
    let Some(seed) = seed_000() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let project_root = tmp.path().join("project");
    copy_dir(&repo().join("examples/projects/taskboard"), &project_root);
    let store = Store::new(tmp.path().join("home"));
    let package = Package::load(&repo().join("examples/packages/create-story-micro")).unwrap();
    let installed = store.packages().install(&package, "test").unwrap().package;
    let pkg_before = tree(&installed.path);
    let project = store.project(&project_root).unwrap();
    let run = project
        .create_run(NewRun {
            package: &package,
            installed: &installed,
            workflow_ref: None,
            agent_id: "sm",
        })
        .unwrap();
    let workflow = &package.workflows()[0];
    let paths = project.run_paths(&run.run_id);
    let mut host = ToolHost::open(
        &project_root,
        &installed.path,
        &paths.state_dir,
        &paths.execution_log,
        RunBinding {
            run_id: run.run_id.clone(),
            graph: workflow.graph.clone(),
            state: project.state_file(&run.run_id),
            artifacts_dir: "artifacts".into(),
        },
    )
    .unwrap();
    let replay = ReplayModel::new(Trace::load(&seed).unwrap());
    let composer = Composer {
        package: &package,
        workflow,
        system: SystemToolSettings::default(),
        autopilot: true,
    };
    let machine = Machine::new(composer, "sm", ContextPolicy::Node, DEFAULT_MAX_TURNS);
    let mut answers = |_: &str| replay.take_user_input();
    let mut driver = Driver {
        machine,
        workflow,
        project: &project,
        run_id: run.run_id.clone(),
        host: &mut host,
        model: &replay,
        recorder: None,
        answers: &mut answers,
        ask: None,
        on_event: None,
        cancel: Default::default(),
        conversation: None,
        audit: None,
        meter: baton_engine::spend::Meter::unbounded(&replay),
        on_durable: None,
    };
    let report = driver.drive(Intent::Start, None).await.unwrap();
    assert!(
        matches!(report.outcome, Outcome::Completed { .. }),
        "{report:?}"
    );
    assert_eq!(report.model_calls, 10);
    assert_eq!(report.tool_calls, 38);
    assert_eq!(
        report.waits, 1,
        "exactly one stop for the user (the story key)"
    );

    let state = project.state_file(&run.run_id).read().unwrap().doc;
    assert_eq!(
        state.steps_completed(),
        [
            "step-01-select-story",
            "step-02-discover-inputs",
            "step-03-extract-context",
            "step-04-generate-story",
            "step-05-update-sprint-status",
            "end-99"
        ]
    );
    assert_eq!(state.variables().unwrap()["workflowStatus"], "complete");
    let artifacts = state.artifacts();
    assert_eq!(
        artifacts,
        [
            "artifacts/create-story/target.md",
            "artifacts/create-story/inputs.md",
            "artifacts/create-story/context.md",
            "artifacts/stories/1-2-user-authentication.md",
            "artifacts/create-story/sprint-status-update.md",
            "artifacts/create-story/summary.md"
        ]
    );
    for a in &artifacts {
        assert!(project_root.join(a).is_file(), "{a} exists");
    }
    let audit = baton_store::jsonl::read(&paths.execution_log)
        .unwrap()
        .records;
    assert_eq!(
        audit.iter().filter(|l| l["kind"] == "tool.exec").count(),
        38
    );
    assert_eq!(
        audit[4]["output"]["error"],
        json!({"code": "ENOENT", "message": "File not found: @project/artifacts/sprint-status.yaml"})
    );
    assert_eq!(tree(&installed.path), pkg_before, "@pkg untouched");
    let meta = project.get_run(&run.run_id).unwrap();
    assert_eq!(meta.phase, baton_store::Phase::Completed);
    assert_eq!(meta.current_node_id.as_deref(), Some("end-99"));
}
