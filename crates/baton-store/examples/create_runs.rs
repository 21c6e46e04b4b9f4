//! Times run creation and a run's metadata changes in a project that already has runs, for the
//! benchmarks (bench/runs_index.sh). Uses only `create_run`, `set_phase` and `update_run`, so
//! the same file builds against earlier versions of the store.
//!
//! `create_runs HOME PROJECT N`: creates N runs, then takes each through a typical life
//! (running, two node changes, a question, running again, completed). Prints the median and
//! p95 creation time, and the bytes written per creation and per life as the kernel counts
//! them (`wchar` of /proc/self/io: bytes handed to write(2), every file included).

use baton_package::Package;
use baton_store::{NewRun, Phase, Store};
use serde_json::json;
use std::path::PathBuf;
use std::time::Instant;

fn written() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|io| {
            io.lines().find_map(|l| {
                l.strip_prefix("wchar: ")
                    .and_then(|v| v.trim().parse().ok())
            })
        })
        .unwrap_or(0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [home, root, n] = args.as_slice() else {
        return Err("usage: create_runs HOME PROJECT N".into());
    };
    let n: usize = n.parse()?;
    let store = Store::new(PathBuf::from(home));
    let installed = store.packages().list()?.remove(0);
    let package = Package::load(&installed.path).map_err(|e| e.to_string())?;
    let project = store.project(&PathBuf::from(root))?;

    let mut times = Vec::with_capacity(n);
    let mut ids = Vec::with_capacity(n);
    let before = written();
    for _ in 0..n {
        let started = Instant::now();
        let run = project.create_run(NewRun {
            package: &package,
            installed: &installed,
            workflow_ref: None,
            agent_id: "sm",
        })?;
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        ids.push(run.run_id);
    }
    let per_creation = (written() - before) / n as u64;

    let before = written();
    let started = Instant::now();
    for id in &ids {
        project.set_phase(id, Phase::Running, None)?;
        for node in ["step-02-discover-inputs", "step-03-extract-context"] {
            project.update_run(id, |r| r.current_node_id = Some(node.into()))?;
        }
        project.set_phase(
            id,
            Phase::WaitingUser,
            Some(json!({"question": "Which story?"})),
        )?;
        project.set_phase(id, Phase::Running, None)?;
        project.set_phase(id, Phase::Completed, None)?;
    }
    let life_ms = started.elapsed().as_secs_f64() * 1000.0 / n as f64;
    let per_life = (written() - before) / n as u64;

    times.sort_by(f64::total_cmp);
    let median = times[n / 2];
    let p95 = times[(n * 95 / 100).min(n - 1)];
    let max = times[n - 1];
    println!(
        "{{\"creations\": {n}, \"createMedianMs\": {median:.2}, \"createP95Ms\": {p95:.2}, \"createMaxMs\": {max:.2}, \"bytesPerCreation\": {per_creation}, \"lifeMs\": {life_ms:.2}, \"bytesPerLife\": {per_life}}}"
    );
    Ok(())
}
