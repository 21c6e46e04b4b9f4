//! git for test fixtures: a command that must succeed (as a fixed test author), and the sample
//! project as a repository, alone or pushed to a bare remote.

use crate::sample_project;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `git -C dir args…` as the author `t <t@example.invalid>`; it must succeed. Returns its
/// standard output, trimmed.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The sample project at `<root>/project` as a git repository on `main` with one commit.
pub fn committed_project(root: &Path) -> PathBuf {
    let project = sample_project(root);
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "start"]);
    project
}

/// [`committed_project`] pushed to the bare repository `<root>/remote.git`, its `origin`;
/// returns (project, bare).
pub fn project_with_remote(root: &Path) -> (PathBuf, PathBuf) {
    let project = committed_project(root);
    let bare = root.join("remote.git");
    git(root, &["init", "-q", "--bare", bare.to_str().unwrap()]);
    git(
        &project,
        &["remote", "add", "origin", bare.to_str().unwrap()],
    );
    git(&project, &["push", "-q", "origin", "main"]);
    (project, bare)
}
