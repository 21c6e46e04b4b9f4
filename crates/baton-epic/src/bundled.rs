//! The bundled phase package, `bmad-phase4` (in `examples/packages/bmad-phase4/`): the default
//! workflow of every phase. It is compiled into the binary and written once into the store
//! (`$BATON_HOME/bundled/<name>-<hash>/`), so the autopilot works without any install step.

use super::error::{EpicError, Result};
use baton_autopilot::bundle::{Bundle, BundleError};
use baton_autopilot::embed;
use std::path::{Path, PathBuf};

pub const NAME: &str = "bmad-phase4";

/// Every file of the package: (path in the package, bytes).
pub const FILES: &[(&str, &[u8])] = embed!(
    "../../../examples/packages/bmad-phase4/";
    "agents.json",
    "assets/review-guide.md",
    "assets/story-checklist.md",
    "assets/story-template.md",
    "bmad.json",
    "workflows/code-review/steps/cr-01-review.md",
    "workflows/code-review/steps/end-99.md",
    "workflows/code-review/workflow.graph.json",
    "workflows/code-review/workflow.md",
    "workflows/create-story/steps/cs-01-draft.md",
    "workflows/create-story/steps/end-99.md",
    "workflows/create-story/workflow.graph.json",
    "workflows/create-story/workflow.md",
    "workflows/dev-story/steps/ds-01-implement.md",
    "workflows/dev-story/steps/end-99.md",
    "workflows/dev-story/workflow.graph.json",
    "workflows/dev-story/workflow.md",
    "workflows/revision/steps/end-99.md",
    "workflows/revision/steps/rv-01-reread.md",
    "workflows/revision/workflow.graph.json",
    "workflows/revision/workflow.md",
    "workflows/validate-story/steps/end-99.md",
    "workflows/validate-story/steps/vs-01-check.md",
    "workflows/validate-story/workflow.graph.json",
    "workflows/validate-story/workflow.md",
);

const BUNDLE: Bundle = Bundle {
    name: NAME,
    files: FILES,
};

/// Writes the package into `home/bundled/` unless an intact copy is there (a damaged one is
/// replaced); returns its directory.
pub fn materialize(home: &Path) -> Result<PathBuf> {
    BUNDLE.materialize(home).map_err(|e| match e {
        BundleError::Create { path, source } => EpicError::io("create", &path)(source),
        BundleError::Store(e) => e.into(),
        BundleError::Unavailable { root } => EpicError::failure(
            "EPIC_IO_FAILED",
            format!("cannot place the bundled package in {}", root.display()),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of the example package is compiled in, and nothing else.
    #[test]
    fn the_embedded_list_matches_the_package_directory() {
        let root =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/packages/bmad-phase4");
        let embedded: Vec<String> = FILES.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(embedded, baton_testkit::files_on_disk(&root));
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

    /// A copy a person edited or a crash cut short is not used: the autopilot would run a
    /// package other than the one it names.
    #[test]
    fn a_damaged_copy_is_replaced() {
        let home = tempfile::tempdir().unwrap();
        let dir = materialize(home.path()).unwrap();
        let step = dir.join("workflows/dev-story/steps/ds-01-implement.md");
        std::fs::write(&step, "damaged").unwrap();
        std::fs::remove_file(dir.join("agents.json")).unwrap();
        assert_eq!(materialize(home.path()).unwrap(), dir);
        assert!(BUNDLE.intact(&dir));
    }
}
