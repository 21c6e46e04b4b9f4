//! Traces: the reference conversation loads as-is, and a recorded run replays to the same
//! assistant messages, refusing to go on when the run diverges.

use baton_llm::testing::{Reply, ScriptedServer};
use baton_llm::trace::Entry;
use baton_llm::{
    CallOptions, ChatModel, ChatRequest, HttpChatModel, LlmConfig, Message, RecordingModel,
    ReplayModel, Trace, TraceRecorder,
};
use baton_testkit::seed_000;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[test]
fn the_reference_trace_loads_as_is() {
    let Some(path) = seed_000() else { return };
    let trace = Trace::load(&path).unwrap();
    let ids: Vec<&str> = trace.dialogues().map(|d| d.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "C01", "C02", "C03", "C04", "C05", "C06", "C07", "C08", "C08b", "C09"
        ]
    );
    assert_eq!(
        trace.user_inputs().collect::<Vec<_>>(),
        ["1-2-user-authentication"]
    );
    let tool_calls: usize = trace.dialogues().map(|d| d.tool_calls.len()).sum();
    assert_eq!(tool_calls, 38);
    let first = &trace.dialogues().next().unwrap().tool_calls[0];
    assert_eq!(
        (first.id.as_str(), first.name.as_str()),
        ("tc01", "fs.read")
    );
    assert_eq!(first.arguments, r#"{"path":"@state/workflow.md"}"#);
    assert!(
        matches!(trace.entries[2], Entry::UserInput { .. }),
        "the user answers after C02"
    );
    assert!(trace.meta.contains_key("templates"));
}

#[tokio::test]
async fn the_reference_trace_replays_with_its_user_input() {
    let Some(path) = seed_000() else { return };
    let replay = ReplayModel::new(Trace::load(&path).unwrap());
    let mut messages = vec![Message::user("start")];
    let mut calls = 0;
    loop {
        let request = ChatRequest {
            messages: messages.clone(),
            ..Default::default()
        };
        let answer = match replay.chat(&request, CallOptions::default()).await {
            Ok(a) => a,
            Err(e) => {
                assert_eq!(e.code(), "REPLAY_EXHAUSTED");
                break;
            }
        };
        calls += 1;
        messages.push(answer.message.clone());
        if answer.message.tool_calls.is_empty() {
            match replay.take_user_input() {
                Some(input) => messages.push(Message::user(input)),
                None => continue,
            }
        }
        for call in &answer.message.tool_calls {
            messages.push(Message::tool_result(call.id.clone(), "{\"ok\":true}"));
        }
    }
    assert_eq!(calls, 10);
    assert_eq!(replay.served(), 10);
}

fn request(text: &str) -> ChatRequest {
    ChatRequest {
        messages: vec![Message::system("sys"), Message::user(text)],
        ..Default::default()
    }
}

#[tokio::test]
async fn a_recorded_run_replays_to_the_same_answers() {
    let server = ScriptedServer::start(vec![
        Reply::tool_calls(&[
            ("call_a", "fs.read", r#"{"path":"@project/x.md"}"#),
            // Spaced as a model might write it: the replay gives back the same bytes.
            ("call_b", "fs.list", "{ \"path\": \"@project\" }"),
        ]),
        Reply::text("Which story key?"),
        Reply::text("Done."),
    ])
    .await
    .unwrap();
    let config = LlmConfig {
        base_url: server.base_url(),
        model: Some("m".into()),
        api_key: Some(baton_llm::ApiKey::new("sk-never-recorded")),
        stream: false,
        retry_base_delay: Duration::from_millis(5),
        ..LlmConfig::default()
    };
    let recorder = Arc::new(Mutex::new(TraceRecorder::default()));
    let model = RecordingModel::new(HttpChatModel::new(config).unwrap(), recorder.clone());

    let mut req = request("start");
    let first = model.chat(&req, CallOptions::default()).await.unwrap();
    req.messages.push(first.message.clone());
    for call in &first.message.tool_calls {
        req.messages
            .push(Message::tool_result(call.id.clone(), "{\"ok\":true}"));
    }
    recorder.lock().unwrap().record_tool_runs(
        first
            .message
            .tool_calls
            .iter()
            .map(|c| (c.id.clone(), serde_json::json!({"ok": true})))
            .collect(),
    );
    let second = model.chat(&req, CallOptions::default()).await.unwrap();
    recorder
        .lock()
        .unwrap()
        .record_ui_after("waiting-user", "assistant_no_toolCalls_and_not_complete");
    recorder.lock().unwrap().record_user_input(
        "1-2-user-authentication",
        "USER_INPUT\n- forNodeId: step-01\n1-2-user-authentication",
    );
    req.messages.push(second.message.clone());
    req.messages.push(Message::user("1-2-user-authentication"));
    let third = model.chat(&req, CallOptions::default()).await.unwrap();

    let bytes = recorder.lock().unwrap().to_bytes();
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(
        !text.contains("sk-never-recorded"),
        "the API key is never recorded"
    );
    assert!(text.contains("\"traceVersion\": \"crewagent.runtime.llm.trace.v1\""));

    let replay = ReplayModel::new(Trace::parse(&text).unwrap());
    let mut rreq = request("start");
    let r1 = replay.chat(&rreq, CallOptions::default()).await.unwrap();
    assert_eq!(r1.message.tool_calls, first.message.tool_calls);
    rreq.messages.push(r1.message.clone());
    // Diverging (the answer is sent back without the results of its tool calls) is refused.
    let err = replay
        .chat(&rreq, CallOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "REPLAY_MISMATCH");
    for call in &r1.message.tool_calls {
        rreq.messages
            .push(Message::tool_result(call.id.clone(), "{\"ok\":true}"));
    }
    let r2 = replay.chat(&rreq, CallOptions::default()).await.unwrap();
    assert_eq!(r2.message.content, second.message.content);
    // The user input comes before the next answer.
    assert_eq!(
        replay
            .chat(&rreq, CallOptions::default())
            .await
            .unwrap_err()
            .code(),
        "REPLAY_MISMATCH"
    );
    assert_eq!(
        replay.take_user_input().as_deref(),
        Some("1-2-user-authentication")
    );
    let r3 = replay.chat(&rreq, CallOptions::default()).await.unwrap();
    assert_eq!(r3.message.content, third.message.content);
    assert_eq!(
        replay
            .chat(&rreq, CallOptions::default())
            .await
            .unwrap_err()
            .code(),
        "REPLAY_EXHAUSTED"
    );
}

#[test]
fn invalid_traces_are_refused_clearly() {
    for (text, needle) in [
        ("{}", "traceVersion"),
        (r#"{"traceVersion":"other"}"#, "traceVersion"),
        (
            r#"{"traceVersion":"crewagent.runtime.llm.trace.v1"}"#,
            "dialogues",
        ),
        (
            r#"{"traceVersion":"crewagent.runtime.llm.trace.v1","dialogues":[{"id":"C01"}]}"#,
            "response.assistant",
        ),
        ("# just markdown\n", "no ```json block"),
    ] {
        let err = Trace::parse(text).unwrap_err();
        assert_eq!(err.code(), "TRACE_INVALID");
        assert!(err.to_string().contains(needle), "{err}");
    }
}

/// Fields a provider needs back with an answer (Anthropic's signed thinking, DeepSeek's
/// reasoning) are recorded and given back by the replay, so a run continued live after a
/// replay stays valid for the provider.
#[tokio::test]
async fn provider_fields_of_an_answer_are_recorded_and_replayed() {
    let mut answer = baton_llm::ChatResponse {
        message: Message::assistant("thought about it"),
        finish_reason: Some("stop".into()),
        usage: None,
        usage_faults: Vec::new(),
    };
    let thinking =
        serde_json::json!([{"type": "thinking", "thinking": "hm", "signature": "sig-1"}]);
    answer
        .message
        .extra
        .insert("thinking_blocks".into(), thinking.clone());
    let mut recorder = TraceRecorder::new(serde_json::Map::new());
    let request = ChatRequest {
        messages: vec![Message::user("go")],
        ..ChatRequest::default()
    };
    recorder.record_call("idle", &request, &answer);
    let trace = Trace::from_value(recorder.to_value()).unwrap();
    let replay = ReplayModel::new(trace);
    let served = replay.chat(&request, CallOptions::default()).await.unwrap();
    assert_eq!(served.message.extra["thinking_blocks"], thinking);
    assert_eq!(served.message.text(), "thought about it");
}
