//! A task run driven by an external executor (a coding-agent CLI behind baton's gateway): its
//! model calls are checked against the budgets before they are sent and recorded as any call,
//! a refused call ends the run resumable with the budget named, and a finished run is
//! completed with its usage.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_engine::external::ExternalTask;
use baton_engine::spend::{self, BUDGET_EXCEEDED, Cap, Counted};
use baton_engine::task_driver::TaskEnd;
use baton_engine::task_run::{TaskContinuation, claim_task, create_task};
use baton_llm::Usage;
use baton_store::{ModelRecord, NewTaskRun, Phase, Store};
use serde_json::json;

fn model() -> ModelRecord {
    ModelRecord {
        name: "claude-code:sonnet".into(),
        base_url: None,
        api: None,
        replay: false,
        trace: None,
    }
}

#[test]
fn calls_are_budgeted_recorded_and_a_refusal_leaves_the_run_resumable() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("project");
    std::fs::create_dir_all(&root).unwrap();
    let store = Store::new(tmp.path().join("home"));
    let project = store.project(&root).unwrap();
    let claimed = create_task(
        &project,
        NewTaskRun {
            task_ref: "epic-1/1-1-a/dev.1",
            agent_id: "claude-code",
        },
        "develop the story",
    )
    .unwrap();
    let id = claimed.run().run_id.clone();
    let caps = vec![Cap::run(Some(1_000), None)];
    let task = ExternalTask::begin(claimed, model(), caps.clone(), None).unwrap();
    assert_eq!(project.get_run(&id).unwrap().phase, Phase::Running);

    let first = task.admit(300, 200).unwrap();
    let reported = Usage {
        prompt_tokens: 300,
        completion_tokens: 150,
        total_tokens: 450,
        ..Usage::default()
    };
    task.settle(
        &first,
        Some(reported),
        Counted {
            prompt_tokens: 280,
            completion_tokens: 120,
        },
        json!({"path": "/v1/messages"}),
    );
    task.note(
        "executor.tool",
        json!({"toolName": "Write", "input": {"path": "hello.txt"}}),
    );
    assert_eq!(task.spent().tokens, 450);
    // 450 spent + 400 + 200 would cross 1,000: refused before anything is sent.
    let stop = task.admit(400, 200).unwrap_err();
    assert_eq!(stop.code, BUDGET_EXCEEDED);
    let finished = task
        .end(TaskEnd::Failed {
            code: BUDGET_EXCEEDED,
            message: stop.message.clone(),
        })
        .unwrap();
    assert_eq!(finished.report.model_calls, 1);
    assert_eq!(
        finished.run.phase,
        Phase::Idle,
        "resumable after a budget stop"
    );
    assert_eq!(
        finished.run.waiting_for.as_ref().unwrap()["error"]["budget"]["kind"],
        "tokens"
    );
    // The call counts wherever spending is read from the run's log.
    let log = project.run_paths(&id).execution_log;
    assert_eq!(spend::recorded(&log, None).spent.tokens, 450);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("\"executor.tool\""), "{text}");

    // The driver lock goes with the value; a later invocation starts from what the log says
    // was spent.
    drop(task);
    let claimed = claim_task(&project, &id, TaskContinuation::Resume).unwrap();
    let task = ExternalTask::begin(claimed, model(), caps, None).unwrap();
    assert_eq!(task.spent().tokens, 450);
    assert!(task.admit(100, 100).is_ok());
    let done = task
        .end(TaskEnd::Finished {
            verdict: json!({"by": "files"}),
        })
        .unwrap();
    assert_eq!(done.run.phase, Phase::Completed);
    assert_eq!(done.run.usage.unwrap().total_tokens, 450);
}
