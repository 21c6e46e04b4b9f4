//! An execution tick against a strict scripted server: the step's prompt is what `ralph next`
//! claims, the step runs as a task run of the store, the model's `session.complete` lands in
//! status.json, and a model that never calls it gets one retry and then blocks the session.
//! A step we still hold after a kill, a stop or a question continues its own run: a verdict
//! already logged is applied without the model, a question waits for `answer`, and a
//! recorded step replays offline.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::session_world;
use baton_engine::machine::WaitReason;
use baton_engine::runner::Settings;
use baton_engine::task_driver::TaskEnd;
use baton_engine::task_run::{TaskDef, create_task, drive_task};
use baton_lifecycle::ralph::check::{self, Scope};
use baton_lifecycle::ralph::verbs::next;
use baton_lifecycle::session::completion::{self, Status};
use baton_lifecycle::session::run::{self, RunSettings, SessionEnd};
use baton_lifecycle::session::step_run::{self, Link, ModelSource};
use baton_lifecycle::session::tick::{StepEnd, StepSettings, StepTick, answer_step, run_step};
use baton_llm::testing::{Reply, ScriptedServer};
use baton_llm::{HttpChatModel, LlmConfig, Message};
use baton_store::{NewTaskRun, Phase, Project, RunKind, Store};
use serde_json::Value;
use session_world::World;
use std::path::Path;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const OWNER: &str = "tick@test";

struct Tick {
    w: World,
    store: Store,
}

fn world() -> Tick {
    let w = session_world::world("plan,verify,milestone-complete", OWNER);
    let store = Store::new(w.tmp.path().join("store"));
    Tick { w, store }
}

impl Tick {
    fn doc(&self) -> Value {
        let doc: Value = serde_json::from_slice(&std::fs::read(&self.w.status).unwrap()).unwrap();
        let findings = check::check(&self.w.ctx, doc.as_object(), &[], Scope::All);
        assert!(!check::has_errors(&findings), "{findings:?}");
        doc
    }

    fn project(&self) -> Project {
        self.store.project(&self.w.ctx.project).unwrap()
    }

    fn settings<'a>(
        &self,
        project: &'a Project,
        model: ModelSource<'a>,
        max_turns: usize,
    ) -> StepSettings<'a> {
        StepSettings {
            owner: OWNER,
            project,
            model,
            record: None,
            tools: Default::default(),
            max_turns,
            cancel: CancellationToken::new(),
            on_event: None,
            caps: Vec::new(),
            price: None,
            executor: None,
            store_home: self.store.home().to_path_buf(),
        }
    }

    async fn tick(&self, model: &HttpChatModel, max_turns: usize) -> StepTick {
        let project = self.project();
        run_step(
            &self.w.ctx,
            None,
            self.settings(&project, ModelSource::Live(model), max_turns),
        )
        .await
        .unwrap()
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

fn done(id: &str) -> Reply {
    Reply::tool_calls(&[(
        id,
        "session_complete",
        r#"{"status":"DONE","evidence":["plan.md"]}"#,
    )])
}

#[tokio::test]
async fn a_step_sees_the_ralph_prompt_runs_in_the_store_and_its_verdict_lands_in_status_json() {
    let t = world();
    let (server, model) = model(vec![
        Reply::tool_calls(&[("c1", "fs_read", r#"{"path":"@project/README.md"}"#)]),
        done("c2"),
    ])
    .await;
    let tick = t.tick(&model, 10).await;
    assert_eq!(tick.index, 0);
    assert!(matches!(&tick.end, StepEnd::Recorded(c) if c.status == Status::Done));
    let doc = t.doc();
    assert_eq!(doc["steps"][0]["status"], "completed");
    assert_eq!(doc["steps"][0]["completion_evidence"], "plan.md");
    assert!(doc["active_step_index"].is_null());
    // The first request carries the prompt `ralph next` assembled for the step.
    let first = &server.received()[0].body;
    let prompt = first["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "user")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
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
    assert!(tools.contains(&"fs_read"), "{tools:?}");
    assert!(tools.contains(&"session_complete"), "{tools:?}");
    assert!(!tools.contains(&"workflow_rewind"));
    // The step's run is a task run of the store, with its conversation log.
    let project = t.project();
    let run = project.get_run(&tick.run_id).unwrap();
    assert_eq!(run.kind, RunKind::Task);
    assert_eq!(run.phase, Phase::Completed);
    assert_eq!(run.workflow_ref, format!("{session}/step-0-{skill}"));
    let log = std::fs::read_to_string(project.run_paths(&tick.run_id).conversation_log).unwrap();
    assert!(
        log.contains("baton ralph: step [0/"),
        "the prompt is logged"
    );
}

#[tokio::test]
async fn a_step_that_never_calls_session_complete_retries_once_then_blocks() {
    let t = world();
    let busy = |n: usize| {
        Reply::tool_calls(&[(
            "c",
            "fs_list",
            &format!(r#"{{"path":"@project/","n":{n}}}"#),
        )])
    };
    let (_server, model) = model((0..4).map(busy).collect()).await;
    let first = t.tick(&model, 2).await;
    assert!(
        matches!(&first.end, StepEnd::Recorded(c) if c.status == Status::NeedsRetry),
        "{:?}",
        first.end
    );
    assert_eq!(t.doc()["steps"][first.index]["status"], "pending");
    assert_eq!(t.doc()["status"], "running");

    let again = t.tick(&model, 2).await;
    assert_eq!(again.index, first.index, "the retried step runs again");
    assert_ne!(again.run_id, first.run_id, "in a run of its own");
    assert!(
        matches!(&again.end, StepEnd::Recorded(c) if c.status == Status::Blocked),
        "{:?}",
        again.end
    );
    let doc = t.doc();
    assert_eq!(doc["steps"][again.index]["status"], "failed");
    assert_eq!(doc["status"], "paused");
}

#[tokio::test]
async fn a_waiting_step_stays_claimed_waits_again_without_the_model_and_takes_an_answer() {
    let t = world();
    let (_server, asks) = model(vec![Reply::text("Which delimiter?")]).await;
    let tick = t.tick(&asks, 10).await;
    let waiting = StepEnd::Waiting {
        question: "Which delimiter?".into(),
        reason: WaitReason::Question,
    };
    assert_eq!(tick.end, waiting);
    let doc = t.doc();
    assert_eq!(doc["steps"][tick.index]["status"], "running");
    assert_eq!(doc["active_step_index"], tick.index);

    // Continuing without an answer asks nobody and stays waiting.
    let (silent, quiet) = model(Vec::new()).await;
    let again = t.tick(&quiet, 10).await;
    assert_eq!(again.end, waiting);
    assert_eq!(again.run_id, tick.run_id);
    assert!(silent.received().is_empty());

    // The answer continues the same run to its verdict, then the session goes on.
    let (server, m) = model(vec![done("c1")]).await;
    let store = &t.store;
    let mut settings = RunSettings::new(OWNER, store, ModelSource::Live(&m));
    settings.max_turns = 1;
    let report = run::answer(&t.w.ctx, None, "a comma", settings)
        .await
        .unwrap();
    let body = &server.received()[0].body;
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["content"], "USER_INPUT\na comma");
    assert_eq!(t.doc()["steps"][tick.index]["status"], "completed");
    // The loop went on to the next step, whose model (the empty script) failed.
    assert!(
        matches!(report.end, SessionEnd::Interrupted { .. }),
        "{report:?}"
    );
    assert_ne!(t.doc()["active_step_index"], tick.index);
    let run = t.project().get_run(&tick.run_id).unwrap();
    assert_eq!(run.phase, Phase::Completed);
}

#[tokio::test]
async fn answering_a_session_that_waits_for_nothing_is_refused() {
    let t = world();
    let project = t.project();
    let (_s, m) = model(Vec::new()).await;
    let err = answer_step(
        &t.w.ctx,
        None,
        "hello",
        t.settings(&project, ModelSource::Live(&m), 10),
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), "SESSION_NOT_WAITING");
}

#[tokio::test]
async fn a_step_stopped_mid_run_continues_its_own_run() {
    let t = world();
    let write = Reply::tool_calls(&[(
        "c1",
        "fs_write",
        r#"{"path":"@project/plan.md","content":"plan"}"#,
    )]);
    let (_s1, m1) = model(vec![write, done("c2").delayed(Duration::from_secs(30))]).await;
    let dropped = tokio::time::timeout(Duration::from_millis(1500), t.tick(&m1, 10)).await;
    assert!(dropped.is_err(), "dropped during the second model call");
    let doc = t.doc();
    let index = doc["active_step_index"].as_u64().unwrap() as usize;
    assert_eq!(t.project().list_runs().unwrap().len(), 1);

    let (s2, m2) = model(vec![done("c2")]).await;
    let tick = t.tick(&m2, 10).await;
    assert_eq!(tick.index, index);
    assert!(matches!(&tick.end, StepEnd::Recorded(c) if c.status == Status::Done));
    assert_eq!(t.project().list_runs().unwrap().len(), 1, "no second run");
    // The continued request holds the write's result: the write was not made again.
    let last = s2.received()[0].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["tool_call_id"], "c1");
}

#[tokio::test]
async fn a_verdict_logged_before_a_kill_is_applied_without_calling_the_model() {
    let t = world();
    let project = t.project();
    // The first half of a tick, as a killed process left it: the step claimed, its run
    // created, linked and finished, status.json not yet told.
    let claimed = next::run(&t.w.ctx, None, Some(OWNER), None).unwrap();
    let index = claimed.json["index"].as_u64().unwrap() as usize;
    let doc = t.doc();
    let task = create_task(
        &project,
        NewTaskRun {
            task_ref: "s/step-0",
            agent_id: "lifecycle",
        },
        claimed.json["prompt"].as_str().unwrap(),
    )
    .unwrap();
    let run_id = task.run().run_id.clone();
    let session = baton_lifecycle::ralph::discovery::find(
        &t.w.ctx,
        None,
        baton_lifecycle::ralph::discovery::Pick::Active,
    )
    .unwrap()
    .into_session()
    .unwrap();
    step_run::write_link(
        &session,
        index,
        &Link {
            run_id: run_id.clone(),
            owner: OWNER.into(),
            claimed_at: doc["active_claim"]["claimed_at"].as_str().unwrap().into(),
        },
    )
    .unwrap();
    let (_s, m) = model(vec![done("c1")]).await;
    let def = TaskDef {
        system: vec![Message::system("rules")],
        finish: completion::tool_def(),
        validate: completion::validator(),
    };
    let finished = drive_task(task, def, Settings::new(&m)).await.unwrap();
    assert!(matches!(finished.report.end, TaskEnd::Finished { .. }));
    assert_eq!(t.doc()["steps"][index]["status"], "running");

    let (silent, quiet) = model(Vec::new()).await;
    let tick = t.tick(&quiet, 10).await;
    assert!(
        silent.received().is_empty(),
        "the model was not asked again"
    );
    assert_eq!(tick.run_id, run_id);
    assert_eq!(tick.report.model_calls, 0);
    assert!(matches!(&tick.end, StepEnd::Recorded(c) if c.status == Status::Done));
    assert_eq!(t.doc()["steps"][index]["status"], "completed");
    assert_eq!(t.doc()["steps"][index]["completion_evidence"], "plan.md");
}

#[tokio::test]
async fn a_claim_that_never_got_a_run_is_taken_again() {
    let t = world();
    next::run(&t.w.ctx, None, Some(OWNER), None).unwrap();
    let (_s, m) = model(vec![done("c1")]).await;
    let tick = t.tick(&m, 10).await;
    assert_eq!(tick.index, 0);
    assert!(matches!(&tick.end, StepEnd::Recorded(c) if c.status == Status::Done));
}

#[tokio::test]
async fn a_run_created_but_never_linked_is_used_not_left_behind() {
    let t = world();
    let project = t.project();
    // Killed between the run's creation and its link.
    let claimed = next::run(&t.w.ctx, None, Some(OWNER), None).unwrap();
    let doc = t.doc();
    let session = doc["session_id"].as_str().unwrap();
    let skill = doc["steps"][0]["skill"].as_str().unwrap();
    let orphan = create_task(
        &project,
        NewTaskRun {
            task_ref: &format!("{session}/step-0-{skill}"),
            agent_id: skill,
        },
        claimed.json["prompt"].as_str().unwrap(),
    )
    .unwrap()
    .run()
    .run_id
    .clone();
    let (server, m) = model(vec![done("c1")]).await;
    let tick = t.tick(&m, 10).await;
    assert_eq!(tick.run_id, orphan, "the orphan run was linked and used");
    assert!(matches!(&tick.end, StepEnd::Recorded(c) if c.status == Status::Done));
    assert_eq!(project.list_runs().unwrap().len(), 1, "no second run");
    let first = &server.received()[0].body;
    let prompt = first["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "user")
        .unwrap()["content"]
        .clone();
    assert_eq!(prompt, claimed.json["prompt"]);
}

/// The runs index lags behind the run directories when the kill fell between the run's
/// directory and its index entry: the orphan is found by its directory all the same.
#[tokio::test]
async fn a_run_created_but_killed_before_its_index_entry_is_used_not_left_behind() {
    let t = world();
    let project = t.project();
    let claimed = next::run(&t.w.ctx, None, Some(OWNER), None).unwrap();
    let doc = t.doc();
    let session = doc["session_id"].as_str().unwrap();
    let skill = doc["steps"][0]["skill"].as_str().unwrap();
    let orphan = create_task(
        &project,
        NewTaskRun {
            task_ref: &format!("{session}/step-0-{skill}"),
            agent_id: skill,
        },
        claimed.json["prompt"].as_str().unwrap(),
    )
    .unwrap()
    .run()
    .run_id
    .clone();
    // The index as the kill left it: without the run's entry.
    let runs_dir = project
        .run_paths(&orphan)
        .dir
        .parent()
        .unwrap()
        .to_path_buf();
    let journal = runs_dir.parent().unwrap().join("runsIndex.journal.jsonl");
    let kept: String = std::fs::read_to_string(&journal)
        .unwrap()
        .lines()
        .filter(|l| !l.contains(&orphan))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&journal, kept).unwrap();
    assert!(project.list_runs().unwrap().is_empty(), "the index lost it");
    let (_server, m) = model(vec![done("c1")]).await;
    let tick = t.tick(&m, 10).await;
    assert_eq!(tick.run_id, orphan, "the orphan run was linked and used");
    assert!(matches!(&tick.end, StepEnd::Recorded(c) if c.status == Status::Done));
    let dirs = std::fs::read_dir(&runs_dir)
        .unwrap()
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .count();
    assert_eq!(dirs, 1, "no second run");
}

#[tokio::test]
async fn a_step_recorded_across_a_kill_replays_every_call() {
    let t = world();
    let traces = t.w.tmp.path().join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    let project = t.project();
    let write = Reply::tool_calls(&[(
        "c1",
        "fs_write",
        r#"{"path":"@project/plan.md","content":"plan"}"#,
    )]);
    let (_s1, m1) = model(vec![write, done("c2").delayed(Duration::from_secs(30))]).await;
    let mut settings = t.settings(&project, ModelSource::Live(&m1), 10);
    settings.record = Some(&traces);
    // Dropped during the second call, as a kill would: the first call is in the trace.
    let dropped = tokio::time::timeout(
        Duration::from_millis(1500),
        run_step(&t.w.ctx, None, settings),
    )
    .await;
    assert!(dropped.is_err());
    let (_s2, m2) = model(vec![done("c2")]).await;
    let mut settings = t.settings(&project, ModelSource::Live(&m2), 10);
    settings.record = Some(&traces);
    run_step(&t.w.ctx, None, settings).await.unwrap();

    let offline = world();
    let project = offline.project();
    let settings = offline.settings(&project, ModelSource::Replay(&traces), 10);
    let tick = run_step(&offline.w.ctx, None, settings).await.unwrap();
    assert!(matches!(&tick.end, StepEnd::Recorded(c) if c.status == Status::Done));
    assert_eq!(tick.report.model_calls, 2, "both recorded calls replayed");
    assert_eq!(
        std::fs::read_to_string(offline.w.ctx.project.join("plan.md")).unwrap(),
        "plan"
    );
}

#[tokio::test]
async fn a_recorded_session_replays_offline_to_the_same_status() {
    let chain = "plan,verify,milestone-complete";
    let verdict = Reply::text(
        "---VERDICT---\nSTATUS: proceed\nREASON: ok\nGAP_SUMMARY: none\nCONFIDENCE: high\n\
         CONFIDENCE_SCORE: 90\nWEAKEST_DIMENSION: tests\n---END---",
    );
    let live = session_world::world(chain, OWNER);
    let traces = live.tmp.path().join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    // verify writes and cites its verification.json: a gate without it would be a fix.
    let verified = Reply::tool_calls(&[(
        "c2",
        "session_complete",
        r#"{"status":"DONE","evidence":["verification.json"]}"#,
    )]);
    let evidence = r#"{"status":"passed","gaps":[]}"#;
    std::fs::write(live.ctx.project.join("verification.json"), evidence).unwrap();
    let (_s, m) = model(vec![
        Reply::text("Which format?"),
        done("c1"),
        verified,
        verdict,
        done("c3"),
    ])
    .await;
    let store = Store::new(live.tmp.path().join("store"));
    let mut settings = RunSettings::new(OWNER, &store, ModelSource::Live(&m));
    settings.record = Some(&traces);
    let first = run::run(&live.ctx, None, settings).await.unwrap();
    assert!(matches!(first.end, SessionEnd::Waiting { .. }));
    let mut settings = RunSettings::new(OWNER, &store, ModelSource::Live(&m));
    settings.record = Some(&traces);
    let done_live = run::answer(&live.ctx, None, "CSV", settings).await.unwrap();
    assert_eq!(done_live.end, SessionEnd::Completed);

    let offline = session_world::world(chain, OWNER);
    std::fs::write(offline.ctx.project.join("verification.json"), evidence).unwrap();
    let store = Store::new(offline.tmp.path().join("store"));
    // Offline, the recorded answer answers the question: the session runs through.
    let settings = RunSettings::new(OWNER, &store, ModelSource::Replay(&traces));
    let replayed = run::run(&offline.ctx, None, settings).await.unwrap();
    assert_eq!(replayed.end, SessionEnd::Completed);
    assert_eq!(steps(&offline.status), steps(&live.status));
}

/// What each step became, without times and ids.
fn steps(status: &Path) -> Vec<(String, String, String)> {
    let doc: Value = serde_json::from_slice(&std::fs::read(status).unwrap()).unwrap();
    doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["skill"].as_str().unwrap_or("").to_string(),
                s["status"].as_str().unwrap_or("").to_string(),
                s["verdict"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_steps_phase_placeholder_is_filled_from_the_session_before_it_is_claimed() {
    let t = world();
    let mut doc = t.doc();
    assert_eq!(doc["steps"][0]["args"], "{phase}");
    doc["phase"] = serde_json::json!("2");
    std::fs::write(&t.w.status, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let (server, model) = model(vec![done("c1")]).await;
    t.tick(&model, 10).await;
    let doc = t.doc();
    assert_eq!(doc["steps"][0]["args"], "2");
    // The next step keeps its placeholder until it is the one claimed.
    assert_eq!(doc["steps"][1]["args"], "{phase}");
    let first = serde_json::to_string(&server.received()[0].body).unwrap();
    assert!(first.contains(r#"args=\"2\""#), "{first}");
}

#[tokio::test]
async fn an_analysis_id_placeholder_is_filled_from_the_session() {
    let t = world();
    let mut doc = t.doc();
    doc["steps"][0]["args"] = serde_json::json!("--from analyze:{analyze_macro_id}");
    doc["analyze_macro_id"] = serde_json::json!("ANL-7");
    std::fs::write(&t.w.status, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let (_server, model) = model(vec![done("c1")]).await;
    t.tick(&model, 10).await;
    assert_eq!(t.doc()["steps"][0]["args"], "--from analyze:ANL-7");
}
