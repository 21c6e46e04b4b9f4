//! Figures for docs/BENCHMARKS.md, not a check (ignored by default): the wall time of an epic
//! of four independent stories with `--parallel 1`, `2` and `4`, the played model answering
//! after a fixed delay, and baton's own time per story with a model that answers at once.
//!
//! `cargo test --release -p baton-epic --test epic epic_parallel_figures:: -- --ignored --nocapture`
//! (`EPIC_FIGURES_DELAY_MS`, default 500; `EPIC_FIGURES_ROUNDS`, default 3).
//!
//! `three_stories_alternating` (run by `bench/epic_parallel.sh`): the sample epic's three
//! independent stories, sequential and `--parallel 3` in alternating pairs
//! (`EPIC_FIGURES_PAIRS`, default 2), medians and their ratio, with the CPU time baton's
//! process and its children used (its own share, less noisy than wall time on a shared
//! machine) and a timeline of the last parallel run's events.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::support;

use baton_epic::{Command, EpicEvent, EpicOutcome, EpicSettings, ModelSource, execute_parallel};
use std::sync::Mutex;
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

/// CPU time (user + system) of this process and its waited-for children, from /proc.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command's closing parenthesis: utime is the 14th field overall.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // rest[0] is the state (field 3), so field n is f[n - 3].
    let ticks: u64 = [14, 15, 16, 17]
        .iter()
        .map(|n| f.get(n - 3).copied().unwrap_or(0))
        .sum();
    Duration::from_millis(ticks * 10)
}

/// One run of the sample epic's three stories: wall time, CPU time, requests, and the events
/// with the time they came (story and merge events only).
async fn three(
    delay: Duration,
    parallel: u32,
) -> (Duration, Duration, u64, Vec<(Duration, String)>) {
    let f = Fixture::new(Scenario {
        delay,
        ..Scenario::default()
    });
    f.config("[autopilot.git]\ncommit = true\n");
    f.git_init();
    let events: Mutex<Vec<(Duration, String)>> = Mutex::new(Vec::new());
    let t = Instant::now();
    let on_event = |e: EpicEvent| {
        let line = match e {
            EpicEvent::PhaseEnded {
                story,
                phase,
                result,
                ..
            } => {
                format!("{story}: {} {result}", phase.as_str())
            }
            EpicEvent::Status { key, status } => format!("{key}: status {status}"),
            EpicEvent::Verify {
                command, millis, ..
            } => format!("verify {command} {millis} ms"),
            EpicEvent::Note(n) => format!("note: {n}"),
            _ => return,
        };
        events.lock().unwrap().push((t.elapsed(), line));
    };
    let cpu = cpu_time();
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
            on_event: Some(&on_event),
            cancel: CancellationToken::new(),
            dry_run: false,
            budget: Default::default(),
        },
        (parallel > 1).then_some(parallel),
    )
    .await
    .unwrap();
    let wall = t.elapsed();
    let cpu = cpu_time().saturating_sub(cpu);
    assert_eq!(
        report.outcome,
        EpicOutcome::Done { epic_done: true },
        "{report:?}"
    );
    assert_eq!(report.stories_completed.len(), 3, "{report:?}");
    (wall, cpu, f.player.requests(), events.into_inner().unwrap())
}

/// The median; of an even count, the mean of the two middle values.
fn median_of(mut v: Vec<Duration>) -> Duration {
    v.sort();
    let n = v.len();
    if n.is_multiple_of(2) {
        (v[n / 2 - 1] + v[n / 2]) / 2
    } else {
        v[n / 2]
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "figures for docs/BENCHMARKS.md (bench/epic_parallel.sh)"]
async fn three_stories_alternating() {
    let delay = Duration::from_millis(env_u64("EPIC_FIGURES_DELAY_MS", 500));
    let pairs = env_u64("EPIC_FIGURES_PAIRS", 2);
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "3 stories, model delay {delay:?} per answer, {pairs} alternating pairs, load at start {}",
        load().trim()
    );
    let (mut seq, mut par, mut seq_cpu, mut par_cpu) = (vec![], vec![], vec![], vec![]);
    let mut timeline = Vec::new();
    let mut requests = 0;
    for i in 0..pairs {
        let (w, c, n, _) = three(delay, 1).await;
        println!("pair {}: sequential {w:.2?} (cpu {c:.2?})", i + 1);
        seq.push(w);
        seq_cpu.push(c);
        let (w, c, m, ev) = three(delay, 3).await;
        println!("pair {}: --parallel 3 {w:.2?} (cpu {c:.2?})", i + 1);
        assert_eq!(n, m, "both runs make the same requests");
        requests = n;
        par.push(w);
        par_cpu.push(c);
        timeline = ev;
    }
    let (s, p) = (median_of(seq), median_of(par));
    let model = delay * requests as u32;
    println!(
        "{requests} requests ({model:.1?} of model time sequentially, {:.1?} per story)",
        model / 3
    );
    println!(
        "median sequential {s:.2?}, median --parallel 3 {p:.2?}: ratio {:.3} (ideal {:.3}: a third of the model's time)",
        p.as_secs_f64() / s.as_secs_f64(),
        (model / 3).as_secs_f64() / s.as_secs_f64()
    );
    println!(
        "cpu time (baton, git and the played model's threads): median sequential {:.2?}, parallel {:.2?}",
        median_of(seq_cpu),
        median_of(par_cpu)
    );
    println!("timeline of the last --parallel 3 run:");
    for (at, line) in timeline {
        println!("  {:>8.3} s  {line}", at.as_secs_f64());
    }
    println!("load at end {}", load().trim());
}
