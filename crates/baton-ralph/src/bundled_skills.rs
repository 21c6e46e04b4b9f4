//! The bundled lifecycle skills (`examples/skills/lifecycle/`): one command file per skill the
//! stage table and the fix-loop templates of [`super::chain`] can name, and the guide they all
//! read. They are compiled into the binary and written once under baton's home
//! (`$BATON_HOME/bundled/lifecycle-skills-<hash>/`), so a session's `command_path` is a real
//! file without any install step. A new version gets a new directory: sessions made with an
//! older binary keep pointing at the files they were built from.
//!
//! They are the last place a skill is looked up ([`super::skills::scan`]): the project's
//! commands, then the user's global ones, then these.

use super::error::{RalphError, Result};
use baton_autopilot::bundle::{Bundle, BundleError};
use baton_autopilot::embed;
use std::path::{Path, PathBuf};

/// `command_scope` of a step whose command file is bundled.
pub const SCOPE: &str = "bundled";

/// Every file: (path below the bundle, bytes).
pub const FILES: &[(&str, &[u8])] = embed!(
    "../../../examples/skills/lifecycle/";
    "commands/maestro-analyze.md",
    "commands/maestro-blueprint.md",
    "commands/maestro-brainstorm.md",
    "commands/maestro-execute.md",
    "commands/maestro-init.md",
    "commands/maestro-milestone-audit.md",
    "commands/maestro-milestone-complete.md",
    "commands/maestro-plan.md",
    "commands/maestro-roadmap.md",
    "commands/maestro-verify.md",
    "commands/quality-auto-test.md",
    "commands/quality-debug.md",
    "commands/quality-review.md",
    "commands/quality-test.md",
    "guide/session-step.md",
);

const BUNDLE: Bundle = Bundle {
    name: "lifecycle-skills",
    files: FILES,
};

/// The command files' folder inside a materialized bundle.
pub const COMMANDS: &str = "commands";

/// Writes the bundle into `home/bundled/` unless an intact copy is there; returns its
/// command folder.
pub fn materialize(home: &Path) -> Result<PathBuf> {
    let dir = BUNDLE.materialize(home).map_err(|e| match e {
        BundleError::Create { path, source } => RalphError::io("create", path)(source),
        BundleError::Store(e) => e.into(),
        BundleError::Unavailable { root } => RalphError::usage(
            "BUNDLED_SKILLS_UNAVAILABLE",
            format!("cannot place the bundled skills in {}", root.display()),
        ),
    })?;
    Ok(dir.join(COMMANDS))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of `examples/skills/lifecycle/` is compiled in, and nothing else.
    #[test]
    fn the_embedded_list_matches_the_directory() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/skills/lifecycle");
        let embedded: Vec<String> = FILES.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(embedded, baton_testkit::files_on_disk(&root));
    }

    #[test]
    fn materializes_the_command_folder() {
        let home = tempfile::tempdir().unwrap();
        let commands = materialize(home.path()).unwrap();
        assert!(commands.join("maestro-verify.md").is_file());
        assert!(BUNDLE.intact(commands.parent().unwrap()));
        assert_eq!(materialize(home.path()).unwrap(), commands);
    }
}
