//! The epic autopilot end to end against a played model over loopback HTTP: every phase is a
//! real baton run of the bundled package, walked with real state patches.

use crate::support;

use baton_epic::{Command, EpicOutcome};
use support::player::Scenario;
use support::{Fixture, IMPL, expected_sprint, without_last_updated};

const EPIC1: [&str; 3] = [
    "1-1-project-scaffold",
    "1-2-user-authentication",
    "1-3-password-reset",
];

fn s(x: &str) -> String {
    x.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_stories_reach_done_and_the_file_keeps_every_other_byte() {
    let f = Fixture::new(Scenario::default());
    let original = f.sprint();
    let report = f.run_epic("epic-1").await;
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: true });
    assert_eq!(report.stories_completed, EPIC1);
    assert_eq!(report.phases_run, 15);

    let after = f.sprint();
    let expected = expected_sprint(
        &original,
        &[
            ("epic-1", "done"),
            (EPIC1[0], "done"),
            (EPIC1[1], "done"),
            (EPIC1[2], "done"),
        ],
    );
    assert_eq!(
        without_last_updated(&after),
        without_last_updated(&expected)
    );
    assert_ne!(after, original);
    let last_updated = after
        .lines()
        .find(|l| l.starts_with("last_updated: "))
        .unwrap();
    assert_ne!(last_updated, "last_updated: 2026-11-20 09:00");
    assert_eq!(last_updated.len(), "last_updated: 2026-11-20 09:00".len());

    let state = f.json(".run-epic-state.json");
    assert_eq!(state["epicId"], "epic-1");
    assert_eq!(state["status"], "paused");
    assert!(state["currentStoryKey"].is_null());
    let steps = state["lastSteps"].as_array().unwrap();
    assert_eq!(steps.len(), 15);
    assert_eq!(steps[0]["phase"], "create-story");
    assert_eq!(steps[14]["phase"], "code-review");
    assert_eq!(steps[14]["storyKey"], EPIC1[2]);
    for key in EPIC1 {
        assert!(
            f.read(&format!("{IMPL}/{key}.md"))
                .contains("Status: review")
        );
        assert_eq!(
            f.json(&format!("{key}.review.json"))["reviewResult"],
            "approved"
        );
        assert!(f.read(&format!("src/{key}.txt")).contains("cycle 1"));
        assert!(!f.impl_file(&format!("{key}.agent-state.json")).exists());
    }
    // Each phase ran once, as an ordinary completed run.
    let project = f.store.project(&f.project).unwrap();
    let runs = project.list_runs().unwrap();
    assert_eq!(runs.len(), 15);
    assert!(
        runs.iter()
            .all(|r| r.phase == baton_store::Phase::Completed)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_requested_go_back_through_dev_revision_and_review() {
    let f = Fixture::new(Scenario {
        changes: vec![(s(EPIC1[1]), 1)],
        ..Default::default()
    });
    let report = f.run_epic("epic-1").await;
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: true });
    assert_eq!(report.phases_run, 18);
    let code = f.read(&format!("src/{}.txt", EPIC1[1]));
    assert!(code.contains("cycle 2"), "{code}");
    assert!(
        code.contains("fixed: cycle 1: handle the empty input"),
        "the review summary reached dev: {code}"
    );
    let steps: Vec<String> = f.json(".run-epic-state.json")["lastSteps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["storyKey"] == EPIC1[1])
        .map(|s| s["phase"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        steps,
        [
            "create-story",
            "validate",
            "dev",
            "revision",
            "code-review",
            "dev",
            "revision",
            "code-review"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_cycles_are_capped_then_the_loop_pauses_with_last_failure() {
    let f = Fixture::new(Scenario {
        changes: vec![(s(EPIC1[0]), 1), (s(EPIC1[0]), 2), (s(EPIC1[0]), 3)],
        ..Default::default()
    });
    f.config("[autopilot]\nmax_review_cycles = 2\n");
    let report = f.run_epic("epic-1").await;
    let EpicOutcome::Paused { failure } = &report.outcome else {
        panic!("{:?}", report.outcome);
    };
    assert_eq!(failure.code, "REVIEW_CYCLES_EXHAUSTED");
    assert_eq!(report.phases_run, 2 + 3 * 2);
    let state = f.json(".run-epic-state.json");
    assert_eq!(state["status"], "paused");
    assert_eq!(state["lastFailure"]["phase"], "code-review");
    assert_eq!(state["lastFailure"]["storyKey"], EPIC1[0]);
    assert!(f.sprint().contains(&format!("  {}: review\n", EPIC1[0])));
    assert!(f.sprint().contains("  1-2-user-authentication: backlog\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_pauses_the_loop_and_the_answer_continues_it() {
    let f = Fixture::new(Scenario {
        questions: vec![(
            s(EPIC1[0]),
            s("dev"),
            1,
            s("Which port does the API listen on?"),
        )],
        ..Default::default()
    });
    let report = f.run_epic("epic-1").await;
    let EpicOutcome::Waiting { story, question } = &report.outcome else {
        panic!("{:?}", report.outcome);
    };
    assert_eq!(story, EPIC1[0]);
    assert_eq!(question.id, "q1");
    assert_eq!(question.question, "Which port does the API listen on?");
    let agent = f.json(&format!("{}.agent-state.json", EPIC1[0]));
    assert_eq!(agent["phase"], "dev");
    assert_eq!(agent["questions"][0]["answer"], serde_json::Value::Null);
    assert_eq!(f.json(".run-epic-state.json")["status"], "paused");

    // Resuming without an answer pauses again on the same question, and runs nothing.
    let again = f.run(Command::Resume).await.unwrap();
    assert!(matches!(again.outcome, EpicOutcome::Waiting { .. }));
    assert_eq!(again.phases_run, 0);

    let report = f
        .run(Command::Answer {
            story: s(EPIC1[0]),
            question: None,
            text: s("Port 8080"),
        })
        .await
        .unwrap();
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: true });
    assert!(
        f.read(&format!("src/{}.txt", EPIC1[0]))
            .contains("answer: Port 8080")
    );
    // The finished phase left no question behind.
    let agent = f.json(&format!("{}.agent-state.json", EPIC1[0]));
    assert_eq!(agent["questions"], serde_json::json!([]));
    // The dev run asked and was answered: one run, not two.
    let runs = f.store.project(&f.project).unwrap().list_runs().unwrap();
    assert_eq!(runs.len(), 15);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_escalation_in_the_agent_state_file_pauses_until_answered_then_the_phase_runs_again() {
    let f = Fixture::new(Scenario {
        escalations: vec![(
            s(EPIC1[0]),
            s("create-story"),
            s("Is the scaffold a monorepo?"),
        )],
        ..Default::default()
    });
    let report = f.run(Command::Story { key: s(EPIC1[0]) }).await.unwrap();
    let EpicOutcome::Waiting { question, .. } = &report.outcome else {
        panic!("{:?}", report.outcome);
    };
    assert_eq!(question.question, "Is the scaffold a monorepo?");
    assert!(f.sprint().contains(&format!("  {}: backlog\n", EPIC1[0])));
    let report = f
        .run(Command::Answer {
            story: s(EPIC1[0]),
            question: Some(s("q1")),
            text: s("yes, one repository"),
        })
        .await
        .unwrap();
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: false });
    assert_eq!(report.stories_completed, [EPIC1[0]]);
    // The second create-story run worked with the answered file in place.
    let story = f.read(&format!("{IMPL}/{}.md", EPIC1[0]));
    assert!(story.contains("decided: yes, one repository"), "{story}");
    let state = f.json(".run-epic-state.json");
    assert_eq!(state["lastStoryCompleted"], EPIC1[0]);
    assert!(f.sprint().contains("  1-2-user-authentication: backlog\n"));
    assert!(f.sprint().contains("  epic-1: in-progress\n"));
    // create-story ran twice: the escalating run and the one after the answer.
    assert_eq!(report.phases_run, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_phase_is_retried_once_then_paused_with_last_failure() {
    let f = Fixture::new(Scenario {
        failures: vec![(s(EPIC1[0]), s("validate"), 2)],
        ..Default::default()
    });
    let report = f.run_epic("epic-1").await;
    let EpicOutcome::Paused { failure } = &report.outcome else {
        panic!("{:?}", report.outcome);
    };
    assert_eq!(failure.phase.as_str(), "validate");
    assert_eq!(report.phases_run, 3);
    let state = f.json(".run-epic-state.json");
    assert_eq!(state["lastFailure"]["phase"], "validate");
    assert_eq!(state["lastFailure"]["storyKey"], EPIC1[0]);
    assert_eq!(state["status"], "paused");
    // The model is healthy again: resume finishes the epic with a fresh validate run.
    let report = f.run(Command::Resume).await.unwrap();
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: true });
    let runs = f.store.project(&f.project).unwrap().list_runs().unwrap();
    let failed = runs
        .iter()
        .filter(|r| r.phase == baton_store::Phase::Failed)
        .count();
    assert_eq!((runs.len(), failed), (17, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_failure_is_absorbed_by_the_retry() {
    let f = Fixture::new(Scenario {
        failures: vec![(s(EPIC1[2]), s("code-review"), 1)],
        ..Default::default()
    });
    let report = f.run_epic("epic-1").await;
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: true });
    assert_eq!(report.phases_run, 16);
    assert!(f.json(".run-epic-state.json").get("lastFailure").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verify_command_that_fails_once_sends_the_story_back_to_dev() {
    let f = Fixture::new(Scenario::default());
    f.config(
        "[autopilot.verify]\ncommands = [\"test -f .verified || { touch .verified; echo 'test auth::login ... FAILED'; exit 1; }\"]\ntimeout_s = 30\n",
    );
    let report = f.run(Command::Story { key: s(EPIC1[0]) }).await.unwrap();
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: false });
    // dev, verify fails, dev again (told why), then revision and review.
    assert_eq!(report.phases_run, 6);
    let code = f.read(&format!("src/{}.txt", EPIC1[0]));
    assert!(code.contains("fixed a failed check"), "{code}");
    let project = f.store.project(&f.project).unwrap();
    let second_dev = project
        .list_runs()
        .unwrap()
        .into_iter()
        .filter_map(|r| {
            let state = project.state_file(&r.run_id).read().unwrap().doc.to_value();
            state["variables"]["verifyOutput"]
                .as_str()
                .map(str::to_owned)
        })
        .next()
        .unwrap();
    assert!(second_dev.contains("FAILED"), "{second_dev}");
    assert!(second_dev.contains("exit code 1"), "{second_dev}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_phase_that_completes_without_its_output_is_a_failure() {
    let f = Fixture::new(Scenario {
        lazy: vec![(s(EPIC1[0]), s("code-review"))],
        ..Default::default()
    });
    let report = f.run_epic("epic-1").await;
    let EpicOutcome::Paused { failure } = &report.outcome else {
        panic!("{:?}", report.outcome);
    };
    assert_eq!(failure.code, "EPIC_PHASE_OUTPUT_MISSING");
    assert!(
        failure.message.contains("1-1-project-scaffold.review.json"),
        "{}",
        failure.message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_developer_and_the_reviewer_get_the_terminal_when_the_project_turns_it_on() {
    let f = Fixture::new(Scenario::default());
    let report = f.run(Command::Story { key: s(EPIC1[0]) }).await.unwrap();
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: false });
    assert!(!f.player.offered("dev").contains(&s("terminal_run")));

    let f = Fixture::new(Scenario::default());
    f.config("[tools.terminal]\nenabled = true\n");
    let report = f.run(Command::Story { key: s(EPIC1[0]) }).await.unwrap();
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: false });
    for phase in ["dev", "revision", "code-review"] {
        assert!(
            f.player.offered(phase).contains(&s("terminal_run")),
            "{phase}: {:?}",
            f.player.offered(phase)
        );
    }
    // The scrum master asks for no terminal.
    assert!(
        !f.player
            .offered("create-story")
            .contains(&s("terminal_run"))
    );
    f.config("[tools.terminal]\nenabled = \"yes\"\n");
    let err = f
        .run(Command::Story { key: s(EPIC1[1]) })
        .await
        .unwrap_err();
    assert_eq!(err.code, "TOOLS_CONFIG_INVALID");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_phase_can_run_an_installed_package() {
    let f = Fixture::new(Scenario::default());
    // The team's own phase package, installed under another name.
    let src = f.tmp.path().join("team-phases");
    baton_testkit::copy_dir(&baton_testkit::example("bmad-phase4"), &src);
    let manifest = src.join("bmad.json");
    let text = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace("\"name\": \"bmad-phase4\"", "\"name\": \"team-phases\"");
    std::fs::write(&manifest, text).unwrap();
    let package = baton_package::Package::load(&src).unwrap();
    f.store.packages().install(&package, "test").unwrap();
    f.config("[autopilot.phases.dev]\npackage = \"team-phases\"\nworkflow = \"dev-story\"\nagent = \"dev\"\n");
    let report = f.run(Command::Story { key: s(EPIC1[0]) }).await.unwrap();
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: false });
    let dev_phase = &report
        .phases
        .iter()
        .find(|p| p.phase.as_str() == "dev")
        .unwrap()
        .package;
    assert!(dev_phase.starts_with("team-phases@1.0.0"), "{dev_phase}");
    let runs = f.store.project(&f.project).unwrap().list_runs().unwrap();
    let packages: Vec<&str> = runs.iter().map(|r| r.package_id.as_str()).collect();
    assert_eq!(
        packages
            .iter()
            .filter(|p| p.starts_with("team-phases@"))
            .count(),
        1,
        "{packages:?}"
    );
    assert_eq!(
        packages
            .iter()
            .filter(|p| p.starts_with("bmad-phase4@"))
            .count(),
        4,
        "{packages:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_stories_stops_after_that_many_and_the_next_run_goes_on() {
    let f = Fixture::new(Scenario::default());
    let once = |n| Command::Run {
        epic: s("epic-1"),
        max_stories: Some(n),
    };
    let report = f.run(once(1)).await.unwrap();
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: false });
    assert_eq!(report.stories_completed, [EPIC1[0]]);
    assert_eq!(f.json(".run-epic-state.json")["status"], "paused");
    assert!(f.sprint().contains("  epic-1: in-progress\n"));
    let report = f.run(once(5)).await.unwrap();
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: true });
    assert_eq!(report.stories_completed, [EPIC1[1], EPIC1[2]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_runs_of_the_same_project_are_never_taken_for_the_phase_in_flight() {
    let f = Fixture::new(Scenario::default());
    let report = f.run(Command::Story { key: s(EPIC1[0]) }).await.unwrap();
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: false });
    // The same project afresh (as `baton demo epic` does), within the same second: the store
    // still holds the first runs, with the same variables.
    std::fs::remove_dir_all(&f.project).unwrap();
    support::sample_project(f.tmp.path());
    let report = f.run(Command::Story { key: s(EPIC1[0]) }).await.unwrap();
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: false });
    assert_eq!(report.phases_run, 5);
    let runs = f.store.project(&f.project).unwrap().list_runs().unwrap();
    assert_eq!(runs.len(), 10);
}
