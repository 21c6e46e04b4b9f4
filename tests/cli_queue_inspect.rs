//! Trying and inspecting the queue without a model: a run submitted with `--replay` (its trace
//! pinned beside the package) runs on a worker offline; `baton worker --model/--base-url`
//! override a unit's model and trace; `queue status` lists failed units with why and the
//! workers that stopped, with when; one package digest everywhere; `runs show UNIT --db` shows
//! the same project id on every call; an endpoint error names the setting that chose it.
//! Real throwaway PostgreSQL; skips without one unless `BATON_REQUIRE_POSTGRES` is set.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::worker_support;

use baton_testkit::git::project_with_remote;
use baton_testkit::pg::postgres_or_skip;
use baton_testkit::{demo_trace, example};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Output, Stdio};
use std::time::Duration;
use worker_support::{baton, json_of, psql, queue, stderr};

/// `baton serve --db URL` on a free port, killed when dropped.
struct Serve {
    child: Child,
    port: u16,
    token: String,
}

impl Serve {
    fn start(home: &std::path::Path, url: &str) -> Serve {
        let mut child = baton(home)
            .args(["serve", "--json", "--port", "0", "--db", url])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        Serve {
            child,
            port: v["port"].as_u64().unwrap() as u16,
            token: v["token"].as_str().unwrap().to_string(),
        }
    }

    /// `GET path` with the token: the status and the body.
    fn get(&self, path: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let request = format!(
            "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\n\r\n",
            self.port, self.token
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap();
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        (status, body)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_replayed_unit_runs_offline_and_reads_back_with_one_digest_and_a_stable_project() {
    let Some(pg) = postgres_or_skip("a_replayed_unit_runs_offline") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let url = queue(&pg, &home);
    let (project, _bare) = project_with_remote(tmp.path());
    let pkg = example("create-story-micro");
    let trace = demo_trace();
    let submit = |json: bool| {
        let mut cmd = baton(&home);
        cmd.args([
            "run",
            pkg.to_str().unwrap(),
            "--project",
            project.to_str().unwrap(),
            "--queue",
            &url,
            "--replay",
            trace.to_str().unwrap(),
        ]);
        if json {
            cmd.arg("--json");
        }
        cmd.output().unwrap()
    };
    let out = submit(true);
    assert!(out.status.success(), "{out:?}");
    let j = json_of(&out);
    let unit = j["unit"].as_i64().unwrap();
    let digest = j["package"]["sha256"].as_str().unwrap().to_string();
    let trace_sha = j["trace"]["sha256"].as_str().unwrap().to_string();
    assert_eq!(j["trace"]["name"], "create-story-micro.trace.json", "{j}");
    assert_eq!(j["payload"]["replay"]["sha256"], trace_sha.as_str());
    assert!(
        j["payload"]["model"]["name"].is_null(),
        "no model travels: {j}"
    );
    // The trace's bytes are in the database, by their sha256.
    assert_eq!(
        psql(
            &pg,
            &format!(
                "SELECT encode(sha256(bytes), 'hex') FROM baton.traces WHERE sha256 = '{trace_sha}'"
            )
        ),
        trace_sha
    );
    // The text says what replays, and the package's digest as `runs show` cuts it.
    let out = submit(false);
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    assert!(
        text.contains(&format!("(sha256 {})", &digest[..16])),
        "{text}"
    );
    assert!(
        text.contains("replays create-story-micro.trace.json"),
        "{text}"
    );

    // A worker with no key and no model runs both offline, then leaves.
    let out = baton(&home)
        .env_remove("OPENAI_API_KEY")
        .args(["worker", "--db", &url, "--exit-when-idle"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        psql(
            &pg,
            "SELECT string_agg(state, ',' ORDER BY id) FROM baton.work_units"
        ),
        "done,done"
    );

    // One digest: the run's package is the one the submission printed.
    let show = |json: bool| {
        let mut cmd = baton(&home);
        cmd.args(["runs", "show", &unit.to_string(), "--db", &url]);
        if json {
            cmd.arg("--json");
        }
        cmd.output().unwrap()
    };
    let first = json_of(&show(true));
    let second = json_of(&show(true));
    let run = &first["run"]["run"];
    assert_eq!(run["packageSha256"], digest.as_str(), "{first}");
    assert_eq!(first["unit"]["packageSha256"], digest.as_str());
    // The run remembers the pinned trace by name and digest, no path of the worker.
    assert_eq!(
        run["model"]["trace"],
        format!("queue:create-story-micro.trace.json@{}", &trace_sha[..16]).as_str(),
        "{first}"
    );
    // The same project id on every call.
    let id = run["projectId"].as_str().unwrap();
    assert_eq!(id.len(), 16);
    assert_eq!(second["run"]["run"]["projectId"], id, "{second}");
    let text = stdout(&show(false));
    assert!(
        text.contains(&format!("sha256 {}", &digest[..16])),
        "{text}"
    );

    // The worker that left is said, with when (not "no workers have registered").
    let out = baton(&home)
        .args(["queue", "status", "--db", &url])
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(text.contains("no worker is running"), "{text}");
    assert!(text.contains("stopped (last 24 hours)"), "{text}");
    assert!(!text.contains("no workers have registered"), "{text}");
    let s = json_of(
        &baton(&home)
            .args(["queue", "status", "--db", &url, "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(s["workers"].as_array().unwrap().len(), 0, "{s}");
    let stopped = &s["stoppedWorkers"][0];
    assert!(stopped["stoppedAt"].as_str().unwrap().ends_with('Z'), "{s}");
    assert!(stopped["id"].as_str().unwrap().contains(':'), "{s}");
}

#[test]
fn failed_units_say_why_and_name_the_setting_that_chose_the_endpoint() {
    let Some(pg) = postgres_or_skip("failed_units_say_why") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let url = queue(&pg, &home);
    let (project, _bare) = project_with_remote(tmp.path());
    let pkg = example("create-story-micro");
    let trace = demo_trace();
    // Unit 1: the endpoint from the submitter's OPENAI_BASE_URL, no --base-url. (A host that
    // is not this machine needs a key: without one the worker stops before any request.)
    let out = baton(&home)
        .env("OPENAI_BASE_URL", "http://model.invalid/v1")
        .args([
            "run",
            pkg.to_str().unwrap(),
            "--project",
            project.to_str().unwrap(),
            "--queue",
            &url,
            "--model",
            "some-model",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // Unit 2: a replay, run by a worker told to use a model of its own.
    let out = baton(&home)
        .args([
            "run",
            pkg.to_str().unwrap(),
            "--project",
            project.to_str().unwrap(),
            "--queue",
            &url,
            "--replay",
            trace.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // Unit 1 by a worker without a key: it fails at once, the message naming the setting.
    let out = baton(&home)
        .env_remove("OPENAI_API_KEY")
        .args(["worker", "--db", &url, "--exit-when-idle"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let outcome = |id: i64| -> Value {
        serde_json::from_str(&psql(
            &pg,
            &format!("SELECT outcome::text FROM baton.work_units WHERE id = {id}"),
        ))
        .unwrap()
    };
    // The worker took both: unit 2 replayed its trace (done); unit 1 failed.
    let o1 = outcome(1);
    let m1 = o1["message"].as_str().unwrap();
    assert!(
        m1.contains("set by OPENAI_BASE_URL where the unit was submitted"),
        "{o1}"
    );
    assert!(!m1.contains("(set by --base-url)"), "{o1}");
    assert_eq!(
        psql(&pg, "SELECT state FROM baton.work_units WHERE id = 2"),
        "done"
    );

    // The worker's own model wins over a unit's trace: a third, replayed unit fails on the
    // worker's endpoint, named as the worker's flag.
    let out = baton(&home)
        .args([
            "run",
            pkg.to_str().unwrap(),
            "--project",
            project.to_str().unwrap(),
            "--queue",
            &url,
            "--replay",
            trace.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = baton(&home)
        .env_remove("OPENAI_API_KEY")
        .args([
            "worker",
            "--db",
            &url,
            "--exit-when-idle",
            "--model",
            "worker-model",
            "--base-url",
            "http://model.invalid/v1",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let o3 = outcome(3);
    assert!(
        o3["message"]
            .as_str()
            .unwrap()
            .contains("set by --base-url of `baton worker`"),
        "{o3}"
    );

    // `queue status` lists the failed units, the most recent first, with code and message.
    let s = json_of(
        &baton(&home)
            .args(["queue", "status", "--db", &url, "--json"])
            .output()
            .unwrap(),
    );
    let failed: Vec<i64> = s["failed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_i64().unwrap())
        .collect();
    assert_eq!(failed, vec![3, 1], "{s}");
    assert_eq!(s["failed"][1]["code"], o1["code"], "{s}");
    assert!(
        s["failed"][1]["message"]
            .as_str()
            .unwrap()
            .contains("OPENAI_BASE_URL")
    );
    let out = baton(&home)
        .args(["queue", "status", "--db", &url])
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(
        text.contains("units: 0 queued, 0 leased, 0 waiting, 1 done, 2 failed"),
        "{text}"
    );
    let code = o1["code"].as_str().unwrap();
    assert!(text.contains("\nfailed\n"), "{text}");
    assert!(text.contains(&format!("{code}: no API key")), "{text}");

    // The queue page lists the failed units with why, each unit number a link to its page,
    // which says why it failed.
    let serve = Serve::start(&home, &url);
    let (status, page) = serve.get("/queue");
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("id=\"queue-failed\""), "{page}");
    assert!(
        page.contains(&format!("<code class=\"failure-code\">{code}</code>")),
        "{page}"
    );
    for id in [1, 2, 3] {
        // Unit 2 is done: it is in no list, so it has no link on this page.
        let linked = page.contains(&format!("href=\"/queue/units/{id}\""));
        assert_eq!(linked, id != 2, "unit {id}: {page}");
    }
    let (status, unit) = serve.get("/queue/units/1");
    assert_eq!(status, 200, "{unit}");
    assert!(
        unit.contains(&format!("Failed: <code>{code}</code>")),
        "{unit}"
    );
    assert!(
        unit.contains("OPENAI_BASE_URL where the unit was submitted"),
        "{unit}"
    );
    let (status, _) = serve.get("/queue/units/99");
    assert_eq!(status, 404);
}
