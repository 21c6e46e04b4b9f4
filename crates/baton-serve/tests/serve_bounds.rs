//! `baton serve` under a file that never answers: a FIFO where a handler reads (here the
//! store's `project.json`, read by every runs listing) gets an error within the deadline, the
//! other requests keep being answered, and the server's blocking threads stay bounded. And
//! under idle clients: half-sent requests and idle kept-alive connections are closed at the
//! header deadline, and connections over the limit wait for a slot.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_serve::ServeOptions;
use baton_serve::bounded::Bounded;
use baton_serve::connections::Limits;
use baton_store::Store;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The handlers' deadline in these tests.
const DEADLINE: Duration = Duration::from_millis(1500);
/// Blocking calls at once in these tests.
const PERMITS: usize = 8;

struct Server {
    addr: SocketAddr,
    token: String,
    home: tempfile::TempDir,
    bounded: Bounded,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start() -> Server {
        Server::start_with(Limits::default())
    }

    fn start_with(limits: Limits) -> Server {
        let home = tempfile::tempdir().unwrap();
        let store = Store::new(home.path());
        let bounded = Bounded::new(PERMITS, DEADLINE);
        let theirs = bounded.clone();
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
                    .unwrap()
                    .with_blocking(theirs)
                    .with_limits(limits);
                ready_tx
                    .send((bound.addr(), bound.token().to_string()))
                    .unwrap();
                let _ = bound
                    .serve(async move {
                        let _ = stop_rx.await;
                    })
                    .await;
            });
        });
        let (addr, token) = ready_rx.recv_timeout(Duration::from_secs(20)).unwrap();
        Server {
            addr,
            token,
            home,
            bounded,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    fn request(&self, path: &str) -> Vec<u8> {
        format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\r\n",
            self.addr, self.token
        )
        .into_bytes()
    }

    /// A connection that sent the start of a request and nothing more.
    fn half_sent(&self) -> TcpStream {
        let mut stream = TcpStream::connect(self.addr).unwrap();
        stream
            .write_all(format!("GET /api/runs HTTP/1.1\r\nHost: {}\r\nAuth", self.addr).as_bytes())
            .unwrap();
        stream
    }

    /// `(status, body)` of a GET; the client gives up after 30 s (a hung handler fails here).
    fn get(&self, path: &str) -> (u16, String) {
        let mut stream = TcpStream::connect(self.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        stream
            .write_all(
                format!(
                    "GET {path} HTTP/1.0\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\r\n",
                    self.addr, self.token
                )
                .as_bytes(),
            )
            .unwrap();
        let mut bytes = Vec::new();
        stream
            .read_to_end(&mut bytes)
            .unwrap_or_else(|e| panic!("no answer to GET {path}: {e}"));
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap();
        (status, body.to_string())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A registered project whose `project.json` is a FIFO nobody writes to.
struct Fifo {
    path: PathBuf,
}

impl Fifo {
    fn in_store(home: &Path, project: &Path) -> Fifo {
        let registered = Store::new(home).project(project).unwrap();
        let path = registered.dir.join("project.json");
        std::fs::remove_file(&path).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
        Fifo { path }
    }

    /// Lets every reader through: a writer opens (unblocking `open`), the path becomes a
    /// regular file (no new reader blocks), and the writer closes (readers see the end).
    fn release(&self) {
        let writer = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.path)
            .unwrap();
        let plain = self.path.with_extension("plain");
        std::fs::write(&plain, b"{}").unwrap();
        std::fs::rename(&plain, &self.path).unwrap();
        drop(writer);
    }
}

fn code(body: &str) -> String {
    let json: serde_json::Value = serde_json::from_str(body).unwrap();
    json["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_fifo_a_handler_reads_answers_an_error_in_time_and_others_are_still_answered() {
    let server = Server::start();
    let project = tempfile::tempdir().unwrap();
    let fifo = Fifo::in_store(server.home.path(), project.path());
    let other = tempfile::tempdir().unwrap();
    let sessions = format!("/api/sessions?project={}", other.path().display());

    let start = Instant::now();
    let (status, body) = server.get("/api/runs");
    let took = start.elapsed();
    assert_eq!(status, 504, "{body}");
    assert_eq!(code(&body), "SERVE_TIMEOUT");
    assert!(took < DEADLINE + Duration::from_secs(5), "{took:?}");

    // The stuck read still holds its permit; the others serve other requests.
    assert_eq!(server.bounded.available(), PERMITS - 1);
    let start = Instant::now();
    let (status, body) = server.get(&sessions);
    assert_eq!(status, 200, "{body}");
    assert!(start.elapsed() < DEADLINE, "{:?}", start.elapsed());

    fifo.release();
    wait_for(|| server.bounded.available() == PERMITS);
}

#[test]
fn more_fifo_requests_than_permits_are_answered_busy_or_timed_out_never_hung() {
    let server = Server::start();
    let project = tempfile::tempdir().unwrap();
    let fifo = Fifo::in_store(server.home.path(), project.path());
    let flood = PERMITS * 3;
    let start = Instant::now();
    let answers: Vec<(u16, String)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..flood)
            .map(|_| s.spawn(|| server.get("/api/runs")))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // Each request waits at most one deadline (for a permit, then for its work).
    assert!(
        start.elapsed() < DEADLINE * 2 + Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    for (status, body) in &answers {
        assert!(
            (*status == 504 && code(body) == "SERVE_TIMEOUT")
                || (*status == 503 && code(body) == "SERVE_BUSY"),
            "{status} {body}"
        );
    }
    assert!(answers.iter().any(|(s, _)| *s == 503));
    // Never more blocking threads than permits, however many requests hung.
    assert_eq!(server.bounded.available(), 0);

    // Routes without blocking work are answered meanwhile.
    let (status, body) = server.get("/api/nothing-here");
    assert_eq!(status, 404, "{body}");

    // Once the file answers, the server recovers by itself.
    fifo.release();
    wait_for(|| server.bounded.available() == PERMITS);
    let (status, body) = server.get("/api/runs");
    assert_eq!(status, 200, "{body}");
}

/// Waits for a condition the server reaches by itself (bounded: 30 s).
fn wait_for(done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(30), "never happened");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether the server closed `stream` (it reads the end, or a reset) within 20 s.
fn closed_by_server(stream: &mut TcpStream) -> bool {
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            // An answer (a 408, say) before the close.
            Ok(_) => continue,
            Err(e) => {
                return !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                );
            }
        }
    }
}

fn short_headers() -> Limits {
    Limits {
        header_read: Duration::from_secs(1),
        ..Limits::default()
    }
}

#[test]
fn hundreds_of_half_sent_requests_do_not_stop_a_normal_request_and_are_closed_in_time() {
    let server = Server::start_with(short_headers());
    let mut halves: Vec<TcpStream> = (0..300).map(|_| server.half_sent()).collect();
    let start = Instant::now();
    let (status, body) = server.get("/api/nothing-here");
    assert_eq!(status, 404, "{body}");
    let (status, body) = server.get("/api/runs");
    assert_eq!(status, 200, "{body}");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    for half in &mut halves {
        assert!(closed_by_server(half), "a half-sent request stayed open");
    }
}

#[test]
fn an_idle_kept_alive_connection_is_closed_at_the_header_deadline() {
    let server = Server::start_with(short_headers());
    let mut stream = TcpStream::connect(server.addr).unwrap();
    stream.write_all(&server.request("/api/runs")).unwrap();
    // The answer comes, then nothing: the connection idles until the server closes it.
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut first = [0u8; 12];
    stream.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"HTTP/1.1 200");
    assert!(closed_by_server(&mut stream));
}

#[test]
fn connections_over_the_limit_wait_for_a_slot() {
    let server = Server::start_with(Limits {
        connections: 2,
        header_read: Duration::from_secs(60),
        ..Limits::default()
    });
    let first = server.half_sent();
    let _second = server.half_sent();
    let mut third = TcpStream::connect(server.addr).unwrap();
    third.write_all(&server.request("/api/runs")).unwrap();
    // Both slots are taken: no answer while they are.
    third
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut buf = [0u8; 12];
    let early = third.read(&mut buf);
    assert!(
        matches!(&early, Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)),
        "answered over the limit: {early:?}"
    );
    // A slot frees: the waiting connection is served.
    drop(first);
    third
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    third.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"HTTP/1.1 200");
}
