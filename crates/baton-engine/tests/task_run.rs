//! Store-backed task runs against the real HTTP client and a strict scripted server: the run
//! lives in the store (kind `task`, conversation log, audit, phases), a stopped or killed run
//! continues to the same verdict, a waiting run takes an answer, a logged verdict is never
//! worked twice, and a recorded run replays offline.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_engine::runner::Settings;
use baton_engine::task::Validate;
use baton_engine::task_driver::TaskEnd;
use baton_engine::task_run::{
    TaskContinuation, TaskDef, TaskFinished, claim_task, create_task, drive_task,
};
use baton_llm::testing::{Reply, ScriptedServer};
use baton_llm::{HttpChatModel, LlmConfig, Message, ReplayModel, ToolDef, Trace, TraceRecorder};
use baton_store::{NewTaskRun, Phase, Project, RunKind, Store};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

struct World {
    _tmp: tempfile::TempDir,
    store: Store,
    project: Project,
}

fn world() -> World {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("project");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("README.md"), "# sample\n").unwrap();
    let store = Store::new(tmp.path().join("home"));
    let project = store.project(&root).unwrap();
    World {
        _tmp: tmp,
        store,
        project,
    }
}

fn validate() -> Validate {
    Box::new(|args| {
        let v: Value = serde_json::from_str(args).map_err(|e| e.to_string())?;
        match v["status"].as_str() {
            Some("DONE" | "BLOCKED") => Ok(v),
            _ => Err("status must be DONE or BLOCKED".into()),
        }
    })
}

fn def() -> TaskDef {
    TaskDef {
        system: vec![Message::system("Do the step, then call session.complete.")],
        finish: ToolDef {
            name: "session.complete".into(),
            description: "end the step".into(),
            parameters: json!({"type": "object", "properties": {"status": {"type": "string"}}}),
        },
        validate: validate(),
    }
}

const PROMPT: &str = "Step 1: plan the CSV export.";

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

fn new_task(w: &World) -> baton_engine::task_run::ClaimedTask {
    create_task(
        &w.project,
        NewTaskRun {
            task_ref: "session-1/step-0-plan",
            agent_id: "lifecycle",
        },
        PROMPT,
    )
    .unwrap()
}

async fn start(w: &World, model: &HttpChatModel) -> TaskFinished {
    drive_task(new_task(w), def(), Settings::new(model))
        .await
        .unwrap()
}

async fn resume(w: &World, run_id: &str, model: &HttpChatModel) -> TaskFinished {
    let claimed = claim_task(&w.project, run_id, TaskContinuation::Resume).unwrap();
    drive_task(claimed, def(), Settings::new(model))
        .await
        .unwrap()
}

fn conversation(w: &World, run_id: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(w.project.run_paths(run_id).conversation_log).unwrap();
    text.lines()
        .flat_map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["messages"]
                .as_array()
                .unwrap()
                .clone()
        })
        .collect()
}

fn done(id: &str) -> Reply {
    Reply::tool_calls(&[(id, "session_complete", r#"{"status":"DONE"}"#)])
}

fn write_file(id: &str) -> Reply {
    Reply::tool_calls(&[(
        id,
        "fs_write",
        r##"{"path":"@project/plan.md","content":"# plan\n"}"##,
    )])
}

#[tokio::test]
async fn a_task_run_lives_in_the_store_with_its_log_phases_and_audit() {
    let w = world();
    let (server, model) = model(vec![
        Reply::tool_calls(&[("c1", "fs_read", r#"{"path":"@project/README.md"}"#)]),
        Reply::tool_calls(&[("c2", "session_complete", r#"{"status":"done?"}"#)]),
        done("c3"),
    ])
    .await;
    let out = start(&w, &model).await;
    assert_eq!(
        out.report.end,
        TaskEnd::Finished {
            verdict: json!({"status": "DONE"})
        }
    );
    assert_eq!(out.report.model_calls, 3);
    assert_eq!(out.report.usage.total_tokens, 87);
    assert_eq!(out.run.phase, Phase::Completed);
    assert_eq!(out.run.kind, RunKind::Task);
    assert_eq!(server.remaining(), 0);
    // Listed among the project's runs, as a task run.
    let runs = w
        .store
        .project(w.project.root())
        .unwrap()
        .list_runs()
        .unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].kind, RunKind::Task);
    assert_eq!(runs[0].workflow_ref, "session-1/step-0-plan");
    // The conversation log starts with the prompt and holds every call with its result.
    let messages = conversation(&w, &out.run.run_id);
    assert_eq!(messages[0]["content"], PROMPT);
    let results: Vec<&str> = messages
        .iter()
        .filter_map(|m| m["toolCallId"].as_str())
        .collect();
    assert_eq!(results, ["c1", "c2", "c3"]);
    // Engine and tool lines in the audit log.
    let audit =
        std::fs::read_to_string(w.project.run_paths(&out.run.run_id).execution_log).unwrap();
    for kind in ["engine.start", "engine.turn", "engine.completed"] {
        assert!(audit.contains(kind), "{kind} missing in {audit}");
    }
    assert!(audit.contains("fs.read"), "{audit}");
    // The model never sees workflow.rewind; the policy layer follows the task's rules.
    let first = &server.received()[0].body;
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"fs_read") && tools.contains(&"session_complete"));
    assert!(!tools.contains(&"workflow_rewind"), "{tools:?}");
    assert_eq!(first["messages"][2]["content"], PROMPT);
}

#[tokio::test]
async fn a_run_stopped_mid_way_continues_to_the_same_verdict() {
    // Uninterrupted: write, then finish.
    let w = world();
    let (_s, m) = model(vec![write_file("c1"), done("c2")]).await;
    let whole = start(&w, &m).await;

    // Dropped while the second model call is under way (as a kill would): the write and its
    // result are logged, the run says running with nobody driving it.
    let w2 = world();
    let (_s1, m1) = model(vec![
        write_file("c1"),
        done("c2").delayed(Duration::from_secs(30)),
    ])
    .await;
    let claimed = new_task(&w2);
    let run_id = claimed.run().run_id.clone();
    let dropped = tokio::time::timeout(
        Duration::from_millis(1500),
        drive_task(claimed, def(), Settings::new(&m1)),
    )
    .await;
    assert!(dropped.is_err(), "the future was dropped mid-way");
    let run = w2.project.get_run(&run_id).unwrap();
    assert_eq!(run.phase, Phase::Running);
    assert!(baton_store::driver_lock::is_interrupted(&w2.project, &run));

    let (s2, m2) = model(vec![done("c2")]).await;
    let resumed = resume(&w2, &run_id, &m2).await;
    assert_eq!(resumed.report.end, whole.report.end);
    assert_eq!(resumed.run.phase, Phase::Completed);
    assert_eq!(s2.remaining(), 0);
    // The resumed request carries the write's result, not a second write.
    let body = &s2.received()[0].body;
    let last = body["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["tool_call_id"], "c1");
    assert!(last["content"].as_str().unwrap().contains("\"ok\":true"));
    assert_eq!(
        std::fs::read_to_string(w2.project.root().join("plan.md")).unwrap(),
        "# plan\n"
    );

    // Cancelled between steps: idle with ENGINE_ABORTED, then resumed.
    let w3 = world();
    let (_s3, m3) = model(vec![done("c1")]).await;
    let settings = Settings::new(&m3);
    settings.cancel.cancel();
    let stopped = drive_task(new_task(&w3), def(), settings).await.unwrap();
    assert!(matches!(
        stopped.report.end,
        TaskEnd::Failed {
            code: "ENGINE_ABORTED",
            ..
        }
    ));
    assert_eq!(stopped.run.phase, Phase::Idle);
    let again = resume(&w3, &stopped.run.run_id, &m3).await;
    assert_eq!(again.report.end, whole.report.end);
}

#[tokio::test]
async fn a_verdict_logged_before_a_kill_is_not_asked_for_again() {
    let w = world();
    let (_s, m) = model(vec![done("c1")]).await;
    let out = start(&w, &m).await;
    // As if killed after the log got the verdict but before the phase did.
    w.project
        .update_run(&out.run.run_id, |r| r.phase = Phase::Running)
        .unwrap();
    let (server, silent) = model(Vec::new()).await;
    let again = resume(&w, &out.run.run_id, &silent).await;
    assert_eq!(again.report.end, out.report.end);
    assert_eq!(again.report.model_calls, 0);
    assert!(server.received().is_empty());
    assert_eq!(again.run.phase, Phase::Completed);
}

#[tokio::test]
async fn a_waiting_run_takes_an_answer_and_finishes() {
    let w = world();
    let (_s, m) = model(vec![Reply::text("Should I also export XLSX?")]).await;
    let out = start(&w, &m).await;
    assert!(
        matches!(&out.report.end, TaskEnd::Waiting { question, .. } if question == "Should I also export XLSX?")
    );
    assert_eq!(out.run.phase, Phase::WaitingUser);
    assert_eq!(
        out.run.waiting_for.as_ref().unwrap()["question"],
        "Should I also export XLSX?"
    );
    // Resume is not an answer, and an answer is for a waiting run only.
    let (server, m2) = model(vec![done("c1")]).await;
    let claimed = claim_task(
        &w.project,
        &out.run.run_id,
        TaskContinuation::Answer("CSV only".into()),
    )
    .unwrap();
    let answered = drive_task(claimed, def(), Settings::new(&m2))
        .await
        .unwrap();
    assert!(matches!(answered.report.end, TaskEnd::Finished { .. }));
    let last = server.received()[0].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["content"], "USER_INPUT\nCSV only");
    let refused = claim_task(
        &w.project,
        &out.run.run_id,
        TaskContinuation::Answer("again".into()),
    );
    assert!(matches!(refused, Err(e) if e.code() == "RUN_NOT_WAITING"));
}

#[tokio::test]
async fn a_recorded_task_run_replays_offline_to_the_same_verdict() {
    let w = world();
    let (_s, m) = model(vec![
        Reply::text("Which format?"),
        write_file("c1"),
        done("c2"),
    ])
    .await;
    let recorder = Arc::new(Mutex::new(TraceRecorder::default()));
    let mut settings = Settings::new(&m);
    settings.record = Some(recorder.clone());
    settings.inputs.push_back("CSV only".into());
    let live = drive_task(new_task(&w), def(), settings).await.unwrap();
    assert!(matches!(live.report.end, TaskEnd::Finished { .. }));
    let bytes = recorder.lock().unwrap().to_bytes();
    let trace = Trace::parse(std::str::from_utf8(&bytes).unwrap()).unwrap();

    let offline = world();
    let replay = ReplayModel::new(trace);
    let mut settings = Settings::new(&replay);
    settings.replay = Some(&replay);
    let replayed = drive_task(new_task(&offline), def(), settings)
        .await
        .unwrap();
    assert_eq!(replayed.report.end, live.report.end);
    assert_eq!(replay.remaining(), 0);
    assert_eq!(
        std::fs::read_to_string(offline.project.root().join("plan.md")).unwrap(),
        "# plan\n"
    );
}

#[tokio::test]
async fn a_run_without_its_prompt_is_refused_not_sent_an_empty_one() {
    let w = world();
    // Created, then killed before the prompt reached the log.
    let run = w
        .project
        .create_task_run(NewTaskRun {
            task_ref: "session-1/step-0-plan",
            agent_id: "lifecycle",
        })
        .unwrap();
    let (server, m) = model(vec![done("c1")]).await;
    let claimed = claim_task(&w.project, &run.run_id, TaskContinuation::Resume).unwrap();
    let err = drive_task(claimed, def(), Settings::new(&m))
        .await
        .err()
        .unwrap();
    assert_eq!(err.code(), "TASK_PROMPT_MISSING");
    assert!(server.received().is_empty());
}

/// A model that, at each call, reads what a process killed right then would leave behind
/// (the page cache survives a kill): the messages in the conversation log and the run's phase.
struct Peek<'a> {
    inner: &'a HttpChatModel,
    project: Project,
    run_id: String,
    seen: Mutex<Vec<(usize, Phase)>>,
}

impl baton_llm::ChatModel for Peek<'_> {
    fn chat<'a>(
        &'a self,
        request: &'a baton_llm::ChatRequest,
        options: baton_llm::CallOptions<'a>,
    ) -> baton_llm::BoxFuture<'a, Result<baton_llm::ChatResponse, baton_llm::LlmError>> {
        let log = self.project.run_paths(&self.run_id).conversation_log;
        let logged = baton_engine::conversation::restore(&log)
            .unwrap()
            .history
            .len();
        let phase = self.project.get_run(&self.run_id).unwrap().phase;
        self.seen.lock().unwrap().push((logged, phase));
        self.inner.chat(request, options)
    }

    fn model_name(&self) -> &str {
        "peek"
    }
}

#[tokio::test]
async fn a_task_run_waits_for_few_disk_flushes_and_a_kill_still_loses_nothing() {
    use baton_store::durable::flushes_on_this_thread;
    let w = world();
    let (server, http) = model(vec![write_file("c1"), done("c2")]).await;
    let at_start = flushes_on_this_thread();
    let task = new_task(&w);
    let created = flushes_on_this_thread() - at_start;
    let peek = Peek {
        inner: &http,
        project: w.project.clone(),
        run_id: task.run().run_id.clone(),
        seen: Mutex::new(Vec::new()),
    };
    let at_drive = flushes_on_this_thread();
    let out = drive_task(task, def(), Settings::new(&peek)).await.unwrap();
    let driven = flushes_on_this_thread() - at_drive;
    assert_eq!(
        out.report.end,
        TaskEnd::Finished {
            verdict: json!({"status": "DONE"})
        }
    );
    assert_eq!(server.remaining(), 0);
    // Written before each call, fsynced or not: the prompt, then the first answer and its
    // result; run.json says running.
    assert_eq!(
        *peek.seen.lock().unwrap(),
        [(1, Phase::Running), (3, Phase::Running)]
    );
    // Creation: the staged directory (its fsyncs in parallel), its rename, the index record.
    assert!(created <= 3, "{created} flushes to create the run");
    // Driving: the first turn's records before the second call, then the end: run.json's
    // temp file with both logs, its rename, the index record. Each conversation record,
    // audit line and `running` fsynced on its own made this 13.
    assert!(driven <= 4, "{driven} flushes to drive a run of two turns");
    // What the end made durable is all there.
    let audit =
        std::fs::read_to_string(&w.project.run_paths(&out.run.run_id).execution_log).unwrap();
    assert!(audit.contains("engine.completed"), "{audit}");
    assert_eq!(conversation(&w, &out.run.run_id).len(), 5);
    assert_eq!(w.project.list_runs().unwrap()[0].phase, Phase::Completed);
}
