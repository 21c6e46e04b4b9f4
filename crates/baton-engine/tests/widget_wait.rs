//! A question asked with `ui.ask_user` is recorded as the widget it is: `waitingFor.widget`
//! holds the validated request, so a page can draw the selection, form or confirmation. A
//! question the model asks in plain text carries no widget.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::support;
use baton_engine::runner::{self, Continuation, Settings, StartRun};
use baton_llm::{ReplayModel, Trace};
use baton_store::{Phase, Store};
use baton_testkit::{copy_dir, demo_trace, repo};
use serde_json::json;
use support::completed_demo::{completed_demo, trace};

/// A completed demo run, then one chat turn answered by `answers`; the run as it is after.
async fn chat_after_completion(answers: Trace) -> baton_store::RunMetadata {
    let demo = completed_demo().await;
    let (store, done_id) = (&demo.store, &demo.run_id);
    let scripted = ReplayModel::new(answers);
    let finished = runner::continue_run(
        store,
        done_id,
        Continuation::Chat("Anything else?".into()),
        Settings::new(&scripted),
    )
    .await
    .unwrap();
    finished.run
}

#[tokio::test]
async fn a_widget_question_is_recorded_with_its_widget() {
    let ask = json!({"widgetId": "pick", "type": "selection", "message": "Which format?",
                     "options": [{"value": "md", "label": "Markdown"}, {"value": "html", "label": "HTML"}]});
    let run = chat_after_completion(trace(vec![(vec![("a1", "ui.ask_user", ask)], "")])).await;
    assert_eq!(run.phase, Phase::WaitingUser);
    let waiting = run.waiting_for.unwrap();
    assert_eq!(waiting["question"], "Which format?");
    assert_eq!(waiting["reason"], "ui_ask_user");
    assert_eq!(waiting["widget"]["type"], "selection");
    assert_eq!(waiting["widget"]["widgetId"], "pick");
    assert_eq!(waiting["widget"]["options"][1]["value"], "html");
}

#[tokio::test]
async fn a_plain_text_question_has_no_widget() {
    // The demo's model asks which story in text; without the trace's recorded inputs the run
    // waits for a person.
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    copy_dir(&repo().join("examples/projects/taskboard"), &project);
    let store = Store::new(tmp.path().join("home"));
    let replay = ReplayModel::new(Trace::load(&demo_trace()).unwrap());
    let pkg = repo().join("examples/packages/create-story-micro");
    let done = runner::start(
        &store,
        StartRun::new(&pkg, &project),
        Settings::new(&replay),
    )
    .await
    .unwrap();
    assert_eq!(done.run.phase, Phase::WaitingUser);
    let waiting = done.run.waiting_for.unwrap();
    assert_eq!(waiting["reason"], "assistant_no_toolCalls_and_not_complete");
    assert!(waiting.get("widget").is_none(), "{waiting}");
}

#[tokio::test]
async fn a_bare_confirmation_answer_reaches_the_model_with_the_questions_widget_id() {
    let demo = completed_demo().await;
    let (store, project) = (&demo.store, &demo.project);
    let ask = json!({"widgetId": "go", "type": "confirmation", "message": "Publish it?"});
    let asks = ReplayModel::new(trace(vec![(vec![("a1", "ui.ask_user", ask)], "")]));
    let id = demo.run_id.clone();
    let waiting = runner::continue_run(
        store,
        &id,
        Continuation::Chat("Publish the story?".into()),
        Settings::new(&asks),
    )
    .await
    .unwrap();
    assert_eq!(waiting.run.phase, Phase::WaitingUser);
    // What `baton answer --confirm` and the web API's {"confirm": true} send: no widgetId.
    let bare = "WIDGET_SUBMIT\n{\"type\": \"confirmation\", \"value\": {\"confirmed\": true}}";
    let replies = ReplayModel::new(trace(vec![(vec![], "Published.")]));
    runner::continue_run(
        store,
        &id,
        Continuation::Answer(bare.into()),
        Settings::new(&replies),
    )
    .await
    .unwrap();
    let paths = store.project(project).unwrap().run_paths(&id);
    let log = std::fs::read_to_string(paths.conversation_log).unwrap();
    let submitted = log
        .lines()
        .rfind(|l| l.contains("WIDGET_SUBMIT"))
        .unwrap()
        .to_string();
    assert!(submitted.contains(r#"\"widgetId\":\"go\""#), "{submitted}");
}
