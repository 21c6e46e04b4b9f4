//! An answer the provider cut at its length limit (`finish_reason: "length"`) is never taken
//! for a whole one: the run stops with `LLM_ANSWER_TRUNCATED`, naming the cap, and the call is
//! still counted and audited (its tokens were spent).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_engine::runner::{self, Settings, StartRun};
use baton_engine::{ANSWER_TRUNCATED, Outcome};
use baton_llm::{HttpChatModel, LlmConfig};
use baton_testkit::json_server::JsonServer;
use baton_testkit::{copy_dir, repo};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test]
async fn a_cut_answer_stops_the_run_with_its_code_and_is_still_counted() {
    // The shape of a real answer cut at max_tokens: half a sentence, "length", full usage.
    let server = JsonServer::start(Arc::new(|_body: &Value| {
        json!({"id": "chatcmpl-cut", "object": "chat.completion", "model": "cutter",
            "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant",
                "content": "Which story should I draft? The sprint status lists 1-2-user-auth"}}],
            "usage": {"prompt_tokens": 900, "completion_tokens": 16, "total_tokens": 916}})
    }));
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    copy_dir(&repo().join("examples/projects/taskboard"), &project);
    let store = baton_store::Store::new(tmp.path().join("home"));
    let model = HttpChatModel::new(LlmConfig {
        base_url: server.base_url(),
        model: Some("cutter".into()),
        stream: false,
        max_retries: 0,
        retry_base_delay: Duration::from_millis(1),
        max_completion_tokens: 16,
        ..LlmConfig::default()
    })
    .unwrap();
    let mut settings = Settings::new(&model);
    settings.inputs.push_back("1-2-user-authentication".into());
    let pkg = repo().join("examples/packages/create-story-micro");
    let finished = runner::start(&store, StartRun::new(&pkg, &project), settings)
        .await
        .unwrap();
    match &finished.report.outcome {
        Outcome::Failed { code, message } => {
            assert_eq!(code, ANSWER_TRUNCATED);
            assert!(
                message.contains("after 16 completion tokens")
                    && message.contains("max_completion_tokens"),
                "{message}"
            );
        }
        other => panic!("a cut answer was taken as whole: {other:?}"),
    }
    // The cut text never became the run's question to the person.
    assert_eq!(finished.report.waits, 0);
    assert_ne!(finished.run.phase, baton_store::Phase::WaitingUser);
    // The call is counted and audited.
    assert_eq!(finished.report.usage.total_tokens, 916);
    let log = store
        .project(&project)
        .unwrap()
        .run_paths(&finished.run.run_id)
        .execution_log;
    let turns: Vec<Value> = std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["kind"] == "engine.turn")
        .collect();
    assert_eq!(turns.len(), 1);
    assert_eq!(turns[0]["finishReason"], "length");
}
