//! Runs created with variables (`baton run --var`, the epic autopilot's phase inputs): the
//! state starts with them, and the completion flag cannot be forged at creation.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_package::Package;
use baton_store::{NewRun, Store};
use baton_testkit::example;
use serde_json::{Map, Value, json};

fn setup() -> (tempfile::TempDir, Store, Package) {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::new(tmp.path().join("home"));
    std::fs::create_dir_all(tmp.path().join("project")).unwrap();
    let package = Package::load(&example("create-story-micro")).unwrap();
    (tmp, store, package)
}

#[test]
fn variables_are_in_the_state_from_the_start() {
    let (tmp, store, package) = setup();
    let installed = store.packages().install(&package, "test").unwrap().package;
    let project = store.project(&tmp.path().join("project")).unwrap();
    let mut vars = Map::new();
    vars.insert("storyKey".into(), json!("1-2-user-authentication"));
    vars.insert("reviewCycle".into(), json!("2"));
    let run = project
        .create_run_with_variables(
            NewRun {
                package: &package,
                installed: &installed,
                workflow_ref: None,
                agent_id: "sm",
            },
            &vars,
        )
        .unwrap();
    let state = project
        .state_file(&run.run_id)
        .read()
        .unwrap()
        .doc
        .to_value();
    assert_eq!(state["variables"], Value::Object(vars));
    assert_eq!(state["stepsCompleted"], json!([]));
}

#[test]
fn workflow_status_and_empty_names_are_refused_and_nothing_is_created() {
    let (tmp, store, package) = setup();
    let installed = store.packages().install(&package, "test").unwrap().package;
    let project = store.project(&tmp.path().join("project")).unwrap();
    for (key, value) in [("workflowStatus", "complete"), (" ", "x")] {
        let mut vars = Map::new();
        vars.insert(key.into(), json!(value));
        let err = project
            .create_run_with_variables(
                NewRun {
                    package: &package,
                    installed: &installed,
                    workflow_ref: None,
                    agent_id: "sm",
                },
                &vars,
            )
            .unwrap_err();
        assert_eq!(err.code(), "RUN_VARIABLE_INVALID", "{err}");
    }
    assert!(project.list_runs().unwrap().is_empty());
}
