//! `--parallel`'s git machinery with real git in temporary folders: story worktrees (made,
//! adopted, repaired after a kill at each step, removed) and merges onto the epic's branch (in
//! order, a conflict, a failing check after the rebase, the checked-out branch fast-forwarded,
//! resumed after a kill at each step). Every test ends with `git fsck` clean.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_epic::merge::{MergeOutcome, MergeSettings, MergeStep, merge_story};
use baton_epic::worktree::{Live, WorktreeRecord, WorktreeState, Worktrees, branch_name};
use baton_tools::{TerminalRuntime, TerminalSettings};
use std::path::{Path, PathBuf};
use std::process::Command as Process;
use std::time::{Duration, SystemTime};
use tokio_util::sync::CancellationToken;

const EPIC: &str = "epic-1";

/// git for the test's own setup and checks (not confined).
fn git(dir: &Path, args: &[&str]) -> String {
    let out = git_status(dir, args);
    assert!(out.0, "git {args:?}: {}", out.2);
    out.1
}

fn git_status(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Process::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// git and verify commands run confined; where this kernel cannot confine them they are
/// refused, and these tests have nothing to check.
fn confined() -> bool {
    let caps = baton_sandbox::capabilities();
    let ok = caps.landlock_abi.is_some()
        && caps.seccomp
        && caps.namespaces != baton_sandbox::NamespaceMode::Unavailable;
    if !ok {
        eprintln!("skipped: commands cannot be confined here");
    }
    ok
}

struct Repo {
    _tmp: tempfile::TempDir,
    project: PathBuf,
    root: PathBuf,
    started: SystemTime,
}

impl Repo {
    /// A project on branch `main` with `a.txt` (ten lines), `status.yaml` (the orchestrator's
    /// file) and one commit; worktrees under a folder next to it.
    fn new() -> Repo {
        let started = SystemTime::now();
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        git(&project, &["init", "-q", "-b", "main"]);
        git(&project, &["config", "user.name", "Dev"]);
        git(&project, &["config", "user.email", "dev@example.invalid"]);
        let lines: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        std::fs::write(project.join("a.txt"), lines).unwrap();
        std::fs::write(project.join("status.yaml"), "1-1-a: backlog\n").unwrap();
        git(&project, &["add", "-A"]);
        git(&project, &["commit", "-q", "-m", "init"]);
        let root = tmp.path().join("worktrees");
        Repo {
            _tmp: tmp,
            project,
            root,
            started,
        }
    }

    fn wts(&self) -> Worktrees {
        Worktrees::open(&self.project, &self.root).unwrap()
    }

    fn tip(&self) -> String {
        git(&self.project, &["rev-parse", "main"])
            .trim()
            .to_string()
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.project.join(rel)).unwrap()
    }

    fn status(&self) -> String {
        git(&self.project, &["status", "--porcelain"])
    }

    fn fsck(&self) {
        let (ok, out, err) = git_status(&self.project, &["fsck", "--no-dangling", "--no-progress"]);
        assert!(ok, "git fsck: {out}{err}");
        assert!(!err.contains("error") && !err.contains("missing"), "{err}");
        // Only the main work tree and the worktrees still recorded.
        let list = git(&self.project, &["worktree", "list", "--porcelain"]);
        assert!(
            !list.contains("prunable") && !list.contains("locked"),
            "{list}"
        );
    }

    /// git's worktrees other than the main one.
    fn linked(&self) -> usize {
        git(&self.project, &["worktree", "list", "--porcelain"])
            .lines()
            .filter(|l| l.starts_with("worktree "))
            .count()
            - 1
    }
}

#[allow(clippy::too_many_arguments)] // a test helper naming every setting it varies
fn settings<'a>(
    branch: &'a str,
    message: &'a str,
    verify: &'a [String],
    carry: &'a [String],
    keep_out: &'a [String],
    terminal: &'a TerminalSettings,
    cancel: &'a CancellationToken,
    started: SystemTime,
) -> MergeSettings<'a> {
    MergeSettings {
        branch,
        message,
        keep_out,
        carry,
        verify_commands: verify,
        verify_timeout: Duration::from_secs(60),
        terminal,
        runtime: TerminalRuntime::default(),
        cancel,
        started,
    }
}

fn terminal() -> TerminalSettings {
    TerminalSettings {
        kill_grace_ms: 200,
        ..TerminalSettings::default()
    }
}

/// Merges with no verify command, nothing carried or kept out.
fn merge_plain(r: &Repo, story: &str) -> MergeOutcome {
    let t = terminal();
    let cancel = CancellationToken::new();
    let message = format!("story {story}: work");
    let s = settings("main", &message, &[], &[], &[], &t, &cancel, r.started);
    merge_story(&r.wts(), EPIC, story, &s, &mut |_| {}).unwrap()
}

fn merged(outcome: MergeOutcome) -> String {
    match outcome {
        MergeOutcome::Merged { commit } => commit,
        other => panic!("not merged: {other:?}"),
    }
}

#[test]
fn a_worktree_is_made_adopted_and_removed_idempotently() {
    if !confined() {
        return;
    }
    let r = Repo::new();
    let wts = r.wts();
    let base = r.tip();
    let wt = wts.create(EPIC, "1-1-a", &base).unwrap();
    assert_eq!(wt.branch(), "baton/epic-1/1-1-a");
    assert_eq!(
        wt.path(),
        r.root.canonicalize().unwrap().join("epic-1/1-1-a")
    );
    assert!(wt.path().join("a.txt").is_file());
    assert!(!wt.path().starts_with(&r.project));
    assert_eq!(git(wt.path(), &["rev-parse", "HEAD"]).trim(), base);
    assert_eq!(
        git(wt.path(), &["symbolic-ref", "HEAD"]).trim(),
        "refs/heads/baton/epic-1/1-1-a"
    );
    let record = wts.read_record(EPIC, "1-1-a").unwrap().unwrap();
    assert_eq!(record.state, WorktreeState::Ready);
    assert_eq!(record.base, base);
    // Work in the worktree survives a second create (adopted, not made again).
    std::fs::write(wt.path().join("work.txt"), "mine").unwrap();
    let again = wts.create(EPIC, "1-1-a", &base).unwrap();
    assert_eq!(again, wt);
    assert!(wt.path().join("work.txt").is_file());
    assert_eq!(r.linked(), 1);
    let listed = wts.list().unwrap();
    assert_eq!(listed.len(), 1);
    assert!(matches!(&listed[0].live, Live::Ready { head } if *head == base));
    // Kept for inspection, then resumed: create takes it back.
    wts.keep(EPIC, "1-1-a", "paused on a question").unwrap();
    assert!(wts.read_record(EPIC, "1-1-a").unwrap().unwrap().is_kept());
    wts.create(EPIC, "1-1-a", &base).unwrap();
    assert!(!wts.read_record(EPIC, "1-1-a").unwrap().unwrap().is_kept());
    // Removed with its branch; removing again is fine.
    wts.remove(EPIC, "1-1-a", true).unwrap();
    assert!(!wt.path().exists());
    assert!(wts.read_record(EPIC, "1-1-a").unwrap().is_none());
    assert_eq!(r.linked(), 0);
    assert!(!git(&r.project, &["branch", "--list"]).contains("baton/"));
    wts.remove(EPIC, "1-1-a", true).unwrap();
    assert!(wts.list().unwrap().is_empty());
    // The main work tree never changed.
    assert_eq!(r.status(), "");
    r.fsck();
}

#[test]
fn what_baton_did_not_make_is_refused_and_the_root_stays_outside_the_project() {
    if !confined() {
        return;
    }
    let r = Repo::new();
    let wts = r.wts();
    let base = r.tip();
    git(&r.project, &["branch", &branch_name(EPIC, "1-1-a"), &base]);
    assert_eq!(
        wts.create(EPIC, "1-1-a", &base).unwrap_err().code,
        "EPIC_WORKTREE_BRANCH_EXISTS"
    );
    std::fs::create_dir_all(r.root.join("epic-1/1-2-b")).unwrap();
    assert_eq!(
        wts.create(EPIC, "1-2-b", &base).unwrap_err().code,
        "EPIC_WORKTREE_PATH_TAKEN"
    );
    assert_eq!(
        wts.create(EPIC, "../x", &base).unwrap_err().code,
        "EPIC_WORKTREE_NAME_INVALID"
    );
    assert_eq!(
        Worktrees::open(&r.project, &r.project.join("wt"))
            .unwrap_err()
            .code,
        "EPIC_WORKTREES_INSIDE_PROJECT"
    );
    assert_eq!(r.linked(), 0);
    r.fsck();
}

fn creating(r: &Repo, story: &str, base: &str) -> WorktreeRecord {
    let root = r.root.canonicalize().unwrap();
    WorktreeRecord {
        version: 1,
        epic: EPIC.into(),
        story: story.into(),
        branch: branch_name(EPIC, story),
        base: base.into(),
        path: root.join(EPIC).join(story),
        state: WorktreeState::Creating,
        admin: None,
        delete_branch: false,
        kept: None,
        merge: None,
        created_at: "2026-01-01T00:00:00Z".into(),
    }
}

/// A kill between any two steps of `create`, simulated by doing the steps before it by hand:
/// the next `create` finishes the job.
#[test]
fn a_creation_killed_at_each_step_is_finished() {
    if !confined() {
        return;
    }
    let r = Repo::new();
    let wts = r.wts();
    let base = r.tip();

    // Killed right after the record was written.
    wts.write_record(&creating(&r, "1-1-a", &base)).unwrap();
    let wt = wts.create(EPIC, "1-1-a", &base).unwrap();
    assert!(wt.path().join("a.txt").is_file());

    // Killed after `git worktree add -b` made the branch, before the worktree.
    let rec = creating(&r, "1-2-b", &base);
    wts.write_record(&rec).unwrap();
    git(&r.project, &["branch", &rec.branch, &base]);
    let wt = wts.create(EPIC, "1-2-b", &base).unwrap();
    assert_eq!(git(wt.path(), &["rev-parse", "HEAD"]).trim(), base);

    // Killed inside `git worktree add`: registered, still locked "initializing", the
    // checkout half done.
    let rec = creating(&r, "1-3-c", &base);
    wts.write_record(&rec).unwrap();
    let shown = rec.path.to_string_lossy().into_owned();
    git(
        &r.project,
        &["worktree", "add", "-q", "-b", &rec.branch, &shown, &base],
    );
    let admin = r.project.join(".git/worktrees/1-3-c");
    std::fs::write(admin.join("locked"), "initializing").unwrap();
    std::fs::remove_file(rec.path.join("a.txt")).unwrap();
    let wt = wts.create(EPIC, "1-3-c", &base).unwrap();
    assert!(wt.path().join("a.txt").is_file(), "made again whole");
    assert!(!wt.git_dir.join("locked").exists());

    // Killed after `git worktree add` finished, before the record said ready: adopted.
    let rec = creating(&r, "1-4-d", &base);
    wts.write_record(&rec).unwrap();
    let shown = rec.path.to_string_lossy().into_owned();
    git(
        &r.project,
        &["worktree", "add", "-q", "-b", &rec.branch, &shown, &base],
    );
    std::fs::write(rec.path.join("early.txt"), "x").unwrap();
    let wt = wts.create(EPIC, "1-4-d", &base).unwrap();
    assert!(
        wt.path().join("early.txt").is_file(),
        "adopted, not made again"
    );
    assert_eq!(
        wts.read_record(EPIC, "1-4-d").unwrap().unwrap().state,
        WorktreeState::Ready
    );

    // Killed after the folder was made but before git registered it.
    let rec = creating(&r, "1-5-e", &base);
    wts.write_record(&rec).unwrap();
    std::fs::create_dir_all(rec.path.join("half")).unwrap();
    let wt = wts.create(EPIC, "1-5-e", &base).unwrap();
    assert!(!wt.path().join("half").exists());
    assert!(wt.path().join("a.txt").is_file());

    assert_eq!(r.linked(), 5);
    for l in wts.list().unwrap() {
        assert!(matches!(l.live, Live::Ready { .. }), "{l:?}");
    }
    r.fsck();
}

#[test]
fn a_removal_killed_at_each_step_is_finished_and_a_lost_worktree_is_made_again() {
    if !confined() {
        return;
    }
    let r = Repo::new();
    let wts = r.wts();
    let base = r.tip();
    for story in ["1-1-a", "1-2-b", "1-3-c", "1-4-d"] {
        wts.create(EPIC, story, &base).unwrap();
    }
    // Killed right after the record said "removing".
    let mut rec = wts.read_record(EPIC, "1-1-a").unwrap().unwrap();
    rec.state = WorktreeState::Removing;
    rec.delete_branch = true;
    wts.write_record(&rec).unwrap();
    // Killed inside `git worktree remove`: the folder half deleted (its .git file gone).
    let mut rec2 = wts.read_record(EPIC, "1-2-b").unwrap().unwrap();
    rec2.state = WorktreeState::Removing;
    wts.write_record(&rec2).unwrap();
    std::fs::remove_file(rec2.path.join(".git")).unwrap();
    // Killed after the folder was deleted, before git's entry.
    let mut rec3 = wts.read_record(EPIC, "1-3-c").unwrap().unwrap();
    rec3.state = WorktreeState::Removing;
    rec3.delete_branch = true;
    wts.write_record(&rec3).unwrap();
    std::fs::remove_dir_all(&rec3.path).unwrap();

    let left = wts.recover().unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].story, "1-4-d");
    assert_eq!(r.linked(), 1);
    for rec in [&rec, &rec2, &rec3] {
        assert!(!rec.path.exists());
        assert!(wts.read_record(EPIC, &rec.story).unwrap().is_none());
    }
    let branches = git(&r.project, &["branch", "--list"]);
    assert!(
        !branches.contains("1-1-a") && !branches.contains("1-3-c"),
        "{branches}"
    );
    assert!(branches.contains("1-2-b"), "kept: delete_branch was false");

    // A ready worktree whose folder and entry vanished is made again from its branch (its
    // commits kept); one whose folder is there but no longer a worktree is refused, never
    // thrown away.
    let wt = wts.get(EPIC, "1-4-d").unwrap().unwrap();
    std::fs::write(wt.path().join("b.txt"), "b").unwrap();
    git(wt.path(), &["add", "b.txt"]);
    git(wt.path(), &["commit", "-q", "-m", "wip"]);
    let wip = git(wt.path(), &["rev-parse", "HEAD"]).trim().to_string();
    std::fs::remove_dir_all(wt.path()).unwrap();
    git(&r.project, &["worktree", "prune"]);
    let again = wts.create(EPIC, "1-4-d", &base).unwrap();
    assert_eq!(git(again.path(), &["rev-parse", "HEAD"]).trim(), wip);
    std::fs::remove_file(again.path().join(".git")).unwrap();
    git(&r.project, &["worktree", "prune"]);
    assert_eq!(
        wts.create(EPIC, "1-4-d", &base).unwrap_err().code,
        "EPIC_WORKTREE_DAMAGED"
    );
    assert!(again.path().join("b.txt").is_file());
    wts.remove(EPIC, "1-4-d", true).unwrap();
    assert_eq!(r.linked(), 0);
    r.fsck();
}

/// A story's work: `file` written in its worktree (not committed, as a dev phase leaves it).
fn work(r: &Repo, story: &str, base: &str, file: &str, text: &str) {
    let wt = r.wts().create(EPIC, story, base).unwrap();
    std::fs::write(wt.path().join(file), text).unwrap();
}

#[test]
fn approved_stories_merge_in_order_one_commit_each() {
    if !confined() {
        return;
    }
    let r = Repo::new();
    let base = r.tip();
    work(&r, "1-1-a", &base, "one.txt", "1\n");
    work(&r, "1-2-b", &base, "two.txt", "2\n");
    work(&r, "1-3-c", &base, "three.txt", "3\n");
    // A phase that committed on its own: folded into the story's one commit.
    let wt = r.wts().get(EPIC, "1-3-c").unwrap().unwrap();
    git(wt.path(), &["add", "-A"]);
    git(wt.path(), &["commit", "-q", "-m", "model's own commit"]);
    std::fs::write(wt.path().join("three-more.txt"), "3+\n").unwrap();

    let a = merged(merge_plain(&r, "1-1-a"));
    let b = merged(merge_plain(&r, "1-2-b"));
    let c = merged(merge_plain(&r, "1-3-c"));
    assert_eq!(r.tip(), c);
    let log = git(&r.project, &["log", "--format=%H %P %s", "main"]);
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 4, "{log}");
    assert!(
        lines[0].starts_with(&format!("{c} {b} story 1-3-c: work")),
        "{log}"
    );
    assert!(
        lines[1].starts_with(&format!("{b} {a} story 1-2-b: work")),
        "{log}"
    );
    assert!(
        lines[2].starts_with(&format!("{a} {base} story 1-1-a: work")),
        "{log}"
    );
    // The main work tree is on the new tip with every story's files, clean.
    assert_eq!(git(&r.project, &["rev-parse", "HEAD"]).trim(), c);
    assert_eq!(r.status(), "");
    for (f, t) in [
        ("one.txt", "1\n"),
        ("two.txt", "2\n"),
        ("three.txt", "3\n"),
        ("three-more.txt", "3+\n"),
    ] {
        assert_eq!(r.read(f), t);
    }
    // Merging again answers the same (nothing moves); then the worktrees go.
    assert_eq!(merged(merge_plain(&r, "1-3-c")), c);
    let wts = r.wts();
    for s in ["1-1-a", "1-2-b", "1-3-c"] {
        wts.remove(EPIC, s, true).unwrap();
    }
    assert_eq!(r.linked(), 0);
    r.fsck();
}

#[test]
fn a_conflict_is_reported_with_its_files_and_the_story_merges_once_resolved() {
    if !confined() {
        return;
    }
    let r = Repo::new();
    let base = r.tip();
    let edit = |line: &str| -> String {
        (1..=10)
            .map(|i| {
                if i == 5 {
                    format!("{line}\n")
                } else {
                    format!("line {i}\n")
                }
            })
            .collect()
    };
    work(&r, "1-1-a", &base, "a.txt", &edit("five by A"));
    work(&r, "1-2-b", &base, "a.txt", &edit("five by B"));
    let a = merged(merge_plain(&r, "1-1-a"));
    let MergeOutcome::Conflict { files, tail } = merge_plain(&r, "1-2-b") else {
        panic!("no conflict");
    };
    assert_eq!(files, ["a.txt"]);
    assert!(tail.contains("a.txt"), "{tail}");
    // The epic's branch and the main work tree did not move.
    assert_eq!(r.tip(), a);
    assert_eq!(r.status(), "");
    assert!(r.read("a.txt").contains("five by A"));
    // The worktree is on the tip with B's change applied and the conflict marked; no rebase
    // or merge in progress.
    let wt = r.wts().get(EPIC, "1-2-b").unwrap().unwrap();
    assert_eq!(git(wt.path(), &["rev-parse", "HEAD"]).trim(), a);
    let text = std::fs::read_to_string(wt.path().join("a.txt")).unwrap();
    assert!(
        text.contains("<<<<<<<") && text.contains("five by B"),
        "{text}"
    );
    assert!(!wt.git_dir.join("rebase-merge").exists());
    assert!(!wt.git_dir.join("MERGE_HEAD").exists());
    assert!(
        r.wts()
            .read_record(EPIC, "1-2-b")
            .unwrap()
            .unwrap()
            .merge
            .is_none()
    );
    // The developer resolves it; the story merges.
    std::fs::write(wt.path().join("a.txt"), edit("five by A and B")).unwrap();
    let b = merged(merge_plain(&r, "1-2-b"));
    assert_eq!(git(&r.project, &["rev-parse", &format!("{b}^")]).trim(), a);
    assert!(r.read("a.txt").contains("five by A and B"));
    assert_eq!(r.status(), "");
    r.fsck();
}

#[test]
fn a_check_failing_after_the_rebase_is_reported_and_nothing_moves() {
    if !confined() {
        return;
    }
    let r = Repo::new();
    let base = r.tip();
    work(&r, "1-1-a", &base, "x.txt", "x\n");
    work(&r, "1-2-b", &base, "y.txt", "y\n");
    let t = terminal();
    let cancel = CancellationToken::new();
    // Each story alone passes; together they do not.
    let verify = vec![
        "test -e a.txt".to_string(),
        "if test -e x.txt && test -e y.txt; then pwd; echo 'x and y clash'; exit 3; fi".to_string(),
    ];
    let mut seen = Vec::new();
    let s = settings(
        "main",
        "story 1-1-a: x",
        &verify,
        &[],
        &[],
        &t,
        &cancel,
        r.started,
    );
    let a = merged(
        merge_story(&r.wts(), EPIC, "1-1-a", &s, &mut |c| {
            seen.push(c.command.clone())
        })
        .unwrap(),
    );
    assert_eq!(seen.len(), 2);
    let s = settings(
        "main",
        "story 1-2-b: y",
        &verify,
        &[],
        &[],
        &t,
        &cancel,
        r.started,
    );
    let out = merge_story(&r.wts(), EPIC, "1-2-b", &s, &mut |_| {}).unwrap();
    let MergeOutcome::CheckFailed { result } = out else {
        panic!("{out:?}");
    };
    assert!(
        result.report().contains("exit code 3"),
        "{}",
        result.report()
    );
    assert!(result.tail.contains("x and y clash"), "{}", result.tail);
    // No host path for the developer: the worktree reads @project.
    assert!(result.tail.contains("@project"), "{}", result.tail);
    assert!(
        !result
            .tail
            .contains(r.project.parent().unwrap().to_str().unwrap()),
        "{}",
        result.tail
    );
    assert_eq!(r.tip(), a);
    assert_eq!(r.status(), "");
    assert!(!r.project.join("y.txt").exists());
    // The worktree stays rebased on the tip for the developer.
    let wt = r.wts().get(EPIC, "1-2-b").unwrap().unwrap();
    assert_eq!(git(wt.path(), &["rev-parse", "HEAD^"]).trim(), a);
    assert!(
        r.wts()
            .read_record(EPIC, "1-2-b")
            .unwrap()
            .unwrap()
            .merge
            .is_none()
    );
    r.fsck();
}

/// The epic's branch is checked out in the main work tree, where the orchestrator keeps its
/// own changes: the fast-forward leaves it on the new tip, those changes kept (or committed
/// with the story when carried), nothing mid-merge; a change of its own in a file the story
/// changes refuses the merge with nothing moved.
#[test]
fn the_checked_out_branch_is_fast_forwarded_with_the_main_work_tree() {
    if !confined() {
        return;
    }
    let r = Repo::new();
    let base = r.tip();
    work(&r, "1-1-a", &base, "one.txt", "1\n");
    work(&r, "1-2-b", &base, "two.txt", "2\n");
    work(&r, "1-3-c", &base, "a.txt", "changed by c\n");
    // The worktree's copy of the orchestrator's file was changed by a phase: left out.
    let wt = r.wts().get(EPIC, "1-1-a").unwrap().unwrap();
    std::fs::write(wt.path().join("status.yaml"), "1-1-a: done-by-model\n").unwrap();
    std::fs::write(r.project.join("status.yaml"), "1-1-a: review\n").unwrap();
    std::fs::write(r.project.join("notes.txt"), "user's untracked notes\n").unwrap();
    let t = terminal();
    let cancel = CancellationToken::new();
    let files = vec!["status.yaml".to_string()];

    // Not carried: the orchestrator's change stays a change of the main work tree.
    let s = settings(
        "main",
        "story 1-1-a: one",
        &[],
        &[],
        &files,
        &t,
        &cancel,
        r.started,
    );
    let a = merged(merge_story(&r.wts(), EPIC, "1-1-a", &s, &mut |_| {}).unwrap());
    assert_eq!(git(&r.project, &["rev-parse", "HEAD"]).trim(), a);
    assert_eq!(
        git(&r.project, &["show", "--name-only", "--format=", &a]).trim(),
        "one.txt"
    );
    assert_eq!(r.read("status.yaml"), "1-1-a: review\n");
    assert_eq!(r.status(), " M status.yaml\n?? notes.txt\n");
    assert_eq!(
        git(wt.path(), &["status", "--porcelain"]),
        "",
        "the worktree is clean"
    );

    // Carried: committed with the story, as sequential mode does.
    let s = settings(
        "main",
        "story 1-2-b: two",
        &[],
        &files,
        &files,
        &t,
        &cancel,
        r.started,
    );
    let b = merged(merge_story(&r.wts(), EPIC, "1-2-b", &s, &mut |_| {}).unwrap());
    let shown = git(&r.project, &["show", "--name-only", "--format=%s", &b]);
    assert_eq!(shown.trim(), "story 1-2-b: two\n\nstatus.yaml\ntwo.txt");
    assert_eq!(r.status(), "?? notes.txt\n");
    assert_eq!(r.read("two.txt"), "2\n");

    // A change of the main work tree's own in a file the story changes: refused, nothing moved.
    std::fs::write(r.project.join("a.txt"), "the user's edit\n").unwrap();
    let s = settings(
        "main",
        "story 1-3-c: a",
        &[],
        &[],
        &files,
        &t,
        &cancel,
        r.started,
    );
    let out = merge_story(&r.wts(), EPIC, "1-3-c", &s, &mut |_| {}).unwrap();
    let MergeOutcome::Blocked { files: busy } = out else {
        panic!("{out:?}");
    };
    assert_eq!(busy, ["a.txt"]);
    assert_eq!(r.tip(), b);
    assert_eq!(r.read("a.txt"), "the user's edit\n");
    // Once the user's change is gone, it merges.
    git(&r.project, &["checkout", "--", "a.txt"]);
    let c = merged(merge_story(&r.wts(), EPIC, "1-3-c", &s, &mut |_| {}).unwrap());
    assert_eq!(git(&r.project, &["rev-parse", "HEAD"]).trim(), c);
    assert_eq!(r.read("a.txt"), "changed by c\n");
    assert_eq!(r.status(), "?? notes.txt\n");
    r.fsck();
}

/// Does by hand what `merge_story` does up to a step, so a kill right there can be resumed:
/// the story committed and rebased onto the tip in its worktree. Returns (tip, rebased).
fn committed_and_rebased(r: &Repo, story: &str) -> (String, String) {
    let wt = r.wts().get(EPIC, story).unwrap().unwrap();
    let tip = r.tip();
    git(wt.path(), &["add", "-A"]);
    git(
        wt.path(),
        &["commit", "-q", "-m", &format!("story {story}: work")],
    );
    git(wt.path(), &["rebase", "-q", &tip]);
    let rebased = git(wt.path(), &["rev-parse", "HEAD"]).trim().to_string();
    (tip, rebased)
}

fn set_step(r: &Repo, story: &str, step: MergeStep) {
    let wts = r.wts();
    let mut rec = wts.read_record(EPIC, story).unwrap().unwrap();
    rec.merge = Some(step);
    wts.write_record(&rec).unwrap();
}

#[test]
fn a_merge_killed_at_each_step_is_finished_on_resume() {
    if !confined() {
        return;
    }
    let r = Repo::new();
    let base = r.tip();
    for (story, file) in [
        ("1-1-a", "one.txt"),
        ("1-2-b", "two.txt"),
        ("1-3-c", "three.txt"),
        ("1-4-d", "four.txt"),
        ("1-5-e", "five.txt"),
    ] {
        work(&r, story, &base, file, &format!("{story}\n"));
    }
    // The kill lands in a rebase (stopped with its state on disk): aborted and done again.
    let wt = r.wts().get(EPIC, "1-1-a").unwrap().unwrap();
    git(wt.path(), &["add", "-A"]);
    git(wt.path(), &["commit", "-q", "-m", "story 1-1-a: work"]);
    git(
        &r.project,
        &["commit", "-q", "--allow-empty", "-m", "moved on"],
    );
    let (stopped, _, _) = git_status(wt.path(), &["rebase", "--exec", "false", "main"]);
    assert!(!stopped && wt.git_dir.join("rebase-merge").exists());
    set_step(
        &r,
        "1-1-a",
        MergeStep::Rebasing {
            tip: r.tip(),
            story: String::new(),
        },
    );
    let a = merged(merge_plain(&r, "1-1-a"));
    assert!(r.read("one.txt").contains("1-1-a"));

    // The kill lands between the branch's move and the main work tree's update.
    let (tip, rebased) = committed_and_rebased(&r, "1-2-b");
    assert_eq!(tip, a);
    set_step(
        &r,
        "1-2-b",
        MergeStep::Advancing {
            tip: tip.clone(),
            commit: rebased.clone(),
        },
    );
    git(
        &r.project,
        &["update-ref", "refs/heads/main", &rebased, &tip],
    );
    assert!(!r.project.join("two.txt").exists());
    assert_eq!(merged(merge_plain(&r, "1-2-b")), rebased);
    assert_eq!(r.read("two.txt"), "1-2-b\n");
    assert_eq!(r.status(), "");

    // The kill lands inside the main work tree's update: a file half written and git's index
    // lock left behind (older than this process).
    let (tip, rebased) = committed_and_rebased(&r, "1-3-c");
    set_step(
        &r,
        "1-3-c",
        MergeStep::Advancing {
            tip: tip.clone(),
            commit: rebased.clone(),
        },
    );
    git(
        &r.project,
        &["update-ref", "refs/heads/main", &rebased, &tip],
    );
    std::fs::write(r.project.join("three.txt"), "1-3").unwrap();
    std::fs::write(r.project.join(".git/index.lock"), "").unwrap();
    let started = SystemTime::now();
    let t = terminal();
    let cancel = CancellationToken::new();
    let s = settings(
        "main",
        "story 1-3-c: work",
        &[],
        &[],
        &[],
        &t,
        &cancel,
        started,
    );
    assert_eq!(
        merged(merge_story(&r.wts(), EPIC, "1-3-c", &s, &mut |_| {}).unwrap()),
        rebased
    );
    assert_eq!(r.read("three.txt"), "1-3-c\n");
    assert!(!r.project.join(".git/index.lock").exists());
    assert_eq!(r.status(), "");

    // The kill lands during verify: it runs again, then the merge ends.
    let (tip, rebased) = committed_and_rebased(&r, "1-4-d");
    set_step(
        &r,
        "1-4-d",
        MergeStep::Verifying {
            tip,
            rebased: rebased.clone(),
        },
    );
    let verify = vec!["test -e four.txt".to_string()];
    let mut ran = 0;
    let s = settings(
        "main",
        "story 1-4-d: work",
        &verify,
        &[],
        &[],
        &t,
        &cancel,
        r.started,
    );
    assert_eq!(
        merged(merge_story(&r.wts(), EPIC, "1-4-d", &s, &mut |_| ran += 1).unwrap()),
        rebased
    );
    assert_eq!(ran, 1);

    // The kill lands while a conflict is handed back: after the reset, before the changes were
    // applied again. The hand-over is redone.
    let wt = r.wts().get(EPIC, "1-5-e").unwrap().unwrap();
    std::fs::write(wt.path().join("four.txt"), "e's four\n").unwrap();
    git(wt.path(), &["add", "-A"]);
    git(wt.path(), &["commit", "-q", "-m", "story 1-5-e: work"]);
    let story = git(wt.path(), &["rev-parse", "HEAD"]).trim().to_string();
    let tip = r.tip();
    set_step(
        &r,
        "1-5-e",
        MergeStep::Conflict {
            tip: tip.clone(),
            story,
            files: vec!["four.txt".into()],
            tail: "CONFLICT (add/add): Merge conflict in four.txt".into(),
        },
    );
    git(wt.path(), &["reset", "-q", "--hard", &tip]);
    let MergeOutcome::Conflict { files, tail } = merge_plain(&r, "1-5-e") else {
        panic!("no conflict");
    };
    assert_eq!(files, ["four.txt"]);
    assert!(tail.contains("four.txt"));
    let text = std::fs::read_to_string(wt.path().join("four.txt")).unwrap();
    assert!(
        text.contains("<<<<<<<") && text.contains("e's four"),
        "{text}"
    );
    assert!(wt.path().join("five.txt").is_file());
    assert_eq!(r.tip(), tip);

    // A merge already ended answers the same.
    set_step(&r, "1-4-d", MergeStep::Merged { commit: r.tip() });
    let before = r.tip();
    merged(merge_plain(&r, "1-4-d"));
    assert_eq!(r.tip(), before);
    assert_eq!(r.status(), "");
    r.fsck();
}

/// Hooks the repository names (which the model may have written) never run for these
/// commands.
#[test]
fn no_hook_runs() {
    use std::os::unix::fs::PermissionsExt;
    if !confined() {
        return;
    }
    let r = Repo::new();
    let hooks = r.project.join(".git/hooks");
    for hook in [
        "post-checkout",
        "pre-rebase",
        "post-rewrite",
        "pre-commit",
        "commit-msg",
        "post-commit",
        "post-merge",
        "reference-transaction",
    ] {
        let path = hooks.join(hook);
        std::fs::write(
            &path,
            format!("#!/bin/sh\ntouch \"{}/ran-{hook}\"\n", r.project.display()),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let base = r.tip();
    work(&r, "1-1-a", &base, "one.txt", "1\n");
    work(&r, "1-2-b", &base, "two.txt", "2\n");
    merged(merge_plain(&r, "1-1-a"));
    merged(merge_plain(&r, "1-2-b"));
    r.wts().remove(EPIC, "1-1-a", true).unwrap();
    let ran: Vec<String> = std::fs::read_dir(&r.project)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("ran-"))
        .collect();
    assert!(ran.is_empty(), "hooks ran: {ran:?}");
    r.fsck();
}

/// The default root is in the store, which no confined command may read: git still makes,
/// merges and removes worktrees there (the root is made writable for it), and a verify
/// command in the worktree runs. Run in a child process whose `BATON_HOME` names a store.
#[test]
fn worktrees_in_the_store_work() {
    if !confined() {
        return;
    }
    const CHILD: &str = "BATON_TEST_STORE_CHILD";
    let Ok(store) = std::env::var(CHILD) else {
        let tmp = tempfile::tempdir().unwrap();
        let store = tmp.path().join("store");
        std::fs::create_dir_all(&store).unwrap();
        let out = Process::new(std::env::current_exe().unwrap())
            .args([
                baton_testkit::harness_name(module_path!(), "worktrees_in_the_store_work").as_str(),
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD, &store)
            .env("BATON_HOME", &store)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{text}");
        assert!(text.contains("1 passed"), "{text}");
        return;
    };
    let mut r = Repo::new();
    r.root = PathBuf::from(&store).join("projects/0123456789abcdef/worktrees");
    let base = r.tip();
    work(&r, "1-1-a", &base, "one.txt", "1\n");
    let t = terminal();
    let cancel = CancellationToken::new();
    let verify = vec!["test -e one.txt".to_string()];
    let mut s = settings(
        "main",
        "story 1-1-a: one",
        &verify,
        &[],
        &[],
        &t,
        &cancel,
        r.started,
    );
    s.runtime = TerminalRuntime {
        store_home: Some(PathBuf::from(&store)),
        ..TerminalRuntime::default()
    };
    merged(merge_story(&r.wts(), EPIC, "1-1-a", &s, &mut |_| {}).unwrap());
    assert_eq!(r.read("one.txt"), "1\n");
    r.wts().remove(EPIC, "1-1-a", true).unwrap();
    assert_eq!(r.linked(), 0);
    r.fsck();
}
