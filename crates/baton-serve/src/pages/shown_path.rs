//! A host path as a page shows it: relative to a root the reader knows (the project,
//! `$BATON_HOME`, `~`), never the absolute path of the server's machine (a page can be
//! screenshotted or shared; a session's `command_path` of a bundled skill is under baton's
//! home).

use std::path::{Path, PathBuf};

/// The roots a shown path may start from.
#[derive(Debug, Clone, Default)]
pub struct Roots {
    /// (root, how it is written): the project (as ``), `$BATON_HOME`, `~`.
    roots: Vec<(PathBuf, &'static str)>,
}

impl Roots {
    pub fn new(project: Option<&Path>, baton_home: Option<&Path>, home: Option<&Path>) -> Roots {
        let mut roots = Vec::new();
        for (root, label) in [(project, ""), (baton_home, "$BATON_HOME"), (home, "~")] {
            let Some(root) = root.filter(|r| r.is_absolute()) else {
                continue;
            };
            roots.push((root.to_path_buf(), label));
            // The same root through its symlinks (a path stored by another process may be
            // either spelling).
            if let Ok(real) = std::fs::canonicalize(root)
                && real != root
            {
                roots.push((real, label));
            }
        }
        Roots { roots }
    }

    /// `raw` relative to the deepest root it is under: `src/x.md` (the project),
    /// `$BATON_HOME/bundled/…`, `~/.claude/…`; a path under none of them shows only its
    /// file name (`…/x.md`). A path already relative (or `~/…`) is shown as it is.
    pub fn shown(&self, raw: &str) -> String {
        let path = Path::new(raw);
        if !path.is_absolute() {
            return raw.to_string();
        }
        let best = self
            .roots
            .iter()
            .filter_map(|(root, label)| {
                let rest = path.strip_prefix(root).ok()?;
                Some((root.components().count(), rest, *label))
            })
            .max_by_key(|(depth, _, _)| *depth);
        match best {
            Some((_, rest, "")) if rest.as_os_str().is_empty() => ".".to_string(),
            Some((_, rest, "")) => rest.display().to_string(),
            Some((_, rest, label)) if rest.as_os_str().is_empty() => label.to_string(),
            Some((_, rest, label)) => format!("{label}/{}", rest.display()),
            None => match path.file_name() {
                Some(name) => format!("…/{}", name.to_string_lossy()),
                None => "…".to_string(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_shown_from_the_deepest_known_root_and_never_absolute() {
        let roots = Roots::new(
            Some(Path::new("/home/ann/.baton/work/proj")),
            Some(Path::new("/home/ann/.baton")),
            Some(Path::new("/home/ann")),
        );
        assert_eq!(
            roots.shown("/home/ann/.baton/bundled/lifecycle-skills-1a/commands/maestro-plan.md"),
            "$BATON_HOME/bundled/lifecycle-skills-1a/commands/maestro-plan.md"
        );
        assert_eq!(
            roots.shown("/home/ann/.claude/commands/plan.md"),
            "~/.claude/commands/plan.md"
        );
        // The project inside baton's home: project-relative wins.
        assert_eq!(
            roots.shown("/home/ann/.baton/work/proj/.claude/commands/x.md"),
            ".claude/commands/x.md"
        );
        assert_eq!(roots.shown("/opt/skills/commands/y.md"), "…/y.md");
        assert_eq!(
            roots.shown("~/.codex/prompts/z.md"),
            "~/.codex/prompts/z.md"
        );
        // A sibling whose name only starts like a root is not under it.
        assert_eq!(roots.shown("/home/annex/a.md"), "…/a.md");
        assert_eq!(Roots::default().shown("/srv/a/b.md"), "…/b.md");
    }
}
