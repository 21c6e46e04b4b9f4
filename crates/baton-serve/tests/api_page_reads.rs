//! The reads the pages need, through the JSON API on a real server on 127.0.0.1: the epic
//! board's phase runs per story (what the story cards link), and a run's events saying
//! whether a process drives it (what the page's "Live." follows).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_package::Package;
use baton_serve::ServeOptions;
use baton_store::{NewRun, RunMetadata, Store, driver_lock};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

struct Server {
    addr: SocketAddr,
    token: String,
    home: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start() -> Server {
        let home = tempfile::tempdir().unwrap();
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
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    fn store(&self) -> Store {
        Store::new(self.home.path())
    }

    fn send(&self, path: &str) -> TcpStream {
        let stream = TcpStream::connect(self.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        (&stream)
            .write_all(
                format!(
                    "GET {path} HTTP/1.0\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\r\n",
                    self.addr, self.token
                )
                .as_bytes(),
            )
            .unwrap();
        stream
    }

    fn get_json(&self, path: &str) -> Value {
        let mut bytes = Vec::new();
        self.send(path).read_to_end(&mut bytes).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200"),
            "{text}"
        );
        serde_json::from_str(body).unwrap()
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

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn url(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[test]
fn the_epic_board_lists_each_storys_phase_runs() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("taskboard-epic");
    baton_testkit::copy_dir(&repo().join("examples/projects/taskboard-epic"), &project);
    let record = |story: &str, phase: &str, n: u32, id: &str, result: &str| json!({"storyKey": story, "phase": phase, "n": n, "runId": id, "reviewCycle": n, "result": result});
    let progress = json!({"version": 1, "epicId": "epic-1", "target": {"mode": "epic", "maxStories": null},
        "completed": ["1-1-project-scaffold"], "story": null, "failure": null,
        "runs": [record("1-1-project-scaffold", "create-story", 1, "run-a", "completed"),
                 record("1-1-project-scaffold", "dev", 1, "run-b", "completed"),
                 record("1-2-user-authentication", "create-story", 1, "run-c", "waiting"),
                 record("1-1-project-scaffold", "dev", 2, "run-d", "")]});
    std::fs::write(
        project.join("_bmad-output/implementation-artifacts/.baton-epic-progress.json"),
        progress.to_string(),
    )
    .unwrap();
    let board = server.get_json(&format!(
        "/api/epic?project={}",
        url(&project.display().to_string())
    ));
    let stories: Vec<&Value> = board["epics"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| e["stories"].as_array().unwrap())
        .collect();
    let runs_of = |key: &str| -> Value {
        stories
            .iter()
            .find(|s| s["key"] == key)
            .map(|s| s["runs"].clone())
            .unwrap_or_else(|| panic!("no story {key} in {board}"))
    };
    // Each story's runs, oldest first, as the progress record has them.
    assert_eq!(
        runs_of("1-1-project-scaffold"),
        json!([
            {"phase": "create-story", "n": 1, "runId": "run-a", "reviewCycle": 1, "result": "completed"},
            {"phase": "dev", "n": 1, "runId": "run-b", "reviewCycle": 1, "result": "completed"},
            {"phase": "dev", "n": 2, "runId": "run-d", "reviewCycle": 2, "result": ""}
        ])
    );
    assert_eq!(runs_of("1-2-user-authentication")[0]["runId"], "run-c");
    assert_eq!(runs_of("1-3-password-reset"), json!([]));
}

/// Reads events until a `run` event; returns its data.
fn next_run_event(reader: &mut BufReader<TcpStream>) -> Value {
    let mut event = String::new();
    loop {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0, "the stream ended");
        let line = line.trim_end_matches(['\r', '\n']);
        if let Some(name) = line.strip_prefix("event:") {
            event = name.trim().to_string();
        } else if let Some(data) = line.strip_prefix("data:")
            && event == "run"
        {
            return serde_json::from_str(data.trim()).unwrap();
        } else if line.is_empty() {
            event.clear();
        }
    }
}

#[test]
fn run_events_say_whether_a_process_drives_the_run() {
    let server = Server::start();
    let store = server.store();
    let dir = tempfile::tempdir().unwrap();
    let project = store.project(dir.path()).unwrap();
    let package = Package::load(&repo().join("examples/packages/create-story-micro")).unwrap();
    let installed = store.packages().install(&package, "test").unwrap().package;
    let run: RunMetadata = project
        .create_run(NewRun {
            package: &package,
            installed: &installed,
            workflow_ref: None,
            agent_id: "sm",
        })
        .unwrap();
    let mut reader = BufReader::new(server.send(&format!("/api/runs/{}/events", run.run_id)));
    let first = next_run_event(&mut reader);
    assert_eq!(first["driven"], json!(false), "{first}");
    // A process takes the driver lock (as `baton resume` does): the next run event says so.
    let lock = driver_lock::acquire(
        &project.run_paths(&run.run_id).dir,
        &run.run_id,
        "baton resume",
    )
    .unwrap();
    let driven = next_run_event(&mut reader);
    assert_eq!(driven["driven"], json!(true), "{driven}");
    drop(lock);
    let released = next_run_event(&mut reader);
    assert_eq!(released["driven"], json!(false), "{released}");
}
