//! A hostile model on a shared `baton worker` (PostgreSQL queue, bare remotes, scripted
//! models on loopback): git on its worktree never runs what it wrote, with or without the
//! worker's secrets, and a unit sees nothing of the worker's home but its own tree — not the
//! mirror of another project, not another unit's folder (kept or live), not another unit's
//! temporary files — whatever `BATON_HOME` is (here outside `$HOME`, as a deployment sets it).
//! Skips without PostgreSQL unless BATON_REQUIRE_POSTGRES is set (CI sets it).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::attacker;
use crate::worker_support;

use baton_llm::Trace;
use baton_llm::testing::{Reply, ScriptedServer};
use baton_testkit::demo_trace;
use baton_testkit::git::project_with_remote;
use baton_testkit::pg::postgres_or_skip;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use worker_support::{KEY, psql, queue, submit_package, unit_state, until_received};

/// `baton` with its home at `home` (BATON_HOME) and `$HOME` elsewhere, so nothing of the home
/// is hidden by the rules for `$HOME`: the worker's own isolation is what is tested.
fn baton_outside_home(root: &Path, home: &Path) -> Command {
    let user_home = root.join("user-home");
    std::fs::create_dir_all(&user_home).unwrap();
    let mut cmd = Command::new(attacker::baton_bin());
    cmd.env("BATON_HOME", home)
        .env("HOME", &user_home)
        .env("NO_COLOR", "1")
        .env("OPENAI_API_KEY", KEY)
        .env("BATON_DEPLOY_SECRET", "db-password-hunter2")
        .env_remove("PGPASSWORD")
        .env_remove("BATON_MODEL")
        .env_remove("OPENAI_BASE_URL");
    cmd
}

/// `baton run --queue` of the shell-enabled create-story package on `project`, answered by the
/// model at `base_url`, the first question answered in advance.
fn submit(submitter: &Path, project: &Path, url: &str, base_url: &str) {
    let pkg = attacker::shell_package(submitter.parent().unwrap());
    let input = ["--input", "1-2-user-authentication"];
    submit_package(submitter, &pkg, project, url, base_url, &input);
}

/// The sample project pushed to its own bare remote under `root`, with the shell tools on and
/// `files` committed.
fn project(root: &Path, files: &[(&str, &str)]) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(root).unwrap();
    let (project, bare) = project_with_remote(root);
    std::fs::write(project.join("baton.toml"), attacker::SHELL_ALLOWED).unwrap();
    for (name, text) in files {
        std::fs::write(project.join(name), text).unwrap();
    }
    baton_testkit::git::git(&project, &["add", "-A"]);
    baton_testkit::git::git(&project, &["commit", "-q", "-m", "tools"]);
    baton_testkit::git::git(&project, &["push", "-q", "origin", "main"]);
    (project, bare)
}

/// The demo conversation, with `first` answered before it.
async fn model(first: Reply) -> ScriptedServer {
    let mut replies = vec![first];
    replies.extend(Reply::from_trace(&Trace::load(&demo_trace()).unwrap()));
    ScriptedServer::start(replies).await.unwrap()
}

fn worker(root: &Path, home: &Path, url: &str, extra: &[&str]) -> std::process::Child {
    std::fs::create_dir_all(home).unwrap();
    std::fs::write(home.join("config.toml"), attacker::SHELL_ALLOWED).unwrap();
    baton_outside_home(root, home)
        .args(["worker", "--db", url, "--lease-s", "30"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

async fn finish(child: std::process::Child) -> std::process::Output {
    tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap()
}

/// Every file under `dir`, read as text where it is text.
fn any_file_holds(dir: &Path, needle: &str) -> Option<PathBuf> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(meta) = p.symlink_metadata() else {
            continue;
        };
        if meta.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().flatten().map(|e| e.path()));
        } else if meta.is_file()
            && std::fs::read(&p).is_ok_and(|b| String::from_utf8_lossy(&b).contains(needle))
        {
            return Some(p);
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_repositorys_fsmonitor_never_runs_in_the_workers_git() {
    let Some(pg) = postgres_or_skip("a_nested_repositorys_fsmonitor_never_runs") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let url = queue(&pg, &tmp.path().join("submitter"));
    let (project, bare) = project(&tmp.path().join("p"), &[]);
    let marker = tmp.path().join("fsmonitor-ran");
    // The model's first move: a repository of its own whose fsmonitor dumps the environment
    // of whoever runs git there into the tree, then the ordinary work, over many checkpoints.
    let script = attacker::nested_fsmonitor(&attacker::exfiltrate_env(&marker));
    let server = model(attacker::shell("call-attack", &script)).await;
    submit(
        &tmp.path().join("submitter"),
        &project,
        &url,
        &server.base_url(),
    );
    let home = tmp.path().join("srv/baton");
    let out = finish(worker(
        tmp.path(),
        &home,
        &url,
        &["--exit-when-idle", "--keep-units"],
    ))
    .await;
    assert!(out.status.success(), "{out:?}");
    // The attack ran in the model's sandbox (its repository is in the result).
    let results = server.received();
    assert_eq!(server.remaining(), 0, "the whole conversation was played");
    let attack_result = results[1].body.to_string();
    assert!(attack_result.contains("exitCode"), "{attack_result}");
    assert_eq!(unit_state(&pg, 1), "done:1");
    let branch = "refs/heads/baton/unit-1/epoch-1";
    let files = baton_testkit::git::git(&bare, &["ls-tree", "-r", "--name-only", branch]);
    assert!(files.contains("artifacts/"), "{files}");
    // No git of the worker's ran it: no marker, no environment in the tree or on the remote.
    assert!(!marker.exists(), "the nested repository's fsmonitor ran");
    assert!(!files.contains("leaked-env.txt"), "{files}");
    for secret in [KEY, "db-password-hunter2"] {
        attacker::assert_nowhere_in(&bare, secret);
        assert_eq!(any_file_holds(&home.join("worker/units"), secret), None);
    }
}

/// Project B's secrets, which project A's model hunts for on the worker they share.
const B_SECRET: &str = "token-of-project-b-5c1f0e";

async fn steal_from(tmp: &Path, url: &str, a_project: &Path) -> ScriptedServer {
    let server = model(attacker::shell(
        "call-steal",
        attacker::STEAL_FROM_WORKER_HOME,
    ))
    .await;
    submit(&tmp.join("submitter"), a_project, url, &server.base_url());
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unit_sees_nothing_of_a_project_that_ran_before_it_on_the_same_worker() {
    let Some(pg) = postgres_or_skip("a_unit_sees_nothing_of_a_project_that_ran_before") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let url = queue(&pg, &tmp.path().join("submitter"));
    let home = tmp.path().join("srv/baton");
    // B runs first and leaves its folder (--keep-units) and its mirror on the worker.
    let (b_project, _) = project(&tmp.path().join("b"), &[("secret-b.txt", B_SECRET)]);
    let b_model = ScriptedServer::start(Reply::from_trace(&Trace::load(&demo_trace()).unwrap()))
        .await
        .unwrap();
    submit(
        &tmp.path().join("submitter"),
        &b_project,
        &url,
        &b_model.base_url(),
    );
    let out = finish(worker(
        tmp.path(),
        &home,
        &url,
        &["--exit-when-idle", "--keep-units"],
    ))
    .await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(unit_state(&pg, 1), "done:1");
    // Then A, whose model looks everywhere it can reach from its worktree.
    let (a_project, a_bare) = project(&tmp.path().join("a"), &[]);
    let a_model = steal_from(tmp.path(), &url, &a_project).await;
    let out = finish(worker(
        tmp.path(),
        &home,
        &url,
        &["--exit-when-idle", "--keep-units"],
    ))
    .await;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(unit_state(&pg, 2), "done:1");
    assert_eq!(a_model.remaining(), 0);
    let branch = "refs/heads/baton/unit-2/epoch-1";
    let stolen = baton_testkit::git::git(&a_bare, &["show", &format!("{branch}:stolen.txt")]);
    assert!(!stolen.contains(B_SECRET), "{stolen}");
    attacker::assert_nowhere_in(&a_bare, B_SECRET);
    // Unit folders are not named by their id alone.
    let names: Vec<String> = std::fs::read_dir(home.join("worker/units"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| n.len() > "1-1-".len() + 16),
        "{names:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unit_sees_nothing_of_a_unit_running_beside_it() {
    let Some(pg) = postgres_or_skip("a_unit_sees_nothing_of_a_unit_running_beside_it") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let url = queue(&pg, &tmp.path().join("submitter"));
    let home = tmp.path().join("srv/baton");
    // B's run writes its secret in its tree and its temporary home, then waits on its model
    // while A runs beside it.
    let (b_project, _) = project(&tmp.path().join("b"), &[("secret-b.txt", B_SECRET)]);
    let b_write = serde_json::json!({
        "script": format!("echo {B_SECRET} > \"$HOME/secret.txt\"; echo {B_SECRET} > \"$TMPDIR/tmp.txt\"")
    })
    .to_string();
    let b_model = ScriptedServer::start(vec![
        Reply::tool_calls(&[("call-b", "shell_exec", &b_write)]),
        Reply::Hang,
    ])
    .await
    .unwrap();
    submit(
        &tmp.path().join("submitter"),
        &b_project,
        &url,
        &b_model.base_url(),
    );
    let mut w = worker(tmp.path(), &home, &url, &["--concurrency", "2"]);
    until_received(2, "B's second request never came", || {
        b_model.received().len()
    })
    .await;
    let (a_project, a_bare) = project(&tmp.path().join("a"), &[]);
    let a_model = steal_from(tmp.path(), &url, &a_project).await;
    // A completes while B still waits on its model.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while psql(&pg, "SELECT state FROM baton.work_units WHERE id = 2") != "done" {
        assert!(std::time::Instant::now() < deadline, "A never completed");
        assert!(w.try_wait().unwrap().is_none(), "the worker stopped");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(
        psql(&pg, "SELECT state FROM baton.work_units WHERE id = 1"),
        "leased"
    );
    w.kill().unwrap();
    let _ = w.wait();
    assert_eq!(a_model.remaining(), 0);
    let stolen = baton_testkit::git::git(
        &a_bare,
        &["show", "refs/heads/baton/unit-2/epoch-1:stolen.txt"],
    );
    assert!(!stolen.contains(B_SECRET), "{stolen}");
    attacker::assert_nowhere_in(&a_bare, B_SECRET);
}
