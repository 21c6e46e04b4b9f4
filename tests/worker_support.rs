//! What the queued-answer and retry tests of `baton worker` share (`cli_worker_answer`,
//! `cli_worker_retry`): a throwaway PostgreSQL with the queue, the sample project pushed to a
//! bare remote, `baton` with a home of its own, and waits on the database's state with a
//! deadline (never a fixed sleep).
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_testkit::pg::PgServer;
use baton_testkit::{example, sample_project};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub const KEY: &str = "sk-worker-test-0123456789";

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

/// `baton` with its own home (BATON_HOME and HOME), no colour, a key for the scripted model.
pub fn baton(home: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
    cmd.env("BATON_HOME", home)
        .env("HOME", home)
        .env("NO_COLOR", "1")
        .env("OPENAI_API_KEY", KEY)
        .env_remove("PGPASSWORD")
        .env_remove("PGPASSFILE")
        .env_remove("BATON_MODEL")
        .env_remove("OPENAI_BASE_URL");
    cmd
}

/// A queue initialised in the server's `postgres` database; returns its URL.
pub fn queue(pg: &PgServer, home: &Path) -> String {
    let url = pg.socket_url("postgres");
    let out = baton(home)
        .args(["queue", "init", "--db", &url])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    url
}

/// The sample project committed and pushed to a bare repository; returns (project, bare).
pub fn project_with_remote(root: &Path) -> (PathBuf, PathBuf) {
    let project = sample_project(root);
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "start"]);
    let bare = root.join("remote.git");
    git(root, &["init", "-q", "--bare", bare.to_str().unwrap()]);
    git(
        &project,
        &["remote", "add", "origin", bare.to_str().unwrap()],
    );
    git(&project, &["push", "-q", "origin", "main"]);
    (project, bare)
}

/// `baton run` of the create-story example submitted to the queue at `url`, answered by the
/// model at `base_url`, with `extra` arguments; it must succeed.
pub fn submit(home: &Path, project: &Path, url: &str, base_url: &str, extra: &[&str]) {
    let pkg = example("create-story-micro");
    let out = baton(home)
        .args([
            "run",
            pkg.to_str().unwrap(),
            "--project",
            project.to_str().unwrap(),
            "--queue",
            url,
            "--model",
            "scripted",
            "--base-url",
            base_url,
        ])
        .args(extra)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

pub fn psql(pg: &PgServer, sql: &str) -> String {
    pg.psql("postgres", sql).unwrap().trim().to_string()
}

/// Polls `sql` until it prints `want` (an event in the database, not a fixed wait).
pub fn wait_for(pg: &PgServer, sql: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let got = psql(pg, sql);
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {sql} = {want} (last: {got})"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The JSON a command printed on stdout.
pub fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            stderr(out)
        )
    })
}

pub fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}
