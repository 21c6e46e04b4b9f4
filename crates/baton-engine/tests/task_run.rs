//! A task run's loop against the real HTTP client and a strict scripted server: host tools run
//! in order, the finish tool ends the run, a refused finish goes back to the model, and a
//! model that only talks leaves the run waiting.

use baton_engine::machine::{ToolResult, WaitReason};
use baton_engine::task::{TaskMachine, TaskSpec};
use baton_engine::task_driver::{TaskEnd, TaskTools, drive_task};
use baton_llm::testing::{Reply, ScriptedServer};
use baton_llm::{HttpChatModel, LlmConfig, Message, ToolCall, ToolDef};
use serde_json::{Value, json};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[derive(Default)]
struct Recorded(Vec<String>);

impl TaskTools for Recorded {
    fn run(&mut self, calls: &[ToolCall]) -> Vec<ToolResult> {
        calls
            .iter()
            .map(|c| {
                self.0.push(c.name.clone());
                ToolResult {
                    call: c.clone(),
                    content: json!({"ok": true, "data": "file text"}).to_string(),
                    ok: true,
                }
            })
            .collect()
    }
}

fn spec() -> TaskSpec {
    TaskSpec {
        system: vec![Message::system("Do the step, then call session.complete.")],
        prompt: "Step 1: plan the CSV export.".into(),
        tools: vec![ToolDef {
            name: "fs.read".into(),
            description: "read a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
        finish: ToolDef {
            name: "session.complete".into(),
            description: "end the step".into(),
            parameters: json!({"type": "object", "properties": {"status": {"type": "string"}}}),
        },
        validate: Box::new(|args| {
            let v: Value = serde_json::from_str(args).map_err(|e| e.to_string())?;
            match v["status"].as_str() {
                Some("DONE" | "BLOCKED") => Ok(v),
                _ => Err("status must be DONE or BLOCKED".into()),
            }
        }),
    }
}

async fn model(replies: Vec<Reply>) -> (ScriptedServer, HttpChatModel) {
    let server = ScriptedServer::start(replies).await.unwrap();
    let model = HttpChatModel::new(LlmConfig {
        base_url: server.base_url(),
        model: Some("scripted".into()),
        stream: false,
        retry_base_delay: Duration::from_millis(5),
        ..LlmConfig::default()
    })
    .unwrap();
    (server, model)
}

#[tokio::test]
async fn a_step_reads_a_file_is_refused_once_then_finishes() {
    let (server, model) = model(vec![
        Reply::tool_calls(&[("c1", "fs_read", r#"{"path":"README.md"}"#)]),
        Reply::tool_calls(&[("c2", "session_complete", r#"{"status":"done?"}"#)]),
        Reply::tool_calls(&[("c3", "session_complete", r#"{"status":"DONE"}"#)]),
    ])
    .await;
    let mut machine = TaskMachine::new(spec(), 10);
    let mut tools = Recorded::default();
    let report = drive_task(
        &mut machine,
        &model,
        &mut tools,
        &mut |_| None,
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(
        report.end,
        TaskEnd::Finished {
            verdict: json!({"status": "DONE"})
        }
    );
    assert_eq!(tools.0, ["fs.read"]);
    assert_eq!(report.model_calls, 3);
    assert_eq!(report.usage.total_tokens, 87);
    assert_eq!(server.remaining(), 0);
    // The strict server accepted every request: each call was answered, in order; the third
    // request carried the refusal of the second call back to the model.
    let third = server.received()[2].body.clone();
    let last = third["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["tool_call_id"], "c2");
    assert!(last["content"].as_str().unwrap().contains("FINISH_INVALID"));
}

#[tokio::test]
async fn a_model_that_only_talks_leaves_the_run_waiting_without_a_verdict() {
    let (_server, model) = model(vec![Reply::text("Should I also export XLSX?")]).await;
    let mut machine = TaskMachine::new(spec(), 10);
    let report = drive_task(
        &mut machine,
        &model,
        &mut Recorded::default(),
        &mut |_| None,
        &CancellationToken::new(),
    )
    .await;
    assert_eq!(
        report.end,
        TaskEnd::Waiting {
            question: "Should I also export XLSX?".into(),
            reason: WaitReason::Question
        }
    );
}

#[tokio::test]
async fn an_answer_continues_the_run_and_a_stop_ends_it_between_steps() {
    let (_server, model) = model(vec![
        Reply::text("Which format?"),
        Reply::tool_calls(&[("c1", "session_complete", r#"{"status":"DONE"}"#)]),
    ])
    .await;
    let mut machine = TaskMachine::new(spec(), 10);
    let report = drive_task(
        &mut machine,
        &model,
        &mut Recorded::default(),
        &mut |_| Some("CSV only".into()),
        &CancellationToken::new(),
    )
    .await;
    assert!(matches!(report.end, TaskEnd::Finished { .. }));
    assert_eq!(machine.history()[1].text(), "CSV only");

    let stopped = CancellationToken::new();
    stopped.cancel();
    let report = drive_task(
        &mut TaskMachine::new(spec(), 10),
        &model,
        &mut Recorded::default(),
        &mut |_| None,
        &stopped,
    )
    .await;
    assert!(matches!(
        report.end,
        TaskEnd::Failed {
            code: "ENGINE_ABORTED",
            ..
        }
    ));
}
