//! The bundled demo: the create-story-micro package, the taskboard sample project and a
//! recorded model of one run, inside the binary, so `baton demo` and `baton serve`'s demo run
//! anywhere, offline, without a key.

use std::fs;
use std::path::Path;

/// The create-story-micro package: (relative path, bytes).
pub const PACKAGE: &[(&str, &[u8])] = &[
    (
        "agents.json",
        include_bytes!("../../../examples/packages/create-story-micro/agents.json"),
    ),
    (
        "assets/story-template.md",
        include_bytes!("../../../examples/packages/create-story-micro/assets/story-template.md"),
    ),
    (
        "bmad.json",
        include_bytes!("../../../examples/packages/create-story-micro/bmad.json"),
    ),
    (
        "steps/end-99.md",
        include_bytes!("../../../examples/packages/create-story-micro/steps/end-99.md"),
    ),
    (
        "steps/step-01-select-story.md",
        include_bytes!(
            "../../../examples/packages/create-story-micro/steps/step-01-select-story.md"
        ),
    ),
    (
        "steps/step-02-discover-inputs.md",
        include_bytes!(
            "../../../examples/packages/create-story-micro/steps/step-02-discover-inputs.md"
        ),
    ),
    (
        "steps/step-03-extract-context.md",
        include_bytes!(
            "../../../examples/packages/create-story-micro/steps/step-03-extract-context.md"
        ),
    ),
    (
        "steps/step-04-generate-story.md",
        include_bytes!(
            "../../../examples/packages/create-story-micro/steps/step-04-generate-story.md"
        ),
    ),
    (
        "steps/step-05-update-sprint-status.md",
        include_bytes!(
            "../../../examples/packages/create-story-micro/steps/step-05-update-sprint-status.md"
        ),
    ),
    (
        "workflow.graph.json",
        include_bytes!("../../../examples/packages/create-story-micro/workflow.graph.json"),
    ),
    (
        "workflow.md",
        include_bytes!("../../../examples/packages/create-story-micro/workflow.md"),
    ),
];

/// The taskboard sample project.
pub const PROJECT: &[(&str, &[u8])] = &[
    (
        "README.md",
        include_bytes!("../../../examples/projects/taskboard/README.md"),
    ),
    (
        "artifacts/PRD.md",
        include_bytes!("../../../examples/projects/taskboard/artifacts/PRD.md"),
    ),
    (
        "artifacts/architecture.md",
        include_bytes!("../../../examples/projects/taskboard/artifacts/architecture.md"),
    ),
    (
        "artifacts/epics.md",
        include_bytes!("../../../examples/projects/taskboard/artifacts/epics.md"),
    ),
    (
        "artifacts/ux.md",
        include_bytes!("../../../examples/projects/taskboard/artifacts/ux.md"),
    ),
    (
        "project-context.md",
        include_bytes!("../../../examples/projects/taskboard/project-context.md"),
    ),
];

/// The recorded model of one create-story-micro run (its user input included).
pub const TRACE: &str = include_str!("../../../examples/traces/create-story-micro.trace.json");
/// How a run replaying [`TRACE`] remembers it (see `model_choice`).
pub const TRACE_SOURCE: &str = "bundled:create-story-micro";

/// Writes `files` under `root`, creating the directories they need.
pub fn write_files(root: &Path, files: &[(&str, &[u8])]) -> std::io::Result<()> {
    for (rel, bytes) in files {
        let path = root.join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(path, bytes)?;
    }
    Ok(())
}
