//! The bundled phase package, `bmad-phase4` (in `examples/packages/bmad-phase4/`): the default
//! workflow of every phase. It is compiled into the binary and written once into the store
//! (`$BATON_HOME/bundled/<name>-<hash>/`), so the autopilot works without any install step.

use super::error::{EpicError, Result};
use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};

pub const NAME: &str = "bmad-phase4";

/// Every file of the package: (path in the package, bytes).
pub const FILES: &[(&str, &[u8])] = &[
    (
        "agents.json",
        include_bytes!("../../../../examples/packages/bmad-phase4/agents.json"),
    ),
    (
        "assets/review-guide.md",
        include_bytes!("../../../../examples/packages/bmad-phase4/assets/review-guide.md"),
    ),
    (
        "assets/story-checklist.md",
        include_bytes!("../../../../examples/packages/bmad-phase4/assets/story-checklist.md"),
    ),
    (
        "assets/story-template.md",
        include_bytes!("../../../../examples/packages/bmad-phase4/assets/story-template.md"),
    ),
    (
        "bmad.json",
        include_bytes!("../../../../examples/packages/bmad-phase4/bmad.json"),
    ),
    (
        "workflows/code-review/steps/cr-01-review.md",
        include_bytes!(
            "../../../../examples/packages/bmad-phase4/workflows/code-review/steps/cr-01-review.md"
        ),
    ),
    (
        "workflows/code-review/steps/end-99.md",
        include_bytes!(
            "../../../../examples/packages/bmad-phase4/workflows/code-review/steps/end-99.md"
        ),
    ),
    (
        "workflows/code-review/workflow.graph.json",
        include_bytes!(
            "../../../../examples/packages/bmad-phase4/workflows/code-review/workflow.graph.json"
        ),
    ),
    (
        "workflows/code-review/workflow.md",
        include_bytes!(
            "../../../../examples/packages/bmad-phase4/workflows/code-review/workflow.md"
        ),
    ),
    (
        "workflows/create-story/steps/cs-01-draft.md",
        include_bytes!(
            "../../../../examples/packages/bmad-phase4/workflows/create-story/steps/cs-01-draft.md"
        ),
    ),
    (
        "workflows/create-story/steps/end-99.md",
        include_bytes!(
            "../../../../examples/packages/bmad-phase4/workflows/create-story/steps/end-99.md"
        ),
    ),
    (
        "workflows/create-story/workflow.graph.json",
        include_bytes!(
            "../../../../examples/packages/bmad-phase4/workflows/create-story/workflow.graph.json"
        ),
    ),
    (
        "workflows/create-story/workflow.md",
        include_bytes!(
            "../../../../examples/packages/bmad-phase4/workflows/create-story/workflow.md"
        ),
    ),
    (
        "workflows/dev-story/steps/ds-01-implement.md",
        include_bytes!(
            "../../../../examples/packages/bmad-phase4/workflows/dev-story/steps/ds-01-implement.md"
        ),
    ),
    (
        "workflows/dev-story/steps/end-99.md",
        include_bytes!(
            "../../../../examples/packages/bmad-phase4/workflows/dev-story/steps/end-99.md"
        ),
    ),
    (
        "workflows/dev-story/workflow.graph.json",
        include_bytes!(
            "../../../../examples/packages/bmad-phase4/workflows/dev-story/workflow.graph.json"
        ),
    ),
    (
        "workflows/dev-story/workflow.md",
        include_bytes!("../../../../examples/packages/bmad-phase4/workflows/dev-story/workflow.md"),
    ),
    (
        "workflows/revision/steps/end-99.md",
        include_bytes!(
            "../../../../examples/packages/bmad-phase4/workflows/revision/steps/end-99.md"
        ),
    ),
    (
        "workflows/revision/steps/rv-01-reread.md",
        include_bytes!(
            "../../../../examples/packages/bmad-phase4/workflows/revision/steps/rv-01-reread.md"
        ),
    ),
    (
        "workflows/revision/workflow.graph.json",
        include_bytes!(
            "../../../../examples/packages/bmad-phase4/workflows/revision/workflow.graph.json"
        ),
    ),
    (
        "workflows/revision/workflow.md",
        include_bytes!("../../../../examples/packages/bmad-phase4/workflows/revision/workflow.md"),
    ),
    (
        "workflows/validate-story/steps/end-99.md",
        include_bytes!(
            "../../../../examples/packages/bmad-phase4/workflows/validate-story/steps/end-99.md"
        ),
    ),
    (
        "workflows/validate-story/steps/vs-01-check.md",
        include_bytes!(
            "../../../../examples/packages/bmad-phase4/workflows/validate-story/steps/vs-01-check.md"
        ),
    ),
    (
        "workflows/validate-story/workflow.graph.json",
        include_bytes!(
            "../../../../examples/packages/bmad-phase4/workflows/validate-story/workflow.graph.json"
        ),
    ),
    (
        "workflows/validate-story/workflow.md",
        include_bytes!(
            "../../../../examples/packages/bmad-phase4/workflows/validate-story/workflow.md"
        ),
    ),
];

fn digest() -> String {
    let mut h = Sha256::new();
    for (name, bytes) in FILES {
        h.update(name.as_bytes());
        h.update([0]);
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    }
    h.finalize()
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Writes the package into `home/bundled/` unless it is there already; returns its directory.
pub fn materialize(home: &Path) -> Result<PathBuf> {
    let root = home.join("bundled");
    let dir = root.join(format!("{NAME}-{}", digest()));
    if dir.join("bmad.json").is_file() {
        return Ok(dir);
    }
    fs::create_dir_all(&root).map_err(EpicError::io("create", &root))?;
    let staging = baton_store::durable::temp_sibling(&dir);
    let written = (|| -> Result<()> {
        for (name, bytes) in FILES {
            let path = staging.join(name);
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent).map_err(EpicError::io("create", parent))?;
            }
            fs::write(&path, bytes).map_err(EpicError::io("write", &path))?;
        }
        Ok(())
    })();
    if let Err(e) = written {
        let _ = fs::remove_dir_all(&staging);
        return Err(e);
    }
    // Another process may have placed the same content first: theirs is as good.
    if fs::rename(&staging, &dir).is_err() {
        let _ = fs::remove_dir_all(&staging);
        if !dir.join("bmad.json").is_file() {
            return Err(EpicError::failure(
                "EPIC_IO_FAILED",
                format!("cannot place the bundled package in {}", root.display()),
            ));
        }
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of the example package is compiled in, and nothing else.
    #[test]
    fn the_embedded_list_matches_the_package_directory() {
        let root =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/packages/bmad-phase4");
        let mut on_disk = Vec::new();
        let mut stack = vec![root.clone()];
        while let Some(d) = stack.pop() {
            for e in fs::read_dir(&d).unwrap().flatten() {
                if e.path().is_dir() {
                    stack.push(e.path());
                } else {
                    on_disk.push(
                        e.path()
                            .strip_prefix(&root)
                            .unwrap()
                            .to_string_lossy()
                            .into_owned(),
                    );
                }
            }
        }
        on_disk.sort();
        let embedded: Vec<String> = FILES.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(embedded, on_disk);
    }

    #[test]
    fn materializes_once_and_validates() {
        let home = tempfile::tempdir().unwrap();
        let a = materialize(home.path()).unwrap();
        let b = materialize(home.path()).unwrap();
        assert_eq!(a, b);
        let report = baton_package::validate_path(&a, &Default::default());
        assert!(report.ok(), "{:?}", report.diagnostics);
    }
}
