//! The demo run through the real HTTP client against the scripted server, checking what baton
//! sends: directive and brief when the node changes, forNodeId on user input, history restarted
//! between nodes, the right persona, and no host path anywhere.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_engine::runner::{self, Settings, StartRun};
use baton_engine::{ContextPolicy, Outcome};
use baton_llm::testing::{Reply, ScriptedServer};
use baton_llm::{HttpChatModel, LlmConfig, Trace};
use baton_store::Store;
use baton_testkit::{copy_dir, demo_trace, repo};
use serde_json::Value;
use std::time::Duration;

/// The demo trace as scripted HTTP replies.
fn replies() -> Vec<Reply> {
    Reply::from_trace(&Trace::load(&demo_trace()).unwrap())
}

fn contents(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or("").to_string(),
                m["content"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

async fn run_with(context: ContextPolicy) -> (Vec<Value>, tempfile::TempDir) {
    run_replies(context, replies()).await
}

async fn run_replies(
    context: ContextPolicy,
    replies: Vec<Reply>,
) -> (Vec<Value>, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    copy_dir(&repo().join("examples/projects/taskboard"), &project);
    let server = ScriptedServer::start(replies).await.unwrap();
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
    settings.inputs.push_back("1-2-user-authentication".into());
    settings.context = Some(context);
    let pkg = repo().join("examples/packages/create-story-micro");
    let finished = runner::start(&store, StartRun::new(&pkg, &project), settings)
        .await
        .unwrap();
    assert!(
        matches!(finished.report.outcome, Outcome::Completed { .. }),
        "{:?}",
        finished.report
    );
    assert_eq!(finished.report.model_calls, 10);
    let bodies = server.received().into_iter().map(|r| r.body).collect();
    (bodies, tmp)
}

#[tokio::test]
async fn requests_follow_the_prompt_protocol() {
    let (bodies, tmp) = run_with(ContextPolicy::Node).await;
    assert_eq!(bodies.len(), 10);
    let host = tmp.path().to_string_lossy().into_owned();
    for (i, body) in bodies.iter().enumerate() {
        let text = body.to_string();
        assert!(!text.contains(&host), "request {i} shows a host path");
        assert!(
            !text.contains("/tmp/") && !text.contains("/root/") && !text.contains("/home/"),
            "request {i} shows an absolute path"
        );
        assert_eq!(body["tools"].as_array().unwrap().len(), 7);
    }
    let first = contents(&bodies[0]);
    assert!(first.iter().any(|(r, c)| r == "user"
        && c.starts_with("RUN_DIRECTIVE")
        && c.contains("- intent: start")
        && c.contains("- graph: @pkg/workflow.graph.json")));
    assert!(first.iter().any(|(_, c)| c.starts_with("NODE_BRIEF")
        && c.contains("- currentNodeId: step-01-select-story")
        && c.contains("- allowed next: step-02-discover-inputs (label=next)")));
    assert!(
        first
            .iter()
            .any(|(r, c)| r == "system" && c.starts_with("You are Bob (Scrum Master)."))
    );

    // The user's answer is wrapped with its node, and a reminder follows.
    let third = contents(&bodies[2]);
    assert!(third.iter().any(
        |(_, c)| c == "USER_INPUT\n- forNodeId: step-01-select-story\n1-2-user-authentication"
    ));
    assert!(third.iter().any(|(_, c)| c.starts_with(
        "Reminder: step-01-select-story requires writing artifacts/create-story/target.md"
    )));

    // A new node restarts the history with its directive and brief: no earlier tool traffic.
    let fourth = contents(&bodies[3]);
    assert!(fourth.iter().any(|(_, c)| c.starts_with("NODE_BRIEF")
        && c.contains("- currentNodeId: step-02-discover-inputs")));
    assert!(
        fourth.iter().all(|(r, _)| r != "tool" && r != "assistant"),
        "history restarted: {fourth:?}"
    );
    assert!(!bodies[3].to_string().contains("tc01"));

    // The end node speaks as its own agent, then is told to finalize, then to conclude.
    let eighth = contents(&bodies[7]);
    assert!(
        eighth
            .iter()
            .any(|(r, c)| r == "system" && c.starts_with("You are Sam (Summarizer)."))
    );
    assert!(
        eighth
            .iter()
            .any(|(_, c)| c.contains("- effectiveAgentId: summarizer"))
    );
    let ninth = contents(&bodies[8]);
    assert!(
        ninth
            .last()
            .unwrap()
            .1
            .starts_with("Finalize end node: patch @state/workflow.md to append end-99")
    );
    let tenth = contents(&bodies[9]);
    assert!(
        tenth
            .last()
            .unwrap()
            .1
            .starts_with("The workflow is complete. Now answer the user")
    );
}

#[tokio::test]
async fn full_context_keeps_everything_and_costs_more() {
    let (node, _a) = run_with(ContextPolicy::Node).await;
    let (full, _b) = run_with(ContextPolicy::Full).await;
    let size = |bodies: &[Value]| {
        bodies
            .iter()
            .map(|b| b["messages"].to_string().len())
            .sum::<usize>()
    };
    assert!(
        size(&full) > size(&node) * 2,
        "node {} vs full {}",
        size(&node),
        size(&full)
    );
    assert!(
        full[9].to_string().contains("tc01"),
        "full history keeps the first tool calls"
    );
}

/// A provider that sends no tool-call ids: the client names them `call_0, call_1, …` on every
/// turn, and the engine makes them unique within the run before they are logged or sent back.
#[tokio::test]
async fn a_provider_without_tool_call_ids_still_gets_unique_ids() {
    let mut trace = Trace::load(&demo_trace()).unwrap();
    for entry in &mut trace.entries {
        if let baton_llm::trace::Entry::Dialogue(d) = entry {
            for call in &mut d.tool_calls {
                call.id.clear();
            }
        }
    }
    let (bodies, _tmp) = run_replies(ContextPolicy::Full, Reply::from_trace(&trace)).await;
    let last = bodies.last().unwrap();
    let ids: Vec<&str> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().into_iter().flatten())
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 38, "the whole run is in the last request");
    let unique: std::collections::HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "{ids:?}");
    assert!(ids.iter().all(|id| !id.is_empty()));
}
