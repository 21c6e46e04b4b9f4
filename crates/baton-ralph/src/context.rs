//! Where a ralph command works: the project (maestro uses the current directory), the home
//! directory holding global command files, the name the prompts use for the CLI, and who
//! claims steps.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Warnings a verb met on its way that do not stop it (a damaged session folder it skipped).
/// The CLI prints them on stderr after the verb's own output; a library caller may show them
/// or drop them. Clones share the list.
#[derive(Debug, Clone, Default)]
pub struct Warnings(Arc<Mutex<Vec<String>>>);

impl Warnings {
    /// Most warnings kept (a long-lived context must not grow without bound).
    const MAX: usize = 64;

    pub fn push(&self, message: impl Into<String>) {
        let mut list = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let message = message.into();
        if list.len() < Self::MAX && !list.contains(&message) {
            list.push(message);
        }
    }

    /// The warnings so far; the list is emptied.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

#[derive(Debug, Clone)]
pub struct Context {
    /// The project root: `.workflow/.maestro/` and the project's `.claude/`, `.codex/`,
    /// `.maestro/skill-config.json` live here.
    pub project: PathBuf,
    /// `$HOME`: global `.claude/` and `.codex/` trees, `~` in paths.
    pub home: Option<PathBuf>,
    /// `$MAESTRO_HOME`, else `~/.maestro`: the global `skill-config.json`.
    pub maestro_home: Option<PathBuf>,
    /// How prompts and hints spell the CLI, e.g. `baton ralph` (or `maestro ralph` when the
    /// binary is installed under that name).
    pub cli: String,
    /// Default owner recorded with a claim.
    pub owner: String,
    /// A folder of command files looked at when neither the project nor the home directory
    /// has a skill: baton's bundled lifecycle skills ([`Context::with_bundled_skills`]).
    /// `None` for `baton ralph`, which finds exactly what maestro finds.
    pub bundled_commands: Option<PathBuf>,
    /// How long a mutating verb waits for the session lock.
    pub lock_timeout: Duration,
    /// What the verb skipped or noticed on its way (printed on stderr by the CLI).
    pub warnings: Warnings,
}

impl Context {
    /// A context from the environment: `HOME`, `MAESTRO_HOME`.
    pub fn from_env(project: &Path, cli: impl Into<String>) -> Context {
        let var = |name: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let home = var("HOME").or_else(|| var("USERPROFILE"));
        let maestro_home =
            var("MAESTRO_HOME").or_else(|| home.as_ref().map(|h| h.join(".maestro")));
        Context {
            project: absolute(project),
            home,
            maestro_home,
            cli: cli.into(),
            owner: super::claim::default_owner(),
            lock_timeout: Duration::from_secs(10),
            bundled_commands: None,
            warnings: Warnings::default(),
        }
    }

    /// The same context with baton's bundled lifecycle skills as the last fallback of skill
    /// resolution, written under `baton_home` first if they are not there yet.
    pub fn with_bundled_skills(mut self, baton_home: &Path) -> super::error::Result<Context> {
        self.bundled_commands = Some(super::bundled_skills::materialize(baton_home)?);
        Ok(self)
    }

    /// Where the files of a prompt may come from when the prompt is for a model baton confines
    /// (`baton session`, recognised by its bundled skills): the project, the home directory's
    /// command and skill folders, maestro's home and the bundled skills. A command file a
    /// step's model rewrote to name `@~/.ssh/id_rsa` is then refused, never read into the next
    /// prompt. `None` for `baton ralph`, which reads what maestro reads (its caller is an agent
    /// that can read those files itself).
    pub fn prompt_roots(&self) -> Option<Vec<PathBuf>> {
        // The whole bundle: its commands name the guide beside them (`@../guide/…`).
        let bundled = self.bundled_commands.as_ref()?;
        let bundle = bundled.parent().unwrap_or(bundled).to_path_buf();
        let mut roots = vec![self.project.clone(), bundle];
        if let Some(h) = &self.home {
            for rel in [".claude/commands", ".claude/skills", ".codex/skills"] {
                roots.push(h.join(rel));
            }
        }
        roots.extend(self.maestro_home.clone());
        Some(roots)
    }

    /// `<project>/.workflow/.maestro`
    pub fn sessions_root(&self) -> PathBuf {
        self.project.join(".workflow").join(".maestro")
    }
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}
