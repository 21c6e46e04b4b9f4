//! `baton demo`: the bundled create-story example on a copy of the sample project, replayed
//! from the bundled trace. Everything it needs is inside the binary, so it works anywhere,
//! offline, without a key.

use crate::cli::DemoArgs;
use crate::exit;
use crate::progress::Progress;
use baton_engine::runner::{self, Settings, StartRun};
use baton_engine::{EngineEvent, Outcome};
use baton_llm::{ReplayModel, Trace};
use baton_store::Store;
use std::fs;
use std::path::Path;

const PACKAGE: &[(&str, &[u8])] = &[
    (
        "agents.json",
        include_bytes!("../../../../examples/packages/create-story-micro/agents.json"),
    ),
    (
        "assets/story-template.md",
        include_bytes!("../../../../examples/packages/create-story-micro/assets/story-template.md"),
    ),
    (
        "bmad.json",
        include_bytes!("../../../../examples/packages/create-story-micro/bmad.json"),
    ),
    (
        "steps/end-99.md",
        include_bytes!("../../../../examples/packages/create-story-micro/steps/end-99.md"),
    ),
    (
        "steps/step-01-select-story.md",
        include_bytes!(
            "../../../../examples/packages/create-story-micro/steps/step-01-select-story.md"
        ),
    ),
    (
        "steps/step-02-discover-inputs.md",
        include_bytes!(
            "../../../../examples/packages/create-story-micro/steps/step-02-discover-inputs.md"
        ),
    ),
    (
        "steps/step-03-extract-context.md",
        include_bytes!(
            "../../../../examples/packages/create-story-micro/steps/step-03-extract-context.md"
        ),
    ),
    (
        "steps/step-04-generate-story.md",
        include_bytes!(
            "../../../../examples/packages/create-story-micro/steps/step-04-generate-story.md"
        ),
    ),
    (
        "steps/step-05-update-sprint-status.md",
        include_bytes!(
            "../../../../examples/packages/create-story-micro/steps/step-05-update-sprint-status.md"
        ),
    ),
    (
        "workflow.graph.json",
        include_bytes!("../../../../examples/packages/create-story-micro/workflow.graph.json"),
    ),
    (
        "workflow.md",
        include_bytes!("../../../../examples/packages/create-story-micro/workflow.md"),
    ),
];

const PROJECT: &[(&str, &[u8])] = &[
    (
        "README.md",
        include_bytes!("../../../../examples/projects/taskboard/README.md"),
    ),
    (
        "artifacts/PRD.md",
        include_bytes!("../../../../examples/projects/taskboard/artifacts/PRD.md"),
    ),
    (
        "artifacts/architecture.md",
        include_bytes!("../../../../examples/projects/taskboard/artifacts/architecture.md"),
    ),
    (
        "artifacts/epics.md",
        include_bytes!("../../../../examples/projects/taskboard/artifacts/epics.md"),
    ),
    (
        "artifacts/ux.md",
        include_bytes!("../../../../examples/projects/taskboard/artifacts/ux.md"),
    ),
    (
        "project-context.md",
        include_bytes!("../../../../examples/projects/taskboard/project-context.md"),
    ),
];

const TRACE: &str = include_str!("../../../../examples/traces/create-story-micro.trace.json");

/// Marks a directory as made by `baton demo`, so a second demo may replace it.
const MARKER: &str = ".baton-demo";

fn write_files(root: &Path, files: &[(&str, &[u8])]) -> std::io::Result<()> {
    for (rel, bytes) in files {
        let path = root.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(path, bytes)?;
    }
    Ok(())
}

pub fn run(args: DemoArgs) -> anyhow::Result<u8> {
    let dir = &args.dir;
    if dir.exists() {
        let empty = fs::read_dir(dir)?.next().is_none();
        if !empty && !dir.join(MARKER).exists() {
            eprintln!(
                "error: {} exists and was not made by `baton demo`; pass --dir to use another place",
                dir.display()
            );
            return Ok(exit::INVALID);
        }
        fs::remove_dir_all(dir)?;
    }
    write_files(dir, PROJECT)?;
    fs::write(dir.join(MARKER), "made by `baton demo`; safe to delete\n")?;
    let package_dir = tempfile_dir()?;
    write_files(package_dir.path(), PACKAGE)?;

    let store = Store::open_default()?;
    let replay = ReplayModel::new(Trace::parse(TRACE)?);
    let bar = Progress::new();
    let on_event = |e: EngineEvent| bar.event(e);
    let mut settings = Settings::new(&replay);
    settings.replay = Some(&replay);
    if !args.json {
        settings.on_event = Some(&on_event);
        eprintln!(
            "baton demo: create-story-micro on {} (replaying a recorded model, offline)",
            dir.display()
        );
    }
    let start = StartRun {
        package: package_dir.path(),
        project: dir,
        workflow: None,
        agent: None,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let finished = runtime.block_on(runner::start(&store, start, settings))?;
    bar.finish();
    if args.json {
        super::print_json(&finished.to_json())?;
    } else if let Outcome::Completed { message } = &finished.report.outcome {
        println!("\n{message}\n");
        println!("Artifacts written under {}:", dir.display());
        if let Some(a) = finished.state.get("artifacts").and_then(|a| a.as_array()) {
            for p in a.iter().filter_map(|p| p.as_str()) {
                println!("  {}", dir.join(p).display());
            }
        }
        println!(
            "\nInspect the run: baton runs show {}",
            &finished.run.run_id[..13]
        );
    }
    Ok(match finished.report.outcome {
        Outcome::Completed { .. } => exit::OK,
        Outcome::Waiting { .. } => super::run::WAITING,
        Outcome::Failed { .. } => exit::FAILURE,
    })
}

/// A private temporary directory for the unpacked package (removed on drop).
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn tempfile_dir() -> std::io::Result<TempDir> {
    let dir = std::env::temp_dir().join(format!("baton-demo-package-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)?;
    Ok(TempDir(dir))
}
