//! `[autopilot.git] commit = true`: the commit before dev is recorded as the story's baseline,
//! a dev phase that changed nothing outside the implementation artifacts is refused, and an
//! approved story is committed as `story <key>: <title>`.
//!
//! git runs in the project's sandbox (like `terminal.run`, with `.git` writable and no
//! network): it executes what the repository's configuration names (hooks, `core.fsmonitor`,
//! `gpg.program`, a nested repository's own configuration), which the model may have written.
//! The user's `~/.gitconfig` is read (identity, their own hooks), nothing else of `$HOME`.

use super::error::{EpicError, Result};
use baton_tools::terminal::{Ended, ProjectShell};
use baton_tools::{TerminalRuntime, ToolsConfig};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Longest a git command may take.
const GIT_TIMEOUT: Duration = Duration::from_secs(300);
/// Output kept of one git command (file lists can be long).
const GIT_OUTPUT: u64 = 16 * 1024 * 1024;

fn sandbox(
    project: &Path,
    extra_writable: &[PathBuf],
) -> Result<(ProjectShell, Vec<(&'static str, String)>)> {
    let store = baton_store::Store::open_default().ok();
    let store_home = store.as_ref().map(|s| s.home().to_path_buf());
    let tools = ToolsConfig::load(store_home.as_deref(), Some(project))
        .map_err(|e| EpicError::usage(e.code(), e.to_string()).hint(e.hint()))?;
    let mut settings = tools.system.terminal;
    settings.network = false;
    settings.max_stdout_bytes = GIT_OUTPUT;
    settings.max_stderr_bytes = 64 * 1024;
    settings.max_output_bytes = settings.max_output_bytes.max(GIT_OUTPUT * 2);
    let mut env = vec![("GIT_TERMINAL_PROMPT", "0".to_string())];
    let global = std::env::var_os("HOME").map(|h| Path::new(&h).join(".gitconfig"));
    if let Some(global) = global.filter(|g| g.is_file()) {
        settings.home_readable.push(".gitconfig".into());
        env.push(("GIT_CONFIG_GLOBAL", global.to_string_lossy().into_owned()));
    }
    let runtime = TerminalRuntime {
        store_home,
        extra_writable: extra_writable.to_vec(),
        ..TerminalRuntime::default()
    };
    let shell = ProjectShell::new(project, settings, true, runtime).map_err(|e| {
        EpicError::usage("EPIC_GIT_FAILED", format!("cannot run git: {}", e.message))
            .hint("run `baton doctor`")
    })?;
    Ok((shell, env))
}

/// How one git command ended: its exit code (`None`: killed, timed out or flooded) and
/// output, stdout bounded by [`GIT_OUTPUT`] and stderr by 64 KiB.
#[derive(Debug, Clone)]
pub struct GitOutput {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl GitOutput {
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }
}

/// Runs `git args…` confined in `project` (the sandbox's writable root, its `.git` writable)
/// plus `extra_writable`, with `env` added; a non-zero exit is returned, not an error.
pub fn run(
    project: &Path,
    extra_writable: &[PathBuf],
    args: &[&str],
    env: &[(&'static str, String)],
) -> Result<GitOutput> {
    let (shell, mut base) = sandbox(project, extra_writable)?;
    base.extend(env.iter().cloned());
    let out = shell
        .run("git", args, &base, GIT_TIMEOUT)
        .map_err(|e| {
            let hint = match e.code {
                "SANDBOX_UNAVAILABLE" | "SANDBOX_SETUP_FAILED" => {
                    "run `baton doctor`; git runs in the project's sandbox like every command the model can influence"
                }
                _ => "install git, or set [autopilot.git] commit = false",
            };
            EpicError::usage("EPIC_GIT_FAILED", format!("cannot run git: {}", e.message))
                .hint(hint)
        })?
        .exec;
    Ok(GitOutput {
        code: match out.ended {
            Ended::Exited(c) => Some(c),
            _ => None,
        },
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

fn git(project: &Path, args: &[&str]) -> Result<String> {
    let out = run(project, &[], args, &[])?;
    if !out.ok() {
        return Err(EpicError::failure(
            "EPIC_GIT_FAILED",
            format!("git {} failed: {}", args.join(" "), out.stderr.trim()),
        ));
    }
    Ok(out.stdout)
}

/// Checks that the project is a git work tree with a commit (before anything is written).
pub fn check(project: &Path) -> Result<()> {
    head(project).map(|_| ()).map_err(|e| {
        EpicError::usage(
            "EPIC_GIT_FAILED",
            format!("[autopilot.git] commit = true needs a git repository with a first commit: {}", e.message),
        )
        .hint("run `git init && git commit --allow-empty -m init` in the project, or set commit = false")
    })
}

pub fn head(project: &Path) -> Result<String> {
    Ok(git(project, &["rev-parse", "HEAD"])?.trim().to_string())
}

/// Paths changed since `baseline` (committed or not, untracked included), outside `exclude`
/// (the implementation artifacts folder, project-relative).
pub fn changes_since(project: &Path, baseline: &str, exclude: &str) -> Result<Vec<String>> {
    let exclude = format!(":(exclude){exclude}");
    let mut changed: Vec<String> = Vec::new();
    let committed = git(
        project,
        &["diff", "--name-only", baseline, "--", ".", &exclude],
    )?;
    let untracked = git(
        project,
        &[
            "ls-files",
            "--others",
            "--exclude-standard",
            "--",
            ".",
            &exclude,
        ],
    )?;
    for line in committed.lines().chain(untracked.lines()) {
        let l = line.trim();
        if !l.is_empty() && !changed.iter().any(|c| c == l) {
            changed.push(l.to_string());
        }
    }
    Ok(changed)
}

/// Commits everything as `message`; a commit already made with that subject and nothing left to
/// commit (a crash between the commit and the next write) counts as done.
pub fn commit_all(project: &Path, message: &str) -> Result<()> {
    git(project, &["add", "-A"])?;
    let pending = git(project, &["status", "--porcelain"])?;
    if pending.trim().is_empty() {
        let subject = git(project, &["log", "-1", "--format=%s"]).unwrap_or_default();
        if subject.trim() == message {
            return Ok(());
        }
    }
    let name = git(project, &["config", "user.name"]).unwrap_or_default();
    let email = git(project, &["config", "user.email"]).unwrap_or_default();
    let mut args: Vec<&str> = Vec::new();
    // A project without an identity still gets its commits, signed as baton.
    if name.trim().is_empty() {
        args.extend(["-c", "user.name=baton"]);
    }
    if email.trim().is_empty() {
        args.extend(["-c", "user.email=baton@localhost"]);
    }
    args.extend(["commit", "--allow-empty", "-q", "-m", message]);
    git(project, &args)?;
    Ok(())
}

/// `story <key>: <title>`; the title is the story file's H1 after `Story N.M:`, else the key's
/// slug.
pub fn commit_message(story_key: &str, story_file: Option<&str>) -> String {
    let from_file = story_file.and_then(|text| {
        text.lines()
            .find_map(|l| l.strip_prefix("# "))
            .map(|h| match h.split_once(':') {
                Some((_, t)) => t.trim().to_string(),
                None => h.trim().to_string(),
            })
            .filter(|t| !t.is_empty())
    });
    let title = from_file.unwrap_or_else(|| {
        let slug = story_key.splitn(3, '-').nth(2).unwrap_or(story_key);
        slug.replace('-', " ")
    });
    format!("story {story_key}: {title}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_story() {
        assert_eq!(
            commit_message(
                "1-2-user-auth",
                Some("# Story 1.2: User Authentication\n\nStatus: done\n")
            ),
            "story 1-2-user-auth: User Authentication"
        );
        assert_eq!(
            commit_message("1-2-user-auth", None),
            "story 1-2-user-auth: user auth"
        );
    }
}
