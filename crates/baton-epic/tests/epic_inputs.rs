//! Bad input gets a clear error with a code, and nothing in the project is written: a missing or
//! malformed sprint status, an unknown epic or story, a malformed agent-state or review file
//! (named, with the field), an invalid phase package, a busy project. Plus what the loop does
//! with files it does not trust.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::support;

use baton_epic::{Command, EpicOutcome, EpicSettings, ModelSource, execute, lock};
use support::player::Scenario;
use support::{Fixture, IMPL, snapshot};
use tokio_util::sync::CancellationToken;

fn s(x: &str) -> String {
    x.to_string()
}

/// Runs `command` and checks it fails with `code`, leaving every project file as it was.
async fn refused(f: &Fixture, command: Command, code: &str) -> String {
    let before = snapshot(&f.project);
    let err = f.run(command).await.unwrap_err();
    assert_eq!(err.code, code, "{err}");
    assert!(
        err.is_usage() || code == "EPIC_BUSY",
        "{code} is a usage error"
    );
    assert_eq!(snapshot(&f.project), before, "{code}: the project changed");
    err.message
}

fn run(epic: &str) -> Command {
    Command::Run {
        epic: s(epic),
        max_stories: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_malformed_sprint_status_is_refused() {
    let f = Fixture::new(Scenario::default());
    let path = f.impl_file("sprint-status.yaml");
    let original = std::fs::read_to_string(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let m = refused(&f, run("epic-1"), "SPRINT_STATUS_MISSING").await;
    assert!(m.contains("sprint-status.yaml"), "{m}");

    std::fs::write(
        &path,
        original.replace("  epic-2: backlog", "  epic-2: [backlog"),
    )
    .unwrap();
    let m = refused(&f, run("epic-1"), "SPRINT_STATUS_INVALID").await;
    assert!(m.contains("line"), "{m}");

    std::fs::write(&path, "project: x\n").unwrap();
    refused(&f, run("epic-1"), "SPRINT_STATUS_INVALID").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_epics_and_stories_are_refused() {
    let f = Fixture::new(Scenario::default());
    let m = refused(&f, run("epic-9"), "EPIC_NOT_FOUND").await;
    assert!(m.contains("epic-9"), "{m}");
    refused(&f, run("banana"), "EPIC_ID_INVALID").await;
    refused(
        &f,
        Command::Story {
            key: s("1-9-nothing"),
        },
        "STORY_NOT_FOUND",
    )
    .await;
    refused(&f, Command::Story { key: s("epic-1") }, "STORY_NOT_FOUND").await;
    refused(&f, Command::Resume, "EPIC_NOT_STARTED").await;
    refused(
        &f,
        Command::Answer {
            story: s("1-1-project-scaffold"),
            question: None,
            text: s("yes"),
        },
        "EPIC_NOT_STARTED",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_configuration_and_phase_packages_are_refused() {
    let f = Fixture::new(Scenario::default());
    f.config("[autopilot]\nmax_review_cyles = 2\n");
    let m = refused(&f, run("epic-1"), "EPIC_CONFIG_INVALID").await;
    assert!(m.contains("max_review_cyles"), "{m}");

    // A phase package with a graph edge to nowhere.
    let pkg = f.project.join("pkgs/broken");
    baton_testkit::copy_dir(&baton_testkit::example("bmad-phase4"), &pkg);
    let graph = pkg.join("workflows/dev-story/workflow.graph.json");
    let text = std::fs::read_to_string(&graph)
        .unwrap()
        .replace("\"to\": \"end-99\"", "\"to\": \"end-98\"");
    std::fs::write(&graph, text).unwrap();
    f.config("[autopilot.phases.dev]\npackage = \"pkgs/broken\"\nworkflow = \"dev-story\"\n");
    let m = refused(&f, run("epic-1"), "EPIC_PHASE_PACKAGE_INVALID").await;
    assert!(m.contains("phase dev"), "{m}");
    assert!(m.contains("end-98"), "{m}");

    f.config("[autopilot.phases.review]\nworkflow = \"x\"\n");
    refused(&f, run("epic-1"), "EPIC_CONFIG_INVALID").await;
    f.config("[autopilot.phases.dev]\npackage = \"no-such-package\"\n");
    refused(&f, run("epic-1"), "EPIC_PHASE_PACKAGE_NOT_FOUND").await;
    f.config("[autopilot.phases.dev]\nagent = \"nobody\"\n");
    let m = refused(&f, run("epic-1"), "EPIC_PHASE_PACKAGE_INVALID").await;
    assert!(m.contains("nobody"), "{m}");
    f.config("[autopilot]\nimplementation_artifacts = \"../outside\"\n");
    refused(&f, run("epic-1"), "EPIC_LAYOUT_INVALID").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_agent_state_file_is_named_with_its_field() {
    let f = Fixture::new(Scenario {
        questions: vec![(s("1-1-project-scaffold"), s("dev"), 1, s("Which port?"))],
        ..Default::default()
    });
    let report = f.run(run("epic-1")).await.unwrap();
    assert!(matches!(report.outcome, EpicOutcome::Waiting { .. }));
    let file = f.impl_file("1-1-project-scaffold.agent-state.json");
    std::fs::write(
        &file,
        r#"{"storyKey": "1-1-project-scaffold", "phase": "dev", "questions": [{"id": "q1", "question": 42, "answer": null}]}"#,
    )
    .unwrap();
    let m = refused(&f, Command::Resume, "AGENT_STATE_INVALID").await;
    assert!(m.contains("1-1-project-scaffold.agent-state.json"), "{m}");
    assert!(m.contains("/questions/0/question"), "{m}");

    std::fs::write(&file, "{ not json").unwrap();
    let m = refused(&f, Command::Resume, "AGENT_STATE_INVALID").await;
    assert!(m.contains("line 1"), "{m}");
    std::fs::write(
        &file,
        r#"{"storyKey": "1-2-other", "phase": "dev", "questions": []}"#,
    )
    .unwrap();
    let m = refused(&f, Command::Resume, "AGENT_STATE_INVALID").await;
    assert!(m.contains("/storyKey"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_review_file_is_named_with_its_field() {
    // On resume, a verdict already written for the review in flight is read first.
    let f = Fixture::new(Scenario {
        questions: vec![(
            s("1-1-project-scaffold"),
            s("code-review"),
            1,
            s("Is a TODO a finding?"),
        )],
        ..Default::default()
    });
    let report = f.run(run("epic-1")).await.unwrap();
    assert!(matches!(report.outcome, EpicOutcome::Waiting { .. }));
    std::fs::write(
        f.impl_file("1-1-project-scaffold.review.json"),
        r#"{"reviewResult": "approve", "summary": "fine"}"#,
    )
    .unwrap();
    let m = refused(&f, Command::Resume, "REVIEW_INVALID").await;
    assert!(m.contains("1-1-project-scaffold.review.json"), "{m}");
    assert!(m.contains("/reviewResult"), "{m}");

    // Written by the review phase itself: the phase failed (retried once), the loop pauses.
    let f = Fixture::new(Scenario {
        broken_review: vec![s("1-1-project-scaffold")],
        ..Default::default()
    });
    let report = f.run(run("epic-1")).await.unwrap();
    let EpicOutcome::Paused { failure } = &report.outcome else {
        panic!("{:?}", report.outcome);
    };
    assert_eq!(failure.code, "REVIEW_INVALID");
    assert!(
        failure.message.contains("/reviewResult"),
        "{}",
        failure.message
    );
    assert_eq!(
        f.json(".run-epic-state.json")["lastFailure"]["phase"],
        "code-review"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_orchestrator_on_the_project_is_refused() {
    let f = Fixture::new(Scenario::default());
    let layout = baton_bmad::layout::resolve(&f.project, None).unwrap();
    let held = lock::acquire(&layout.dir, IMPL).unwrap();
    let m = refused(&f, run("epic-1"), "EPIC_BUSY").await;
    assert!(m.contains("another `baton epic` process"), "{m}");
    drop(held);
    let report = f
        .run(Command::Story {
            key: s("1-1-project-scaffold"),
        })
        .await
        .unwrap();
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: false });
    // Another epic cannot start while a story is in progress; the same epic goes on.
    let f = Fixture::new(Scenario {
        questions: vec![(s("1-1-project-scaffold"), s("validate"), 1, s("?"))],
        ..Default::default()
    });
    f.run(run("1")).await.unwrap();
    refused(&f, run("epic-2"), "EPIC_OTHER_IN_PROGRESS").await;
    refused(
        &f,
        Command::Story {
            key: s("1-2-user-authentication"),
        },
        "EPIC_OTHER_IN_PROGRESS",
    )
    .await;
    refused(
        &f,
        Command::Answer {
            story: s("1-1-project-scaffold"),
            question: Some(s("q7")),
            text: s("x"),
        },
        "EPIC_QUESTION_NOT_FOUND",
    )
    .await;
    refused(
        &f,
        Command::Answer {
            story: s("1-2-user-authentication"),
            question: None,
            text: s("x"),
        },
        "EPIC_NO_QUESTION",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_shows_the_plan_and_writes_nothing() {
    let f = Fixture::new(Scenario::default());
    let path = f.impl_file("sprint-status.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace(
            "1-1-project-scaffold: backlog",
            "1-1-project-scaffold: done",
        )
        .replace(
            "1-2-user-authentication: backlog",
            "1-2-user-authentication: drafted",
        );
    std::fs::write(&path, text).unwrap();
    let before = snapshot(&f.project);
    let report = execute(
        &f.store,
        &f.project,
        run("epic-1"),
        EpicSettings {
            source: ModelSource::Live(&f.model),
            record: None,
            ask: None,
            on_event: None,
            cancel: CancellationToken::new(),
            dry_run: true,
            budget: Default::default(),
        },
    )
    .await
    .unwrap();
    let EpicOutcome::Planned { plan, .. } = &report.outcome else {
        panic!("{:?}", report.outcome);
    };
    let plan: Vec<(&str, &str)> = plan
        .iter()
        .map(|p| (p.key.as_str(), p.phase.as_str()))
        .collect();
    // A legacy `drafted` story is ready for dev: it starts at validate.
    assert_eq!(
        plan,
        [
            ("1-2-user-authentication", "validate"),
            ("1-3-password-reset", "create-story")
        ]
    );
    assert_eq!(snapshot(&f.project), before);
    assert_eq!(report.phases.len(), 5);
    assert!(f.player.served().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_only_the_orchestrator_writes_is_restored_after_a_phase() {
    let f = Fixture::new(Scenario {
        tamper: vec![(s("1-1-project-scaffold"), s("validate"))],
        ..Default::default()
    });
    let report = f
        .run(Command::Story {
            key: s("1-1-project-scaffold"),
        })
        .await
        .unwrap();
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: false });
    assert!(f.sprint().contains("  1-1-project-scaffold: done\n"));
    assert!(f.sprint().contains("# STATUS DEFINITIONS"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_agent_state_file_and_a_stale_stop_request_are_cleared() {
    let f = Fixture::new(Scenario::default());
    // A previous tool's escalation, answered long ago.
    std::fs::write(
        f.impl_file("1-1-project-scaffold.agent-state.json"),
        r#"{"storyKey": "1-1-project-scaffold", "phase": "dev", "blockedAt": "x", "blockReason": "no_resource", "lastCompletedStep": "step-2", "questions": [{"id": "q1", "question": "a?", "context": "c", "answer": "b"}]}"#,
    )
    .unwrap();
    // A stop asked for before the loop starts is a stale request: cleared, not obeyed.
    std::fs::write(f.impl_file(".run-epic.stop"), "x").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let report = f
        .run(Command::Story {
            key: s("1-1-project-scaffold"),
        })
        .await
        .unwrap();
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: false });
    let agent = f.json("1-1-project-scaffold.agent-state.json");
    assert_eq!(agent["questions"], serde_json::json!([]));
    assert_eq!(agent["lastCompletedStep"], "step-2");
    assert!(agent.get("blockReason").is_none());
    assert!(!f.impl_file(".run-epic.stop").exists());
}
