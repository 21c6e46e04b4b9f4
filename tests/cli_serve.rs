//! `baton serve` as a command: the first line of stdout (the URL with its token, or
//! `{url, token, port}` with `--json`), the warning for a non-loopback bind, a port already in
//! use, and SIGTERM stopping the server cleanly.

// `common` re-exports helpers this file does not need.
#[allow(unused_imports)]
mod common;

use common::{Baton, repo};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
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
