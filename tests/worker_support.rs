//! What the tests of the work queue and `baton worker` share (`cli_worker`, `cli_worker_answer`,
//! `cli_worker_retry`, `cli_worker_fleet`, `cli_queue_read`, `cli_queue_run`): a throwaway
//! PostgreSQL with the queue, the sample project pushed to a bare remote, `baton` with a home of
//! its own, and waits on the database's state or the model's requests with a deadline (never a
//! fixed sleep).
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_llm::Trace;
use baton_llm::testing::{Reply, ScriptedServer};
use baton_testkit::demo_trace;
use baton_testkit::example;
use baton_testkit::pg::PgServer;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const KEY: &str = "sk-worker-test-0123456789";

/// The `baton` at `bin` with `home` as its home (BATON_HOME and HOME), no colour, `key` as the
/// model's key, and none of the caller's database password or model settings.
pub fn baton_at(bin: &Path, home: &Path, key: &str) -> Command {
    let mut cmd = Command::new(bin);
    cmd.env("BATON_HOME", home)
        .env("HOME", home)
        .env("NO_COLOR", "1")
        .env("OPENAI_API_KEY", key)
        .env_remove("PGPASSWORD")
        .env_remove("PGPASSFILE")
        .env_remove("BATON_MODEL")
        .env_remove("OPENAI_BASE_URL");
    cmd
}

/// `baton` with its own home (BATON_HOME and HOME), no colour, a key for the scripted model.
pub fn baton(home: &Path) -> Command {
    baton_at(Path::new(env!("CARGO_BIN_EXE_baton")), home, KEY)
}

/// A queue initialised in the server's `postgres` database; returns its URL.
pub fn queue(pg: &PgServer, home: &Path) -> String {
    queue_with(baton(home), pg)
}

/// [`queue`], initialised by the `baton` command given.
pub fn queue_with(mut baton: Command, pg: &PgServer) -> String {
    let url = pg.socket_url("postgres");
    let out = baton
        .args(["queue", "init", "--db", &url])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    url
}

/// `baton run` of the create-story example submitted to the queue at `url`, answered by the
/// model at `base_url`, with `extra` arguments; it must succeed.
pub fn submit(home: &Path, project: &Path, url: &str, base_url: &str, extra: &[&str]) {
    submit_package(
        home,
        &example("create-story-micro"),
        project,
        url,
        base_url,
        extra,
    );
}

/// [`submit`] of the package at `pkg`.
pub fn submit_package(
    home: &Path,
    pkg: &Path,
    project: &Path,
    url: &str,
    base_url: &str,
    extra: &[&str],
) {
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

/// What `sql` prints in the server's `postgres` database, trimmed; it must run.
pub fn psql(pg: &PgServer, sql: &str) -> String {
    pg.psql("postgres", sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .trim()
        .to_string()
}

/// A worker on `home` with a 2-second lease, SIGKILLed once the model has had `n` requests
/// (`what` says which never came): the unit it held stays leased, with its checkpoints.
pub async fn worker_killed_at(
    home: &Path,
    url: &str,
    n: usize,
    what: &str,
    received: impl Fn() -> usize,
) {
    let mut worker = baton(home)
        .args(["worker", "--db", url, "--lease-s", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    until_received(n, what, received).await;
    worker.kill().unwrap();
    worker.wait().unwrap();
}

/// Unit `id`'s `state:epoch`.
pub fn unit_state(pg: &PgServer, id: i64) -> String {
    psql(
        pg,
        &format!("SELECT state || ':' || epoch FROM baton.work_units WHERE id = {id}"),
    )
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

/// Waits until unit `id`'s lease has run out by the database's clock.
pub fn wait_lease_expired(pg: &PgServer, id: i64) {
    wait_for(
        pg,
        &format!("SELECT lease_expires_at < now() FROM baton.work_units WHERE id = {id}"),
        "t",
    );
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

/// The demo conversation with a request that is never answered inserted at `index` (0-based),
/// played on 127.0.0.1.
pub async fn hanging_at(index: usize) -> ScriptedServer {
    let mut replies = Reply::from_trace(&Trace::load(&demo_trace()).unwrap());
    replies.insert(index, Reply::Hang);
    ScriptedServer::start(replies).await.unwrap()
}

/// Waits until `received()` (the requests a model got) reaches `n`, polling for a minute at
/// most; `what` says what never came.
pub async fn until_received(n: usize, what: &str, received: impl Fn() -> usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while received() < n {
        assert!(Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `resumed` (a request's messages) is the request in flight when its worker went, `hung`,
/// with the resume directive after it, as `baton resume` sends it.
pub fn assert_resumed(hung: &[Value], resumed: &[Value]) {
    assert!(resumed.len() > hung.len());
    assert_eq!(resumed[..hung.len()], hung[..]);
    assert!(
        resumed[hung.len()]["content"]
            .as_str()
            .unwrap()
            .contains("intent: resume")
    );
}
