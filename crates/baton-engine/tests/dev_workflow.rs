//! The bundled dev workflow with a scripted model over HTTP, on the sample `pricing` project:
//! the developer runs the tests with `terminal.run` (one fails), fixes the code, runs them
//! again (they pass); the reviewer runs them too and writes the review. Everything goes
//! through the real sandbox, policy and audit.

use baton_engine::Outcome;
use baton_engine::runner::{self, Settings, StartRun};
use baton_llm::testing::{Reply, ScriptedServer};
use baton_llm::{HttpChatModel, LlmConfig};
use baton_sandbox::{NamespaceMode, capabilities};
use baton_store::Store;
use baton_testkit::copy_dir;
use baton_tools::ToolsConfig;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The repository, from this crate (not from a helper crate built elsewhere).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn patch_state(update: Value) -> String {
    json!({"path": "@state/workflow.md", "operation": "updateFrontmatter", "update": update})
        .to_string()
}

const TESTS: &str = r#"{"command": "python3", "args": ["-m", "unittest", "-q"]}"#;

fn replies() -> Vec<Reply> {
    vec![
        Reply::tool_calls(&[(
            "c1",
            "fs_read",
            r#"{"path": "@project/stories/1-1-percentage-discount.md"}"#,
        )]),
        Reply::tool_calls(&[(
            "c2",
            "fs_apply_patch",
            &patch_state(json!({
                "stepsCompleted": {"append": ["step-01-load-story"]},
                "currentNodeId": {"set": "step-02-implement"},
                "variables": {"set": {"storyFile": "stories/1-1-percentage-discount.md", "testCommand": ["python3", "-m", "unittest", "-q"]}}
            })),
        )]),
        // The tests fail: the discount is subtracted as an amount.
        Reply::tool_calls(&[("c3", "terminal_run", TESTS)]),
        Reply::tool_calls(&[(
            "c4",
            "fs_apply_patch",
            &json!({
                "path": "@project/pricing.py",
                "operation": "replaceText",
                "find": "return round(subtotal - discount_percent, 2)",
                "replace": "return round(subtotal * (100 - discount_percent) / 100, 2)"
            })
            .to_string(),
        )]),
        Reply::tool_calls(&[("c5", "terminal_run", TESTS)]),
        Reply::tool_calls(&[(
            "c6",
            "fs_apply_patch",
            &patch_state(json!({
                "stepsCompleted": {"append": ["step-02-implement"]},
                "currentNodeId": {"set": "step-03-review"}
            })),
        )]),
        // The reviewer trusts nothing it has not run.
        Reply::tool_calls(&[("c7", "terminal_run", TESTS)]),
        Reply::tool_calls(&[(
            "c8",
            "fs_write",
            &json!({"path": "@project/artifacts/review/review.md", "content": "# Review of 1-1\n\nVerdict: approve\n\n- python3 -m unittest -q: OK (3 tests)\n"}).to_string(),
        )]),
        Reply::tool_calls(&[(
            "c9",
            "fs_apply_patch",
            &patch_state(json!({
                "stepsCompleted": {"append": ["step-03-review"]},
                "currentNodeId": {"set": "end-99"}
            })),
        )]),
        Reply::tool_calls(&[(
            "c10",
            "fs_write",
            &json!({"path": "@project/artifacts/dev/summary.md", "content": "# 1-1 done\n\nChanged pricing.py; python3 -m unittest -q passes.\n"}).to_string(),
        )]),
        Reply::tool_calls(&[(
            "c11",
            "fs_apply_patch",
            &patch_state(json!({
                "stepsCompleted": {"append": ["end-99"]},
                "variables": {"set": {"workflowStatus": "complete"}}
            })),
        )]),
        Reply::text("Story 1-1 is implemented, reviewed and recorded."),
    ]
}

fn python3() -> bool {
    std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[tokio::test]
async fn the_dev_workflow_fixes_the_code_until_its_tests_pass() {
    let caps = capabilities();
    if caps.landlock_abi.is_none() || !caps.seccomp || caps.namespaces == NamespaceMode::Unavailable
    {
        eprintln!(
            "this kernel lacks a sandbox layer ({caps:?}); the terminal refuses to run, so the dev workflow cannot"
        );
        return;
    }
    if !python3() {
        eprintln!("python3 is not installed; the sample project's tests need it");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    copy_dir(&repo().join("examples/projects/pricing"), &project);
    let server = ScriptedServer::start(replies()).await.unwrap();
    let model = HttpChatModel::new(LlmConfig {
        base_url: server.base_url(),
        model: Some("scripted".into()),
        stream: false,
        retry_base_delay: Duration::from_millis(5),
        ..LlmConfig::default()
    })
    .unwrap();
    let store = Store::new(tmp.path().join("home"));
    let mut settings = Settings::new(&model);
    let mut tools = ToolsConfig::default();
    tools.system.terminal.enabled = true;
    settings.tools = tools;
    let pkg = repo().join("examples/packages/dev-story");
    let finished = runner::start(&store, StartRun::new(&pkg, &project), settings)
        .await
        .unwrap();
    assert!(
        matches!(finished.report.outcome, Outcome::Completed { .. }),
        "{:?}",
        finished.report
    );
    assert_eq!(finished.report.model_calls, 12);

    // The terminal results, in order: failing, passing, passing.
    let paths = store
        .project(&project)
        .unwrap()
        .run_paths(&finished.run.run_id);
    let audit = baton_store::jsonl::read(&paths.execution_log)
        .unwrap()
        .records;
    let runs: Vec<&Value> = audit
        .iter()
        .filter(|l| l["toolName"] == "terminal.run")
        .collect();
    assert_eq!(runs.len(), 3);
    let exits: Vec<&Value> = runs.iter().map(|l| &l["output"]["exitCode"]).collect();
    assert_eq!(exits, [&json!(1), &json!(0), &json!(0)], "{runs:#?}");
    assert_eq!(runs[2]["agentId"], "reviewer");
    assert!(
        runs[0]["output"]["stderr"]["sha256"].is_string(),
        "output is redacted in the audit"
    );

    // What the model saw: the failure, then the success; never a host path.
    let bodies: Vec<Value> = server.received().into_iter().map(|r| r.body).collect();
    let tool_result = |n: usize| -> Value {
        let last = bodies[n]["messages"].as_array().unwrap().last().unwrap();
        serde_json::from_str(last["content"].as_str().unwrap()).unwrap()
    };
    let failing = tool_result(3);
    assert_eq!(failing["exitCode"], 1, "{failing:#}");
    assert!(
        failing["stderr"]
            .as_str()
            .unwrap()
            .contains("FAILED (failures=1)")
    );
    let passing = tool_result(5);
    assert_eq!(passing["exitCode"], 0, "{passing:#}");
    assert!(passing["stderr"].as_str().unwrap().contains("OK"));
    let root = project.canonicalize().unwrap().display().to_string();
    for body in &bodies {
        assert!(
            !body.to_string().contains(&root),
            "a host path reached the model"
        );
    }
    let tools: Vec<&str> = bodies[2]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(tools.contains(&"terminal_run"), "{tools:?}");
    assert!(
        !tools.contains(&"shell_exec"),
        "shell.exec is off by default"
    );

    // The project really is fixed: its tests pass outside baton too.
    let check = std::process::Command::new("python3")
        .args(["-m", "unittest", "-q"])
        .current_dir(&project)
        .output()
        .unwrap();
    assert!(check.status.success(), "{check:?}");
    assert!(Path::new(&project.join("artifacts/review/review.md")).exists());
    assert_eq!(
        finished.state["artifacts"],
        json!(["artifacts/review/review.md", "artifacts/dev/summary.md"])
    );
}

#[tokio::test]
async fn without_the_operator_the_terminal_stays_hidden() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    copy_dir(&repo().join("examples/projects/pricing"), &project);
    let server = ScriptedServer::start(vec![
        Reply::tool_calls(&[("c1", "terminal_run", TESTS)]),
        Reply::text("I cannot run the tests."),
    ])
    .await
    .unwrap();
    let model = HttpChatModel::new(LlmConfig {
        base_url: server.base_url(),
        model: Some("scripted".into()),
        stream: false,
        ..LlmConfig::default()
    })
    .unwrap();
    let store = Store::new(tmp.path().join("home"));
    let settings = Settings::new(&model);
    let pkg = repo().join("examples/packages/dev-story");
    let finished = runner::start(&store, StartRun::new(&pkg, &project), settings)
        .await
        .unwrap();
    assert!(matches!(finished.report.outcome, Outcome::Waiting { .. }));
    let bodies: Vec<Value> = server.received().into_iter().map(|r| r.body).collect();
    assert!(
        !bodies[0].to_string().contains("terminal_run"),
        "the agent asks for the terminal, but the operator did not enable it"
    );
    let last = bodies[1]["messages"].as_array().unwrap().last().unwrap();
    let result: Value = serde_json::from_str(last["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["error"]["code"], "TOOL_NOT_AVAILABLE");
}
