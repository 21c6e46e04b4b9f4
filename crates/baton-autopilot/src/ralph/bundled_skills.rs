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
use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};

/// `command_scope` of a step whose command file is bundled.
pub const SCOPE: &str = "bundled";

const NAME: &str = "lifecycle-skills";

macro_rules! embed {
    ($base:literal; $($rel:literal),* $(,)?) => {
        &[$(($rel, include_bytes!(concat!($base, $rel)) as &[u8])),*]
    };
}

/// Every file: (path below the bundle, bytes).
pub const FILES: &[(&str, &[u8])] = embed!(
    "../../../../examples/skills/lifecycle/";
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

/// The command files' folder inside a materialized bundle.
pub const COMMANDS: &str = "commands";

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

/// Whether every bundled file is in `dir` with its bundled content (a person or a crash may
/// have left a damaged copy).
fn intact(dir: &Path) -> bool {
    FILES
        .iter()
        .all(|(name, bytes)| fs::read(dir.join(name)).is_ok_and(|b| b == *bytes))
}

/// Writes the bundle into `home/bundled/` unless an intact copy is there; returns its
/// command folder.
pub fn materialize(home: &Path) -> Result<PathBuf> {
    let root = home.join("bundled");
    let dir = root.join(format!("{NAME}-{}", digest()));
    if intact(&dir) {
        return Ok(dir.join(COMMANDS));
    }
    fs::create_dir_all(&root).map_err(RalphError::io("create", &root))?;
    let staging = baton_store::durable::temp_sibling(&dir);
    let written = write_all(&staging);
    if let Err(e) = written {
        let _ = fs::remove_dir_all(&staging);
        return Err(e);
    }
    // A damaged copy is replaced; another process may have placed an intact one first.
    if dir.exists() && !intact(&dir) {
        let _ = fs::remove_dir_all(&dir);
    }
    if fs::rename(&staging, &dir).is_err() {
        let _ = fs::remove_dir_all(&staging);
    }
    if !intact(&dir) {
        return Err(RalphError::usage(
            "BUNDLED_SKILLS_UNAVAILABLE",
            format!("cannot place the bundled skills in {}", root.display()),
        ));
    }
    baton_store::durable::sync_dir(&root)?;
    Ok(dir.join(COMMANDS))
}

/// Every file durably in `staging` (each synced, then its folder).
fn write_all(staging: &Path) -> Result<()> {
    for (name, bytes) in FILES {
        let path = staging.join(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(RalphError::io("create", parent))?;
        }
        baton_store::durable::atomic_write(&path, bytes)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of `examples/skills/lifecycle/` is compiled in, and nothing else.
    #[test]
    fn the_embedded_list_matches_the_directory() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/skills/lifecycle");
        let mut on_disk = Vec::new();
        let mut stack = vec![root.clone()];
        while let Some(d) = stack.pop() {
            for e in fs::read_dir(&d).unwrap().flatten() {
                if e.path().is_dir() {
                    stack.push(e.path());
                } else {
                    let rel = e.path().strip_prefix(&root).unwrap().to_path_buf();
                    on_disk.push(rel.to_string_lossy().into_owned());
                }
            }
        }
        on_disk.sort();
        let embedded: Vec<String> = FILES.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(embedded, on_disk);
    }

    #[test]
    fn materializes_once_and_repairs_a_damaged_copy() {
        let home = tempfile::tempdir().unwrap();
        let a = materialize(home.path()).unwrap();
        let verify = a.join("maestro-verify.md");
        assert!(verify.is_file());
        let written = fs::metadata(&verify).unwrap().modified().unwrap();
        let b = materialize(home.path()).unwrap();
        assert_eq!(a, b);
        assert_eq!(fs::metadata(&verify).unwrap().modified().unwrap(), written);
        fs::write(&verify, "damaged").unwrap();
        fs::remove_file(a.join("quality-debug.md")).unwrap();
        let c = materialize(home.path()).unwrap();
        assert_eq!(a, c);
        assert!(intact(c.parent().unwrap()));
        let leftovers: Vec<_> = fs::read_dir(home.path().join("bundled")).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no staging folder is left behind");
    }
}
