//! Figures for docs/BENCHMARKS.md, not a check (ignored by default): the wall time of an epic
//! of four independent stories with `--parallel 1`, `2` and `4`, the played model answering
//! after a fixed delay, and baton's own time per story with a model that answers at once.
//!
//! `cargo test --release -p baton-epic --test epic_parallel_figures -- --ignored --nocapture`
//! (`EPIC_FIGURES_DELAY_MS`, default 500; `EPIC_FIGURES_ROUNDS`, default 3).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

mod support;

use baton_epic::{Command, EpicOutcome, EpicSettings, ModelSource, execute_parallel};
use std::time::{Duration, Instant};
use support::Fixture;
use support::player::Scenario;
use tokio_util::sync::CancellationToken;

/// The sample epic with a fourth story, in a git repository, committing per story.
fn four_stories(delay: Duration) -> Fixture {
    let f = Fixture::new(Scenario {
        delay,
        ..Scenario::default()
    });
    let sprint = f.file("_bmad-output/implementation-artifacts/sprint-status.yaml");
    let text = std::fs::read_to_string(&sprint).unwrap().replace(
        "  1-3-password-reset: backlog\n",
        "  1-3-password-reset: backlog\n  1-4-session-timeout: backlog\n",
    );
    std::fs::write(&sprint, text).unwrap();
    f.config("[autopilot.git]\ncommit = true\n");
    f.git_init();
    f
}

/// One epic run: wall time and the model requests it made.
async fn one(delay: Duration, parallel: u32) -> (Duration, u64) {
    let f = four_stories(delay);
    let t = Instant::now();
    let report = execute_parallel(
        &f.store,
        &f.project,
        Command::Run {
            epic: "epic-1".into(),
            max_stories: None,
        },
        EpicSettings {
            source: ModelSource::Live(&f.model),
            record: None,
            ask: None,
            on_event: None,
            cancel: CancellationToken::new(),
            dry_run: false,
            budget: Default::default(),
        },
        (parallel > 1).then_some(parallel),
    )
    .await
    .unwrap();
    let wall = t.elapsed();
    assert_eq!(
        report.outcome,
        EpicOutcome::Done { epic_done: true },
        "{report:?}"
    );
    assert_eq!(report.stories_completed.len(), 4, "{report:?}");
    (wall, f.player.requests())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "figures for docs/BENCHMARKS.md"]
async fn wall_time_of_four_stories_by_parallelism() {
    let delay = Duration::from_millis(env_u64("EPIC_FIGURES_DELAY_MS", 500));
    let rounds = env_u64("EPIC_FIGURES_ROUNDS", 3);
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "delay {delay:?} per model answer, {rounds} rounds, load at start {}",
        load().trim()
    );
    let mut baseline = None;
    for parallel in [1u32, 2, 4] {
        let mut walls = Vec::new();
        let mut requests = 0;
        // Alternate nothing: each setting's rounds run back to back; medians reported.
        for _ in 0..rounds {
            let (wall, n) = one(delay, parallel).await;
            walls.push(wall);
            requests = n;
        }
        let m = median(walls.clone());
        let base = *baseline.get_or_insert(m);
        println!(
            "--parallel {parallel}: median {m:.1?} (rounds {walls:.1?}), {requests} requests ({:.1?} of model time), ratio to --parallel 1 {:.2}",
            delay * requests as u32,
            m.as_secs_f64() / base.as_secs_f64()
        );
    }
    // Baton's own time: the same epic with a model that answers at once.
    for parallel in [1u32, 4] {
        let mut walls = Vec::new();
        for _ in 0..rounds {
            walls.push(one(Duration::ZERO, parallel).await.0);
        }
        let m = median(walls);
        println!(
            "no model delay, --parallel {parallel}: median {m:.2?} for 4 stories, {:.2?} per story",
            m / 4
        );
    }
    println!("load at end {}", load().trim());
}
