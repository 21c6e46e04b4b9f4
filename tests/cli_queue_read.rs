//! Following the queue: `baton runs show|log <UNIT> --db URL` read a queued run from the
//! database (the unit, and the run folded from its checkpoints, printed as a local run is), and
//! `baton serve --db URL` shows the queue (`/queue`, `/api/queue`), says so when its database
//! is down and goes on serving the rest. Against a real throwaway PostgreSQL, a scripted model
//! on 127.0.0.1 and a bare git repository as the project's remote; skips without PostgreSQL
//! unless BATON_REQUIRE_POSTGRES is set (CI sets it).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::worker_support;

use baton_llm::Trace;
use baton_llm::testing::{Reply, ScriptedServer};
use baton_testkit::git::{git, project_with_remote};
use baton_testkit::pg::postgres_or_skip;
use baton_testkit::{demo_trace, example, sample_project};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;
use worker_support::{KEY, baton, psql};

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run(home: &Path, args: &[&str]) -> Out {
    let out = baton(home).args(args).output().unwrap();
    Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn ok(home: &Path, args: &[&str]) -> String {
    let out = run(home, args);
    assert_eq!(out.code, Some(0), "{args:?}: {}{}", out.stdout, out.stderr);
    out.stdout
}

/// The demo run's arguments: the create-story example on `project`, answered by `base_url`.
fn run_args<'a>(pkg: &'a str, project: &'a str, base_url: &'a str) -> Vec<&'a str> {
    vec![
        "run",
        pkg,
        "--project",
        project,
        "--model",
        "scripted",
        "--base-url",
        base_url,
        "--input",
        "1-2-user-authentication",
        "--context",
        "node",
    ]
}

/// `runs show` text with what differs between two runs of the same conversation made the same:
/// the run id, the project line, the model's endpoint, the times.
fn normalize_show(text: &str, run_id: &str) -> String {
    text.replace(run_id, "<run>")
        .lines()
        .map(|line| {
            let key = line.split_whitespace().next().unwrap_or("");
            match key {
                "project" => "project   <project>".to_string(),
                "created" => "created   <times>".to_string(),
                "model" => line.split(" at ").next().unwrap_or(line).to_string(),
                _ => line.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `runs log` lines without their time and durations.
fn normalize_log(text: &str, run_id: &str) -> Vec<String> {
    text.replace(run_id, "<run>")
        .lines()
        .map(|line| {
            line.get(8..)
                .unwrap_or("")
                .split("  ")
                .filter(|part| {
                    !(part.ends_with("ms")
                        && part[..part.len() - 2].chars().all(|c| c.is_ascii_digit()))
                })
                .collect::<Vec<_>>()
                .join("  ")
        })
        .collect()
}

fn run_id_of(show: &str) -> String {
    show.lines()
        .find_map(|l| l.strip_prefix("run       "))
        .expect("a run line")
        .trim()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_show_and_log_read_a_queued_run_from_the_database_as_a_local_run_is_read() {
    let Some(pg) = postgres_or_skip("runs_show_and_log_read_a_queued_run") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let url = pg.socket_url("postgres");
    let home = tmp.path().join("home");
    ok(&home, &["queue", "init", "--db", &url]);
    let (project, _bare) = project_with_remote(&tmp.path().join("queued"));
    let local_project = sample_project(&tmp.path().join("local"));
    let pkg = example("create-story-micro");
    let pkg = pkg.to_str().unwrap();

    // The same conversation twice: once run here, once queued and run by a worker.
    let replies = Reply::from_trace(&Trace::load(&demo_trace()).unwrap());
    let local_model = ScriptedServer::start(replies.clone()).await.unwrap();
    let queued_model = ScriptedServer::start(replies).await.unwrap();
    let local_url = local_model.base_url();
    ok(
        &home,
        &run_args(pkg, local_project.to_str().unwrap(), &local_url),
    );
    let queued_url = queued_model.base_url();
    let mut submit = run_args(pkg, project.to_str().unwrap(), &queued_url);
    submit.extend(["--queue", &url]);
    ok(&home, &submit);
    let worker = run(
        &tmp.path().join("worker"),
        &["worker", "--db", &url, "--exit-when-idle"],
    );
    assert_eq!(worker.code, Some(0), "{}", worker.stderr);
    assert_eq!(
        psql(&pg, "SELECT state FROM baton.work_units WHERE id = 1"),
        "done"
    );

    // show: the unit, then the run as `runs show` prints the local one.
    let queued = ok(&home, &["runs", "show", "1", "--db", &url]);
    assert!(
        queued.starts_with("unit      1 (run in queue default)\n"),
        "{queued}"
    );
    assert!(queued.contains("state     done   epoch 1   attempts 1   last worker "));
    assert!(
        queued.contains("result    baton/unit-1/epoch-1 at "),
        "{queued}"
    );
    let remote = tmp.path().join("queued/remote.git");
    let base = git(&project, &["rev-parse", "HEAD"]);
    assert!(
        queued.contains(&format!(
            "project   {} at {}",
            remote.display(),
            &base[..12]
        )),
        "{queued}"
    );
    let (_, queued_run) = queued.split_once("\n\n").expect("the run after the unit");
    let local_list: Value = serde_json::from_str(&ok(&home, &["runs", "list", "--json"])).unwrap();
    let local_id = local_list[0]["runId"].as_str().unwrap().to_string();
    let local = ok(&home, &["runs", "show", &local_id]);
    let queued_id = run_id_of(queued_run);
    assert_ne!(queued_id, local_id);
    assert_eq!(
        normalize_show(queued_run, &queued_id),
        normalize_show(&local, &local_id),
        "queued:\n{queued_run}\nlocal:\n{local}"
    );
    assert!(queued_run.contains("phase     completed"), "{queued_run}");
    assert!(queued_run.contains("[x]"), "{queued_run}");
    // No path of this machine's scratch store.
    assert!(!queued.contains("baton-unit-"), "{queued}");
    assert!(!queued.contains(std::env::temp_dir().join("baton-unit").to_str().unwrap()));

    // --json: the unit, its last checkpoint and the run, without a scratch path.
    let json_text = ok(&home, &["runs", "show", "1", "--db", &url, "--json"]);
    let v: Value = serde_json::from_str(&json_text).unwrap();
    assert_eq!(v["unit"]["state"], "done");
    assert_eq!(v["unit"]["epoch"], 1);
    assert_eq!(v["unit"]["outcome"]["branch"], "baton/unit-1/epoch-1");
    assert_eq!(v["checkpoint"]["runId"], queued_id.as_str());
    assert_eq!(v["checkpoint"]["commit"].as_str().unwrap().len(), 40);
    assert_eq!(v["run"]["run"]["phase"], "completed");
    assert_eq!(v["run"]["complete"], true);
    assert!(v["run"].get("projectRoot").is_none());
    let local_json: Value =
        serde_json::from_str(&ok(&home, &["runs", "show", &local_id, "--json"])).unwrap();
    assert_eq!(v["run"]["progress"], local_json["progress"]);
    assert_eq!(v["run"]["usage"], local_json["usage"]);
    assert!(!json_text.contains("baton-unit-"), "{json_text}");
    assert!(!json_text.contains(KEY));

    // log: the audit log as `runs log` prints the local one.
    let queued_log = ok(&home, &["runs", "log", "1", "--db", &url]);
    let local_log = ok(&home, &["runs", "log", &local_id]);
    assert!(queued_log.lines().count() > 10, "{queued_log}");
    assert_eq!(
        normalize_log(&queued_log, &queued_id),
        normalize_log(&local_log, &local_id),
        "queued:\n{queued_log}\nlocal:\n{local_log}"
    );
    let queued_jsonl = ok(&home, &["runs", "log", "1", "--db", &url, "--json"]);
    assert_eq!(
        queued_jsonl.lines().count(),
        queued_log.lines().count(),
        "one JSON record per line"
    );
    for line in queued_jsonl.lines() {
        serde_json::from_str::<Value>(line).unwrap();
    }
    // --follow reads this machine's runs only.
    let follow = run(&home, &["runs", "log", "1", "--db", &url, "--follow"]);
    assert_eq!(follow.code, Some(2), "{}", follow.stderr);

    // A unit no worker has started: the unit alone, said clearly.
    ok(&home, &submit);
    let waiting = ok(&home, &["runs", "show", "2", "--db", &url]);
    assert!(
        waiting.contains("state     queued   epoch 0   attempts 0"),
        "{waiting}"
    );
    assert!(
        waiting.contains("no run yet: no worker has checkpointed this unit (it is queued)"),
        "{waiting}"
    );
    assert!(
        waiting.contains("package   create-story-micro (sha256 "),
        "{waiting}"
    );
    let v: Value =
        serde_json::from_str(&ok(&home, &["runs", "show", "2", "--db", &url, "--json"])).unwrap();
    assert_eq!(v["unit"]["state"], "queued");
    assert!(v["run"].is_null() && v["checkpoint"].is_null());
    let log = run(&home, &["runs", "log", "2", "--db", &url]);
    assert_eq!(log.code, Some(0));
    assert_eq!(log.stdout, "");
    assert!(
        log.stderr.contains("unit 2 has no run yet"),
        "{}",
        log.stderr
    );

    // An unknown unit, and an id that is no unit's.
    let unknown = run(&home, &["runs", "show", "99", "--db", &url]);
    assert_eq!(unknown.code, Some(1));
    assert!(
        unknown.stderr.contains("QUEUE_UNIT_NOT_FOUND") && unknown.stderr.contains("help:"),
        "{}",
        unknown.stderr
    );
    let unknown = run(&home, &["runs", "log", "99", "--db", &url, "--json"]);
    let e: Value = serde_json::from_str(&unknown.stdout)
        .or_else(|_| serde_json::from_str(&unknown.stderr))
        .unwrap();
    assert_eq!(e["error"]["code"], "QUEUE_UNIT_NOT_FOUND", "{e}");
    let word = run(&home, &["runs", "show", "abc", "--db", &url]);
    assert_eq!(word.code, Some(2));
    assert!(
        word.stderr.contains("QUEUE_INVALID_INPUT"),
        "{}",
        word.stderr
    );
}

// ------------------------------------------------------------------------------ baton serve

struct Serve {
    child: Child,
    port: u16,
    token: String,
}

impl Serve {
    fn start(home: &Path, args: &[&str]) -> Serve {
        let mut child = baton(home)
            .arg("serve")
            .arg("--json")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("baton serve starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let v: Value = serde_json::from_str(&line).expect("the first line is JSON");
        Serve {
            child,
            port: v["port"].as_u64().unwrap() as u16,
            token: v["token"].as_str().unwrap().to_string(),
        }
    }

    /// `GET path` with the token; the status and the body.
    fn get(&self, path: &str) -> (u16, String) {
        self.exchange(&format!(
            "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\n\r\n",
            self.port, self.token
        ))
    }

    /// Sends `request` (HTTP/1.0) on a new connection; the status and the body of the answer.
    fn exchange(&self, request: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
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

    /// `POST path` with a JSON body and these extra headers; the status and the JSON answer.
    fn post(&self, path: &str, body: &str, headers: &[(&str, &str)]) -> (u16, Value) {
        let mut request = format!(
            "POST {path} HTTP/1.0\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n",
            self.port,
            body.len()
        );
        for (k, v) in headers {
            request.push_str(&format!("{k}: {v}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(body);
        let (status, body) = self.exchange(&request);
        let v = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        (status, v)
    }

    fn bearer(&self) -> String {
        format!("Bearer {}", self.token)
    }

    fn get_json(&self, path: &str) -> (u16, Value) {
        let (status, body) = self.get(path);
        let v = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        (status, v)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const QUESTION: &str = "<script>alert('x')</script> Which <b>database</b> & why?";

#[test]
fn serve_shows_the_queue_escaped_and_says_when_its_database_is_down() {
    let Some(pg) = postgres_or_skip("serve_shows_the_queue") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let url = pg.socket_url("postgres");
    let home = tmp.path().join("home");
    ok(&home, &["queue", "init", "--db", &url]);
    // Two queued units, one leased by a worker, one waiting with a question the model wrote.
    psql(
        &pg,
        "INSERT INTO baton.work_units (kind, queue, project_remote, base_commit) \
         VALUES ('run', 'default', 'r', 'c'), ('run', 'default', 'r', 'c')",
    );
    psql(
        &pg,
        "INSERT INTO baton.workers (id, host) VALUES ('w<1>', 'build-1');
         INSERT INTO baton.work_units (kind, queue, state, project_remote, base_commit, owner,
             epoch, attempts, leased_at, heartbeat_at, lease_expires_at)
         VALUES ('run', 'default', 'leased', 'r', 'c', 'w<1>', 3, 3, now() - interval '90 s',
             now(), now() + interval '1 hour')",
    );
    let question = serde_json::json!({"question": QUESTION, "runId": "r1"}).to_string();
    psql(
        &pg,
        &format!(
            "INSERT INTO baton.work_units (kind, queue, state, project_remote, base_commit, \
             question) VALUES ('run', 'default', 'waiting', 'r', 'c', '{}'::jsonb)",
            question.replace('\'', "''")
        ),
    );

    let serve = Serve::start(&home, &["--db", &url]);
    // The JSON is what `baton queue status --json` prints.
    let (status, api) = serve.get_json("/api/queue");
    assert_eq!(status, 200, "{api}");
    let cli: Value =
        serde_json::from_str(&ok(&home, &["queue", "status", "--db", &url, "--json"])).unwrap();
    assert_eq!(api["counts"], cli["counts"]);
    assert_eq!(api["counts"]["queued"], 2);
    assert_eq!(api["counts"]["leased"], 1);
    assert_eq!(api["counts"]["waiting"], 1);
    assert_eq!(api["leased"][0]["owner"], "w<1>");
    assert_eq!(api["leased"][0]["epoch"], 3);
    assert_eq!(api["waiting"][0]["question"]["question"], QUESTION);
    assert_eq!(api["workers"][0]["id"], "w<1>");
    assert_eq!(api["workers"][0]["leases"], 1);
    assert!(!api["database"].as_str().unwrap().contains(pg.password()));

    // The page: counts, the lease, the worker, the question as text (never markup).
    let (status, html) = serve.get("/queue");
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("<dd id=\"count-queued\">2</dd>"), "{html}");
    assert!(html.contains("<dd id=\"count-waiting\">1</dd>"), "{html}");
    assert!(html.contains("id=\"queue-leased\""), "{html}");
    assert!(html.contains("<td>w&lt;1&gt;</td>"), "{html}");
    assert!(
        html.contains("<td>1m</td>"),
        "the lease is held 90 s: {html}"
    );
    assert!(html.contains("id=\"queue-workers\""), "{html}");
    assert!(html.contains("<td>build-1</td>"), "{html}");
    assert!(
        html.contains(
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; Which &lt;b&gt;database&lt;/b&gt; \
             &amp; why?"
        ),
        "{html}"
    );
    assert!(!html.contains("<script>alert"), "{html}");
    assert!(html.contains("id=\"nav-queue\" href=\"/queue\" aria-current=\"page\""));
    // Linked from every page.
    let (_, runs) = serve.get("/");
    assert!(runs.contains("id=\"nav-queue\" href=\"/queue\""), "{runs}");

    // The waiting unit is answered from the page's form: a POST with the token, as the
    // page's other answers; another site's page is refused, and a unit answered is no longer
    // waiting.
    let waiting_id = api["waiting"][0]["id"].as_i64().unwrap();
    let action = format!("/api/queue/units/{waiting_id}/answer");
    assert!(
        html.contains(&format!("data-action=\"{action}\"")),
        "{html}"
    );
    let answer = r#"{"text": "PostgreSQL, it is what the team runs"}"#;
    let bearer = serve.bearer();
    let origin = ("Origin", "http://evil.example");
    let (status, err) = serve.post(&action, answer, &[("Authorization", &bearer), origin]);
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (403, Some("ORIGIN_REFUSED"))
    );
    let (status, err) = serve.post(&action, answer, &[]);
    assert_eq!(status, 401, "{err}");
    assert_eq!(
        psql(
            &pg,
            &format!("SELECT state FROM baton.work_units WHERE id = {waiting_id}")
        ),
        "waiting"
    );
    let (status, receipt) = serve.post(&action, answer, &[("Authorization", &bearer)]);
    assert_eq!(status, 202, "{receipt}");
    assert_eq!(receipt["unit"], waiting_id);
    assert_eq!(receipt["state"], "queued");
    assert_eq!(
        psql(
            &pg,
            &format!("SELECT state FROM baton.work_units WHERE id = {waiting_id}")
        ),
        "queued"
    );
    let (status, err) = serve.post(&action, answer, &[("Authorization", &bearer)]);
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("QUEUE_UNIT_NOT_WAITING"))
    );
    let (status, err) = serve.post(
        "/api/queue/units/99/answer",
        answer,
        &[("Authorization", &bearer)],
    );
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (404, Some("QUEUE_UNIT_NOT_FOUND"))
    );
    let (status, err) = serve.post(&action, r#"{"text": " "}"#, &[("Authorization", &bearer)]);
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (400, Some("QUEUE_ANSWER_INVALID"))
    );

    // The database goes away: the endpoint answers its code, the page says so, and the rest of
    // the server still answers.
    drop(pg);
    let (status, err) = serve.get_json("/api/queue");
    assert_eq!(status, 503, "{err}");
    assert_eq!(err["error"]["code"], "QUEUE_DB_UNREACHABLE", "{err}");
    assert!(err["error"]["hint"].as_str().is_some(), "{err}");
    let (status, html) = serve.get("/queue");
    assert_eq!(status, 503, "{html}");
    assert!(html.contains("id=\"queue-error\""), "{html}");
    assert!(html.contains("QUEUE_DB_UNREACHABLE"), "{html}");
    let (status, runs) = serve.get_json("/api/runs");
    assert_eq!(status, 200, "{runs}");
    let (status, _) = serve.get("/");
    assert_eq!(status, 200);

    // A server started without --db has no queue, and says how to get one.
    let plain = Serve::start(&home, &[]);
    let (status, err) = plain.get_json("/api/queue");
    assert_eq!(status, 404, "{err}");
    assert_eq!(err["error"]["code"], "QUEUE_NOT_CONFIGURED");
    let (status, html) = plain.get("/queue");
    assert_eq!(status, 404);
    assert!(html.contains("baton serve --db URL"), "{html}");
}
