//! The JSON API against a real server on 127.0.0.1: every endpoint, the token rules, path
//! traversal on artifact views, SSE (appended lines, Last-Event-ID), a demo run started and
//! completed, and a waiting run answered. The client is a few lines of HTTP/1.0 over a
//! `TcpStream`, so every header (Host, Origin, Cookie) is exactly what the test says.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_serve::{AppState, ServeOptions};
use baton_store::Store;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------- the server and a client

struct Server {
    addr: SocketAddr,
    token: String,
    home: tempfile::TempDir,
    state: AppState,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start() -> Server {
        Server::start_in(tempfile::tempdir().unwrap())
    }

    /// A server on the store at `home` (another server may have used it before).
    fn start_in(home: tempfile::TempDir) -> Server {
        let store = Store::new(home.path());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let bound = baton_serve::bind(ServeOptions::loopback(store))
                    .await
                    .unwrap();
                ready_tx
                    .send((
                        bound.addr(),
                        bound.token().to_string(),
                        bound.state().clone(),
                    ))
                    .unwrap();
                bound
                    .serve(async move {
                        let _ = stop_rx.await;
                    })
                    .await
                    .unwrap();
            });
        });
        let (addr, token, state) = ready_rx.recv_timeout(Duration::from_secs(60)).unwrap();
        Server {
            addr,
            token,
            home,
            state,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    fn store(&self) -> Store {
        Store::new(self.home.path())
    }

    fn host(&self) -> String {
        self.addr.to_string()
    }

    fn bearer(&self) -> String {
        format!("Bearer {}", self.token)
    }

    /// A request with the bearer token.
    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Reply {
        let auth = self.bearer();
        let text = body.map(Value::to_string);
        self.raw(method, path, &[("Authorization", &auth)], text.as_deref())
    }

    fn get(&self, path: &str) -> Reply {
        self.call("GET", path, None)
    }

    fn post(&self, path: &str, body: &Value) -> Reply {
        self.call("POST", path, Some(body))
    }

    /// A request with exactly these headers (plus `Host` unless given, and the length).
    fn raw(&self, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&str>) -> Reply {
        let mut stream = TcpStream::connect(self.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        stream
            .write_all(head(self, method, path, headers, body).as_bytes())
            .unwrap();
        let mut bytes = Vec::new();
        stream.read_to_end(&mut bytes).unwrap();
        Reply::parse(&bytes)
    }

    fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn head(
    server: &Server,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> String {
    let mut text = format!("{method} {path} HTTP/1.0\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        text.push_str(&format!("Host: {}\r\n", server.host()));
    }
    for (k, v) in headers {
        text.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(body) = body {
        text.push_str("Content-Type: application/json\r\n");
        text.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    } else {
        text.push_str("\r\n");
    }
    text
}

#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn parse(bytes: &[u8]) -> Reply {
        let end = bytes
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("a response head");
        let head = String::from_utf8_lossy(&bytes[..end]).to_string();
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .expect("a status");
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        Reply {
            status,
            headers,
            body: bytes[end + 4..].to_vec(),
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).to_string()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    /// The error code of a JSON error answer.
    fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_else(|| panic!("no error code in {}", self.text()))
            .to_string()
    }
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A fresh copy of the sample project.
fn sample_project(dir: &Path) -> PathBuf {
    let project = dir.join("taskboard");
    copy_dir(&examples().join("projects/taskboard"), &project);
    project
}

/// Polls `GET /api/runs/{id}` until its phase is `phase`.
fn wait_for_phase(server: &Server, id: &str, phase: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let shown = server.get(&format!("/api/runs/{id}"));
        assert_eq!(shown.status, 200, "{}", shown.text());
        let v = shown.json();
        if v["run"]["phase"] == phase {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "run {id} never reached {phase}: {v:#}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until the server's job for the run has ended (its outcome is remembered): nothing
/// writes the run's files any more.
fn wait_for_invocation(server: &Server, id: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let v = server.get(&format!("/api/runs/{id}")).json();
        if !v["invocation"].is_null() {
            return v["invocation"].clone();
        }
        assert!(Instant::now() < deadline, "no invocation outcome: {v:#}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts the bundled demo; `answer_from_trace` false leaves its question to a person.
fn start_demo(server: &Server, project: &Path, answer_from_trace: bool) -> String {
    let started = server.post(
        "/api/runs",
        &json!({"replay": "demo", "project": project, "answerFromTrace": answer_from_trace}),
    );
    assert_eq!(started.status, 202, "{}", started.text());
    let v = started.json();
    assert_eq!(v["phase"], "running");
    v["runId"].as_str().unwrap().to_string()
}

// ---------------------------------------------------------------- security

#[test]
fn the_token_is_required_and_a_post_needs_the_header() {
    let server = Server::start();
    let token = server.token.clone();

    // No token, a wrong one, a malformed header.
    let none = server.raw("GET", "/api/runs", &[], None);
    assert_eq!(none.status, 401);
    assert_eq!(none.code(), "TOKEN_REQUIRED");
    let wrong = server.raw(
        "GET",
        "/api/runs",
        &[("Authorization", &format!("Bearer {}", "0".repeat(64)))],
        None,
    );
    assert_eq!(wrong.status, 401);
    assert_eq!(wrong.code(), "TOKEN_INVALID");
    let basic = server.raw("GET", "/api/runs", &[("Authorization", "Basic eDp5")], None);
    assert_eq!(basic.code(), "TOKEN_INVALID");
    let bad_cookie = server.raw("GET", "/", &[("Cookie", "baton_token=nope")], None);
    assert_eq!(bad_cookie.status, 401);
    let bad_query = server.raw("GET", "/api/runs?token=nope", &[], None);
    assert_eq!(bad_query.status, 401);

    // The page load with ?token= sets the cookie and leaves the address bar clean.
    let first = server.raw("GET", &format!("/?token={token}&x=1"), &[], None);
    assert_eq!(first.status, 303, "{}", first.text());
    assert_eq!(first.header("location"), Some("/?x=1"));
    let cookie = first.header("set-cookie").unwrap();
    assert!(
        cookie.starts_with(&format!("baton_token={token}")),
        "{cookie}"
    );
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");

    // The cookie reads; it does not write.
    let cookie = format!("baton_token={token}");
    let read = server.raw("GET", "/api/runs", &[("Cookie", &cookie)], None);
    assert_eq!(read.status, 200, "{}", read.text());
    let body = r#"{"replay":"demo"}"#;
    let write = server.raw("POST", "/api/runs", &[("Cookie", &cookie)], Some(body));
    assert_eq!(write.status, 403);
    assert_eq!(write.code(), "TOKEN_HEADER_REQUIRED");
    let by_query = server.raw("POST", &format!("/api/runs?token={token}"), &[], Some(body));
    assert_eq!(by_query.code(), "TOKEN_HEADER_REQUIRED");
    // An API GET with ?token= answers and sets the cookie too.
    let api_query = server.raw("GET", &format!("/api/runs?token={token}"), &[], None);
    assert_eq!(api_query.status, 200, "{}", api_query.text());
    assert!(api_query.header("set-cookie").is_some());

    // Cross-site: another origin is refused even with the token; our own origin passes.
    let bearer = server.bearer();
    let evil = server.raw(
        "POST",
        "/api/runs",
        &[
            ("Authorization", &bearer),
            ("Origin", "http://evil.example"),
        ],
        Some("{}"),
    );
    assert_eq!(evil.status, 403);
    assert_eq!(evil.code(), "ORIGIN_REFUSED");
    let null_origin = server.raw(
        "POST",
        "/api/runs",
        &[("Authorization", &bearer), ("Origin", "null")],
        Some("{}"),
    );
    assert_eq!(null_origin.code(), "ORIGIN_REFUSED");
    let own = format!("http://{}", server.host());
    let same = server.raw(
        "POST",
        "/api/runs",
        &[("Authorization", &bearer), ("Origin", &own)],
        Some("{}"),
    );
    assert_eq!(same.status, 400, "{}", same.text());
    assert_eq!(same.code(), "START_INVALID");

    // DNS rebinding: a foreign Host is refused before the token is looked at.
    for host in [
        format!("evil.example:{}", server.addr.port()),
        "127.0.0.1:1".to_string(),
        String::new(),
    ] {
        let foreign = server.raw(
            "GET",
            "/api/runs",
            &[("Authorization", &bearer), ("Host", &host)],
            None,
        );
        assert_eq!(foreign.status, 403, "Host {host:?}");
        assert_eq!(foreign.code(), "HOST_REFUSED");
    }
    let localhost = format!("localhost:{}", server.addr.port());
    let ok = server.raw(
        "GET",
        "/api/runs",
        &[("Authorization", &bearer), ("Host", &localhost)],
        None,
    );
    assert_eq!(ok.status, 200);
}

#[test]
fn every_answer_carries_the_security_headers() {
    let server = Server::start();
    for reply in [
        server.raw("GET", "/api/runs", &[], None),
        server.get("/api/runs"),
        server.get("/api/nothing-here"),
        server.raw("GET", "/api/runs", &[("Host", "evil.example")], None),
    ] {
        let csp = reply.header("content-security-policy").unwrap_or("");
        assert!(csp.contains("default-src 'none'"), "{csp}");
        assert!(csp.contains("script-src 'self'"), "{csp}");
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert_eq!(reply.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(reply.header("x-frame-options"), Some("DENY"));
        assert_eq!(reply.header("referrer-policy"), Some("no-referrer"));
    }
    let unknown = server.get("/api/nothing-here");
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.code(), "API_NOT_FOUND");
}

// ---------------------------------------------------------------- runs

#[test]
fn the_demo_starts_in_the_background_completes_and_is_listed() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let project = sample_project(dir.path());
    let id = start_demo(&server, &project, true);
    let shown = wait_for_phase(&server, &id, "completed");
    assert_eq!(shown["complete"], true, "{shown:#}");
    assert_eq!(shown["run"]["runId"], id.as_str());
    assert!(
        shown["progress"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["status"] == "completed")
    );
    // The invocation the server drove, as `baton run --json` reports it.
    let invocation = wait_for_invocation(&server, &id);
    assert_eq!(invocation["phase"], "completed", "{invocation:#}");
    assert!(!invocation["artifacts"].as_array().unwrap().is_empty());
    // The same JSON as `runs show --json` (a prefix finds it too).
    let by_prefix = server.get(&format!("/api/runs/{}", &id[..13])).json();
    assert_eq!(by_prefix["run"]["runId"], id.as_str());
    let root = std::fs::canonicalize(&project).unwrap();
    let listed = server.get("/api/runs").json();
    assert_eq!(listed["runs"][0]["runId"], id.as_str());
    assert_eq!(listed["nextCursor"], Value::Null);
    let filtered = server
        .get(&format!(
            "/api/runs?project={}&phase=completed",
            root.display()
        ))
        .json();
    assert_eq!(filtered["runs"].as_array().unwrap().len(), 1);
    let none = server.get("/api/runs?phase=failed").json();
    assert!(none["runs"].as_array().unwrap().is_empty());

    let missing = server.get("/api/runs/0000nothing");
    assert_eq!(missing.status, 404);
    assert_eq!(missing.code(), "RUN_NOT_FOUND");
}

#[test]
fn a_run_from_a_package_and_a_trace_file_and_pages_of_runs() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let project = sample_project(dir.path());
    let package = examples().join("packages/create-story-micro");
    let trace = examples().join("traces/create-story-micro.trace.json");
    let mut ids = Vec::new();
    for _ in 0..3 {
        let started = server.post(
            "/api/runs",
            &json!({"package": package, "project": project, "replay": trace}),
        );
        assert_eq!(started.status, 202, "{}", started.text());
        let id = started.json()["runId"].as_str().unwrap().to_string();
        wait_for_phase(&server, &id, "completed");
        ids.push(id);
    }
    ids.reverse();
    let root = std::fs::canonicalize(&project).unwrap();
    let first = server
        .get(&format!("/api/runs?project={}&limit=2", root.display()))
        .json();
    let page: Vec<&str> = first["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["runId"].as_str().unwrap())
        .collect();
    assert_eq!(page, [ids[0].as_str(), ids[1].as_str()]);
    let cursor = first["nextCursor"].as_str().unwrap().to_string();
    let second = server
        .get(&format!(
            "/api/runs?project={}&limit=2&cursor={cursor}",
            root.display()
        ))
        .json();
    let page: Vec<&str> = second["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["runId"].as_str().unwrap())
        .collect();
    assert_eq!(page, [ids[2].as_str()]);
    assert_eq!(second["nextCursor"], Value::Null);
    let by_workflow = server.get("/api/runs?workflow=no-such-workflow").json();
    assert!(by_workflow["runs"].as_array().unwrap().is_empty());

    // Mistakes in the query or the body.
    assert_eq!(server.get("/api/runs?phase=bogus").code(), "QUERY_INVALID");
    assert_eq!(
        server.get("/api/runs?cursor=garbage").code(),
        "QUERY_INVALID"
    );
    assert_eq!(server.get("/api/runs?limit=x").code(), "QUERY_INVALID");
    let no_package = server.post("/api/runs", &json!({"project": project}));
    assert_eq!(
        (no_package.status, no_package.code().as_str()),
        (400, "START_INVALID")
    );
    let unknown_field = server.post("/api/runs", &json!({"replay": "demo", "colour": 1}));
    assert_eq!(unknown_field.code(), "BODY_INVALID");
    let not_json = server.raw(
        "POST",
        "/api/runs",
        &[("Authorization", &server.bearer())],
        Some("{"),
    );
    assert_eq!(not_json.code(), "BODY_INVALID");
    let bad_trace = server.post(
        "/api/runs",
        &json!({"package": package, "project": project, "replay": dir.path().join("none.json")}),
    );
    assert_eq!(bad_trace.status, 400, "{}", bad_trace.text());
    let bad_package = server.post(
        "/api/runs",
        &json!({"package": dir.path().join("no-package"), "project": project, "replay": trace}),
    );
    assert_eq!(bad_package.status, 404, "{}", bad_package.text());
    assert_eq!(bad_package.code(), "PACKAGE_NOT_FOUND");
    assert!(
        bad_package.text().contains("no-package"),
        "{}",
        bad_package.text()
    );
}

#[test]
fn a_waiting_run_is_answered_in_the_background_and_completes() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let project = sample_project(dir.path());
    let id = start_demo(&server, &project, false);
    let waiting = wait_for_phase(&server, &id, "waiting-user");
    let question = waiting["run"]["waitingFor"]["question"].as_str().unwrap();
    assert!(question.contains("Which story"), "{question}");

    // Not one of text, confirm, widget.
    let empty = server.post(&format!("/api/runs/{id}/answer"), &json!({}));
    assert_eq!(
        (empty.status, empty.code().as_str()),
        (400, "ANSWER_INVALID")
    );
    let both = server.post(
        &format!("/api/runs/{id}/answer"),
        &json!({"text": "a", "confirm": true}),
    );
    assert_eq!(both.code(), "ANSWER_INVALID");

    // Another driver holds the run: RUN_BUSY, and the run still waits.
    let (p, run) = server.store().find_run(&id).unwrap();
    let lock = baton_store::driver_lock::acquire(
        &p.run_paths(&run.run_id).dir,
        &run.run_id,
        "baton resume",
    )
    .unwrap();
    let busy = server.post(
        &format!("/api/runs/{id}/answer"),
        &json!({"text": "1-2-user-authentication"}),
    );
    assert_eq!((busy.status, busy.code().as_str()), (409, "RUN_BUSY"));
    drop(lock);

    let answered = server.post(
        &format!("/api/runs/{id}/answer"),
        &json!({"text": "1-2-user-authentication"}),
    );
    assert_eq!(answered.status, 202, "{}", answered.text());
    assert_eq!(answered.json()["runId"], id.as_str());
    let done = wait_for_phase(&server, &id, "completed");
    assert_eq!(done["complete"], true, "{done:#}");

    let again = server.post(&format!("/api/runs/{id}/answer"), &json!({"text": "more"}));
    assert_eq!(
        (again.status, again.code().as_str()),
        (409, "RUN_NOT_WAITING")
    );
    let unknown = server.post("/api/runs/0000nothing/answer", &json!({"text": "x"}));
    assert_eq!(unknown.status, 404);
}

/// A run started with a live model (its name and endpoint given then, not in the server's
/// environment) is answered from the page with that model: the answer body names none.
#[test]
fn a_live_run_is_answered_with_the_model_it_was_started_with() {
    use baton_llm::testing::{Reply as Scripted, ScriptedServer};
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let project = sample_project(dir.path());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let trace = baton_llm::Trace::load(&baton_testkit::demo_trace()).unwrap();
    let scripted = runtime
        .block_on(ScriptedServer::start(Scripted::from_trace(&trace)))
        .unwrap();
    let model = baton_llm::HttpChatModel::new(baton_llm::LlmConfig {
        base_url: scripted.base_url(),
        model: Some("model-x".into()),
        ..baton_llm::LlmConfig::default()
    })
    .unwrap();
    let pkg = examples().join("packages/create-story-micro");
    let started = runtime
        .block_on(baton_engine::runner::start(
            &server.store(),
            baton_engine::runner::StartRun::new(&pkg, &project),
            baton_engine::runner::Settings::new(&model),
        ))
        .unwrap();
    let id = started.run.run_id.clone();
    wait_for_phase(&server, &id, "waiting-user");
    let asked = scripted.received().len();

    let answered = server.post(
        &format!("/api/runs/{id}/answer"),
        &json!({"text": "1-2-user-authentication"}),
    );
    assert_eq!(answered.status, 202, "{}", answered.text());
    let done = wait_for_phase(&server, &id, "completed");
    assert_eq!(done["complete"], true, "{done:#}");
    let models: Vec<String> = scripted
        .received()
        .iter()
        .map(|r| r.body["model"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(
        models.len() > asked,
        "the answer went to the run's endpoint"
    );
    assert!(models.iter().all(|m| m == "model-x"), "{models:?}");
}

/// `api` in a body: a run started with `"api": "anthropic"` speaks Anthropic's Messages API
/// and is answered with it though the answer names none; an API baton does not know is
/// refused before anything starts or is claimed.
#[test]
fn a_run_started_with_api_anthropic_is_answered_with_it() {
    use baton_llm::testing::anthropic::{AnthropicServer, trace_answers};
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let project = sample_project(dir.path());
    let trace = baton_llm::Trace::load(&baton_testkit::demo_trace()).unwrap();
    let anthropic = AnthropicServer::start(trace_answers(&trace, false)).unwrap();
    std::fs::write(
        project.join("baton.toml"),
        format!("[llm]\nbase_url = \"{}\"\n", anthropic.base_url()),
    )
    .unwrap();
    let package = examples().join("packages/create-story-micro");
    let start = |api: &str| {
        server.post(
            "/api/runs",
            &json!({"package": package, "project": project, "model": "claude-x", "api": api}),
        )
    };
    let unknown = start("gemini");
    assert_eq!(
        (unknown.status, unknown.code().as_str()),
        (400, "LLM_CONFIG_INVALID"),
        "{}",
        unknown.text()
    );
    assert!(
        server.get("/api/runs").json()["runs"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    let started = start("anthropic");
    assert_eq!(started.status, 202, "{}", started.text());
    let id = started.json()["runId"].as_str().unwrap().to_string();
    let waiting = wait_for_phase(&server, &id, "waiting-user");
    assert_eq!(waiting["run"]["model"]["api"], "anthropic", "{waiting:#}");
    let asked = anthropic.exchanges().len();
    let refused = server.post(
        &format!("/api/runs/{id}/answer"),
        &json!({"text": "1-2-user-authentication", "api": "gemini"}),
    );
    assert_eq!(refused.code(), "LLM_CONFIG_INVALID", "{}", refused.text());
    wait_for_phase(&server, &id, "waiting-user");

    let answered = server.post(
        &format!("/api/runs/{id}/answer"),
        &json!({"text": "1-2-user-authentication"}),
    );
    assert_eq!(answered.status, 202, "{}", answered.text());
    let done = wait_for_phase(&server, &id, "completed");
    assert_eq!(done["complete"], true, "{done:#}");
    let exchanges = anthropic.exchanges();
    assert!(
        exchanges.len() > asked,
        "the answer went to the run's endpoint"
    );
    for e in &exchanges {
        assert_eq!((e.path.as_str(), e.status), ("/v1/messages", 200), "{e:?}");
    }
}

/// A run started with `--context full` (the carrying policy) is answered from the page with
/// that policy: every request after the answer begins with the whole previous one, across the
/// node changes, as they did before; the run still remembers `full`.
#[test]
fn a_carried_run_is_answered_with_the_context_policy_it_was_started_with() {
    use baton_llm::testing::{Reply as Scripted, ScriptedServer};
    use baton_llm::wire::prompt_bytes;
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let project = sample_project(dir.path());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let trace = baton_llm::Trace::load(&baton_testkit::demo_trace()).unwrap();
    let scripted = runtime
        .block_on(ScriptedServer::start(Scripted::from_trace(&trace)))
        .unwrap();
    let model = baton_llm::HttpChatModel::new(baton_llm::LlmConfig {
        base_url: scripted.base_url(),
        model: Some("model-x".into()),
        ..baton_llm::LlmConfig::default()
    })
    .unwrap();
    let pkg = examples().join("packages/create-story-micro");
    let mut settings = baton_engine::runner::Settings::new(&model);
    settings.context = Some(baton_engine::ContextPolicy::Full);
    let started = runtime
        .block_on(baton_engine::runner::start(
            &server.store(),
            baton_engine::runner::StartRun::new(&pkg, &project),
            settings,
        ))
        .unwrap();
    let id = started.run.run_id.clone();
    assert_eq!(started.run.context, baton_engine::ContextPolicy::Full);
    wait_for_phase(&server, &id, "waiting-user");
    let asked = scripted.received().len();

    let answered = server.post(
        &format!("/api/runs/{id}/answer"),
        &json!({"text": "1-2-user-authentication"}),
    );
    assert_eq!(answered.status, 202, "{}", answered.text());
    let done = wait_for_phase(&server, &id, "completed");
    assert_eq!(done["complete"], true, "{done:#}");
    assert_eq!(done["context"], "full", "{done:#}");
    let bodies: Vec<Value> = scripted.received().into_iter().map(|r| r.body).collect();
    assert!(
        bodies.len() > asked + 1,
        "the answer went on: {}",
        bodies.len()
    );
    let mut node_changes = 0;
    for i in asked..bodies.len() {
        let (prev, next) = (prompt_bytes(&bodies[i - 1]), prompt_bytes(&bodies[i]));
        assert!(
            next.starts_with(&prev),
            "request {i} does not begin with the whole previous one"
        );
        let n = bodies[i - 1]["messages"].as_array().unwrap().len();
        node_changes += bodies[i]["messages"].as_array().unwrap()[n..]
            .iter()
            .filter(|m| {
                m["content"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("NODE_BRIEF"))
            })
            .count();
    }
    assert!(
        node_changes >= 1,
        "the requests after the answer cross a node change"
    );
    let (_, run) = server.store().find_run(&id).unwrap();
    assert_eq!(run.context, baton_engine::ContextPolicy::Full);
}

#[test]
fn a_run_the_server_drives_is_held_with_the_driver_lock() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let project = sample_project(dir.path());
    let id = start_demo(&server, &project, true);
    // While the server drives it, a second driver is refused (or it already finished).
    let (p, run) = server.store().find_run(&id).unwrap();
    match baton_store::driver_lock::acquire(
        &p.run_paths(&run.run_id).dir,
        &run.run_id,
        "baton resume",
    ) {
        Err(e) => assert_eq!(e.code(), "RUN_BUSY"),
        Ok(_) => {
            let phase = p.get_run(&id).unwrap().phase;
            assert_eq!(
                phase,
                baton_store::Phase::Completed,
                "the lock was free while the run was {phase:?}"
            );
        }
    }
    wait_for_phase(&server, &id, "completed");
}

// ---------------------------------------------------------------- events (SSE)

/// An open event stream and the events read so far.
struct Events {
    reader: BufReader<TcpStream>,
}

#[derive(Debug, Clone, Default)]
struct Event {
    event: String,
    id: Option<u64>,
    data: String,
}

impl Events {
    fn open(server: &Server, path: &str, last_event_id: Option<u64>) -> Events {
        let stream = TcpStream::connect(server.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let bearer = server.bearer();
        let last = last_event_id.map(|n| n.to_string());
        let mut headers = vec![
            ("Authorization", bearer.as_str()),
            ("Accept", "text/event-stream"),
        ];
        if let Some(last) = &last {
            headers.push(("Last-Event-ID", last.as_str()));
        }
        (&stream)
            .write_all(head(server, "GET", path, &headers, None).as_bytes())
            .unwrap();
        let mut reader = BufReader::new(stream);
        let mut status = String::new();
        reader.read_line(&mut status).unwrap();
        assert!(status.contains(" 200 "), "{status}");
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" || line.is_empty() {
                break;
            }
        }
        Events { reader }
    }

    /// The next event (comments and keep-alives skipped); `None` when the stream ended.
    fn next(&mut self) -> Option<Event> {
        let mut event = Event::default();
        let mut any = false;
        loop {
            let mut line = String::new();
            if self.reader.read_line(&mut line).ok()? == 0 {
                return None;
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if any {
                    return Some(event);
                }
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            any = true;
            match field {
                "event" => event.event = value.to_string(),
                "id" => event.id = value.parse().ok(),
                "data" => event.data.push_str(value),
                _ => {}
            }
        }
    }

    /// The next event named `name`.
    fn next_named(&mut self, name: &str) -> Event {
        loop {
            let e = self
                .next()
                .unwrap_or_else(|| panic!("the stream ended before a {name} event"));
            if e.event == name {
                return e;
            }
        }
    }
}

fn append(path: &Path, line: &str) {
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(line.as_bytes()).unwrap();
}

#[test]
fn events_deliver_every_audit_line_new_ones_and_resume_after_last_event_id() {
    let mut server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let project = sample_project(dir.path());
    let id = start_demo(&server, &project, true);
    wait_for_phase(&server, &id, "completed");
    // The job may still write its last lines after the phase: wait for its end.
    wait_for_invocation(&server, &id);
    let (p, run) = server.store().find_run(&id).unwrap();
    let log = p.run_paths(&run.run_id).execution_log;
    let lines = std::fs::read_to_string(&log).unwrap().lines().count() as u64;
    assert!(lines > 3);

    let path = format!("/api/runs/{id}/events");
    let mut events = Events::open(&server, &path, None);
    let state = events.next_named("run");
    assert_eq!(
        serde_json::from_str::<Value>(&state.data).unwrap()["phase"],
        "completed"
    );
    for n in 1..=lines {
        let e = events.next_named("record");
        assert_eq!(e.id, Some(n));
        serde_json::from_str::<Value>(&e.data).unwrap();
    }
    // A line appended to the audit log arrives, numbered after the others.
    let appended = Instant::now();
    append(&log, "{\"kind\":\"test.appended\",\"n\":1}\n");
    let e = events.next_named("record");
    let latency = appended.elapsed();
    assert_eq!(e.id, Some(lines + 1));
    assert_eq!(
        serde_json::from_str::<Value>(&e.data).unwrap()["kind"],
        "test.appended"
    );
    // A bound on liveness, generous for a loaded 2-core machine (the server polls every
    // 50 ms; the figure is in docs/BENCHMARKS.md).
    assert!(latency < Duration::from_secs(10), "{latency:?}");
    // A half-written line waits for its end; a line that is not JSON is reported, numbered.
    append(&log, "{\"kind\":\"test.half\"");
    std::thread::sleep(Duration::from_millis(200));
    append(&log, "}\nnot json\n");
    let e = events.next_named("record");
    assert_eq!(
        (
            e.id,
            serde_json::from_str::<Value>(&e.data).unwrap()["kind"].clone()
        ),
        (Some(lines + 2), json!("test.half"))
    );
    let e = events.next_named("damaged");
    assert_eq!(e.id, Some(lines + 3));
    // A line over the limit is reported, not sent, and the next one still arrives.
    let long = format!(
        "{{\"kind\":\"{}\"}}\n",
        "x".repeat(baton_serve::api::MAX_LINE + 10)
    );
    append(&log, &long);
    append(&log, "{\"kind\":\"test.after-long\"}\n");
    let e = events.next_named("damaged");
    assert_eq!(e.id, Some(lines + 4));
    assert!(e.data.contains("over"), "{}", e.data);
    assert!(e.data.len() < 200);
    let e = events.next_named("record");
    assert_eq!(e.id, Some(lines + 5));
    assert_eq!(
        serde_json::from_str::<Value>(&e.data).unwrap()["kind"],
        "test.after-long"
    );

    // Reconnecting with Last-Event-ID starts after it.
    let mut resumed = Events::open(&server, &path, Some(lines));
    let e = resumed.next_named("record");
    assert_eq!(e.id, Some(lines + 1));
    assert_eq!(
        serde_json::from_str::<Value>(&e.data).unwrap()["kind"],
        "test.appended"
    );

    // The conversation log streams the same way; an unknown log is refused.
    let mut conversation = Events::open(&server, &format!("{path}?log=conversation"), None);
    assert_eq!(conversation.next_named("record").id, Some(1));
    assert_eq!(
        server.get(&format!("{path}?log=bogus")).code(),
        "QUERY_INVALID"
    );
    assert_eq!(server.get("/api/runs/0000nothing/events").status, 404);

    // Stopping the server ends the open streams.
    let stopped = Instant::now();
    server.stop();
    while events.next().is_some() {}
    while resumed.next().is_some() {}
    assert!(stopped.elapsed() < Duration::from_secs(30));
}

// ---------------------------------------------------------------- artifacts

#[test]
fn artifacts_are_read_through_the_mounts_and_nothing_else() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let project = sample_project(dir.path());
    let id = start_demo(&server, &project, true);
    let done = wait_for_phase(&server, &id, "completed");
    let artifact = done["state"]["artifacts"][0].as_str().unwrap().to_string();

    let base = format!("/api/runs/{id}/artifacts");
    let readme = server.get(&format!("{base}/@project/README.md"));
    assert_eq!(readme.status, 200, "{}", readme.text());
    assert_eq!(
        readme.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(
        readme.text(),
        std::fs::read_to_string(project.join("README.md")).unwrap()
    );
    let made = server.get(&format!("{base}/@project/{artifact}"));
    assert_eq!(made.status, 200, "{artifact}: {}", made.text());
    assert_eq!(
        server.get(&format!("{base}/@state/workflow.md")).status,
        200
    );
    assert_eq!(server.get(&format!("{base}/@pkg/bmad.json")).status, 200);
    let missing = server.get(&format!("{base}/@project/no-such-file.md"));
    assert_eq!((missing.status, missing.code().as_str()), (404, "ENOENT"));

    // Something outside the project, and links to it.
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "TOP-SECRET").unwrap();
    std::os::unix::fs::symlink(&secret, project.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(dir.path(), project.join("outside")).unwrap();
    let host_path = dir.path().display().to_string();
    for attempt in [
        "@project/../secret.txt",
        "@project/%2e%2e/secret.txt",
        "@project/%252e%252e/secret.txt",
        "@project/..%2fsecret.txt",
        "@project/a/../../secret.txt",
        "/etc/passwd",
        "etc/passwd",
        "@project/link.txt",
        "@project/outside/secret.txt",
        "@nothing/secret.txt",
        "@project/%E2%80%A5/secret.txt",
    ] {
        let reply = server.get(&format!("{base}/{attempt}"));
        assert_ne!(reply.status, 200, "{attempt} was served: {}", reply.text());
        assert!(!reply.text().contains("TOP-SECRET"), "{attempt}");
        assert!(
            !reply.text().contains(&host_path),
            "{attempt} names a host path: {}",
            reply.text()
        );
        assert!(
            reply.status == 403 || reply.status == 404 || reply.status == 400,
            "{attempt}: {}",
            reply.status
        );
    }
    let dotdot = server.get(&format!("{base}/@project/../secret.txt"));
    assert_eq!(dotdot.code(), "E_SANDBOX_VIOLATION");
    let linked = server.get(&format!("{base}/@project/link.txt"));
    assert_eq!(linked.code(), "E_SANDBOX_VIOLATION", "{}", linked.text());
}

// ---------------------------------------------------------------- epic and sessions

#[test]
fn the_epic_board_and_its_answer_endpoint() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("taskboard-epic");
    copy_dir(&examples().join("projects/taskboard-epic"), &project);

    let board = server.get(&format!("/api/epic?project={}", project.display()));
    assert_eq!(board.status, 200, "{}", board.text());
    let v = board.json();
    assert_eq!(v["live"], false);
    assert!(!v["epics"].as_array().unwrap().is_empty(), "{v:#}");

    assert_eq!(server.get("/api/epic").code(), "QUERY_INVALID");
    let nowhere = server.get(&format!(
        "/api/epic?project={}",
        dir.path().join("none").display()
    ));
    assert_eq!(
        (nowhere.status, nowhere.code().as_str()),
        (404, "PROJECT_NOT_FOUND")
    );

    let incomplete = server.post("/api/epic/answer", &json!({"project": project}));
    assert_eq!(incomplete.code(), "BODY_INVALID");
    let unknown = server.post(
        "/api/epic/answer",
        &json!({"project": dir.path().join("none"), "story": "1-1", "text": "yes", "replay": dir.path()}),
    );
    assert_eq!(unknown.status, 404, "{}", unknown.text());
    // Accepted, then driven in the background: with no question waiting the epic says so, and
    // the board shows how the answer ended.
    let accepted = server.post(
        "/api/epic/answer",
        &json!({"project": project, "story": "1-1-no-such-story", "text": "yes", "replay": dir.path()}),
    );
    assert_eq!(accepted.status, 202, "{}", accepted.text());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v = server
            .get(&format!("/api/epic?project={}", project.display()))
            .json();
        if let Some(code) = v["invocation"]["error"]["code"].as_str() {
            assert!(!code.is_empty());
            break;
        }
        assert!(v["invocation"].is_null(), "{v:#}");
        assert!(Instant::now() < deadline, "the answer never ended");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sessions_are_listed_and_a_damaged_one_does_not_hide_the_others() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let empty = server
        .get(&format!("/api/sessions?project={}", dir.path().display()))
        .json();
    assert_eq!(empty, json!({"sessions": [], "more": false}));

    let damaged = dir
        .path()
        .join(".workflow/.maestro/ralph-20260101-000000-x");
    std::fs::create_dir_all(&damaged).unwrap();
    std::fs::write(damaged.join("status.json"), "{").unwrap();
    let listed = server
        .get(&format!("/api/sessions?project={}", dir.path().display()))
        .json();
    let sessions = listed["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{listed:#}");
    assert_eq!(sessions[0]["ok"], false);
    assert_eq!(sessions[0]["session_id"], "ralph-20260101-000000-x");
    assert!(sessions[0]["error"]["code"].is_string());

    assert_eq!(server.get("/api/sessions").code(), "QUERY_INVALID");
    let nowhere = server.get(&format!(
        "/api/sessions?project={}",
        dir.path().join("none").display()
    ));
    assert_eq!(
        (nowhere.status, nowhere.code().as_str()),
        (404, "PROJECT_NOT_FOUND")
    );
    // The server state is shared with the pages: the same token.
    assert_eq!(server.state.token.as_str(), server.token);
}

#[test]
fn event_streams_are_capped() {
    let server = Server::start();
    let all = u32::try_from(baton_serve::server::MAX_STREAMS).unwrap();
    let taken = server
        .state
        .streams
        .clone()
        .try_acquire_many_owned(all)
        .unwrap();
    let refused = server.get("/api/runs/0000nothing/events");
    assert_eq!(
        (refused.status, refused.code().as_str()),
        (503, "SSE_LIMIT")
    );
    drop(taken);
    assert_eq!(server.get("/api/runs/0000nothing/events").status, 404);
}

// ---------------------------------------------------------------- demo runs across restarts

/// A demo without a project runs on a copy in the store's `demo-projects/`; left waiting when
/// its server stops, it is answered by the next server on the same store, which rebuilds the
/// bundled recording where the run stood, and it completes.
#[test]
fn a_demo_left_waiting_is_answered_by_the_next_server_on_the_same_store() {
    let mut first = Server::start();
    let started = first.post("/api/runs", &json!({"replay": "demo"}));
    assert_eq!(started.status, 202, "{}", started.text());
    let v = started.json();
    let id = v["runId"].as_str().unwrap().to_string();
    let root = PathBuf::from(v["projectRoot"].as_str().unwrap());
    let copies = std::fs::canonicalize(first.home.path().join("demo-projects")).unwrap();
    assert_eq!(root.parent(), Some(copies.as_path()), "{}", root.display());
    assert!(root.join("artifacts/PRD.md").is_file());
    wait_for_phase(&first, &id, "waiting-user");
    wait_for_invocation(&first, &id);
    first.stop();

    let home = std::mem::replace(&mut first.home, tempfile::tempdir().unwrap());
    let second = Server::start_in(home);
    let answered = second.post(
        &format!("/api/runs/{id}/answer"),
        &json!({"text": "1-2-user-authentication"}),
    );
    assert_eq!(answered.status, 202, "{}", answered.text());
    let outcome = wait_for_invocation(&second, &id);
    assert_eq!(outcome["phase"], "completed", "{outcome:#}");
    let done = wait_for_phase(&second, &id, "completed");
    assert_eq!(done["complete"], true, "{done:#}");
    assert!(
        root.join("artifacts/stories/1-2-user-authentication.md")
            .is_file()
    );
}

/// A demo start refused after its copy of the sample project was made leaves no copy behind.
#[test]
fn a_refused_demo_start_leaves_no_copy() {
    let server = Server::start();
    for (body, code) in [
        (
            json!({"replay": "demo", "workflow": "nope"}),
            "PACKAGE_INVALID",
        ),
        (
            json!({"replay": "demo", "agent": "nope"}),
            "AGENT_NOT_FOUND",
        ),
    ] {
        let refused = server.post("/api/runs", &body);
        assert_eq!(refused.code(), code, "{}", refused.text());
    }
    let copies = server.home.path().join("demo-projects");
    let left: Vec<_> = std::fs::read_dir(&copies)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}
