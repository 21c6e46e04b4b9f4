//! The decomposition call against a strict scripted server: a valid answer, an invalid one
//! then a valid one (the retry carries the located problem), two invalid answers
//! (DECOMPOSITION_INVALID), hostile answers (huge, wrong types, 10,000 sub-goals) and a failed
//! call. No tools are offered.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_lifecycle::ralph::chain::PlanningMode;
use baton_lifecycle::session::build::decompose::decompose;
use baton_lifecycle::session::infer::{Breadth, Clarification, Inference, Position, QualityMode};
use baton_llm::testing::{Reply, ScriptedServer};
use baton_llm::{HttpChatModel, LlmConfig};
use serde_json::{Value, json};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn inference() -> Inference {
    Inference {
        phase: Some(1),
        phase_slug: Some("csv-export".into()),
        phase_is_new: false,
        milestone: Some("M1".into()),
        position: Position::Stage("plan"),
        completed_stages: Vec::new(),
        quality: QualityMode::Standard,
        planning_mode: Some(PlanningMode::Independent),
        scope_verdict: None,
        breadth: Breadth::Medium,
        decompose: true,
        analyze_macro_id: None,
        blueprint_id: None,
        explicit_phase: false,
        clarification: Clarification {
            scope: Some("src/export only".into()),
            constraints: None,
            done: Some("tests green".into()),
        },
        questions: Vec::new(),
    }
}

const STAGES: [&str; 3] = ["plan", "execute", "verify"];

fn valid() -> Value {
    json!({
        "boundary_contract": {"in_scope": ["src/export/"], "out_of_scope": [],
                              "constraints": ["no new dependency"],
                              "definition_of_done": "export tests pass"},
        "execution_criteria": ["incremental commits"],
        "task_decomposition": [
            {"id": "G1", "goal": "CSV writer", "boundary": "src/export",
             "done_when": "verification.json passed", "evidence": "verification.json",
             "lifecycle": ["execute", "verify"], "status": "pending"}
        ]
    })
}

async fn scripted(replies: Vec<Reply>) -> (ScriptedServer, HttpChatModel) {
    let server = ScriptedServer::start(replies).await.unwrap();
    let model = HttpChatModel::new(LlmConfig {
        base_url: server.base_url(),
        model: Some("scripted".into()),
        stream: false,
        retry_base_delay: Duration::from_millis(5),
        max_retries: 0,
        ..LlmConfig::default()
    })
    .unwrap();
    (server, model)
}

async fn run(
    replies: Vec<Reply>,
) -> (
    ScriptedServer,
    Result<
        baton_lifecycle::session::build::decompose::Decomposed,
        baton_lifecycle::session::build::BuildError,
    >,
) {
    let (server, model) = scripted(replies).await;
    let stages: Vec<String> = STAGES.iter().map(|s| s.to_string()).collect();
    let out = decompose(
        &model,
        "add CSV export",
        &inference(),
        &stages,
        &["src".to_string(), "tests".to_string()],
        &CancellationToken::new(),
    )
    .await;
    (server, out)
}

#[tokio::test]
async fn a_valid_answer_is_taken_in_one_tool_less_call() {
    let (server, out) = run(vec![Reply::text(&valid().to_string())]).await;
    let d = out.unwrap();
    assert_eq!(d.attempts, 1);
    assert_eq!(d.usage.total_tokens, 18);
    assert_eq!(d.decomposition.goals[0].lifecycle, ["execute", "verify"]);
    let got = server.received();
    assert_eq!(got.len(), 1);
    let body = &got[0].body;
    assert!(
        body.get("tools")
            .is_none_or(|t| t.as_array().is_none_or(Vec::is_empty))
    );
    let user = body["messages"][1]["content"].as_str().unwrap();
    for fact in [
        "Intent: add CSV export",
        "Phase: 1",
        "Milestone: M1",
        "Chain stages: plan, execute, verify",
        "Project folders: src, tests",
        "on scope: src/export only",
        "on definition of done: tests green",
    ] {
        assert!(user.contains(fact), "{fact} missing from {user}");
    }
}

#[tokio::test]
async fn an_invalid_answer_is_retried_once_with_its_problem() {
    let mut bad = valid();
    bad["task_decomposition"][0]["lifecycle"] = json!(["deploy"]);
    let (server, out) = run(vec![
        Reply::text(&bad.to_string()),
        Reply::text(&format!("```json\n{}\n```", valid())),
    ])
    .await;
    let d = out.unwrap();
    assert_eq!(d.attempts, 2);
    assert_eq!(d.usage.total_tokens, 36);
    let got = server.received();
    assert_eq!(got.len(), 2);
    let messages = got[1].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4);
    assert_eq!(messages[2]["role"], "assistant");
    let retry = messages[3]["content"].as_str().unwrap();
    assert!(
        retry
            .contains("at task_decomposition[0].lifecycle[0]: \"deploy\" is not a lifecycle stage"),
        "{retry}"
    );
}

#[tokio::test]
async fn two_invalid_answers_are_an_error() {
    let (server, out) = run(vec![
        Reply::text("I would split this into three goals."),
        Reply::text("{\"boundary_contract\": 1}"),
        Reply::text(&valid().to_string()),
    ])
    .await;
    let e = out.unwrap_err();
    assert_eq!(e.code(), "DECOMPOSITION_INVALID");
    assert!(e.to_string().contains("rejected 2 times"), "{e}");
    assert!(
        e.to_string()
            .contains("at boundary_contract: must be an object"),
        "{e}"
    );
    assert_eq!(server.received().len(), 2);
    assert_eq!(server.remaining(), 1);
}

#[tokio::test]
async fn hostile_answers_are_refused_and_not_echoed_whole() {
    let huge = format!("{{\"x\": \"{}\"}}", "a".repeat(1 << 20));
    let mut many = valid();
    many["task_decomposition"] = Value::Array(vec![json!({}); 10_000]);
    let (server, out) = run(vec![Reply::text(&huge), Reply::text(&many.to_string())]).await;
    let e = out.unwrap_err();
    assert_eq!(e.code(), "DECOMPOSITION_INVALID");
    assert!(
        e.to_string()
            .contains("10000 sub-goals, over the limit of 20"),
        "{e}"
    );
    let got = server.received();
    let echoed = got[1].body["messages"][2]["content"].as_str().unwrap();
    assert!(echoed.len() <= 4000, "{}", echoed.len());
    let retry = got[1].body["messages"][3]["content"].as_str().unwrap();
    assert!(retry.contains("byte limit"), "{retry}");

    let mut typed = valid();
    typed["execution_criteria"] = json!("all of them");
    typed["task_decomposition"][0]["lifecycle"] = json!([1, null]);
    typed["task_decomposition"][0]["status"] = json!("done");
    let (_server, out) = run(vec![
        Reply::text(&typed.to_string()),
        Reply::text(&typed.to_string()),
    ])
    .await;
    let text = out.unwrap_err().to_string();
    for at in [
        "at execution_criteria: must be an array of strings",
        "at task_decomposition[0].lifecycle[0]: must be a string",
        "at task_decomposition[0].status",
    ] {
        assert!(text.contains(at), "{at} missing from {text}");
    }
}

#[tokio::test]
async fn a_failed_call_is_its_own_error() {
    let (_server, out) = run(vec![Reply::error(500, "upstream down")]).await;
    let e = out.unwrap_err();
    assert_eq!(e.code(), "DECOMPOSITION_CALL_FAILED");
}

#[tokio::test]
async fn a_stopped_call_is_interrupted() {
    let (_server, model) = scripted(vec![Reply::Hang]).await;
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        stop.cancel();
    });
    let stages: Vec<String> = STAGES.iter().map(|s| s.to_string()).collect();
    let e = decompose(
        &model,
        "add CSV export",
        &inference(),
        &stages,
        &[],
        &cancel,
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), "INTERRUPTED");
}
