//! `[autopilot.publish]` through the real binary, against the played model on loopback and a
//! bare git repository as the remote: each approved story's branch `baton/<epic>/<story>` is
//! pushed, the operator's command runs once per story with the values filled in and quoted (a
//! hostile story title cannot add to it), its link is on the board; with `done_when =
//! "merged"` the stories wait `published` until the remote's base branch has them; a failed
//! push keeps the story and is published again on resume.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;
use crate::player;

use common::{Baton, Run, git, repo};
use player::{Player, Scenario};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const IMPL: &str = "_bmad-output/implementation-artifacts";
const A: &str = "1-1-project-scaffold";
const B: &str = "1-2-user-authentication";
/// Story A's title, as its story file says it: quotes, a command substitution, backticks.
const HOSTILE: &str = "Scaffold'; touch PWNED; echo '$(touch PWNED2) `touch PWNED3` \"x\"";

/// Whether `reference` exists in the bare repository `remote` (its commit).
fn remote_ref(remote: &Path, reference: &str) -> Option<String> {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(remote)
        .args(["rev-parse", "--verify", "-q", reference])
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn make_remote(remote: &Path) {
    let out = Command::new("git")
        .args(["init", "-q", "--bare", "-b", "main"])
        .arg(remote)
        .output()
        .unwrap();
    assert!(out.status.success());
}

/// The sample project, epic 1 cut to stories A and B, A ready for dev with a hostile title, in
/// a git repository whose `origin` is `remote` (made and holding `main` when `with_remote`).
fn sample(into: &Path, publish: &str, with_remote: bool) -> (PathBuf, PathBuf) {
    let project = into.join("project");
    let remote = into.join("remote.git");
    baton_testkit::copy_dir(&repo().join("examples/projects/taskboard-epic"), &project);
    let sprint = project.join(IMPL).join("sprint-status.yaml");
    let text = std::fs::read_to_string(&sprint)
        .unwrap()
        .replace("  1-3-password-reset: backlog\n", "")
        .replace(&format!("{A}: backlog"), &format!("{A}: ready-for-dev"));
    std::fs::write(&sprint, text).unwrap();
    std::fs::write(
        project.join(IMPL).join(format!("{A}.md")),
        format!(
            "# Story 1.1: {HOSTILE}\n\nStatus: ready-for-dev\n\n## Story\n\nAs a user, I want a scaffold, so that the epic moves on.\n\n## Acceptance Criteria\n\n1. It works. [Source: artifacts/epics.md]\n\n## Tasks / Subtasks\n\n- [ ] Task 1 (AC: #1)\n\n## Dev Agent Record\n\n### File List\n\n- src/{A}.txt\n"
        ),
    )
    .unwrap();
    std::fs::write(project.join("baton.toml"), publish).unwrap();
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["add", "-A"]);
    git(
        &project,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "-m",
            "init",
        ],
    );
    git(
        &project,
        &["remote", "add", "origin", remote.to_str().unwrap()],
    );
    if with_remote {
        make_remote(&remote);
        git(&project, &["push", "-q", "origin", "main"]);
    }
    (project, remote)
}

fn epic(baton: &Baton, player: &Player, args: &[&str]) -> Run {
    baton.played(&player.base_url(), args)
}

fn status_json(baton: &Baton, player: &Player, p: &str) -> Value {
    let st = epic(baton, player, &["epic", "status", "-p", p, "--json"]);
    assert_eq!(st.code, 0, "{}{}", st.stdout, st.stderr);
    st.json()
}

fn story<'a>(board: &'a Value, key: &str) -> &'a Value {
    board["epics"][0]["stories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"] == key)
        .unwrap_or_else(|| panic!("{key} not on the board: {board:#}"))
}

fn sprint_status(project: &Path, key: &str) -> String {
    let text = std::fs::read_to_string(project.join(IMPL).join("sprint-status.yaml")).unwrap();
    text.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("{key} not in sprint-status.yaml: {text}"))
        .trim()
        .to_string()
}

/// The commit whose subject names `key`, in the project.
fn story_commit(project: &Path, key: &str) -> String {
    git(project, &["log", "--format=%H %s", "main"])
        .lines()
        .find(|l| l.contains(&format!(" story {key}: ")))
        .unwrap_or_else(|| panic!("no commit of {key}"))
        .split(' ')
        .next()
        .unwrap()
        .to_string()
}

fn no_injection(into: &Path, project: &Path) {
    for dir in [into, project] {
        for f in ["PWNED", "PWNED2", "PWNED3"] {
            assert!(!dir.join(f).exists(), "{f} was made in {}", dir.display());
        }
    }
}

#[test]
fn each_story_branch_is_pushed_and_the_command_runs_once_per_story_with_quoted_values() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("pr.log");
    let publish = format!(
        "[autopilot.git]\ncommit = true\n\n[autopilot.publish]\npush = true\ncommand = \"printf '%s|%s|%s|%s|%s\\\\n' {{branch}} {{base}} {{story}} {{epic}} {{title}} >> '{}'; echo opened https://forge.test/pr/{{story}}\"\n",
        log.display()
    );
    let (project, remote) = sample(tmp.path(), &publish, true);
    let p = project.to_str().unwrap();
    let player = Player::start(&project, Scenario::default());

    let r = epic(
        &baton,
        &player,
        &["epic", "run", "epic-1", "-p", p, "--non-interactive"],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);

    // The remote holds both story branches, each at its story's commit.
    for key in [A, B] {
        let branch = format!("refs/heads/baton/epic-1/{key}");
        assert_eq!(
            remote_ref(&remote, &branch),
            Some(story_commit(&project, key)),
            "{key}"
        );
        assert_eq!(sprint_status(&project, key), "done");
    }
    assert_eq!(sprint_status(&project, "epic-1"), "done");
    // The command ran once per story, each value one word as it is: the title too.
    let lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(
        lines,
        [
            format!("baton/epic-1/{A}|main|{A}|epic-1|{HOSTILE}"),
            format!("baton/epic-1/{B}|main|{B}|epic-1|user authentication"),
        ]
    );
    no_injection(tmp.path(), &project);

    // The board: each story's branch, state and link (text and JSON).
    let board = status_json(&baton, &player, p);
    for key in [A, B] {
        let s = story(&board, key);
        assert_eq!(
            s["publish"]["branch"],
            format!("baton/epic-1/{key}"),
            "{s:#}"
        );
        assert_eq!(s["publish"]["state"], "published", "{s:#}");
        assert_eq!(s["publish"]["url"], format!("https://forge.test/pr/{key}"));
        assert_eq!(s["publish"]["command"]["exit"], 0, "{s:#}");
        assert!(
            s["publish"]["command"]["output"]
                .as_str()
                .unwrap()
                .contains("opened https://forge.test/pr/")
        );
    }
    let st = epic(&baton, &player, &["epic", "status", "-p", p]);
    assert!(
        st.stdout.contains(&format!(
            "      branch baton/epic-1/{B} · published · https://forge.test/pr/{B}\n"
        )),
        "{}",
        st.stdout
    );
    // A resume publishes nothing again.
    let r = epic(&baton, &player, &["epic", "resume", "-p", p]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 2);
}

#[test]
fn with_done_when_merged_stories_wait_published_until_the_remote_has_them() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let publish = "[autopilot.publish]\npush = true\ndone_when = \"merged\"\n";
    let (project, remote) = sample(tmp.path(), publish, true);
    let p = project.to_str().unwrap();
    let player = Player::start(&project, Scenario::default());

    let r = epic(
        &baton,
        &player,
        &["epic", "run", "epic-1", "-p", p, "--non-interactive"],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains(&format!("waiting for their merge on origin: {A}, {B}")),
        "{}",
        r.stderr
    );
    let board = status_json(&baton, &player, p);
    for key in [A, B] {
        assert_eq!(story(&board, key)["publish"]["state"], "published");
        assert_eq!(story(&board, key)["status"], "review");
        assert_eq!(sprint_status(&project, key), "review");
        assert!(remote_ref(&remote, &format!("refs/heads/baton/epic-1/{key}")).is_some());
    }
    assert_ne!(sprint_status(&project, "epic-1"), "done");
    let st = epic(&baton, &player, &["epic", "status", "-p", p]);
    assert!(
        st.stdout.contains(&format!(
            "      branch baton/epic-1/{A} · published, waits for its merge\n"
        )),
        "{}",
        st.stdout
    );

    // The remote's main gets A (a fast-forward, as a merged pull request): A is done, B waits.
    let remote_git = |args: &[&str]| {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t", "--git-dir"])
            .arg(&remote)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    remote_git(&[
        "update-ref",
        "refs/heads/main",
        &format!("refs/heads/baton/epic-1/{A}"),
    ]);
    let board = status_json(&baton, &player, p);
    assert_eq!(story(&board, A)["status"], "done", "{board:#}");
    assert_eq!(story(&board, A)["publish"]["state"], "merged");
    assert_eq!(story(&board, B)["status"], "review");
    assert_eq!(sprint_status(&project, A), "done");
    assert_eq!(sprint_status(&project, B), "review");

    // Then B, merged with a merge commit made on the remote.
    let b = format!("refs/heads/baton/epic-1/{B}");
    let merge = remote_git(&[
        "commit-tree",
        &format!("{b}^{{tree}}"),
        "-p",
        "refs/heads/main",
        "-p",
        &b,
        "-m",
        "Merge pull request #2",
    ]);
    remote_git(&["update-ref", "refs/heads/main", &merge]);
    let board = status_json(&baton, &player, p);
    assert_eq!(story(&board, B)["status"], "done", "{board:#}");
    assert_eq!(sprint_status(&project, B), "done");

    // The epic completes on resume.
    let r = epic(&baton, &player, &["epic", "resume", "-p", p]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(sprint_status(&project, "epic-1"), "done");
}

#[test]
fn a_failed_push_keeps_the_story_and_resume_publishes_it() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let publish = "[autopilot.publish]\npush = true\n";
    // The remote does not exist yet.
    let (project, remote) = sample(tmp.path(), publish, false);
    let p = project.to_str().unwrap();
    let player = Player::start(&project, Scenario::default());

    let r = epic(
        &baton,
        &player,
        &["epic", "run", "epic-1", "-p", p, "--non-interactive"],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "{A}: approved, not published: EPIC_PUBLISH_PUSH_FAILED"
        )),
        "{}",
        r.stderr
    );
    let board = status_json(&baton, &player, p);
    for key in [A, B] {
        let s = story(&board, key);
        assert_eq!(s["publish"]["state"], "approved", "{s:#}");
        assert_eq!(s["publish"]["error"]["code"], "EPIC_PUBLISH_PUSH_FAILED");
        assert!(
            s["publish"]["error"]["hint"]
                .as_str()
                .unwrap()
                .contains("baton epic resume")
        );
    }

    make_remote(&remote);
    let r = epic(&baton, &player, &["epic", "resume", "-p", p]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let board = status_json(&baton, &player, p);
    for key in [A, B] {
        assert_eq!(story(&board, key)["publish"]["state"], "published");
        assert!(story(&board, key)["publish"]["error"].is_null());
        assert_eq!(
            remote_ref(&remote, &format!("refs/heads/baton/epic-1/{key}")),
            Some(story_commit(&project, key))
        );
    }
}

#[test]
fn in_parallel_a_dependant_waits_for_the_merge_of_the_story_it_needs() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let publish = format!(
        "[autopilot.parallel]\nafter = {{ \"{B}\" = [\"{A}\"] }}\n\n[autopilot.publish]\npush = true\ndone_when = \"merged\"\n"
    );
    let (project, remote) = sample(tmp.path(), &publish, true);
    let p = project.to_str().unwrap();
    let player = Player::start(&project, Scenario::default());
    let run = ["epic", "run", "epic-1", "-p", p, "--parallel", "2"];

    // A runs, is merged onto main here and published; B waits for A's merge on the remote.
    let r = epic(
        &baton,
        &player,
        &[&run[..], &["--non-interactive"]].concat(),
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let a_branch = format!("refs/heads/baton/epic-1/{A}");
    assert_eq!(
        remote_ref(&remote, &a_branch),
        Some(story_commit(&project, A))
    );
    assert!(remote_ref(&remote, &format!("refs/heads/baton/epic-1/{B}")).is_none());
    assert_eq!(sprint_status(&project, A), "review");
    assert_eq!(sprint_status(&project, B), "backlog");
    let board = status_json(&baton, &player, p);
    assert_eq!(
        story(&board, A)["publish"]["state"],
        "published",
        "{board:#}"
    );
    assert!(story(&board, B)["publish"].is_null());

    // Merged on the remote: A is done, and the resumed epic runs B, published in its turn.
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(&remote)
        .args(["update-ref", "refs/heads/main", &a_branch])
        .output()
        .unwrap();
    assert!(out.status.success());
    let r = epic(&baton, &player, &["epic", "resume", "-p", p]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(sprint_status(&project, A), "done");
    assert_eq!(sprint_status(&project, B), "review");
    assert_eq!(
        remote_ref(&remote, &format!("refs/heads/baton/epic-1/{B}")),
        Some(story_commit(&project, B))
    );
    assert_ne!(sprint_status(&project, "epic-1"), "done");
}

#[test]
fn a_hook_or_an_fsmonitor_planted_in_the_repository_never_runs_when_a_story_is_published() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let publish = "[autopilot.git]\ncommit = true\n\n[autopilot.publish]\npush = true\n";
    let (project, remote) = sample(tmp.path(), publish, true);
    // What a model with a shell could leave behind: hooks for the commit and the push, and an
    // fsmonitor, each leaving a mark inside the project and beside it when run.
    let outside = tmp.path().join("PLANTED-RAN");
    let mark = |name: &str| {
        format!(
            "#!/bin/sh\ntouch \"$PWD/{name}-RAN\" '{}'\nexit 0\n",
            outside.display()
        )
    };
    let hooks = project.join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    for hook in [
        "pre-push",
        "post-commit",
        "pre-commit",
        "reference-transaction",
    ] {
        let path = hooks.join(hook);
        std::fs::write(&path, mark(hook)).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let fsmonitor = project.join("fsmonitor.sh");
    std::fs::write(&fsmonitor, mark("fsmonitor")).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fsmonitor, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let config = project.join(".git/config");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!("[core]\n\tfsmonitor = {}\n", fsmonitor.display()));
    std::fs::write(&config, text).unwrap();

    let p = project.to_str().unwrap();
    let player = Player::start(&project, Scenario::default());
    let r = epic(
        &baton,
        &player,
        &["epic", "run", "epic-1", "-p", p, "--non-interactive"],
    );
    // Checked before the test's own git touches the project.
    let ran: Vec<String> = std::fs::read_dir(&project)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with("-RAN"))
        .collect();
    assert!(ran.is_empty(), "planted programs ran: {ran:?}");
    assert!(
        !outside.exists(),
        "a planted program ran outside the project"
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    for key in [A, B] {
        assert!(
            remote_ref(&remote, &format!("refs/heads/baton/epic-1/{key}")).is_some(),
            "{key} was not published"
        );
    }
}
