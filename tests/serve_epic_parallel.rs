//! The epic board of a parallel epic, through a real `baton serve` server (the library's) on
//! 127.0.0.1: `GET /api/epic` and
//! the `/epic` page show the stories in flight side by side with their phase, worktree branch
//! and folder, and why the others wait. The epic is run for real first (`--parallel 2` against
//! the played model on loopback): two stories stop at a question, the third waits for one of
//! them.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::player;

use baton_epic::{Command, EpicOutcome, EpicSettings, ModelSource};
use baton_serve::ServeOptions;
use baton_store::Store;
use player::{Player, Scenario};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

const A: &str = "1-1-project-scaffold";
const B: &str = "1-2-user-authentication";
const C: &str = "1-3-password-reset";

struct Server {
    addr: SocketAddr,
    token: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(store: Store) -> Server {
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
        let (addr, token) = ready_rx.recv_timeout(Duration::from_secs(60)).unwrap();
        Server {
            addr,
            token,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// (status line and headers, body) of a GET with `auth` as its one extra header.
    fn get(&self, path: &str, auth: &str) -> (String, String) {
        let mut stream = TcpStream::connect(self.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        stream
            .write_all(
                format!(
                    "GET {path} HTTP/1.0\r\nHost: {}\r\n{auth}\r\n\r\n",
                    self.addr
                )
                .as_bytes(),
            )
            .unwrap();
        let mut bytes = Vec::new();
        stream.read_to_end(&mut bytes).unwrap();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        (head.to_string(), body.to_string())
    }

    fn json(&self, path: &str) -> Value {
        let (head, body) = self.get(path, &format!("Authorization: Bearer {}", self.token));
        assert!(head.contains(" 200 "), "{head}\n{body}");
        serde_json::from_str(&body).unwrap()
    }

    fn page(&self, path: &str) -> String {
        let (head, body) = self.get(path, &format!("Cookie: baton_token={}", self.token));
        assert!(head.contains(" 200 "), "{head}\n{body}");
        body
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

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The sample project in a git repository, story B after story A.
fn sample(into: &Path) -> PathBuf {
    let project = into.join("project");
    baton_testkit::copy_dir(
        &baton_testkit::repo().join("examples/projects/taskboard-epic"),
        &project,
    );
    std::fs::write(
        project.join("baton.toml"),
        format!(
            "[autopilot.git]\ncommit = true\n\n[autopilot.parallel]\nafter = {{ \"{B}\" = [\"{A}\"] }}\n"
        ),
    )
    .unwrap();
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["add", "-A"]);
    git(
        &project,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "-m",
            "init",
        ],
    );
    project
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

fn s(x: &str) -> String {
    x.to_string()
}

#[test]
fn the_board_shows_the_stories_in_flight_side_by_side_and_why_the_others_wait() {
    let tmp = tempfile::tempdir().unwrap();
    let project = sample(tmp.path());
    let store = Store::new(tmp.path().join("home"));
    let player = Player::start(
        &project,
        Scenario {
            questions: vec![
                (s(A), s("dev"), 1, s("Which port does the API listen on?")),
                (
                    s(C),
                    s("dev"),
                    1,
                    s("Which mail server sends the <b>reset</b> link?"),
                ),
            ],
            ..Scenario::default()
        },
    );
    let model = baton_llm::testing::played_model(player.base_url()).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let report = runtime
        .block_on(baton_epic::execute_parallel(
            &store,
            &project,
            Command::Run {
                epic: "epic-1".into(),
                max_stories: None,
            },
            EpicSettings {
                source: ModelSource::Live(&model),
                record: None,
                ask: None,
                on_event: None,
                cancel: Default::default(),
                dry_run: false,
                budget: Default::default(),
            },
            Some(2),
        ))
        .unwrap();
    assert!(
        matches!(report.outcome, EpicOutcome::Waiting { .. }),
        "{report:?}"
    );

    // A story in flight keeps its phase runs in its worktree's progress record until its
    // loop ends; the runs page finds them there (so they sit under their story while it runs).
    let runs = store.project(&project).unwrap().list_runs().unwrap();
    let in_a: Vec<_> = runs
        .iter()
        .filter(|r| {
            r.work_tree
                .as_ref()
                .is_some_and(|t| t.ends_with(format!("epic-1/{A}")))
        })
        .collect();
    assert_eq!(in_a.len(), 3, "{runs:#?}");
    let tree = in_a[0].work_tree.clone().unwrap();
    let recorded = baton_epic::board::phase_runs_in_work_tree(&project, &tree);
    for run in &in_a {
        let r = recorded
            .iter()
            .find(|r| r.run_id == run.run_id)
            .unwrap_or_else(|| panic!("{} not in {recorded:#?}", run.run_id));
        assert_eq!(r.story_key, A);
    }
    assert!(recorded.iter().all(|r| r.story_key == A), "{recorded:#?}");

    let server = Server::start(store);
    let p = url(&project.display().to_string());
    // The API: the board of `baton epic status --json`, with the schedule.
    let board = server.json(&format!("/api/epic?project={p}"));
    let par = &board["parallel"];
    assert_eq!(par["slots"], 2, "{par:#}");
    assert_eq!(par["branch"], "main", "{par:#}");
    let flights = par["inFlight"].as_array().unwrap();
    assert_eq!(flights.len(), 2, "{par:#}");
    for (f, key) in flights.iter().zip([A, C]) {
        assert_eq!(f["key"], key, "{par:#}");
        assert_eq!(f["phase"], "dev", "{f:#}");
        assert_eq!(f["state"], "question", "{f:#}");
        assert_eq!(f["branch"], format!("baton/epic-1/{key}"), "{f:#}");
        assert_eq!(f["worktree"], format!("<worktrees>/epic-1/{key}"), "{f:#}");
    }
    assert_eq!(
        par["waiting"],
        json!([{"key": B, "why": "dependency", "on": [A], "reason": format!("waits for {A} (not done)")}])
    );

    // The page: the two stories side by side (one card each in the flights' row), with their
    // phase, state and branch; the waiting story with its reason; model text escaped.
    let body = server.page(&format!("/epic?project={p}"));
    let section = body
        .find("id=\"epic-parallel\"")
        .unwrap_or_else(|| panic!("no parallel section: {body}"));
    let end = body[section..].find("</section>").unwrap() + section;
    let flights = &body[section..end];
    let row = flights.find("id=\"epic-flights\"").unwrap();
    let card = |key: &str| {
        let at = flights
            .find(&format!("data-flight=\"{key}\" data-state=\"question\""))
            .unwrap_or_else(|| panic!("{key}: {flights}"));
        let end = flights[at..].find("</article>").unwrap() + at;
        assert!(at > row);
        &flights[at..end]
    };
    for key in [A, C] {
        let c = card(key);
        assert!(
            c.contains("<span class=\"phase phase-dev\">dev</span>"),
            "{c}"
        );
        assert!(
            c.contains(&format!(
                "<code data-testid=\"flight-branch\">baton/epic-1/{key}</code>"
            )),
            "{c}"
        );
        assert!(
            c.contains(&format!("<code>&lt;worktrees&gt;/epic-1/{key}</code>")),
            "{c}"
        );
    }
    assert!(card(C).contains("&lt;b&gt;reset&lt;/b&gt;"));
    assert!(!body.contains("<b>reset"));
    assert!(flights.contains(&format!(
        "<li data-key=\"{B}\" data-why=\"dependency\"><code>{B}</code> waits for {A} (not done)</li>"
    )));
    // The worktrees' folder is shown relative to a known root, never as the host's path.
    assert!(flights.contains("worktrees in <code>…/"), "{flights}");
    assert!(
        !flights.contains(&tmp.path().display().to_string()),
        "{flights}"
    );
}
