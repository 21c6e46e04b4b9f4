//! An execution tick against a strict scripted server: the step's prompt is what `ralph next`
//! claims, the model's `session.complete` lands in status.json, and a model that never calls
//! it gets one retry and then blocks the session.

#[path = "support/session_world.rs"]
mod session_world;
use baton_autopilot::ralph::check::{self, Scope};
use baton_autopilot::session::completion::Status;
use baton_autopilot::session::tick::{StepEnd, StepSettings, run_step};
use baton_engine::machine::{ToolResult, WaitReason};
use baton_engine::task_driver::TaskTools;
use baton_llm::testing::{Reply, ScriptedServer};
use baton_llm::{HttpChatModel, LlmConfig, ToolCall, ToolDef};
use serde_json::{Value, json};
use session_world::World;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn world() -> World {
    session_world::world("plan,verify,milestone-complete", "tick@test")
}

impl World {
    fn doc(&self) -> Value {
        let doc: Value = serde_json::from_slice(&std::fs::read(&self.status).unwrap()).unwrap();
        let findings = check::check(&self.ctx, doc.as_object(), &[], Scope::All);
        assert!(!check::has_errors(&findings), "{findings:?}");
        doc
    }
}

#[derive(Default)]
struct Files(Vec<String>);

impl TaskTools for Files {
    fn run(&mut self, calls: &[ToolCall]) -> Vec<ToolResult> {
        calls
            .iter()
            .map(|c| {
                self.0.push(c.arguments.clone());
                ToolResult {
                    call: c.clone(),
                    content: json!({"ok": true, "data": "..."}).to_string(),
                    ok: true,
                }
            })
            .collect()
    }
}

fn read_tool() -> ToolDef {
    ToolDef {
        name: "fs.read".into(),
        description: "read a file".into(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
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

async fn tick(
    w: &World,
    model: &HttpChatModel,
    files: &mut Files,
    max_turns: usize,
) -> (usize, StepEnd) {
    let t = run_step(
        &w.ctx,
        None,
        StepSettings {
            owner: "tick@test",
            model,
            tools: files,
            tool_defs: vec![read_tool()],
            max_turns,
            cancel: CancellationToken::new(),
        },
    )
    .await
    .unwrap();
    (t.index, t.end)
}

#[tokio::test]
async fn a_step_sees_the_ralph_prompt_and_its_verdict_lands_in_status_json() {
    let w = world();
    let (server, model) = model(vec![
        Reply::tool_calls(&[("c1", "fs_read", r#"{"path":"README.md"}"#)]),
        Reply::tool_calls(&[(
            "c2",
            "session_complete",
            r#"{"status":"DONE","evidence":["plan.md"]}"#,
        )]),
    ])
    .await;
    let mut files = Files::default();
    let (index, end) = tick(&w, &model, &mut files, 10).await;
    assert_eq!(index, 0);
    assert!(matches!(end, StepEnd::Recorded(c) if c.status == Status::Done));
    let doc = w.doc();
    assert_eq!(doc["steps"][0]["status"], "completed");
    assert_eq!(doc["steps"][0]["completion_evidence"], "plan.md");
    assert!(doc["active_step_index"].is_null());
    assert_eq!(files.0, [r#"{"path":"README.md"}"#]);
    // The first request carries the prompt `ralph next` assembled for the step.
    let first = &server.received()[0].body;
    let prompt = first["messages"][1]["content"].as_str().unwrap();
    let session = doc["session_id"].as_str().unwrap();
    let skill = doc["steps"][0]["skill"].as_str().unwrap();
    let total = doc["steps"].as_array().unwrap().len();
    let header = format!("<!-- baton ralph: step [0/{total}] skill={skill}");
    assert!(prompt.contains(&header), "{prompt}");
    assert!(
        prompt.contains(&format!("session={session} -->")),
        "{prompt}"
    );
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["fs_read", "session_complete"]);
}

#[tokio::test]
async fn a_step_that_never_calls_session_complete_retries_once_then_blocks() {
    let w = world();
    let busy = |n: usize| Reply::tool_calls(&[("c", "fs_read", &format!(r#"{{"path":"{n}"}}"#))]);
    let (_server, model) = model((0..4).map(busy).collect()).await;
    let mut files = Files::default();
    let (index, end) = tick(&w, &model, &mut files, 2).await;
    assert!(
        matches!(&end, StepEnd::Recorded(c) if c.status == Status::NeedsRetry),
        "{end:?}"
    );
    assert_eq!(w.doc()["steps"][index]["status"], "pending");
    assert_eq!(w.doc()["status"], "running");

    let (again, end) = tick(&w, &model, &mut files, 2).await;
    assert_eq!(again, index, "the retried step runs again");
    assert!(
        matches!(&end, StepEnd::Recorded(c) if c.status == Status::Blocked),
        "{end:?}"
    );
    let doc = w.doc();
    assert_eq!(doc["steps"][index]["status"], "failed");
    assert_eq!(doc["status"], "paused");
}

#[tokio::test]
async fn a_step_waiting_for_a_person_stays_claimed() {
    let w = world();
    let (_server, model) = model(vec![Reply::text("Which delimiter?")]).await;
    let (index, end) = tick(&w, &model, &mut Files::default(), 10).await;
    assert_eq!(
        end,
        StepEnd::Waiting {
            question: "Which delimiter?".into(),
            reason: WaitReason::Question
        }
    );
    let doc = w.doc();
    assert_eq!(doc["steps"][index]["status"], "running");
    assert_eq!(doc["active_step_index"], index);
}
