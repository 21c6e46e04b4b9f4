//! What a tick of a lifecycle session costs on a disk: the device flushes (fsyncs; fsyncs
//! made in parallel count once) the store makes it wait for, counted while the recorded
//! session of `baton demo session` replays. Each flush costs 0.2 ms to several ms depending on
//! the disk's load, so their number, not a time, is what is bounded here. What is fsynced and
//! why: docs/RELIABILITY.md ("What is fsynced, and why"). The project files the tools write are
//! fsynced by the tools, outside this count.

use baton_lifecycle::ralph::Context;
use baton_lifecycle::session::run::{RunSettings, SessionEnd, Tick, run};
use baton_lifecycle::session::start::{self, StartOptions, StartOutcome};
use baton_lifecycle::session::step_run::ModelSource;
use baton_llm::{ReplayModel, Trace};
use baton_store::Store;
use baton_store::durable::flushes_on_this_thread;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[tokio::test]
async fn a_step_tick_waits_for_11_store_flushes_and_a_gate_tick_for_2() {
    let traces = repo().join("examples/traces/session-demo");
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("csvsum");
    baton_testkit::copy_dir(&repo().join("examples/projects/csvsum"), &project);
    let store = Store::new(tmp.path().join("baton-home"));
    let ctx = Context {
        project: project.clone(),
        home: None,
        maestro_home: None,
        cli: "baton ralph".into(),
        owner: "baton-demo".into(),
        lock_timeout: Duration::from_secs(5),
        bundled_commands: None,
        warnings: Default::default(),
    }
    .with_bundled_skills(store.home())
    .unwrap();
    let options = StartOptions {
        intent: "phase 1: add a --header flag that skips the first line".into(),
        quality: Some(baton_lifecycle::session::infer::QualityMode::Quick),
        auto: true,
        answers: BTreeMap::new(),
        platform: None,
    };
    let start_model = ReplayModel::new(Trace::load(&traces.join("start.trace.json")).unwrap());
    let created = start::start(&ctx, &options, &start_model, &CancellationToken::new())
        .await
        .unwrap();
    assert!(matches!(created, StartOutcome::Created(_)), "{created:?}");

    // The session runs on this thread (a current-thread runtime), so the count is its own.
    let mut ticks: Vec<(String, u64)> = Vec::new();
    let mut last = flushes_on_this_thread();
    let mut after = |t: &Tick| {
        let now = flushes_on_this_thread();
        let kind = match t {
            Tick::Step { .. } => "step".to_string(),
            Tick::Gate { gate, .. } => format!("gate {gate}"),
            other => format!("{other:?}"),
        };
        ticks.push((kind, now - last));
        last = now;
    };
    let mut settings = RunSettings::new("baton-demo", &store, ModelSource::Replay(&traces));
    settings.after_tick = Some(&mut after);
    let report = run(&ctx, None, settings).await.unwrap();
    assert_eq!(report.end, SessionEnd::Completed);
    eprintln!("store flushes per tick: {ticks:?}");
    let steps: Vec<u64> = ticks
        .iter()
        .filter(|(k, _)| k == "step")
        .map(|(_, n)| *n)
        .collect();
    assert_eq!(steps.len(), 11, "{ticks:?}");
    // The project's first run also writes the store's record of the project and its first
    // index (6 more).
    assert!(steps[0] <= 17, "{ticks:?}");
    // A step: its claim with its filled args (status.json, 2), the task run's creation (3),
    // its first turn's records before the second call (1), its end (3: run.json's temp file
    // with both logs, the rename, the index record), the verdict (status.json, 2). The args
    // written on their own, and every audit line, conversation record, `running` and the
    // link fsynced on their own, made it 24.
    assert!(steps[1..].iter().all(|n| *n <= 11), "{ticks:?}");
    // A gate: the decision line with status.json's temp file, then the rename (2; it was 3).
    for (kind, n) in ticks.iter().filter(|(k, _)| k.starts_with("gate")) {
        assert!(*n <= 2, "{kind}: {n} flushes; {ticks:?}");
    }
}
