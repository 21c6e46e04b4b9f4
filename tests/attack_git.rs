//! A hostile model against baton's own git in the person's repository (`[autopilot.git]
//! commit = true`), through the real binary and the played model on loopback: a repository
//! the model nested in the project never has its configuration run (no fsmonitor, no hooks),
//! nothing is planted in the person's `.git`, and a repository without an identity merges
//! parallel stories as sequential mode commits them.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::attacker;
use crate::common;
use crate::player;

use common::{Run, repo};
use player::{Player, Scenario};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The epic sample in a git repository on `main` (its first commit by a fixed author; the
/// repository itself has no identity), with `baton.toml` holding `config`.
fn sample(into: &Path, config: &str) -> PathBuf {
    let project = into.join("project");
    baton_testkit::copy_dir(&repo().join("examples/projects/taskboard-epic"), &project);
    std::fs::write(project.join("baton.toml"), config).unwrap();
    baton_testkit::git::git(&project, &["init", "-q", "-b", "main"]);
    baton_testkit::git::git(&project, &["add", "-A"]);
    baton_testkit::git::git(&project, &["commit", "-q", "-m", "init"]);
    project
}

/// `baton args…` with its own home, the played model, and `$HOME` at `user_home` (no git
/// identity there unless the test writes one), the outer environment's git settings removed.
fn baton(home: &Path, user_home: &Path, player: &Player, args: &[&str]) -> Run {
    let out = Command::new(attacker::baton_bin())
        .args(args)
        .env("BATON_HOME", home)
        .env("HOME", user_home)
        .env("OPENAI_BASE_URL", player.base_url())
        .env("BATON_MODEL", "played")
        .env("OPENAI_API_KEY", "sk-test")
        .env_remove("GIT_CONFIG_GLOBAL")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("GIT_AUTHOR_NAME")
        .env_remove("GIT_AUTHOR_EMAIL")
        .env_remove("GIT_COMMITTER_NAME")
        .env_remove("GIT_COMMITTER_EMAIL")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(Stdio::null())
        .output()
        .expect("baton runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn homes(tmp: &Path) -> (PathBuf, PathBuf) {
    let home = tmp.join("baton-home");
    let user = tmp.join("user-home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&user).unwrap();
    (home, user)
}

fn sh(dir: &Path, script: &str) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{script}: {out:?}");
}

#[test]
fn a_nested_repositorys_fsmonitor_never_runs_in_an_epic_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, user) = homes(tmp.path());
    let project = sample(tmp.path(), "[autopilot.git]\ncommit = true\n");
    let marker = tmp.path().join("person-ran-it");
    let fsmonitor_ran = project.join("fsmonitor-ran");
    // What the dev model's shell leaves in the project: a repository of its own whose
    // monitor plants a hook and a monitor in the person's .git once any git enters it.
    let payload = format!(
        "touch ../fsmonitor-ran; {}",
        attacker::plant_in_outer_git(&marker)
    );
    sh(&project, &attacker::nested_fsmonitor(&payload));
    let before = attacker::protected_files(&project.join(".git"));
    let player = Player::start(&project, Scenario::default());
    let p = project.to_str().unwrap();
    let run = baton(
        &home,
        &user,
        &player,
        &["epic", "story", "1-1-project-scaffold", "-p", p],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    // The story was committed (the nested repository as git records one: a gitlink)...
    let subject = attacker::git(&project, &["log", "-1", "--format=%s"]);
    assert!(
        subject.starts_with("story 1-1-project-scaffold"),
        "{subject}"
    );
    // ... and nothing of the nested configuration ran.
    assert!(!fsmonitor_ran.exists(), "the nested fsmonitor ran");
    assert!(!project.join("planted").exists());
    assert_eq!(attacker::protected_files(&project.join(".git")), before);
    // The person's own next git is as it was.
    attacker::git(&project, &["status", "--porcelain"]);
    assert!(!marker.exists(), "the person's git ran the model's code");
}

#[test]
fn a_repository_without_an_identity_merges_parallel_stories_as_baton() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, user) = homes(tmp.path());
    let project = sample(
        tmp.path(),
        "[autopilot.git]\ncommit = true\n\n[autopilot.parallel]\nafter = { \"1-2-user-authentication\" = [\"1-1-project-scaffold\"] }\n",
    );
    let player = Player::start(&project, Scenario::default());
    let p = project.to_str().unwrap();
    let run = baton(
        &home,
        &user,
        &player,
        &["epic", "run", "epic-1", "-p", p, "--parallel", "2"],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let authors = attacker::git(&project, &["log", "--format=%an <%ae>|%s", "main"]);
    let stories: Vec<&str> = authors.lines().filter(|l| l.contains("|story ")).collect();
    assert!(stories.len() >= 2, "{authors}");
    for line in stories {
        assert!(line.starts_with("baton <baton@localhost>|"), "{line}");
    }
}
