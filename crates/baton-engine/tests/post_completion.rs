//! After completion (seed 002): the run stays open for conversation, a state change needs a
//! fresh confirmation, one confirmation allows one change, and a change that makes the workflow
//! incomplete brings the normal profile back.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::support;
use baton_engine::Outcome;
use baton_engine::runner::{self, Continuation, Settings};
use baton_llm::{ReplayModel, Trace, TraceRecorder};
use baton_store::{Phase, Store};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use support::completed_demo::{completed_demo, trace};

fn patch(var: &str) -> Value {
    json!({"path": "@state/workflow.md", "operation": "updateFrontmatter", "update": {"variables": {"set": {var: "yes"}}}})
}

const CONFIRM: &str = "WIDGET_SUBMIT\n{\"widgetId\": \"c1\", \"type\": \"confirmation\", \"value\": {\"confirmed\": true}}";

struct Env {
    _tmp: tempfile::TempDir,
    store: Store,
    run_id: String,
}

impl Env {
    async fn completed() -> Env {
        let demo = completed_demo().await;
        Env {
            _tmp: demo.tmp,
            run_id: demo.run_id,
            store: demo.store,
        }
    }

    /// One conversation turn; returns the outcome, the state and the recorded requests.
    async fn say(&self, text: &str, answers: Trace) -> (runner::Finished, Vec<Value>) {
        let replay = ReplayModel::new(answers);
        let recorder = Arc::new(Mutex::new(TraceRecorder::default()));
        let mut settings = Settings::new(&replay);
        settings.record = Some(recorder.clone());
        let (_, run) = self.store.find_run(&self.run_id).unwrap();
        let continuation = if run.phase == Phase::WaitingUser {
            Continuation::Answer(text.to_string())
        } else {
            Continuation::Chat(text.to_string())
        };
        let finished = runner::continue_run(&self.store, &self.run_id, continuation, settings)
            .await
            .unwrap();
        let recorded = recorder.lock().unwrap().to_value();
        let requests = recorded["dialogues"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d.get("request").is_some())
            .map(|d| d["request"].clone())
            .collect();
        (finished, requests)
    }

    fn audit_codes(&self) -> Vec<Value> {
        let (project, _) = self.store.find_run(&self.run_id).unwrap();
        let log = baton_store::jsonl::read(&project.run_paths(&self.run_id).execution_log)
            .unwrap()
            .records;
        log.iter()
            .filter(|l| l["kind"] == "tool.exec")
            .map(|l| l["output"]["error"]["code"].clone())
            .collect()
    }
}

fn contents(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test]
async fn an_unconfirmed_state_change_is_refused() {
    let env = Env::completed().await;
    let (done, requests) = env
        .say(
            "Add a note to the state",
            trace(vec![
                (vec![("p1", "fs.apply_patch", patch("note"))], ""),
                (vec![], "I need your confirmation first."),
            ]),
        )
        .await;
    assert!(
        matches!(done.report.outcome, Outcome::Completed { .. }),
        "a completed run stays completed while talking"
    );
    assert!(done.state["variables"].get("note").is_none());
    assert_eq!(
        env.audit_codes().last().unwrap(),
        "STATE_CHANGE_REQUIRES_CONFIRMATION"
    );
    let first = contents(&requests[0]);
    let directive = first
        .iter()
        .find(|c| c.starts_with("RUN_DIRECTIVE"))
        .unwrap();
    assert!(!directive.contains("currentNodeId"), "{directive}");
    assert!(directive.contains("Post-run protocol"));
    assert!(first.iter().all(|c| !c.starts_with("NODE_BRIEF")));
    assert!(
        first
            .iter()
            .any(|c| c == "USER_INPUT\nAdd a note to the state"),
        "no forNodeId after completion"
    );
}

#[tokio::test]
async fn one_confirmation_allows_exactly_one_change() {
    let env = Env::completed().await;
    let answers = trace(vec![
        (
            vec![
                ("p1", "fs.apply_patch", patch("first")),
                ("p2", "fs.apply_patch", patch("second")),
            ],
            "",
        ),
        (vec![], "Done: one change."),
    ]);
    let (done, _) = env.say(CONFIRM, answers).await;
    assert_eq!(done.state["variables"]["first"], "yes");
    assert!(done.state["variables"].get("second").is_none());
    assert_eq!(done.run.phase, Phase::Completed);
    let codes = env.audit_codes();
    assert_eq!(codes[codes.len() - 2], Value::Null);
    assert_eq!(codes[codes.len() - 1], "STATE_CHANGE_REQUIRES_CONFIRMATION");
}

#[tokio::test]
async fn a_confirmed_rewind_brings_the_normal_profile_back() {
    let env = Env::completed().await;
    let rewind = json!({"toNodeId": "end-99", "reason": "the user wants a longer summary", "confirmed": true});
    let answers = trace(vec![
        (vec![("r1", "workflow.rewind", rewind)], ""),
        (vec![], "What should the summary add?"),
    ]);
    let (done, requests) = env.say(CONFIRM, answers).await;
    match &done.report.outcome {
        Outcome::Waiting { question } => assert_eq!(question, "What should the summary add?"),
        other => panic!("{other:?}"),
    }
    assert_eq!(done.run.phase, Phase::WaitingUser);
    assert_eq!(done.state["currentNodeId"], "end-99");
    assert!(done.state["variables"].get("workflowStatus").is_none());
    let second = contents(&requests[1]);
    assert!(
        second
            .iter()
            .any(|c| c.starts_with("NODE_BRIEF") && c.contains("- currentNodeId: end-99")),
        "{second:?}"
    );
    assert!(
        second
            .iter()
            .any(|c| c.starts_with("RUN_DIRECTIVE") && c.contains("- currentNodeId: end-99"))
    );
}
