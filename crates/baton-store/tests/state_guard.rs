//! The seed-000 state patches applied in order to a fresh create-story run, and every rule of
//! the transition guard.

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
    }
}

impl Fixture {
    fn graph(&self) -> &baton_package::Graph {
        &self.package.workflows()[0].graph
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

#[test]
fn damaged_index_is_reported_not_overwritten() {
    let f = fixture("create-story-micro", None, "sm");
    let index = f.project.dir.join("runsIndex.json");
    fs::write(&index, "[{\"runId\": ").unwrap();
    assert_eq!(
        f.project.list_runs().unwrap_err().code(),
        "RUNS_INDEX_INVALID"
    );
    let err = f
        .project
        .set_phase(&f.run_id, Phase::Running, None)
        .unwrap_err();
    assert_eq!(err.code(), "RUNS_INDEX_INVALID");
    assert_eq!(fs::read_to_string(&index).unwrap(), "[{\"runId\": ");
}
