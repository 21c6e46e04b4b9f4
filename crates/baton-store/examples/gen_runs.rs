//! Fills a project with COUNT runs, for the benchmarks (bench/runs_index.sh).
//!
//! `gen_runs HOME PROJECT COUNT [--legacy]`
//!
//! One run is created through the library; the others are copies of its directory with their
//! own UUID v7 (one minute apart), a spread of phases and nodes, and a question on every fifth.
//! The index is then rebuilt from the directories with `reindex` (its time is printed). With
//! `--legacy` the layout is the one of earlier versions: no `run.json`, no journal, and a
//! `runsIndex.json` written in creation order, for measuring the previous implementation.

use baton_package::Package;
use baton_store::{NewRun, Phase, RunMetadata, Store};
use serde_json::json;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (home, root, count) = match args.as_slice() {
        [home, root, count, ..] => (PathBuf::from(home), PathBuf::from(root), count.parse()?),
        _ => return Err("usage: gen_runs HOME PROJECT COUNT [--legacy]".into()),
    };
    let legacy = args.iter().any(|a| a == "--legacy");
    generate(&home, &root, count, legacy)
}

fn generate(
    home: &Path,
    root: &Path,
    count: usize,
    legacy: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    fs::create_dir_all(root)?;
    let store = Store::new(home);
    let package_dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/packages/create-story-micro");
    let package = Package::load(&package_dir).map_err(|e| e.to_string())?;
    let installed = store.packages().install(&package, "bench")?.package;
    let project = store.project(root)?;
    let template = project.create_run(NewRun {
        package: &package,
        installed: &installed,
        workflow_ref: None,
        agent_id: "sm",
    })?;
    let template_paths = project.run_paths(&template.run_id);
    let state = fs::read_to_string(&template_paths.state_file)?;

    let phases = [
        Phase::Idle,
        Phase::Running,
        Phase::WaitingUser,
        Phase::Completed,
        Phase::Failed,
    ];
    let nodes = [
        "step-01-select-story",
        "step-02-discover-inputs",
        "step-03-extract-context",
        "end-99",
    ];
    // A minute apart, ending now, so the newest are the most recent.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as u64;
    let mut runs = Vec::with_capacity(count);
    runs.push(template.clone());
    for i in 1..count {
        let ms = now_ms - (count - i) as u64 * 60_000;
        let mut random = [0u8; 10];
        random[..8].copy_from_slice(&(i as u64).to_le_bytes());
        let id = uuid::Builder::from_unix_timestamp_millis(ms, &random)
            .into_uuid()
            .to_string();
        let created = baton_store::time::rfc3339(ms / 1000);
        let phase = phases[i % phases.len()];
        let run = RunMetadata {
            run_id: id.clone(),
            created_at: created.clone(),
            last_updated_at: created,
            phase,
            current_node_id: Some(nodes[i % nodes.len()].to_string()),
            waiting_for: (phase == Phase::WaitingUser)
                .then(|| json!({"question": format!("Which story should run {i} prepare next?"), "nodeId": nodes[i % nodes.len()], "reason": "assistant_no_toolCalls_and_not_complete"})),
            ..template.clone()
        };
        let paths = project.run_paths(&id);
        fs::create_dir_all(paths.execution_log.parent().ok_or("no logs dir")?)?;
        fs::write(&paths.state_file, state.replace(&template.run_id, &id))?;
        fs::write(&paths.execution_log, b"")?;
        if !legacy {
            fs::write(paths.metadata_file(), serde_json::to_vec(&run)?)?;
        }
        runs.push(run);
    }
    if legacy {
        let _ = fs::remove_file(template_paths.metadata_file());
        let _ = fs::remove_file(project.dir.join("runsIndex.journal.jsonl"));
        runs.sort_by(|a, b| {
            a.created_at
                .cmp(&b.created_at)
                .then(a.run_id.cmp(&b.run_id))
        });
        let lines: Vec<String> = runs
            .iter()
            .map(serde_json::to_string)
            .collect::<Result<_, _>>()?;
        fs::write(
            project.dir.join("runsIndex.json"),
            format!("[\n{}\n]\n", lines.join(",\n")),
        )?;
        println!("wrote {count} runs in the previous layout");
        return Ok(());
    }
    let started = Instant::now();
    let (report, _) = project.reindex()?;
    println!(
        "wrote {count} runs; reindex from the run directories: {} runs in {:.0} ms",
        report.runs,
        started.elapsed().as_secs_f64() * 1000.0
    );
    Ok(())
}
