//! What the epic autopilot costs per phase when the model costs nothing: the demo epic (epic 2
//! of the Taskboard sample, 13 phase runs) replayed in process, `RUNS` times on fresh copies.
//! Each phase run is split into the engine's part (from the moment the run is claimed to its
//! end: model turns, tools, state writes) and the orchestrator's (everything else: reading and
//! checking the files, validating and creating the run, editing sprint-status.yaml, the state
//! and progress writes). Usage: `cargo run --release -p baton-epic --example epic_overhead
//! [RUNS]`; run from the repository root (the files live under target/, so fsyncs are real).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_epic::{Command, EpicEvent, EpicOutcome, EpicSettings, ModelSource, execute};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20);
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let traces = repo.join("examples/traces/epic-demo");
    std::fs::create_dir_all(repo.join("target")).expect("target/ exists");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let (mut totals, mut engines, mut phases_seen) = (Vec::new(), Vec::new(), 0);
    for i in 0..=runs {
        let tmp = tempfile::tempdir_in(repo.join("target")).expect("a temp dir");
        let project = tmp.path().join("project");
        baton_testkit::copy_dir(&repo.join("examples/projects/taskboard-epic"), &project);
        let store = baton_store::Store::new(tmp.path().join("home"));
        let spans: Mutex<(Option<Instant>, Duration, usize)> =
            Mutex::new((None, Duration::ZERO, 0));
        let on_event = |e: EpicEvent| {
            let mut s = spans.lock().expect("spans");
            match e {
                EpicEvent::Phase { .. } => s.0 = Some(Instant::now()),
                EpicEvent::PhaseEnded { .. } => {
                    if let Some(t) = s.0.take() {
                        s.1 += t.elapsed();
                        s.2 += 1;
                    }
                }
                _ => {}
            }
        };
        let started = Instant::now();
        let report = runtime
            .block_on(execute(
                &store,
                &project,
                Command::Run {
                    epic: "epic-2".into(),
                    max_stories: None,
                },
                EpicSettings {
                    source: ModelSource::Replay(traces.clone()),
                    record: None,
                    ask: None,
                    on_event: Some(&on_event),
                    cancel: Default::default(),
                    dry_run: false,
                    budget: Default::default(),
                },
            ))
            .expect("the demo epic replays");
        let total = started.elapsed();
        assert_eq!(report.outcome, EpicOutcome::Done { epic_done: true });
        let (_, engine, phases) = *spans.lock().expect("spans");
        if i == 0 {
            continue; // warm-up: the bundled package is written into the store once
        }
        phases_seen = phases;
        totals.push(total.as_secs_f64() * 1000.0 / phases as f64);
        engines.push(engine.as_secs_f64() * 1000.0 / phases as f64);
    }
    let orchestrator: Vec<f64> = totals.iter().zip(&engines).map(|(t, e)| t - e).collect();
    println!(
        "demo epic replayed {runs} times, {phases_seen} phase runs each (medians per phase run)"
    );
    println!("  everything but the model  {:>7.2} ms", median(totals));
    println!("  engine (claimed run → end) {:>6.2} ms", median(engines));
    println!(
        "  orchestrator               {:>6.2} ms",
        median(orchestrator)
    );
}
