//! `baton serve` as a command: the first line of stdout (the URL with its token, or
//! `{url, token, port}` with `--json`), the warning for a non-loopback bind, a port already in
//! use, and SIGTERM stopping the server cleanly; SIGTERM then SIGINT quitting at once with
//! requests in flight, and SIGTERM alone ending while a handler is stuck on a FIFO.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

// `common` re-exports helpers this file does not need.
use crate::common;

use common::{Baton, repo};
use serde_json::Value;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

struct Serve {
    child: Child,
    first_line: String,
    stderr: mpsc::Receiver<String>,
}

impl Serve {
    fn start(baton: &Baton, args: &[&str]) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_baton"))
            .arg("serve")
            .args(args)
            .current_dir(repo())
            .env("BATON_HOME", baton.home.path())
            .env_remove("OPENAI_API_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("baton serve starts");
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (line_tx, line_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = line_tx.send(line);
        });
        let (err_tx, err_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = BufReader::new(stderr).read_to_string(&mut text);
            let _ = err_tx.send(text);
        });
        let first_line = line_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("a first line on stdout");
        Serve {
            child,
            first_line,
            stderr: err_rx,
        }
    }

    /// SIGTERM, then the exit code and stderr.
    fn terminate(mut self) -> (Option<i32>, String) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success());
        // Generous for a loaded 2-core machine; it ends when the server exits.
        let deadline = Instant::now() + Duration::from_secs(60);
        let code = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status.code();
            }
            assert!(
                Instant::now() < deadline,
                "baton serve did not stop on SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let stderr = self
            .stderr
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_default();
        (code, stderr)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET path` over HTTP/1.0 with these headers; the status and the body.
fn get(port: u16, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n");
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
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

#[test]
fn json_prints_url_token_and_port_first_and_sigterm_stops_the_server() {
    let baton = Baton::new();
    let serve = Serve::start(&baton, &["--json"]);
    let v: Value = serde_json::from_str(&serve.first_line).unwrap();
    let token = v["token"].as_str().unwrap().to_string();
    let port = u16::try_from(v["port"].as_u64().unwrap()).unwrap();
    assert_eq!(token.len(), 64);
    assert_eq!(
        v["url"].as_str().unwrap(),
        format!("http://127.0.0.1:{port}/?token={token}")
    );
    let bearer = format!("Bearer {token}");
    let (status, body) = get(port, "/api/runs", &[("Authorization", &bearer)]);
    assert_eq!(status, 200, "{body}");
    let (status, _) = get(port, "/api/runs", &[]);
    assert_eq!(status, 401);
    let (code, stderr) = serve.terminate();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    // No run was going: nothing is said about runs stopping.
    assert!(stderr.contains("stopping…"), "{stderr}");
    assert!(!stderr.contains("in progress"), "{stderr}");
}

#[test]
fn the_plain_first_line_is_the_url_and_a_wide_bind_warns_but_still_needs_the_token() {
    let baton = Baton::new();
    let serve = Serve::start(&baton, &["--bind", "0.0.0.0"]);
    let url = serve.first_line.trim().to_string();
    let rest = url
        .strip_prefix("http://127.0.0.1:")
        .unwrap_or_else(|| panic!("{url}"));
    let (port, token) = rest.split_once("/?token=").unwrap();
    let port: u16 = port.parse().unwrap();
    let (status, _) = get(port, "/api/runs", &[]);
    assert_eq!(status, 401);
    let bearer = format!("Bearer {token}");
    let (status, body) = get(port, "/api/runs", &[("Authorization", &bearer)]);
    assert_eq!(status, 200, "{body}");
    let (code, stderr) = serve.terminate();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("warning: baton serve listens on 0.0.0.0"),
        "{stderr}"
    );
}

#[test]
fn a_port_in_use_is_refused_with_its_code() {
    let baton = Baton::new();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = baton.run(&["serve", "--port", &port, "--json"]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert_eq!(out.json()["error"]["code"], "SERVE_BIND_FAILED");
}

// ---------------------------------------------------------------- stopping with requests in flight

#[cfg(target_os = "linux")]
const O_NONBLOCK: i32 = 0o4000;
#[cfg(not(target_os = "linux"))]
const O_NONBLOCK: i32 = 0x0004;

/// A server whose stderr is read line by line (its words are the events waited on).
struct Live {
    child: Child,
    port: u16,
    token: String,
    stderr: mpsc::Receiver<String>,
}

impl Live {
    fn start(baton: &Baton) -> Live {
        let mut child = Command::new(env!("CARGO_BIN_EXE_baton"))
            .args(["serve", "--json"])
            .current_dir(repo())
            .env("BATON_HOME", baton.home.path())
            .env_remove("OPENAI_API_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("baton serve starts");
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (line_tx, line_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = line_tx.send(line);
        });
        let (err_tx, err_rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if err_tx.send(line).is_err() {
                    break;
                }
            }
        });
        let first: serde_json::Value = serde_json::from_str(
            &line_rx
                .recv_timeout(Duration::from_secs(30))
                .expect("a first line on stdout"),
        )
        .unwrap();
        Live {
            child,
            port: u16::try_from(first["port"].as_u64().unwrap()).unwrap(),
            token: first["token"].as_str().unwrap().to_string(),
            stderr: err_rx,
        }
    }

    fn signal(&self, name: &str) {
        let sent = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    }

    /// Waits for a stderr line containing `text` (the server says it when it happens).
    fn wait_said(&self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(line) if line.contains(text) => return,
                Ok(_) => {}
                Err(_) => panic!("baton serve never said {text:?}"),
            }
        }
    }

    /// The exit code once the process ends within `within`.
    fn exits_within(&mut self, within: Duration) -> Option<i32> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(
                start.elapsed() < within,
                "baton serve still runs {within:?} after the signal"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends a whole authenticated GET and leaves the connection open.
    fn send(&self, path: &str) -> TcpStream {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .write_all(
                format!(
                    "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: Bearer {}\r\n\r\n",
                    self.port, self.token
                )
                .as_bytes(),
            )
            .unwrap();
        stream
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A project directory in the store whose `project.json` is a FIFO: every runs listing reads
/// it, and the read never ends while [`hold`] keeps a writer open without writing.
fn fifo_project(home: &Path) -> PathBuf {
    let dir = home.join("projects").join("0123456789abcdef");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("project.json");
    assert!(
        Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap()
            .success()
    );
    path
}

/// Waits until a reader has the FIFO open (a non-blocking writer can open it only then) and
/// keeps the writer: the handler is now inside its read, which never ends.
fn hold(fifo: &Path) -> File {
    let start = Instant::now();
    loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(O_NONBLOCK)
            .open(fifo)
        {
            Ok(f) => return f,
            Err(_) => {
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "no handler ever read the FIFO"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

#[test]
fn sigterm_then_sigint_quits_at_once_with_a_request_in_flight() {
    let baton = Baton::new();
    let mut serve = Live::start(&baton);
    let fifo = fifo_project(baton.home.path());
    let _in_flight = serve.send("/api/runs");
    let _writer = hold(&fifo);
    // A half-sent request and an idle connection too.
    let mut half = TcpStream::connect(("127.0.0.1", serve.port)).unwrap();
    half.write_all(b"GET /api/runs HTTP/1.1\r\nHost: 12")
        .unwrap();
    let _idle = TcpStream::connect(("127.0.0.1", serve.port)).unwrap();

    serve.signal("TERM");
    serve.wait_said("stopping");
    serve.signal("INT");
    assert_eq!(serve.exits_within(Duration::from_secs(5)), Some(130));
}

#[test]
fn sigterm_alone_ends_by_itself_while_a_handler_is_stuck_on_a_fifo() {
    let baton = Baton::new();
    let mut serve = Live::start(&baton);
    let fifo = fifo_project(baton.home.path());
    let _in_flight = serve.send("/api/runs");
    let _writer = hold(&fifo);

    serve.signal("TERM");
    serve.wait_said("stopping");
    // The handler's deadline (10 s) answers the request; nothing else is waited for.
    assert_eq!(serve.exits_within(Duration::from_secs(25)), Some(0));
}
