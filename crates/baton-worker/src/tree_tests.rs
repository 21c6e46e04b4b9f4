//! The in-process checkpoint commits against git, and what a takeover finds.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::checkpoint::{CARRY_BYTES, PUSH_SOON_BYTES, TreeRecord, record_tree};
use crate::git::checkout;
use crate::pusher::Pusher;
use crate::tree_commit::{self, apply};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Runs plain git for a test; it must succeed.
fn sh(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "test")
        .env("GIT_AUTHOR_EMAIL", "test@baton.invalid")
        .env("GIT_COMMITTER_NAME", "test")
        .env("GIT_COMMITTER_EMAIL", "test@baton.invalid")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A bare remote whose `main` holds files, a folder, an executable, a link, ignore rules and a
/// tracked file they ignore; returns (remote, its commit).
fn remote(root: &Path) -> (PathBuf, String) {
    let remote = root.join("remote.git");
    let work = root.join("seed");
    sh(root, &["init", "-q", "--bare", remote.to_str().unwrap()]);
    sh(root, &["init", "-q", "-b", "main", work.to_str().unwrap()]);
    write(&work, "a.txt", "a\n");
    write(&work, "dir/b.txt", "b\n");
    write(&work, "dir/deep/c.txt", "c\n");
    write(&work, "run.sh", "#!/bin/sh\n");
    std::fs::set_permissions(work.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("a.txt", work.join("link")).unwrap();
    write(&work, ".gitignore", "ignored/\n*.log\n");
    write(&work, "keep.log", "tracked though ignored\n");
    sh(&work, &["add", "-A"]);
    sh(&work, &["add", "-f", "keep.log"]);
    sh(&work, &["commit", "-q", "-m", "start"]);
    sh(&work, &["push", "-q", remote.to_str().unwrap(), "main"]);
    let commit = sh(&work, &["rev-parse", "HEAD"]);
    (remote, commit)
}

/// A unit's worktree of `remote` at `commit`, as a worker checks it out under `home`.
fn unit_tree(home: &Path, remote: &Path, commit: &str, unit: &str) -> PathBuf {
    checkout(
        home,
        &std::sync::Mutex::new(()),
        remote.to_str().unwrap(),
        commit,
        &home.join(unit),
    )
    .unwrap()
}

/// A unit's worktree checked out from a fresh remote, with its committer.
struct Unit {
    tmp: tempfile::TempDir,
    remote: PathBuf,
    start: String,
    tree: PathBuf,
    commits: tree_commit::TreeCommitter,
}

fn unit() -> Unit {
    let tmp = tempfile::tempdir().unwrap();
    let (remote, start) = remote(tmp.path());
    let home = tmp.path().join("home");
    let tree = unit_tree(&home, &remote, &start, "u1");
    let commits = tree_commit::open(&home, &tree).unwrap();
    Unit {
        tmp,
        remote,
        start,
        tree,
        commits,
    }
}

#[test]
fn a_checkpoint_commit_holds_what_git_add_all_stages() {
    let Unit {
        tmp: _tmp,
        remote: _,
        start,
        tree,
        mut commits,
    } = unit();
    // Nothing changed: no commit.
    let (head, new) = commits.commit("none", 1).unwrap();
    assert_eq!((crate::objects::to_hex(&head), new), (start.clone(), false));

    write(&tree, "a.txt", "a, changed\n");
    write(&tree, "new/one.txt", "one\n");
    std::fs::remove_file(tree.join("dir/b.txt")).unwrap();
    std::fs::set_permissions(
        tree.join("dir/deep/c.txt"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    write(&tree, "ignored/x.txt", "ignored\n");
    write(&tree, "y.log", "ignored\n");
    write(&tree, "keep.log", "still tracked\n");
    std::os::unix::fs::symlink("new/one.txt", tree.join("link2")).unwrap();
    std::fs::create_dir_all(tree.join(".hidden")).unwrap();
    write(&tree, ".hidden/h.txt", "hidden\n");
    let (head, new) = commits.commit("turn", 2).unwrap();
    assert!(new);
    let head = crate::objects::to_hex(&head);
    // git reads every object written, and stages the same tree.
    let listed = sh(&tree, &["ls-tree", "-r", "--name-only", &head]);
    assert!(
        listed.contains("new/one.txt") && !listed.contains("ignored/"),
        "{listed}"
    );
    assert!(
        listed.contains("keep.log") && !listed.contains("y.log"),
        "{listed}"
    );
    assert_eq!(
        sh(&tree, &["cat-file", "-p", &format!("{head}:a.txt")]),
        "a, changed"
    );
    assert_eq!(sh(&tree, &["rev-parse", &format!("{head}^")]), start);
    sh(&tree, &["add", "-A"]);
    assert_eq!(
        sh(&tree, &["write-tree"]),
        sh(&tree, &["rev-parse", &format!("{head}^{{tree}}")])
    );

    // A nested repository is never entered: its files are not committed.
    sh(&tree, &["init", "-q", "sub"]);
    write(&tree, "sub/secret.txt", "nested\n");
    let (next, new) = commits.commit("nested", 3).unwrap();
    assert!(!new, "only a nested repository appeared");
    assert_eq!(crate::objects::to_hex(&next), head);
}

/// Every file of the worktree that a commit would hold, by path: (mode, bytes).
fn committed_files(tree: &Path, commit: &str) -> Vec<(String, String)> {
    sh(tree, &["ls-tree", "-r", commit])
        .lines()
        .map(|l| {
            let (meta, path) = l.split_once('\t').unwrap();
            (path.to_string(), meta.to_string())
        })
        .collect()
}

/// What a takeover finds from `record`: a fresh home's checkout of its base with its files
/// written back, committed; the commit's entries.
fn taken_over(root: &Path, remote: &Path, record: &TreeRecord, n: usize) -> Vec<(String, String)> {
    let home = root.join(format!("takeover-{n}"));
    // Over git's protocol: a local clone copies the object folder, racing the push under way.
    let url = PathBuf::from(format!("file://{}", remote.display()));
    let tree = unit_tree(&home, &url, &record.base, "unit");
    let mut commits = tree_commit::open(&home, &tree).unwrap();
    apply(&tree, &record.changes).unwrap();
    let (head, _) = commits.commit("restored", 1).unwrap();
    committed_files(&tree, &crate::objects::to_hex(&head))
}

#[test]
fn a_takeover_after_any_checkpoint_finds_every_file_the_run_wrote() {
    let Unit {
        tmp,
        remote,
        start,
        tree,
        mut commits,
    } = unit();
    let pusher = Pusher::new(
        &tree,
        remote.to_str().unwrap(),
        "refs/baton/runs/1/1",
        Duration::ZERO,
    );
    let big = "x".repeat(CARRY_BYTES + 1);
    let mut bases = std::collections::BTreeSet::new();
    for turn in 0..8 {
        match turn {
            3 => write(&tree, "big.bin", &big),
            5 => std::fs::remove_file(tree.join("dir/b.txt")).unwrap(),
            _ => write(
                &tree,
                &format!("turn/{turn}.txt"),
                &format!("turn {turn}\n"),
            ),
        }
        let record = record_tree(&mut commits, &pusher, &start, &format!("turn {turn}")).unwrap();
        // What the history will name, as a takeover right now would find it: the base is on
        // the remote (whatever push is under way), and with the carried files it is the commit.
        sh(
            &remote,
            &["cat-file", "-e", &format!("{}^{{commit}}", record.base)],
        );
        assert_eq!(
            taken_over(tmp.path(), &remote, &record, turn),
            committed_files(&tree, &record.commit),
            "turn {turn}: base {}, {} files carried",
            record.base,
            record.changes.len()
        );
        if turn == 3 {
            assert_eq!(
                record.base, record.commit,
                "too large to carry: pushed first"
            );
        }
        bases.insert(record.base.clone());
    }
    pusher.settle();
    assert!(bases.len() > 1, "the base moves on as pushes land");
}

#[test]
fn a_checkpoint_whose_pushes_fail_carries_the_files_and_fails_when_it_cannot() {
    let Unit {
        tmp,
        remote,
        start,
        tree,
        mut commits,
    } = unit();
    let gone = tmp.path().join("no-such-remote.git");
    let pusher = Pusher::new(
        &tree,
        gone.to_str().unwrap(),
        "refs/baton/runs/1/1",
        Duration::ZERO,
    );
    for turn in 0..3 {
        write(
            &tree,
            &format!("turn/{turn}.txt"),
            &format!("turn {turn}\n"),
        );
        let record = record_tree(&mut commits, &pusher, &start, "turn").unwrap();
        pusher.settle();
        assert_eq!(record.base, start, "no push landed");
        assert_eq!(
            record.changes.len(),
            turn + 1,
            "every file since the base carried"
        );
        assert_eq!(
            taken_over(tmp.path(), &remote, &record, turn),
            committed_files(&tree, &record.commit)
        );
    }
    write(&tree, "big.bin", &"x".repeat(CARRY_BYTES + 1));
    let e = record_tree(&mut commits, &pusher, &start, "big").unwrap_err();
    assert_eq!(e.code(), "WORKER_GIT_FAILED", "{e}");
}

#[test]
fn carried_files_are_never_written_through_a_link_or_into_a_repository() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("tree");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, root.join("d")).unwrap();
    let mut changes = tree_commit::Changes::new();
    changes.insert("d/x.txt".into(), Some((0o100644, b"x".to_vec())));
    apply(&root, &changes).unwrap();
    assert!(!outside.join("x.txt").exists());
    assert_eq!(std::fs::read(root.join("d/x.txt")).unwrap(), b"x");
    for bad in ["../up.txt", ".git/config", "a//b", "/abs"] {
        let mut changes = tree_commit::Changes::new();
        changes.insert(bad.into(), Some((0o100644, b"x".to_vec())));
        assert!(apply(&root, &changes).is_err(), "{bad}");
    }
}

#[test]
fn git_index_files_of_versions_2_to_4_read_as_git_lists_them() {
    let tmp = tempfile::tempdir().unwrap();
    let (remote, start) = remote(tmp.path());
    let home = tmp.path().join("home");
    let tree = unit_tree(&home, &remote, &start, "u1");
    let index = baton_git::RepoDirs::resolve(&tree)
        .unwrap()
        .git_dir
        .join("index");
    for version in ["2", "3", "4"] {
        sh(&tree, &["update-index", "--index-version", version]);
        let entries = crate::index_file::parse(&std::fs::read(&index).unwrap())
            .unwrap_or_else(|| panic!("version {version} not read"));
        let ours: Vec<String> = entries
            .iter()
            .map(|e| {
                format!(
                    "{:o} {} 0\t{}",
                    e.mode,
                    crate::objects::to_hex(&e.oid),
                    e.path
                )
            })
            .collect();
        assert_eq!(
            ours.join("\n"),
            sh(&tree, &["ls-files", "-s"]),
            "version {version}"
        );
    }
    // A split index keeps its entries elsewhere: not read here.
    sh(&tree, &["update-index", "--split-index"]);
    assert!(crate::index_file::parse(&std::fs::read(&index).unwrap()).is_none());
}

#[test]
fn a_file_rewritten_at_once_with_the_same_size_is_committed_again() {
    let Unit {
        tmp: _tmp,
        remote: _,
        start: _,
        tree,
        mut commits,
    } = unit();
    // The same length each time, rewritten in place within the file system's clock tick: only
    // the bytes differ.
    let mut heads = Vec::new();
    for round in 0..50 {
        std::fs::write(tree.join("a.txt"), format!("{round:02}\n")).unwrap();
        heads.push(commits.commit("turn", 1).unwrap());
    }
    for (round, (head, new)) in heads.iter().enumerate() {
        assert!(new, "round {round}");
        let head = crate::objects::to_hex(head);
        assert_eq!(
            sh(&tree, &["cat-file", "-p", &format!("{head}:a.txt")]),
            format!("{round:02}")
        );
    }
}

#[test]
fn pushes_keep_their_pace_unless_a_record_would_carry_too_much_or_someone_waits() {
    let Unit {
        tmp,
        remote,
        start,
        tree,
        mut commits,
    } = unit();
    let hour = Duration::from_secs(3600);
    let pusher = Pusher::new(&tree, remote.to_str().unwrap(), "refs/baton/runs/1/1", hour);
    // Fast turns: no push yet, every record carries all the remote lacks.
    let mut last = String::new();
    for turn in 0..3 {
        write(
            &tree,
            &format!("turn/{turn}.txt"),
            &format!("turn {turn}\n"),
        );
        let record = record_tree(&mut commits, &pusher, &start, "turn").unwrap();
        assert_eq!(record.base, start);
        assert_eq!(record.changes.len(), turn + 1);
        assert_eq!(
            taken_over(tmp.path(), &remote, &record, turn),
            committed_files(&tree, &record.commit)
        );
        last = record.commit;
    }
    assert_eq!(pusher.started(), 0, "the pace holds the pushes back");
    // Someone waits (the unit's end): the newest commit goes at once, the ones between never.
    let (done, settled) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            pusher.settle();
            let _ = done.send(());
        });
        settled
            .recv_timeout(Duration::from_secs(120))
            .expect("settle waited for the pace");
    });
    assert_eq!(pusher.confirmed().as_deref(), Some(last.as_str()));
    assert_eq!(pusher.started(), 1);
    // A record that would carry more than PUSH_SOON_BYTES asks for its push at once.
    write(&tree, "mid.bin", &"y".repeat(PUSH_SOON_BYTES + 1));
    let record = record_tree(&mut commits, &pusher, &start, "mid").unwrap();
    assert_eq!(record.base, last);
    assert!(
        pusher.idle_within(Duration::from_secs(120)),
        "the urgent push waited for the pace"
    );
    assert_eq!(pusher.confirmed(), Some(record.commit));
    assert_eq!(pusher.started(), 2);
}
