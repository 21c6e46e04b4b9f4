//! git on trees a model wrote: epic commits, parallel merges, a worker's checkpoints, queued
//! story units.
//!
//! A model can write anything in its work tree, including a nested repository whose own
//! configuration names a program (`core.fsmonitor`), hooks, attributes and files a
//! configuration could include. git runs such programs as it works, so every git command baton
//! runs on such a tree goes through [`TreeGit`]:
//! - its configuration cannot be extended from the tree: [`hardening::HARDENING`] on the
//!   command line (no fsmonitor, no hooks, nested repositories and submodules never entered),
//!   the repository located by baton ([`repo::RepoDirs`]: from the project up, never from a
//!   folder of the tree) and given to git, and a repository whose configuration includes a file of the tree refused
//!   ([`includes`]); filter, diff and merge drivers are only those the person's own
//!   configuration files define;
//! - its environment holds nothing of baton's but `PATH` and the locale (no model key, no
//!   database URL, no `BATON_HOME`);
//! - it runs confined by the caller's sandbox ([`Confine`]), where of the repository folders
//!   only what git writes is writable, never the configuration, hooks or `info/`;
//! - the configuration, hooks and `info/` are compared before and after each command
//!   ([`guard`]); a change is undone and stops the caller with `GIT_PROTECTED_CHANGED`.
//!
//! git that needs the network or the person's credentials (fetching into a worker's mirror,
//! pushing from it) runs on a repository no model writes, with the same configuration and a
//! clean environment: [`hardening::remote_command`].

mod error;
pub mod guard;
pub mod hardening;
pub mod includes;
pub mod repo;

pub use error::{
    GIT_CONFIG_INCLUDES_TREE, GIT_FAILED, GIT_NOT_A_REPOSITORY, GIT_PROTECTED_CHANGED, GitError,
};
pub use repo::RepoDirs;

use std::path::{Path, PathBuf};

/// One git command to run confined, as [`TreeGit`] prepared it.
#[derive(Debug)]
pub struct Invocation<'a> {
    /// The work tree: writable.
    pub work_tree: &'a Path,
    /// Where the command starts: the work tree or a folder of it.
    pub cwd: &'a Path,
    /// git's arguments (without `git`).
    pub args: &'a [String],
    /// Its whole environment, but `HOME` and `TMPDIR`, which the sandbox gives.
    pub env: &'a [(String, String)],
    /// Writable besides the work tree: the repository folders outside it.
    pub writable: &'a [PathBuf],
    /// Read-only although beneath a writable path: the protected files that exist.
    pub read_only: &'a [PathBuf],
}

/// How a git command ended: its exit code (`None`: killed, timed out or flooded) and output.
#[derive(Debug, Clone)]
pub struct Output {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }
}

/// Runs a prepared git command inside a sandbox (implemented by baton's terminal sandbox).
pub trait Confine {
    fn run(&self, invocation: &Invocation<'_>) -> Result<Output, GitError>;
}

/// Who commits.
#[derive(Debug, Clone)]
pub enum Identity {
    /// The repository's own `user.name`/`user.email`, each missing one replaced by these.
    Fallback { name: String, email: String },
    /// Always these (a worker's checkpoints).
    Fixed { name: String, email: String },
}

impl Identity {
    /// baton's fallback for a repository without an identity (CI, containers).
    pub fn baton() -> Identity {
        Identity::Fallback {
            name: "baton".into(),
            email: "baton@localhost".into(),
        }
    }
}

/// Subcommands that write commits, and so need an identity.
const COMMITTING: [&str; 8] = [
    "commit",
    "merge",
    "rebase",
    "cherry-pick",
    "revert",
    "am",
    "commit-tree",
    "stash",
];

/// The subcommand of git's arguments: the first that is neither an option nor the value of
/// `-c` or `-C`.
fn subcommand<'a>(args: &[&'a str]) -> Option<&'a str> {
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match *arg {
            "-c" | "-C" => {
                it.next();
            }
            a if a.starts_with('-') => {}
            a => return Some(a),
        }
    }
    None
}

/// git on one work tree a model wrote. See the crate's documentation.
pub struct TreeGit<'c> {
    dirs: RepoDirs,
    confine: &'c dyn Confine,
    /// The person's own configuration file (`~/.gitconfig`), or none: `/dev/null`.
    global: Option<PathBuf>,
    identity: Identity,
    /// The `-c user.*` given to committing commands, found on first need.
    identity_args: std::sync::OnceLock<Vec<String>>,
}

impl<'c> TreeGit<'c> {
    /// Locates the repository of the folder `work_tree` (see [`RepoDirs::resolve`]) and checks that no configuration file it reads
    /// (the `global` one included) includes a file of the tree.
    pub fn open(
        work_tree: &Path,
        confine: &'c dyn Confine,
        global: Option<PathBuf>,
        identity: Identity,
    ) -> Result<TreeGit<'c>, GitError> {
        let dirs = RepoDirs::resolve(work_tree)?;
        let home = std::env::var_os("HOME").map(PathBuf::from);
        includes::check(&dirs, global.as_deref(), home.as_deref())?;
        Ok(TreeGit {
            dirs,
            confine,
            global,
            identity,
            identity_args: std::sync::OnceLock::new(),
        })
    }

    pub fn dirs(&self) -> &RepoDirs {
        &self.dirs
    }

    fn environment(&self, extra: &[(&str, String)]) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = ["PATH", "LANG", "LC_ALL"]
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
            .collect();
        if !env.iter().any(|(k, _)| k == "PATH") {
            env.push(("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()));
        }
        let global = self
            .global
            .as_ref()
            .map_or("/dev/null".to_string(), |g| g.display().to_string());
        env.extend([
            ("GIT_TERMINAL_PROMPT".to_string(), "0".to_string()),
            ("GIT_CONFIG_GLOBAL".to_string(), global),
            (
                "GIT_DIR".to_string(),
                self.dirs.git_dir.display().to_string(),
            ),
            (
                "GIT_WORK_TREE".to_string(),
                self.dirs.work_tree.display().to_string(),
            ),
        ]);
        for (k, v) in extra {
            env.retain(|(key, _)| key != k);
            env.push((k.to_string(), v.clone()));
        }
        env
    }

    /// The `-c user.name=… -c user.email=…` a committing command gets.
    fn identity_args(&self) -> Result<&[String], GitError> {
        if let Some(args) = self.identity_args.get() {
            return Ok(args);
        }
        let args = match &self.identity {
            Identity::Fixed { name, email } => vec![
                "-c".into(),
                format!("user.name={name}"),
                "-c".into(),
                format!("user.email={email}"),
            ],
            Identity::Fallback { name, email } => {
                let out =
                    self.run_plain(&["config", "--get-regexp", r"^user\.(name|email)$"], &[])?;
                let has = |key: &str| {
                    out.stdout.lines().any(|l| {
                        l.split_once(' ')
                            .is_some_and(|(k, v)| k == key && !v.trim().is_empty())
                    })
                };
                let mut args = Vec::new();
                if !has("user.name") {
                    args.extend(["-c".to_string(), format!("user.name={name}")]);
                }
                if !has("user.email") {
                    args.extend(["-c".to_string(), format!("user.email={email}")]);
                }
                args
            }
        };
        Ok(self.identity_args.get_or_init(|| args))
    }

    /// Runs `git args…` with `env` added; a non-zero exit is returned, not an error.
    pub fn run(&self, args: &[&str], env: &[(&str, String)]) -> Result<Output, GitError> {
        let committing = subcommand(args).is_some_and(|sub| COMMITTING.contains(&sub));
        if committing {
            let identity = self.identity_args()?.to_vec();
            let mut all: Vec<&str> = identity.iter().map(String::as_str).collect();
            all.extend_from_slice(args);
            return self.run_plain(&all, env);
        }
        self.run_plain(args, env)
    }

    fn run_plain(&self, args: &[&str], env: &[(&str, String)]) -> Result<Output, GitError> {
        let mut argv = hardening::config_args();
        argv.extend(args.iter().map(|a| a.to_string()));
        let env = self.environment(env);
        let mut writable = Vec::new();
        for dir in [&self.dirs.git_dir, &self.dirs.common_dir] {
            if !dir.starts_with(&self.dirs.work_tree) && !writable.contains(dir) {
                writable.push(dir.clone());
            }
        }
        let read_only: Vec<PathBuf> = guard::protected_paths(&self.dirs)
            .into_iter()
            .filter(|p| p.symlink_metadata().is_ok())
            .collect();
        let before = guard::Snapshot::take(&self.dirs)?;
        let out = self.confine.run(&Invocation {
            work_tree: &self.dirs.work_tree,
            cwd: &self.dirs.start,
            args: &argv,
            env: &env,
            writable: &writable,
            read_only: &read_only,
        });
        // Checked whatever the command did, even when it failed to start.
        before.verify_and_undo()?;
        out
    }

    /// Runs `git args…`; a non-zero exit is `GIT_FAILED` with git's error.
    pub fn ok(&self, args: &[&str]) -> Result<String, GitError> {
        let out = self.run(args, &[])?;
        if !out.ok() {
            return Err(GitError::new(
                GIT_FAILED,
                format!("git {} failed: {}", args.join(" "), out.stderr.trim()),
            ));
        }
        Ok(out.stdout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subcommand_is_found_past_global_options() {
        assert_eq!(subcommand(&["commit", "-m", "x"]), Some("commit"));
        assert_eq!(
            subcommand(&["-c", "a=b", "-C", "dir", "--git-dir=x", "rebase", "--onto"]),
            Some("rebase")
        );
        assert_eq!(subcommand(&["-c", "user.name=x"]), None);
    }
}
