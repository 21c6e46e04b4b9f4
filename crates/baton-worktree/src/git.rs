//! `[autopilot.git] commit = true`: the commit before dev is recorded as the story's baseline,
//! a dev phase that changed nothing outside the implementation artifacts is refused, and an
//! approved story is committed as `story <key>: <title>`.
//!
//! git runs through `baton-git` (see its documentation): a configuration nothing in the tree
//! can extend (no fsmonitor, hooks or nested repositories entered, whatever a nested
//! repository's configuration says), an environment without baton's secrets, the project's
//! sandbox with `.git`'s configuration, hooks and `info/` read-only, and those checked after
//! each command (`GIT_PROTECTED_CHANGED`, undone). The user's `~/.gitconfig` is read
//! (identity, their own drivers), nothing else of `$HOME`.

use super::error::{EpicError, Result};
use baton_git::{Identity, TreeGit};
use baton_tools::terminal::GitSandbox;
use baton_tools::{TerminalRuntime, ToolsConfig};
use std::path::{Path, PathBuf};

pub use baton_git::Output as GitOutput;

fn git_error(e: baton_git::GitError) -> EpicError {
    let code = match e.code {
        // Kept for scripts that know the epic's code for a git failure.
        baton_git::GIT_FAILED => "EPIC_GIT_FAILED",
        other => other,
    };
    let mut err = EpicError::failure(code, e.message);
    err.hint = e.hint;
    err
}

fn sandbox(project: &Path, extra_writable: &[PathBuf]) -> Result<(GitSandbox, Option<PathBuf>)> {
    let store = baton_store::Store::open_default().ok();
    let store_home = store.as_ref().map(|s| s.home().to_path_buf());
    let tools = ToolsConfig::load(store_home.as_deref(), Some(project))
        .map_err(|e| EpicError::usage(e.code(), e.to_string()).hint(e.hint()))?;
    let mut settings = tools.system.terminal;
    let global = std::env::var_os("HOME")
        .map(|h| Path::new(&h).join(".gitconfig"))
        .filter(|g| g.is_file());
    if global.is_some() {
        settings.home_readable.push(".gitconfig".into());
    }
    let runtime = TerminalRuntime {
        store_home,
        extra_writable: extra_writable.to_vec(),
        ..TerminalRuntime::default()
    };
    let sandbox = GitSandbox::new(settings, runtime).map_err(git_error)?;
    Ok((sandbox, global))
}

/// Runs `git args…` on the project's repository, confined in `project` (its writable root)
/// plus `extra_writable`, with `env` added; a non-zero exit is returned, not an error.
pub fn run(
    project: &Path,
    extra_writable: &[PathBuf],
    args: &[&str],
    env: &[(&'static str, String)],
) -> Result<GitOutput> {
    let (sandbox, global) = sandbox(project, extra_writable)?;
    let git = TreeGit::open(project, &sandbox, global, Identity::baton()).map_err(git_error)?;
    git.run(args, env).map_err(git_error)
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
    // A project without an identity still gets its commits, signed as baton (TreeGit's
    // fallback).
    let args = ["commit", "--allow-empty", "-q", "-m", message];
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

/// A commit id as messages show it.
pub fn short(id: &str) -> &str {
    id.get(..13).unwrap_or(id)
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
