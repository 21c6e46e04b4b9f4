//! The seed-000 state patches applied in order to a fresh create-story run, and every rule of
//! the transition guard.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_package::Package;
use baton_store::{GuardOptions, NewRun, Phase, Project, StateCode, StateFileError, Store};
use baton_testkit::example;
use serde_json::{Value, json};
use std::fs;

struct Fixture {
    _tmp: tempfile::TempDir,
    store: Store,
    project: Project,
    package: Package,
    run_id: String,
    workflow_ref: String,
}

fn fixture(name: &str, workflow: Option<&str>, agent: &str) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::new(tmp.path().join("home"));
    let project_root = tmp.path().join("project");
    fs::create_dir_all(&project_root).unwrap();
    let package = Package::load(&example(name)).unwrap();
    let installed = store.packages().install(&package, "test").unwrap().package;
    let project = store.project(&project_root).unwrap();
    let run = project
        .create_run(NewRun {
            package: &package,
            installed: &installed,
            workflow_ref: workflow,
            agent_id: agent,
        })
        .unwrap();
    Fixture {
        _tmp: tmp,
        store,
        project,
        package,
        run_id: run.run_id,
        workflow_ref: run.workflow_ref,
    }
}

impl Fixture {
    fn graph(&self) -> &baton_package::Graph {
        &self.package.workflow(&self.workflow_ref).unwrap().graph
    }

    fn patch(&self, update: Value) -> Result<baton_store::StateWrite, StateFileError> {
        self.project.state_file(&self.run_id).patch(
            self.graph(),
            &update,
            None,
            GuardOptions::default(),
        )
    }

    fn fields(&self) -> serde_json::Map<String, Value> {
        self.project
            .state_file(&self.run_id)
            .read()
            .unwrap()
            .doc
            .fields()
            .clone()
    }

    fn raw(&self) -> Vec<u8> {
        fs::read(self.project.run_paths(&self.run_id).state_file).unwrap()
    }
}

fn refused(result: Result<baton_store::StateWrite, StateFileError>) -> baton_store::StateError {
    match result {
        Err(StateFileError::Refused(e)) => e,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

const T: &str = "2025-12-25T00:00:00Z";

fn tc(id: &str) -> Value {
    match id {
        "tc07" => json!({
            "stepsCompleted": { "append": ["step-01-select-story"] },
            "variables": { "set": { "storyKey": "1-2-user-authentication", "epicNum": "1", "storyNum": "2",
                                     "storyTitle": "user-authentication", "sprintStatusPath": "" } },
            "currentNodeId": { "set": "step-02-discover-inputs" },
            "artifacts": { "append": ["artifacts/create-story/target.md"] },
            "updatedAt": { "set": T }
        }),
        "tc16" => json!({
            "stepsCompleted": { "append": ["step-02-discover-inputs"] },
            "variables": { "set": { "epicsPath": "artifacts/epics.md", "prdPath": "artifacts/PRD.md",
                                     "architecturePath": "artifacts/architecture.md", "uxPath": "artifacts/ux.md",
                                     "projectContextPath": "project-context.md" } },
            "currentNodeId": { "set": "step-03-extract-context" },
            "artifacts": { "append": ["artifacts/create-story/inputs.md"] },
            "updatedAt": { "set": T }
        }),
        "tc24" => json!({
            "stepsCompleted": { "append": ["step-03-extract-context"] },
            "variables": { "set": { "storySummary": "Create user authentication story context with AC, tasks, and guardrails." } },
            "currentNodeId": { "set": "step-04-generate-story" },
            "artifacts": { "append": ["artifacts/create-story/context.md"] },
            "updatedAt": { "set": T }
        }),
        "tc29" => json!({
            "stepsCompleted": { "append": ["step-04-generate-story"] },
            "variables": { "set": { "storyFile": "artifacts/stories/1-2-user-authentication.md" } },
            "currentNodeId": { "set": "step-05-update-sprint-status" },
            "artifacts": { "append": ["artifacts/stories/1-2-user-authentication.md"] },
            "updatedAt": { "set": T }
        }),
        "tc34" => json!({
            "stepsCompleted": { "append": ["step-05-update-sprint-status"] },
            "currentNodeId": { "set": "end-99" },
            "artifacts": { "append": ["artifacts/create-story/sprint-status-update.md"] },
            "updatedAt": { "set": T }
        }),
        "tc38" => json!({
            "stepsCompleted": { "append": ["end-99"] },
            "variables": { "set": { "workflowStatus": "complete" } },
            "artifacts": { "append": ["artifacts/create-story/summary.md"] },
            "updatedAt": { "set": T }
        }),
        _ => unreachable!(),
    }
}

#[test]
fn new_run_state_follows_seed_001() {
    let f = fixture("create-story-micro", None, "sm");
    let fields = f.fields();
    assert_eq!(fields["runId"], f.run_id.as_str());
    assert_eq!(fields["activeAgentId"], "sm");
    assert_eq!(fields["workflowRef"], "create-story-micro");
    assert_eq!(fields["workflowType"], "create-story-micro");
    assert_eq!(fields["currentNodeId"], "");
    assert_eq!(fields["stepsCompleted"], json!([]));
    assert_eq!(fields["variables"], json!({}));
    assert_eq!(fields["decisionLog"], json!([]));
    assert_eq!(fields["artifacts"], json!([]));
    assert!(fields["updatedAt"].as_str().unwrap().ends_with('Z'));
    let paths = f.project.run_paths(&f.run_id);
    assert_eq!(
        fs::read(&paths.execution_log).unwrap().len(),
        0,
        "empty audit log exists"
    );
    assert!(f.project.root().join("artifacts").is_dir());
    // The body of workflow.md is copied as is.
    let text = String::from_utf8(f.raw()).unwrap();
    let template = &f.package.workflows()[0].state_template;
    let body_of = |t: &str| t[t.find("\n---\n").unwrap() + 5..].to_string();
    assert_eq!(body_of(&text), body_of(template));
    let meta = f.project.get_run(&f.run_id).unwrap();
    assert_eq!(meta.phase, Phase::Idle);
    assert_eq!(meta.package_sha256, f.package.content_sha256());
    assert_eq!(
        meta.current_node_id.as_deref(),
        Some("step-01-select-story")
    );
}

#[test]
fn seed_trace_patches_apply_in_order() {
    let f = fixture("create-story-micro", None, "sm");
    let base = f.fields();
    let mut vars = serde_json::Map::new();
    let mut steps: Vec<&str> = Vec::new();
    let mut artifacts: Vec<&str> = Vec::new();
    type Step<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], &'a str, &'a str);
    let plan: [Step; 6] = [
        (
            "tc07",
            "step-02-discover-inputs",
            &[
                ("storyKey", "1-2-user-authentication"),
                ("epicNum", "1"),
                ("storyNum", "2"),
                ("storyTitle", "user-authentication"),
                ("sprintStatusPath", ""),
            ],
            "step-01-select-story",
            "artifacts/create-story/target.md",
        ),
        (
            "tc16",
            "step-03-extract-context",
            &[
                ("epicsPath", "artifacts/epics.md"),
                ("prdPath", "artifacts/PRD.md"),
                ("architecturePath", "artifacts/architecture.md"),
                ("uxPath", "artifacts/ux.md"),
                ("projectContextPath", "project-context.md"),
            ],
            "step-02-discover-inputs",
            "artifacts/create-story/inputs.md",
        ),
        (
            "tc24",
            "step-04-generate-story",
            &[(
                "storySummary",
                "Create user authentication story context with AC, tasks, and guardrails.",
            )],
            "step-03-extract-context",
            "artifacts/create-story/context.md",
        ),
        (
            "tc29",
            "step-05-update-sprint-status",
            &[("storyFile", "artifacts/stories/1-2-user-authentication.md")],
            "step-04-generate-story",
            "artifacts/stories/1-2-user-authentication.md",
        ),
        (
            "tc34",
            "end-99",
            &[],
            "step-05-update-sprint-status",
            "artifacts/create-story/sprint-status-update.md",
        ),
        (
            "tc38",
            "end-99",
            &[("workflowStatus", "complete")],
            "end-99",
            "artifacts/create-story/summary.md",
        ),
    ];
    for (id, node, new_vars, step, artifact) in plan {
        let before = f.raw();
        let write = f.patch(tc(id)).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(
            write.before_sha256,
            baton_package::digest::sha256_hex(&before),
            "{id}"
        );
        assert_eq!(
            write.after_sha256,
            baton_package::digest::sha256_hex(&f.raw()),
            "{id}"
        );
        for (k, v) in new_vars {
            vars.insert(k.to_string(), json!(v));
        }
        steps.push(step);
        artifacts.push(artifact);
        let got = f.fields();
        let mut want = base.clone();
        want.insert("currentNodeId".into(), json!(node));
        want.insert("stepsCompleted".into(), json!(steps));
        want.insert("variables".into(), Value::Object(vars.clone()));
        want.insert("artifacts".into(), json!(artifacts));
        want.insert("updatedAt".into(), json!(T));
        assert_eq!(
            Value::Object(got.clone()),
            Value::Object(want),
            "after {id}"
        );
        let keys: Vec<&String> = got.keys().collect();
        let base_keys: Vec<&String> = base.keys().collect();
        assert_eq!(keys, base_keys, "{id}: key order is stable");
        let complete = write.doc.is_complete(f.graph());
        assert_eq!(complete, id == "tc38", "{id}");
    }
}

#[test]
fn invalid_jump_is_refused_with_allowed_next_and_the_file_unchanged() {
    let f = fixture("create-story-micro", None, "sm");
    let before = f.raw();
    let err = refused(f.patch(json!({"currentNodeId": {"set": "step-04-generate-story"}})));
    assert_eq!(err.code, StateCode::InvalidTransition);
    let details = err.details.unwrap();
    assert_eq!(details["fromNodeId"], "step-01-select-story");
    assert_eq!(
        details["allowedNext"],
        json!([{"to": "step-02-discover-inputs", "label": "next", "isDefault": false}])
    );
    assert_eq!(f.raw(), before);
}

#[test]
fn unknown_node_is_refused() {
    let f = fixture("create-story-micro", None, "sm");
    let err = refused(f.patch(json!({"currentNodeId": {"set": "step-99"}})));
    assert_eq!(err.code, StateCode::InvalidTransition);
    assert!(err.details.unwrap()["nodes"].as_array().unwrap().len() == 6);
}

#[test]
fn staying_on_the_node_is_allowed_and_empty_means_entry() {
    let f = fixture("create-story-micro", None, "sm");
    f.patch(json!({"currentNodeId": {"set": "step-01-select-story"}}))
        .unwrap();
    f.patch(json!({"currentNodeId": {"set": ""}})).unwrap();
    f.patch(json!({"variables": {"set": {"x": "y"}}})).unwrap();
}

#[test]
fn decision_branches_follow_the_graph() {
    let f = fixture("bug-triage", None, "triager");
    f.patch(json!({"stepsCompleted": {"append": ["step-01-collect-facts"]}, "currentNodeId": {"set": "decide-02-severity"}})).unwrap();
    let err = refused(f.patch(json!({"currentNodeId": {"set": "end-99"}})));
    let allowed = err.details.unwrap()["allowedNext"].clone();
    assert_eq!(allowed.as_array().unwrap().len(), 3);
    assert_eq!(
        allowed[1],
        json!({"to": "step-03b-backlog-entry", "label": "normal", "isDefault": true, "conditionText": "variables.severity != 'critical'"})
    );
    f.patch(json!({
        "currentNodeId": {"set": "step-01-collect-facts"},
        "decisionLog": {"append": [{"from": "decide-02-severity", "to": "step-01-collect-facts", "label": "needs-info", "reason": "no versions"}]}
    }))
    .unwrap();
    assert_eq!(f.fields()["decisionLog"].as_array().unwrap().len(), 1);
}

#[test]
fn steps_completed_never_shrinks() {
    let f = fixture("create-story-micro", None, "sm");
    f.patch(tc("tc07")).unwrap();
    let before = f.raw();
    let text = String::from_utf8(before.clone())
        .unwrap()
        .replace("- step-01-select-story\n", "");
    let err = match f.project.state_file(&f.run_id).replace(
        f.graph(),
        &text.replace("stepsCompleted:\n", "stepsCompleted: []\n"),
        None,
        GuardOptions::default(),
    ) {
        Err(StateFileError::Refused(e)) => e,
        other => panic!("{other:?}"),
    };
    assert_eq!(err.code, StateCode::InvalidTransition);
    assert!(err.message.contains("stepsCompleted"));
    assert_eq!(f.raw(), before);
    // A rewind may truncate.
    let rewind = GuardOptions { rewind: true };
    f.project
        .state_file(&f.run_id)
        .replace(
            f.graph(),
            &String::from_utf8(before)
                .unwrap()
                .replace("- step-01-select-story\n", "")
                .replace("stepsCompleted:\n", "stepsCompleted: []\n"),
            None,
            rewind,
        )
        .unwrap();
}

#[test]
fn schema_and_yaml_errors_leave_the_file_unchanged() {
    let f = fixture("create-story-micro", None, "sm");
    let before = f.raw();
    let err = refused(f.patch(json!({"stepsCompleted": {"set": "oops"}})));
    assert_eq!(err.code, StateCode::SchemaValidation);
    assert_eq!(
        err.details.unwrap()["issues"][0]["pointer"],
        "/stepsCompleted"
    );
    let file = f.project.state_file(&f.run_id);
    let err = match file.replace(
        f.graph(),
        "---\nschemaVersion: [\n---\n",
        None,
        GuardOptions::default(),
    ) {
        Err(StateFileError::Refused(e)) => e,
        other => panic!("{other:?}"),
    };
    assert_eq!(err.code, StateCode::InvalidFrontmatter);
    let err = match file.replace(
        f.graph(),
        "no frontmatter at all",
        None,
        GuardOptions::default(),
    ) {
        Err(StateFileError::Refused(e)) => e,
        other => panic!("{other:?}"),
    };
    assert_eq!(err.code, StateCode::InvalidFrontmatter);
    let err = refused(f.patch(json!({"workflowType": {"set": ""}})));
    assert_eq!(err.code, StateCode::SchemaValidation);
    let err = refused(f.patch(json!({"stepsCompleted": {"pop": 1}})));
    assert_eq!(err.code, StateCode::InvalidPatch);
    assert_eq!(f.raw(), before);
}

#[test]
fn if_match_sha256_guards_against_lost_updates() {
    let f = fixture("create-story-micro", None, "sm");
    let file = f.project.state_file(&f.run_id);
    let read = file.read().unwrap();
    let stale = read.sha256.clone();
    file.patch(
        f.graph(),
        &json!({"variables": {"set": {"a": "1"}}}),
        Some(&stale),
        GuardOptions::default(),
    )
    .unwrap();
    let before = f.raw();
    let err = match file.patch(
        f.graph(),
        &json!({"variables": {"set": {"b": "2"}}}),
        Some(&stale),
        GuardOptions::default(),
    ) {
        Err(StateFileError::Refused(e)) => e,
        other => panic!("{other:?}"),
    };
    assert_eq!(err.code, StateCode::PreconditionFailed);
    assert_eq!(f.raw(), before);
}

#[test]
fn run_creation_rules() {
    let f = fixture("docs-kit", Some("write-adr"), "architect");
    let run = f.project.get_run(&f.run_id).unwrap();
    assert_eq!(run.workflow_ref, "write-adr");
    let installed = f.store.packages().list().unwrap().remove(0);
    let create = |workflow: Option<&str>, agent: &str| {
        f.project
            .create_run(NewRun {
                package: &f.package,
                installed: &installed,
                workflow_ref: workflow,
                agent_id: agent,
            })
            .map(|_| ())
            .unwrap_err()
            .code()
    };
    assert_eq!(create(None, "writer"), "WORKFLOW_REF_REQUIRED");
    assert_eq!(create(Some("nope"), "writer"), "WORKFLOW_REF_UNKNOWN");
    assert_eq!(create(Some("write-readme"), "ghost"), "AGENT_NOT_FOUND");
    assert_eq!(
        f.project.list_runs().unwrap().len(),
        1,
        "failed creations leave nothing behind"
    );
    let runs_dir = f.project.run_paths("x").dir.parent().unwrap().to_path_buf();
    assert_eq!(fs::read_dir(runs_dir).unwrap().count(), 1);
}

#[test]
fn resuming_against_a_changed_package_is_refused() {
    let f = fixture("create-story-micro", None, "sm");
    let run = f.project.get_run(&f.run_id).unwrap();
    f.project.pinned_package(&f.store, &run).unwrap();
    let installed = f.store.packages().list().unwrap().remove(0);
    let file = installed.path.join("assets/story-template.md");
    let mut perms = fs::metadata(&file).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    fs::set_permissions(&file, perms).unwrap();
    fs::write(&file, "# tampered\n").unwrap();
    let err = f.project.pinned_package(&f.store, &run).unwrap_err();
    assert_eq!(err.code(), "RUN_PACKAGE_CHANGED");
}

#[test]
fn phases_and_prefix_lookup() {
    let f = fixture("create-story-micro", None, "sm");
    let meta = f
        .project
        .set_phase(
            &f.run_id,
            Phase::WaitingUser,
            Some(json!({"question": "story key?"})),
        )
        .unwrap();
    assert_eq!(meta.phase, Phase::WaitingUser);
    let again = f.project.get_run(&f.run_id[..8]).unwrap();
    assert_eq!(again.waiting_for, Some(json!({"question": "story key?"})));
    let (_, found) = f.store.find_run(&f.run_id[..12]).unwrap();
    assert_eq!(found.run_id, f.run_id);
    assert_eq!(
        f.store.find_run("zzzz").unwrap_err().code(),
        "RUN_NOT_FOUND"
    );
    assert_eq!(
        f.project.get_run("").unwrap().run_id,
        f.run_id,
        "an empty prefix is unique with one run"
    );
}

// ---- The model cannot forge progress -------------------------------------------------------

impl Fixture {
    fn text(&self) -> String {
        String::from_utf8(self.raw()).unwrap()
    }

    fn replace(
        &self,
        text: &str,
        options: GuardOptions,
    ) -> Result<baton_store::StateWrite, StateFileError> {
        self.project
            .state_file(&self.run_id)
            .replace(self.graph(), text, None, options)
    }

    fn is_complete(&self) -> bool {
        self.project
            .state_file(&self.run_id)
            .read()
            .unwrap()
            .doc
            .is_complete(self.graph())
    }
}

/// Asserts the refusal code and that the state file did not change.
fn assert_refused(
    f: &Fixture,
    result: Result<baton_store::StateWrite, StateFileError>,
    before: &[u8],
    code: StateCode,
) -> Value {
    let err = refused(result);
    assert_eq!(err.code, code, "{err}");
    assert_eq!(f.raw(), before, "a refused write leaves the file unchanged");
    err.details.expect("every refusal says what was wrong")
}

#[test]
fn forged_completion_at_the_entry_node_is_refused() {
    let f = fixture("create-story-micro", None, "sm");
    let before = f.raw();
    let forged = json!({
        "stepsCompleted": {"append": ["end-99", "ghost-node"]},
        "variables": {"set": {"workflowStatus": "complete"}},
        "updatedAt": {"set": T}
    });
    let details = assert_refused(&f, f.patch(forged), &before, StateCode::UnknownNode);
    assert_eq!(details["entries"], json!(["ghost-node"]));
    assert!(!f.is_complete());
    // Without the ghost, the end node was never current.
    let forged = json!({
        "stepsCompleted": {"append": ["end-99"]},
        "variables": {"set": {"workflowStatus": "complete"}}
    });
    assert_refused(&f, f.patch(forged), &before, StateCode::StepNotVisited);
    // Without any step, the status alone is refused too.
    let forged = json!({"variables": {"set": {"workflowStatus": "complete"}}});
    assert_refused(&f, f.patch(forged), &before, StateCode::CompletionNotAtEnd);
    // The same forgery as a whole-file write.
    let text = f
        .text()
        .replace("stepsCompleted: []", "stepsCompleted:\n- end-99")
        .replace("variables: {}", "variables:\n  workflowStatus: complete");
    assert_refused(
        &f,
        f.replace(&text, GuardOptions::default()),
        &before,
        StateCode::StepNotVisited,
    );
    assert!(!f.is_complete());
}

#[test]
fn unknown_step_entries_are_refused() {
    let f = fixture("create-story-micro", None, "sm");
    let before = f.raw();
    let details = assert_refused(
        &f,
        f.patch(
            json!({"stepsCompleted": {"append": ["step-01-select-story", "Step-01-Select-Story"]}}),
        ),
        &before,
        StateCode::UnknownNode,
    );
    assert_eq!(details["field"], "stepsCompleted");
    assert_eq!(details["entries"], json!(["Step-01-Select-Story"]));
    assert_eq!(details["nodes"].as_array().unwrap().len(), 6);
    assert_eq!(StateCode::UnknownNode.as_str(), "E_UNKNOWN_NODE");
}

#[test]
fn only_the_node_left_or_entered_can_be_completed() {
    let f = fixture("create-story-micro", None, "sm");
    let before = f.raw();
    let details = assert_refused(
        &f,
        f.patch(json!({
            "stepsCompleted": {"append": ["step-01-select-story", "step-03-extract-context"]},
            "currentNodeId": {"set": "step-02-discover-inputs"}
        })),
        &before,
        StateCode::StepNotVisited,
    );
    assert_eq!(details["entry"], "step-03-extract-context");
    assert_eq!(details["currentNodeIdBefore"], "step-01-select-story");
    assert_eq!(details["currentNodeIdAfter"], "step-02-discover-inputs");
    assert_eq!(
        details["allowed"],
        json!(["step-01-select-story", "step-02-discover-inputs"])
    );
    assert_eq!(StateCode::StepNotVisited.as_str(), "E_STEP_NOT_VISITED");
    // The node being left and the node being entered both may.
    f.patch(json!({
        "stepsCompleted": {"append": ["step-01-select-story", "step-02-discover-inputs"]},
        "currentNodeId": {"set": "step-02-discover-inputs"}
    }))
    .unwrap();
    // A node current long ago but not now is not "visited" by this write: entries are only
    // added through the guard, so it is either already in the list or was never completed.
    let before = f.raw();
    f.patch(json!({"currentNodeId": {"set": "step-03-extract-context"}}))
        .unwrap();
    let text = f.text().replace(
        "- step-02-discover-inputs\n",
        "- step-02-discover-inputs\n- step-05-update-sprint-status\n",
    );
    let before_write = f.raw();
    assert_refused(
        &f,
        f.replace(&text, GuardOptions::default()),
        &before_write,
        StateCode::StepNotVisited,
    );
    assert_ne!(before, before_write);
}

#[test]
fn duplicate_step_entries_are_refused() {
    let f = fixture("create-story-micro", None, "sm");
    f.patch(tc("tc07")).unwrap();
    let before = f.raw();
    let text = f.text().replace(
        "- step-01-select-story\n",
        "- step-01-select-story\n- step-01-select-story\n",
    );
    let details = assert_refused(
        &f,
        f.replace(&text, GuardOptions::default()),
        &before,
        StateCode::DuplicateStep,
    );
    assert_eq!(details["entries"], json!(["step-01-select-story"]));
    assert_eq!(StateCode::DuplicateStep.as_str(), "E_STEP_DUPLICATE");
    // The patch operator drops duplicates itself, so appending again is a no-op, not an error.
    f.patch(json!({"stepsCompleted": {"append": ["step-01-select-story"]}}))
        .unwrap();
}

#[test]
fn completion_only_at_an_end_node() {
    let f = fixture("create-story-micro", None, "sm");
    f.patch(tc("tc07")).unwrap();
    let before = f.raw();
    let details = assert_refused(
        &f,
        f.patch(json!({"variables": {"set": {"workflowStatus": "complete"}}})),
        &before,
        StateCode::CompletionNotAtEnd,
    );
    assert_eq!(details["currentNodeId"], "step-02-discover-inputs");
    assert_eq!(details["nodeType"], "step");
    assert_eq!(details["endNodes"], json!(["end-99"]));
    assert_eq!(
        StateCode::CompletionNotAtEnd.as_str(),
        "E_COMPLETION_NOT_AT_END"
    );
    // Other statuses are the model's business.
    f.patch(json!({"variables": {"set": {"workflowStatus": "in-progress"}}}))
        .unwrap();
    // At the end node it is what the workflow asks for.
    for id in ["tc16", "tc24", "tc29", "tc34", "tc38"] {
        f.patch(tc(id)).unwrap_or_else(|e| panic!("{id}: {e}"));
    }
    assert!(f.is_complete());
}

#[test]
fn identity_fields_cannot_change_or_disappear() {
    let f = fixture("create-story-micro", None, "sm");
    let before = f.raw();
    let fields = f.fields();
    for (field, value) in [
        ("runId", "0198f1c2-0000-7000-8000-000000000000"),
        ("workflowRef", "bug-triage"),
        ("workflowType", "bug-triage"),
        ("activeAgentId", "dev"),
        ("schemaVersion", "1.1.0"),
    ] {
        let details = assert_refused(
            &f,
            f.patch(json!({ field: {"set": value} })),
            &before,
            StateCode::ImmutableField,
        );
        assert_eq!(details["field"], field);
        assert_eq!(details["before"], fields[field]);
        assert_eq!(details["after"], value);
    }
    // Removing one through a whole-file write.
    let text = f
        .text()
        .lines()
        .filter(|l| !l.starts_with("activeAgentId:"))
        .map(|l| format!("{l}\n"))
        .collect::<String>();
    let details = assert_refused(
        &f,
        f.replace(&text, GuardOptions::default()),
        &before,
        StateCode::ImmutableField,
    );
    assert_eq!(details["field"], "activeAgentId");
    assert_eq!(details["after"], Value::Null);
    assert_eq!(StateCode::ImmutableField.as_str(), "E_IMMUTABLE_FIELD");
    // Setting a field to the value it has is no change.
    f.patch(json!({"activeAgentId": {"set": "sm"}})).unwrap();
}

#[test]
fn artifact_entries_are_normalized_project_paths() {
    let f = fixture("create-story-micro", None, "sm");
    let before = f.raw();
    for (entry, why) in [
        ("/etc/passwd", "absolute"),
        ("../outside.md", "'..'"),
        ("artifacts/../../x.md", "'..'"),
        ("./artifacts/a.md", "'.'"),
        ("artifacts//a.md", "empty path component"),
        ("artifacts\\a.md", "backslash"),
        ("artifacts/a\u{0}.md", "control"),
        ("@project/artifacts/a.md", "mount prefix"),
        ("@state/workflow.md", "mount prefix"),
        ("@elsewhere/a.md", "mount prefix"),
        ("artifacts/", "trailing"),
        ("", "empty"),
    ] {
        let details = assert_refused(
            &f,
            f.patch(json!({"artifacts": {"append": [entry]}})),
            &before,
            StateCode::ArtifactPathInvalid,
        );
        assert_eq!(details["entry"], entry);
        let reason = details["reason"].as_str().unwrap();
        assert!(reason.contains(why), "{entry:?}: {reason}");
    }
    assert_eq!(
        StateCode::ArtifactPathInvalid.as_str(),
        "E_ARTIFACT_PATH_INVALID"
    );
    f.patch(json!({"artifacts": {"append": ["artifacts/stories/1-2 auth.md", ".notes/a.md"]}}))
        .unwrap();
}

#[test]
fn decision_log_entries_follow_graph_edges() {
    let f = fixture("bug-triage", None, "triager");
    f.patch(json!({"stepsCompleted": {"append": ["step-01-collect-facts"]}, "currentNodeId": {"set": "decide-02-severity"}})).unwrap();
    let before = f.raw();
    let log = |from: &str, to: &str, label: &str| json!({"decisionLog": {"append": [{"from": from, "to": to, "label": label}]}});
    for (update, why) in [
        (log("decide-02-severity", "end-99", "done"), "no edge"),
        (
            log("decide-02-severity", "ghost", "critical"),
            "'ghost' is not a node",
        ),
        (
            log("nowhere", "step-03a-hotfix-plan", "critical"),
            "'nowhere' is not a node",
        ),
        (
            log("", "step-03a-hotfix-plan", "critical"),
            "'from' must name a node",
        ),
        // A forged rewind record outside a rewind is an ordinary entry: it needs an edge.
        (log("end-99", "step-01-collect-facts", "rewind"), "no edge"),
    ] {
        let details = assert_refused(&f, f.patch(update), &before, StateCode::DecisionLogInvalid);
        let reason = details["reason"].as_str().unwrap();
        assert!(reason.contains(why), "{reason}");
        assert!(details["entry"].is_object());
    }
    let details = assert_refused(
        &f,
        f.patch(log("decide-02-severity", "end-99", "done")),
        &before,
        StateCode::DecisionLogInvalid,
    );
    assert_eq!(details["allowedNext"].as_array().unwrap().len(), 3);
    assert_eq!(
        StateCode::DecisionLogInvalid.as_str(),
        "E_DECISION_LOG_INVALID"
    );
    // Labels may be paraphrased; the edge must exist.
    f.patch(log(
        "decide-02-severity",
        "step-03a-hotfix-plan",
        "it is critical",
    ))
    .unwrap();
}

#[test]
fn rewind_records_only_this_rewind_and_only_goes_back() {
    let f = fixture("create-story-micro", None, "sm");
    for id in ["tc07", "tc16"] {
        f.patch(tc(id)).unwrap();
    }
    let rewind = GuardOptions { rewind: true };
    let before = f.raw();
    let rewound = |to: &str, entry_from: &str, entry_to: &str| {
        f.text()
            .replace(
                "currentNodeId: step-03-extract-context",
                &format!("currentNodeId: {to}"),
            )
            .replace(
                "decisionLog: []",
                &format!("decisionLog:\n- from: {entry_from}\n  to: {entry_to}\n  label: rewind"),
            )
    };
    // Forward is not a rewind.
    let text = rewound(
        "step-04-generate-story",
        "step-03-extract-context",
        "step-04-generate-story",
    );
    let details = assert_refused(
        &f,
        f.replace(&text, rewind),
        &before,
        StateCode::InvalidTransition,
    );
    assert_eq!(details["toNodeId"], "step-04-generate-story");
    // The record must name this rewind.
    let text = rewound("step-01-select-story", "end-99", "step-01-select-story");
    assert_refused(
        &f,
        f.replace(&text, rewind),
        &before,
        StateCode::DecisionLogInvalid,
    );
    let text = rewound(
        "step-01-select-story",
        "step-03-extract-context",
        "step-01-select-story",
    );
    assert_refused(
        &f,
        f.replace(&text, GuardOptions::default()),
        &before,
        StateCode::InvalidTransition,
    );
    f.replace(&text, rewind).unwrap();
    assert_eq!(f.fields()["currentNodeId"], "step-01-select-story");
}

#[test]
fn a_state_written_before_the_rules_still_progresses() {
    let f = fixture("create-story-micro", None, "sm");
    // Written by an older baton: a ghost step, a duplicate, odd artifacts and decisions.
    let legacy = f
        .text()
        .replace(
            "stepsCompleted: []",
            "stepsCompleted:\n- ghost-node\n- ghost-node",
        )
        .replace(
            "artifacts: []",
            "artifacts:\n- ../odd.md\n- '@project/x.md'",
        )
        .replace(
            "decisionLog: []",
            "decisionLog:\n- from: ghost-node\n  to: end-99\n  label: jump",
        );
    fs::write(f.project.run_paths(&f.run_id).state_file, &legacy).unwrap();
    for id in ["tc07", "tc16", "tc24", "tc29", "tc34", "tc38"] {
        f.patch(tc(id)).unwrap_or_else(|e| panic!("{id}: {e}"));
    }
    assert!(f.is_complete());
    assert_eq!(f.fields()["stepsCompleted"][1], "ghost-node");
}

/// Replays create-story-micro's recorded patches on another package's run: node ids like
/// `end-99` exist there too, but the run never went there.
fn replay_foreign_patches(f: &Fixture) {
    let entry = f.graph().entry_node_id().to_string();
    for id in ["tc07", "tc16", "tc24", "tc29", "tc34", "tc38"] {
        let before = f.raw();
        let err = refused(f.patch(tc(id)));
        assert!(
            matches!(
                err.code,
                StateCode::InvalidTransition | StateCode::UnknownNode | StateCode::StepNotVisited
            ),
            "{id}: {err}"
        );
        assert_eq!(f.raw(), before, "{id}");
    }
    assert!(!f.is_complete());
    assert_eq!(
        f.project
            .state_file(&f.run_id)
            .read()
            .unwrap()
            .doc
            .effective_node_id(f.graph()),
        entry
    );
}

#[test]
fn another_packages_trace_cannot_complete_a_run() {
    replay_foreign_patches(&fixture("bug-triage", None, "triager"));
    replay_foreign_patches(&fixture("docs-kit", Some("write-adr"), "architect"));
    replay_foreign_patches(&fixture("docs-kit", Some("write-readme"), "writer"));
}

// ---- Property: completion needs an end node reached along the graph -------------------------

/// One random write, as indexes: below 32 into the nodes near the current one (it and its
/// successors), so that runs do progress, else into a pool of all node ids and junk.
#[derive(Debug, Clone)]
struct RandomWrite {
    current: Option<usize>,
    append: Option<Vec<usize>>,
    set_steps: Option<Vec<usize>>,
    complete: bool,
    decision: Option<(usize, usize, bool)>,
    artifact: Option<usize>,
    run_id: Option<usize>,
    rewind: bool,
}

fn random_write() -> impl proptest::strategy::Strategy<Value = RandomWrite> {
    use proptest::prelude::*;
    let pick = || 0usize..64;
    (
        proptest::option::of(pick()),
        proptest::option::weighted(0.6, proptest::collection::vec(pick(), 1..3)),
        proptest::option::weighted(0.15, proptest::collection::vec(pick(), 0..5)),
        proptest::bool::weighted(0.25),
        proptest::option::weighted(0.15, (pick(), pick(), any::<bool>())),
        proptest::option::weighted(0.1, pick()),
        proptest::option::weighted(0.05, pick()),
        proptest::bool::weighted(0.15),
    )
        .prop_map(
            |(current, append, set_steps, complete, decision, artifact, run_id, rewind)| {
                RandomWrite {
                    current,
                    append,
                    set_steps,
                    complete,
                    decision,
                    artifact,
                    run_id,
                    rewind,
                }
            },
        )
}

impl RandomWrite {
    fn update(&self, near: &[String], pool: &[String]) -> Value {
        let at = |i: usize| {
            if i < 32 {
                near[i % near.len()].clone()
            } else {
                pool[i % pool.len()].clone()
            }
        };
        let mut u = serde_json::Map::new();
        if let Some(i) = self.current {
            u.insert("currentNodeId".into(), json!({"set": at(i)}));
        }
        if let Some(list) = &self.append {
            let items: Vec<String> = list.iter().map(|&i| at(i)).collect();
            u.insert("stepsCompleted".into(), json!({"append": items}));
        } else if let Some(list) = &self.set_steps {
            let items: Vec<String> = list.iter().map(|&i| at(i)).collect();
            u.insert("stepsCompleted".into(), json!({"set": items}));
        }
        if self.complete {
            u.insert(
                "variables".into(),
                json!({"set": {"workflowStatus": "complete"}}),
            );
        }
        if let Some((from, to, rewind_label)) = self.decision {
            let label = if rewind_label { "rewind" } else { "next" };
            u.insert(
                "decisionLog".into(),
                json!({"append": [{"from": at(from), "to": at(to), "label": label}]}),
            );
        }
        if let Some(i) = self.artifact {
            u.insert("artifacts".into(), json!({"append": [at(i)]}));
        }
        if let Some(i) = self.run_id {
            u.insert("runId".into(), json!({"set": at(i)}));
        }
        Value::Object(u)
    }
}

#[test]
fn random_writes_never_complete_without_reaching_an_end_node() {
    use baton_package::model::NodeType;
    use baton_store::StateDoc;
    use proptest::test_runner::{Config, TestCaseError, TestRunner};

    let packages = [
        Package::load(&example("create-story-micro")).unwrap(),
        Package::load(&example("bug-triage")).unwrap(),
        Package::load(&example("docs-kit")).unwrap(),
    ];
    let workflows: Vec<&baton_package::Workflow> =
        packages.iter().flat_map(|p| p.workflows()).collect();
    let mut runner = TestRunner::new(Config {
        cases: 500,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = proptest::collection::vec(random_write(), 1..24);
    runner
        .run(&strategy, |writes| {
            for workflow in &workflows {
                let graph = &workflow.graph;
                let mut pool: Vec<String> = graph.nodes().iter().map(|n| n.id.clone()).collect();
                pool.extend(
                    [
                        "",
                        "end-99",
                        "ghost-node",
                        "END-99",
                        "../x.md",
                        "@state/workflow.md",
                        "artifacts/a.md",
                    ]
                    .map(str::to_owned),
                );
                let mut doc = StateDoc::parse(&workflow.state_template).unwrap();
                let mut visited = vec![doc.effective_node_id(graph).to_string()];
                for write in &writes {
                    let current = doc.effective_node_id(graph);
                    let mut near = vec![current.to_string()];
                    near.extend(graph.successors(current).iter().map(|s| s.to.to_string()));
                    let mut new = doc.clone();
                    if new.apply_update(&write.update(&near, &pool)).is_err() {
                        continue;
                    }
                    let options = GuardOptions {
                        rewind: write.rewind,
                    };
                    if baton_store::guard::check(&doc, "", &new, graph, None, options).is_err() {
                        continue;
                    }
                    doc = new;
                    visited.push(doc.effective_node_id(graph).to_string());
                    for step in doc.steps_completed() {
                        if !visited.iter().any(|v| v == step) {
                            return Err(TestCaseError::fail(format!(
                                "{}: '{step}' completed but never current ({visited:?})",
                                workflow.id
                            )));
                        }
                    }
                    let reached_end = visited
                        .iter()
                        .any(|v| graph.node(v).is_some_and(|n| n.node_type == NodeType::End));
                    if doc.is_complete(graph) && !reached_end {
                        return Err(TestCaseError::fail(format!(
                            "{}: complete without reaching an end node ({visited:?})",
                            workflow.id
                        )));
                    }
                }
            }
            Ok(())
        })
        .unwrap();
}

/// A model turn's state writes are renamed into place without an fsync and made durable by
/// the turn's group flush; until then the last durable state is kept, and read should a
/// power cut leave the file unreadable (an empty file: the new name reached the disk, its
/// content did not).
#[test]
fn grouped_state_writes_keep_the_durable_state_until_the_flush() {
    use baton_store::durable::{Group, flushes_on_this_thread};
    let f = fixture("create-story-micro", None, "sm");
    let group = Group::new();
    let state = f.project.state_file(&f.run_id).grouped(group.clone());
    let before = flushes_on_this_thread();
    let set = |key: &str| json!({"variables": {"set": {key: "x"}}});
    state
        .patch(f.graph(), &set("storyKey"), None, GuardOptions::default())
        .unwrap();
    state
        .patch(f.graph(), &set("epicNum"), None, GuardOptions::default())
        .unwrap();
    assert_eq!(
        flushes_on_this_thread(),
        before,
        "no flush before the group's"
    );
    let paths = f.project.run_paths(&f.run_id);
    let copy = paths.dir.join("workflow.md.durable");
    assert!(copy.is_file(), "the durable state is kept");
    // A power cut now may leave the renamed file empty: the durable state is read.
    let newest = f.raw();
    fs::write(&paths.state_file, b"").unwrap();
    let read = f.fields();
    assert!(read["variables"].get("storyKey").is_none(), "{read:?}");
    fs::write(&paths.state_file, &newest).unwrap();
    group.flush().unwrap();
    assert_eq!(flushes_on_this_thread(), before + 1);
    assert!(!copy.exists(), "the flush made the state durable");
    assert_eq!(f.fields()["variables"]["epicNum"], "x");
    // Unreadable with no copy left: the error, not an older state.
    fs::write(&paths.state_file, b"").unwrap();
    assert!(f.project.state_file(&f.run_id).read().is_err());
}
