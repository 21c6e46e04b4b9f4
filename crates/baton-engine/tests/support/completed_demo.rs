//! The bundled demo run taken to completion, and traces made of scripted answers: what the
//! tests of the post-completion profile and of widget questions start from.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_engine::runner::{self, Settings, StartRun};
use baton_llm::{ReplayModel, Trace};
use baton_store::{Phase, Store};
use baton_testkit::{copy_dir, demo_trace, repo};
use serde_json::{Value, json};
use std::path::PathBuf;

/// One scripted answer: `(tool calls as (id, name, arguments), text)`.
pub type Answer<'a> = (Vec<(&'a str, &'a str, Value)>, &'a str);

/// A trace from scripted answers.
pub fn trace(answers: Vec<Answer>) -> Trace {
    let dialogues: Vec<Value> = answers
        .into_iter()
        .enumerate()
        .map(|(i, (calls, text))| {
            let calls: Vec<Value> = calls
                .into_iter()
                .map(|(id, name, args)| json!({"id": id, "name": name, "arguments": args}))
                .collect();
            json!({"id": format!("C{:02}", i + 1), "response": {"assistant": {"content": text, "toolCalls": calls}}})
        })
        .collect();
    Trace::from_value(
        json!({"traceVersion": "crewagent.runtime.llm.trace.v1", "dialogues": dialogues}),
    )
    .unwrap()
}

/// A completed run of the bundled demo on a copy of the taskboard sample.
pub struct CompletedDemo {
    pub tmp: tempfile::TempDir,
    pub store: Store,
    pub project: PathBuf,
    pub run_id: String,
}

pub async fn completed_demo() -> CompletedDemo {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    copy_dir(&repo().join("examples/projects/taskboard"), &project);
    let store = Store::new(tmp.path().join("home"));
    let replay = ReplayModel::new(Trace::load(&demo_trace()).unwrap());
    let mut settings = Settings::new(&replay);
    settings.replay = Some(&replay);
    let pkg = repo().join("examples/packages/create-story-micro");
    let done = runner::start(&store, StartRun::new(&pkg, &project), settings)
        .await
        .unwrap();
    assert_eq!(done.run.phase, Phase::Completed);
    CompletedDemo {
        run_id: done.run.run_id.clone(),
        tmp,
        store,
        project,
    }
}
