//! Budgets in the epic loop, against the played model: a story budget pauses the loop on that
//! story before a call that could cross it (its phase run idle, nothing lost), the spending of
//! the story's earlier runs counts, and a larger budget finishes the epic as an unbudgeted loop
//! does. The board sums the tokens per run, story and epic.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::support;

use baton_engine::spend::{self, BudgetConfig};
use baton_epic::{Command, EpicOutcome, EpicSettings, ModelSource, execute};
use baton_store::Phase;
use support::player::Scenario;
use support::{Fixture, expected_sprint, without_last_updated};
use tokio_util::sync::CancellationToken;

const EPIC1: [&str; 3] = [
    "1-1-project-scaffold",
    "1-2-user-authentication",
    "1-3-password-reset",
];

async fn run(f: &Fixture, command: Command, budget: BudgetConfig) -> baton_epic::EpicReport {
    execute(
        &f.store,
        &f.project,
        command,
        EpicSettings {
            source: ModelSource::Live(&f.model),
            record: None,
            ask: None,
            on_event: None,
            cancel: CancellationToken::new(),
            dry_run: false,
            budget,
        },
    )
    .await
    .unwrap()
}

fn per_story(tokens: u64) -> BudgetConfig {
    BudgetConfig {
        tokens_per_story: Some(tokens),
        ..BudgetConfig::default()
    }
}

/// The tokens budgets charged for every model call of `run_id`: the larger of the model's
/// reported figures and baton's own count.
fn turns(f: &Fixture, run_id: &str) -> Vec<u64> {
    let project = f.store.project(&f.project).unwrap();
    std::fs::read_to_string(project.run_paths(run_id).execution_log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["kind"] == "engine.turn")
        .map(|l| {
            let usage: baton_llm::Usage = serde_json::from_value(l["usage"].clone()).unwrap();
            let counted: spend::Counted = serde_json::from_value(l["counted"].clone()).unwrap();
            spend::charge(Some(&usage), counted, None).total_tokens
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_story_budget_pauses_the_loop_on_that_story_and_a_larger_one_finishes_the_epic() {
    let f = Fixture::new(Scenario::default());
    let original = f.sprint();
    // Each call is estimated at its counted prompt plus the 8,192-token cap, and is charged
    // its counted prompt and answer (the played model reports only 15 to 29 tokens): 14,000
    // tokens let a story make a couple of calls, not all.
    let budget = 14_000;
    let report = run(
        &f,
        Command::Run {
            epic: "epic-1".into(),
            max_stories: None,
        },
        per_story(budget),
    )
    .await;
    let (run_id, budget_json) = match &report.outcome {
        EpicOutcome::Budget {
            story,
            run_id,
            budget,
            message,
            ..
        } => {
            assert_eq!(story, EPIC1[0]);
            assert!(
                message.contains(&format!("story {}", EPIC1[0])),
                "{message}"
            );
            (run_id.clone().unwrap(), budget.clone())
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(budget_json["scope"], format!("story {}", EPIC1[0]));
    assert_eq!(budget_json["kind"], "tokens");
    let spent = budget_json["spent"].as_u64().unwrap();
    assert!(spent <= budget);
    assert!(spent + budget_json["estimate"].as_u64().unwrap() > budget);
    // The story's runs together spent what the budget says, and never more than it.
    let progress = f.json(".baton-epic-progress.json");
    let story_runs: Vec<String> = progress["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["storyKey"] == EPIC1[0])
        .map(|r| r["runId"].as_str().unwrap().to_string())
        .collect();
    let total: u64 = story_runs.iter().flat_map(|r| turns(&f, r)).sum();
    assert_eq!(total, spent);
    // The run that hit it is idle, resumable.
    let project = f.store.project(&f.project).unwrap();
    let stopped = project.get_run(&run_id).unwrap();
    assert_eq!(stopped.phase, Phase::Idle);
    assert_eq!(stopped.stop_reason.as_deref(), Some("budget-exceeded"));
    assert_eq!(f.json(".run-epic-state.json")["status"], "paused");

    // The same budget again: still paused on the same story, nothing sent.
    let served = f.player.served().len();
    let again = run(&f, Command::Resume, per_story(budget)).await;
    assert!(matches!(again.outcome, EpicOutcome::Budget { .. }));
    assert_eq!(f.player.served().len(), served);

    // A budget large enough for a story finishes the epic, the same as without one.
    let done = run(&f, Command::Resume, per_story(10_000_000)).await;
    assert_eq!(done.outcome, EpicOutcome::Done { epic_done: true });
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
        without_last_updated(&f.sprint()),
        without_last_updated(&expected)
    );

    // The board sums tokens per run, story and epic.
    let mut board = baton_epic::status(&f.project, Some("epic-1")).unwrap();
    baton_epic::budget::fill_usage(&mut board, &f.store, &f.project);
    let epic = &board.epics[0];
    let story_sum: u64 = epic
        .stories
        .iter()
        .map(|s| s.usage.unwrap().total_tokens)
        .sum();
    assert_eq!(epic.usage.unwrap().total_tokens, story_sum);
    let first = &epic.stories[0];
    let runs_sum: u64 = first
        .runs
        .iter()
        .map(|r| r.usage.unwrap().total_tokens)
        .sum();
    assert_eq!(first.usage.unwrap().total_tokens, runs_sum);
    let json = serde_json::to_value(&board).unwrap();
    assert!(json["epics"][0]["usage"]["promptTokens"].as_u64().unwrap() > 0);
    assert!(json["epics"][0]["stories"][0]["runs"][0]["usage"].is_object());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_epic_budget_of_zero_runs_nothing() {
    let f = Fixture::new(Scenario::default());
    let report = run(
        &f,
        Command::Run {
            epic: "epic-1".into(),
            max_stories: None,
        },
        BudgetConfig {
            tokens: Some(0),
            ..BudgetConfig::default()
        },
    )
    .await;
    match &report.outcome {
        EpicOutcome::Budget { budget, .. } => assert_eq!(budget["scope"], "epic epic-1"),
        other => panic!("{other:?}"),
    }
    assert_eq!(f.player.served().len(), 0);
}
