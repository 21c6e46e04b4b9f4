//! Failures of a queued unit that may pass are tried again, with a backoff; the others fail it
//! at once. A model endpoint that refuses connections, then answers HTTP 503 once, then plays
//! the run: the unit is queued again after each failure (`baton queue status` shows its
//! attempts and last failure while it waits), resumed from its checkpoint, and completed. A
//! unit that keeps failing fails after its attempts with the last reason; a payload that cannot
//! be read fails at once; a unit whose database connections are cut mid-run is queued again and
//! completes. Real throwaway PostgreSQL, scripted model on 127.0.0.1. Skips without
//! PostgreSQL unless BATON_REQUIRE_POSTGRES is set (CI sets it).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::worker_support;

use baton_llm::Trace;
use baton_llm::testing::{Reply, ScriptedServer};
use baton_testkit::demo_trace;
use baton_testkit::git::{git, project_with_remote};
use baton_testkit::pg::postgres_or_skip;
use serde_json::Value;
use std::process::Stdio;
use std::time::{Duration, Instant};
use worker_support::{
    assert_resumed, baton, json_of, psql, queue, signal, submit, until_received, wait_for,
};

/// A port on 127.0.0.1 that refuses connections (bound, not listening) until it is listened on.
fn closed_port() -> tokio::net::TcpSocket {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    socket
}

/// Listens on `socket` and forwards every connection to 127.0.0.1:`to`.
fn forward(socket: tokio::net::TcpSocket, to: u16) {
    let listener = socket.listen(64).unwrap();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            tokio::spawn(async move {
                if let Ok(mut out) = tokio::net::TcpStream::connect(("127.0.0.1", to)).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                }
            });
        }
    });
}

fn port_of(base_url: &str) -> u16 {
    base_url
        .trim_start_matches("http://127.0.0.1:")
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// The retry writes of a unit, oldest first.
fn retries(pg: &baton_testkit::pg::PgServer, unit: i64) -> Vec<Value> {
    let text = psql(
        pg,
        &format!(
            "SELECT coalesce(json_agg(body ORDER BY seq), '[]') FROM baton.unit_writes \
             WHERE unit_id = {unit} AND kind = 'retry'"
        ),
    );
    serde_json::from_str::<Value>(&text)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// A worker whose model client does not retry on its own (the worker's retries are tested).
fn worker_home(root: &std::path::Path, name: &str) -> std::path::PathBuf {
    let home = root.join(name);
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("config.toml"), "[llm]\nmax_retries = 0\n").unwrap();
    home
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unit_whose_model_is_unreachable_is_tried_again_with_backoff_and_completes() {
    let Some(pg) = postgres_or_skip("a_unit_whose_model_is_unreachable_is_tried_again") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let submitter = tmp.path().join("submitter-home");
    let url = queue(&pg, &submitter);
    let (project, bare) = project_with_remote(tmp.path());
    let closed = closed_port();
    let port = closed.local_addr().unwrap().port();
    submit(
        &submitter,
        &project,
        &url,
        &format!("http://127.0.0.1:{port}/v1"),
        &["--input", "1-2-user-authentication"],
    );
    // Enough tries that the model comes up before they run out, however slow this machine.
    psql(
        &pg,
        "UPDATE baton.work_units SET max_attempts = 30 WHERE id = 1",
    );

    let mut worker = baton(&worker_home(tmp.path(), "worker"))
        .args(["worker", "--db", &url, "--retry-base-s", "0.2"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    // While it waits for its next try, the queue shows its attempts and its last failure.
    let deadline = Instant::now() + Duration::from_secs(60);
    let seen = loop {
        let out = baton(&submitter)
            .args(["queue", "status", "--db", &url, "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let status = json_of(&out);
        if let Some(r) = status["retrying"].as_array().and_then(|r| r.first()) {
            break r.clone();
        }
        assert!(Instant::now() < deadline, "never seen waiting for a retry");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(seen["id"], 1);
    assert!(seen["attempts"].as_i64().unwrap() >= 1, "{seen}");
    assert_eq!(seen["maxAttempts"], 30);
    assert_eq!(seen["reason"]["code"], "LLM_CONNECT_ERROR", "{seen}");
    assert!(
        seen["reason"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot reach")
    );
    assert_eq!(seen["reason"]["of"], 30);

    // The model comes up: one HTTP 503 first (past the client's retries, none here), then the
    // run.
    let mut replies = vec![Reply::error(503, "overloaded")];
    replies.extend(Reply::from_trace(&Trace::load(&demo_trace()).unwrap()));
    let server = ScriptedServer::start(replies).await.unwrap();
    forward(closed, port_of(&server.base_url()));
    wait_for(
        &pg,
        "SELECT state FROM baton.work_units WHERE id = 1",
        "done",
    );
    signal(worker.id(), "-TERM");
    let out = tokio::task::spawn_blocking(move || {
        let mut err = String::new();
        std::io::Read::read_to_string(worker.stderr.as_mut().unwrap(), &mut err).unwrap();
        (worker.wait().unwrap(), err)
    })
    .await
    .unwrap();
    assert!(out.0.success(), "{}", out.1);
    assert!(out.1.contains("tried again in"), "{}", out.1);

    // Every failure was recorded, numbered in a row, each wait twice the one before.
    let tries = retries(&pg, 1);
    let codes: Vec<&str> = tries.iter().map(|r| r["code"].as_str().unwrap()).collect();
    assert!(codes.len() >= 2, "{codes:?}");
    assert_eq!(codes.last(), Some(&"LLM_HTTP_ERROR"), "{codes:?}");
    assert!(
        codes[..codes.len() - 1]
            .iter()
            .all(|c| *c == "LLM_CONNECT_ERROR"),
        "{codes:?}"
    );
    assert!(
        tries.last().unwrap()["message"]
            .as_str()
            .unwrap()
            .contains("HTTP 503")
    );
    for (i, r) in tries.iter().enumerate() {
        assert_eq!(r["attempt"], i as i64 + 1, "{r}");
        let want = 0.2 * 2f64.powi(i as i32);
        let got = r["delayS"].as_f64().unwrap();
        assert!((got - want.min(300.0)).abs() < 1e-6, "{got} != {want}");
    }
    // Claimed once per try; the model answered every turn once, after its one 503.
    assert_eq!(
        psql(&pg, "SELECT epoch FROM baton.work_units WHERE id = 1"),
        (tries.len() + 1).to_string()
    );
    assert_eq!(server.received().len(), 11);
    assert_eq!(server.remaining(), 0);
    let branch = format!("refs/heads/baton/unit-1/epoch-{}", tries.len() + 1);
    let commit = git(&bare, &["rev-parse", &branch]);
    let files = git(&bare, &["ls-tree", "-r", "--name-only", &commit]);
    assert!(
        files.lines().any(|f| f.starts_with("artifacts/")),
        "{files}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unit_that_keeps_failing_fails_after_its_attempts_and_a_bad_payload_fails_at_once() {
    let Some(pg) = postgres_or_skip("a_unit_that_keeps_failing_fails_after_its_attempts") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let submitter = tmp.path().join("submitter-home");
    let url = queue(&pg, &submitter);
    let (project, _bare) = project_with_remote(tmp.path());
    let closed = closed_port();
    let base_url = format!(
        "http://127.0.0.1:{}/v1",
        closed.local_addr().unwrap().port()
    );
    submit(&submitter, &project, &url, &base_url, &[]);
    submit(&submitter, &project, &url, &base_url, &[]);
    psql(
        &pg,
        "UPDATE baton.work_units SET max_attempts = 3 WHERE id = 1",
    );
    // A payload no worker can read, written straight into the database.
    psql(
        &pg,
        "UPDATE baton.work_units SET payload = '{\"workflow\": 7}' WHERE id = 2",
    );

    let worker = baton(&worker_home(tmp.path(), "worker"))
        .args(["worker", "--db", &url, "--retry-base-s", "0.1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(
        &pg,
        "SELECT string_agg(state, ',' ORDER BY id) FROM baton.work_units",
        "failed,failed",
    );
    signal(worker.id(), "-TERM");
    let status = tokio::task::spawn_blocking(move || worker.wait_with_output().unwrap())
        .await
        .unwrap();
    assert!(status.status.success(), "{status:?}");

    // Three tries, two waits, then failed with the last reason.
    assert_eq!(
        psql(
            &pg,
            "SELECT epoch || ':' || (outcome->>'code') || ':' || (outcome->>'attempts') \
             FROM baton.work_units WHERE id = 1"
        ),
        "3:LLM_CONNECT_ERROR:3"
    );
    assert_eq!(retries(&pg, 1).len(), 2);
    // The payload: failed on its first claim, never tried again.
    assert_eq!(
        psql(
            &pg,
            "SELECT epoch || ':' || (outcome->>'code') FROM baton.work_units WHERE id = 2"
        ),
        "1:QUEUE_PAYLOAD_INVALID"
    );
    assert!(retries(&pg, 2).is_empty());
    drop(closed);
}

/// The demo conversation as JSON answers, served by a model that holds the fourth request
/// until the test opens its gate.
struct GatedModel {
    server: baton_testkit::json_server::JsonServer,
    requests: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
    gate: std::sync::Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
}

impl GatedModel {
    fn start(answers: Vec<Value>, gated: usize) -> GatedModel {
        use std::sync::{Arc, Condvar, Mutex};
        let requests: Arc<Mutex<Vec<Value>>> = Arc::default();
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let (seen, held) = (requests.clone(), gate.clone());
        let server = baton_testkit::json_server::JsonServer::start_with_status(Arc::new(
            move |body: &Value| {
                let i = {
                    let mut r = seen.lock().unwrap();
                    r.push(body.clone());
                    r.len() - 1
                };
                if i == gated {
                    let (open, cv) = &*held;
                    let mut open = open.lock().unwrap();
                    while !*open {
                        open = cv.wait(open).unwrap();
                    }
                }
                match answers.get(i) {
                    Some(a) => (200, a.clone()),
                    None => (
                        500,
                        serde_json::json!({"error": {"message": "no more answers"}}),
                    ),
                }
            },
        ));
        GatedModel {
            server,
            requests,
            gate,
        }
    }

    fn received(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }

    fn open(&self) {
        let (open, cv) = &*self.gate;
        *open.lock().unwrap() = true;
        cv.notify_all();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unit_whose_database_connection_is_lost_mid_run_is_tried_again_and_completes() {
    let Some(pg) = postgres_or_skip("a_unit_whose_database_connection_is_lost_mid_run") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let submitter = tmp.path().join("submitter-home");
    let url = queue(&pg, &submitter);
    let (project, _bare) = project_with_remote(tmp.path());
    // The demo's answers, the fourth twice: the turn whose checkpoint never reached the
    // database is asked again after the retry.
    let mut answers: Vec<Value> = Reply::from_trace(&Trace::load(&demo_trace()).unwrap())
        .into_iter()
        .map(|r| match r {
            Reply::Full { body, .. } => serde_json::from_slice(&body).unwrap(),
            _ => unreachable!("the demo's answers are whole JSON answers"),
        })
        .collect();
    answers.insert(4, answers[3].clone());
    let model = GatedModel::start(answers, 3);
    submit(
        &submitter,
        &project,
        &url,
        &model.server.base_url(),
        &["--input", "1-2-user-authentication"],
    );
    let worker = baton(&worker_home(tmp.path(), "worker"))
        .args([
            "worker",
            "--db",
            &url,
            "--lease-s",
            "3",
            "--retry-base-s",
            "0.2",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // With the fourth request at the model, every connection of the worker is cut.
    until_received(4, "no fourth request", || model.received().len()).await;
    let cut = psql(
        &pg,
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
    );
    assert_ne!(cut, "0");
    model.open();
    wait_for(
        &pg,
        "SELECT state FROM baton.work_units WHERE id = 1",
        "done",
    );
    signal(worker.id(), "-TERM");
    let out = tokio::task::spawn_blocking(move || worker.wait_with_output().unwrap())
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("connecting again"), "{err}");
    // Queued again once, with the database's failure as its reason, then resumed from the
    // last checkpoint that reached the database: only the fourth turn asked twice.
    let tries = retries(&pg, 1);
    assert_eq!(tries.len(), 1, "{tries:?}");
    assert_eq!(tries[0]["code"], "QUEUE_DB_FAILED");
    assert_eq!(
        psql(&pg, "SELECT epoch FROM baton.work_units WHERE id = 1"),
        "2"
    );
    let received = model.received();
    assert_eq!(received.len(), 11);
    let messages = |i: usize| received[i]["messages"].as_array().unwrap().clone();
    assert_resumed(&messages(3), &messages(4));
}
