//! A host serving a task run: the file tools work, but there is no graph and no workflow
//! state, so state writes and rewinds are refused and nothing is recorded as an artifact.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_tools::{CallContext, EffectivePolicy, SystemToolSettings, ToolCall, ToolHost};
use serde_json::{Value, json};
use std::fs;

struct Task {
    tmp: tempfile::TempDir,
    host: ToolHost,
    policy: EffectivePolicy,
}

const RUN_ID: &str = "019a0b7e-5f00-7000-8000-000000000001";

fn task() -> Task {
    let tmp = tempfile::tempdir().unwrap();
    for d in ["project/artifacts", "pkg", "state/logs"] {
        fs::create_dir_all(tmp.path().join(d)).unwrap();
    }
    let host = ToolHost::open_task(
        &tmp.path().join("project"),
        &tmp.path().join("pkg"),
        &tmp.path().join("state"),
        &tmp.path().join("state/logs/execution.jsonl"),
        RUN_ID.into(),
    )
    .unwrap();
    let policy = EffectivePolicy::merge(&SystemToolSettings::default(), None);
    Task { tmp, host, policy }
}

impl Task {
    fn call(&mut self, name: &str, args: Value) -> Value {
        let arguments = args.to_string();
        let ctx = CallContext {
            agent_id: "task",
            node_id: "",
            policy: &self.policy,
        };
        let call = ToolCall {
            id: "tc01",
            name,
            arguments: &arguments,
        };
        let outcome = self.host.execute(call, ctx);
        assert!(!outcome.state_changed, "{}", outcome.result);
        outcome.result
    }
}

fn error_code(result: &Value) -> &str {
    result
        .pointer("/error/code")
        .and_then(Value::as_str)
        .unwrap_or("")
}

#[test]
fn a_task_run_has_no_graph() {
    assert!(task().host.graph().is_none());
}

#[test]
fn project_writes_work_and_are_audited_but_not_recorded_as_artifacts() {
    let mut t = task();
    let result = t.call(
        "fs.write",
        json!({"path": "@project/artifacts/notes.md", "content": "done\n"}),
    );
    assert_eq!(result["ok"], true, "{result}");
    assert!(result.get("artifactRecorded").is_none(), "{result}");
    let written = fs::read_to_string(t.tmp.path().join("project/artifacts/notes.md")).unwrap();
    assert_eq!(written, "done\n");
    let log = baton_store::jsonl::read(&t.tmp.path().join("state/logs/execution.jsonl"))
        .unwrap()
        .records;
    assert_eq!(log.len(), 1);
    assert_eq!(log[0]["runId"], RUN_ID, "{}", log[0]);
}

#[test]
fn state_writes_and_rewinds_are_refused() {
    let mut t = task();
    let state = t.tmp.path().join("state/workflow.md");
    let write = t.call(
        "fs.write",
        json!({"path": "@state/workflow.md", "content": "---\nrunId: x\n---\n"}),
    );
    assert_eq!(error_code(&write), "E_NO_WORKFLOW_STATE", "{write}");
    let patch = t.call(
        "fs.apply_patch",
        json!({"path": "@state/workflow.md", "operation": "updateFrontmatter", "update": {"variables": {"set": {"a": 1}}}}),
    );
    assert_eq!(error_code(&patch), "E_NO_WORKFLOW_STATE", "{patch}");
    let rewind = t.call(
        "workflow.rewind",
        json!({"toNodeId": "step-01", "reason": "again", "confirmed": true}),
    );
    assert_eq!(error_code(&rewind), "E_NO_WORKFLOW_STATE", "{rewind}");
    assert!(!state.exists(), "no state file appears");
}
