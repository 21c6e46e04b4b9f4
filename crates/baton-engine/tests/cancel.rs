//! A stopped run ends with `ENGINE_ABORTED` between turns, idle again, and can be resumed.

use baton_engine::Outcome;
use baton_engine::runner::{self, Continuation, Settings, StartRun};
use baton_llm::{ReplayModel, Trace};
use baton_store::{Phase, Store};
use baton_testkit::{demo_trace, repo, sample_project};

#[tokio::test]
async fn cancellation_stops_between_turns_and_resume_finishes() {
    let tmp = tempfile::tempdir().unwrap();
    let project = sample_project(tmp.path());
    let store = Store::new(tmp.path().join("home"));
    let trace_path = demo_trace();
    let replay = ReplayModel::new(Trace::load(&trace_path).unwrap());
    let mut settings = Settings::new(&replay);
    settings.replay = Some(&replay);
    settings.cancel.cancel();
    let pkg = repo().join("examples/packages/create-story-micro");
    let stopped = runner::start(&store, StartRun::new(&pkg, &project), settings)
        .await
        .unwrap();
    match &stopped.report.outcome {
        Outcome::Failed { code, .. } => assert_eq!(code, "ENGINE_ABORTED"),
        other => panic!("{other:?}"),
    }
    assert_eq!(stopped.run.phase, Phase::Idle, "a stop is not a failure");
    assert_eq!(
        stopped.report.model_calls, 0,
        "nothing was asked of the model"
    );

    let replay = ReplayModel::new(Trace::load(&trace_path).unwrap());
    let mut settings = Settings::new(&replay);
    settings.replay = Some(&replay);
    let done = runner::continue_run(&store, &stopped.run.run_id, Continuation::Resume, settings)
        .await
        .unwrap();
    assert!(
        matches!(done.report.outcome, Outcome::Completed { .. }),
        "{:?}",
        done.report
    );
    assert_eq!(done.run.phase, Phase::Completed);
}
