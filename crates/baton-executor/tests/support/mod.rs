//! What the tests of the real CLIs share: their folders, a job for the runner, what a run saw,
//! a trap for addresses the CLI must not contact, a launch outside the runner, and a budget
//! that admits one request.

// Each test binary uses only part of this module.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use baton_executor::{Event, ExecutorKind, Invocation, Job, Launch, Mode, Outcome, SandboxPaths};
use baton_gateway::{Admission, Meter, Refusal, Settled};
use std::ffi::OsString;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A run's project and run folder, under a temporary root removed at the end.
pub struct Dirs {
    pub _root: tempfile::TempDir,
    pub workdir: PathBuf,
    pub run_dir: PathBuf,
}

pub fn dirs() -> Dirs {
    let root = tempfile::tempdir().unwrap();
    let workdir = root.path().join("project");
    std::fs::create_dir_all(&workdir).unwrap();
    Dirs {
        workdir: workdir.canonicalize().unwrap(),
        run_dir: root.path().join("run"),
        _root: root,
    }
}

/// A fresh run of the `kind` CLI on `model` in `d` (no resume, no meter: set them with
/// `Job { resume, ..job(..) }`).
pub fn job<'a>(
    kind: ExecutorKind,
    model: &'a str,
    program: &'a Path,
    d: &'a Dirs,
    prompt: &'a str,
    mode: Mode,
) -> Job<'a> {
    Job {
        adapter: kind.adapter().unwrap(),
        program,
        workdir: &d.workdir,
        run_dir: &d.run_dir,
        model,
        prompt,
        resume: None,
        extra_args: &[],
        mode,
        meter: None,
        max_output_tokens: None,
        sandbox: SandboxPaths {
            // Where namespaces cannot be entered (not root), the CLI runs unconfined.
            allow_unconfined: true,
            ..SandboxPaths::default()
        },
    }
}

/// Live through the gateway to `upstream`, which holds the operator's `key`.
pub fn live(upstream: String, key: &str) -> Mode {
    Mode::Live {
        upstream,
        api_key: key.into(),
    }
}

/// Runs `job`, returning its outcome and every event it reported.
pub async fn run_collecting(job: Job<'_>) -> (Outcome, Vec<Event>) {
    let mut seen = Vec::new();
    let outcome = baton_executor::run(job, &mut |e| seen.push(e.clone()))
        .await
        .unwrap();
    (outcome, seen)
}

/// The run's transcript as baton wrote it.
pub fn transcript(run_dir: &Path) -> Vec<Event> {
    std::fs::read_to_string(run_dir.join("transcript.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// What the CLI wrote on stderr (for failure messages).
pub fn stderr_of(d: &Dirs) -> String {
    std::fs::read_to_string(d.run_dir.join("stderr.log")).unwrap_or_default()
}

/// The output of tool call `call` among `events`.
pub fn tool_output(events: &[Event], call: &str) -> String {
    events
        .iter()
        .find_map(|e| match e {
            Event::ToolResult { id, output, .. } if id == call => Some(output.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no result of {call} in {events:#?}"))
}

/// Where this system can give the run a private network, the CLI had one (the gateway its
/// only reachable address).
pub fn assert_confined_where_possible(outcome: &Outcome) {
    if baton_sandbox::PrivateNetwork::new().is_ok() {
        assert!(
            outcome
                .confinement
                .iter()
                .any(|(layer, how)| layer == "network" && how == "private-namespace"),
            "{:?}",
            outcome.confinement
        );
    } else {
        eprintln!("no private network here: the CLI ran unconfined");
    }
}

/// An event in a word or two, for comparing transcripts whose ids and paths vary.
pub fn shape(e: &Event) -> String {
    match e {
        Event::Session { .. } => "session".into(),
        Event::Message { text } => format!("message {text}"),
        Event::ToolCall { name, .. } => format!("call {name}"),
        Event::ToolResult { is_error, .. } => {
            format!("result {}", if *is_error { "error" } else { "ok" })
        }
        Event::Question { text } => format!("question {text}"),
        Event::Result { is_error, .. } => {
            format!("end {}", if *is_error { "error" } else { "ok" })
        }
    }
}

/// The processes whose command line holds `marker`, each with its process group.
pub fn marked_processes(marker: &str) -> Vec<(u32, u32)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let pgrp = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(2)?
                .parse()
                .ok()?;
            Some((pid, pgrp))
        })
        .collect()
}

/// When a refusal came, and the marked processes (pid, group) running then.
pub type Refused = (Instant, Vec<(u32, u32)>);

/// Admits the first model request and refuses every later one, noting at the first refusal
/// when it came and which processes held `marker` then (none looked for without a marker).
pub struct OneRequest {
    marker: Option<String>,
    admitted: AtomicU64,
    refused: Mutex<Option<Refused>>,
}

impl OneRequest {
    pub fn new(marker: Option<&str>) -> Arc<OneRequest> {
        Arc::new(OneRequest {
            marker: marker.map(str::to_string),
            admitted: AtomicU64::new(0),
            refused: Mutex::new(None),
        })
    }

    /// The first refusal (panics when none came).
    pub fn first_refusal(&self) -> Refused {
        self.refused
            .lock()
            .unwrap()
            .clone()
            .expect("the second request was refused")
    }
}

impl Meter for OneRequest {
    fn admit(&self, _: &Admission) -> Result<(), Refusal> {
        if self.admitted.fetch_add(1, Ordering::SeqCst) == 0 {
            return Ok(());
        }
        self.refused.lock().unwrap().get_or_insert_with(|| {
            let marked = self.marker.as_deref().map(marked_processes);
            (Instant::now(), marked.unwrap_or_default())
        });
        Err(Refusal {
            code: "BUDGET_EXCEEDED".into(),
            message: "the run's budget allows one request".into(),
            details: serde_json::json!({"requests": 1}),
        })
    }
    fn settle(&self, _: &Settled) {}
}

/// A loopback listener standing in for every other address: the CLI's proxy for anything but
/// 127.0.0.1, counting the connections it gets (there must be none).
pub struct Trap {
    pub port: u16,
    pub hits: Arc<AtomicUsize>,
}

impl Trap {
    pub fn start() -> Trap {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = hits.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                counted.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
        Trap { port, hits }
    }
}

/// A CLI launched outside the runner, and what it printed.
pub struct Run {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub events: Vec<Event>,
}

/// A CLI as the tests launch it outside the runner: which, where, and with what token and model.
pub struct Cli<'a> {
    pub kind: ExecutorKind,
    pub program: &'a Path,
    pub token: &'a str,
    pub model: &'a str,
}

/// The folders of a CLI launched outside the runner (a project and a home), and the trap for
/// every address but loopback.
pub struct Direct {
    _dir: tempfile::TempDir,
    pub workdir: PathBuf,
    pub home: PathBuf,
    pub trap: Trap,
}

impl Direct {
    pub fn new() -> Direct {
        let dir = tempfile::tempdir().unwrap();
        let (workdir, home) = (dir.path().join("work"), dir.path().join("home"));
        std::fs::create_dir_all(&workdir).unwrap();
        Direct {
            _dir: dir,
            workdir,
            home,
            trap: Trap::start(),
        }
    }

    /// The launch `cli`'s adapter asks for with `gateway` as the model's address, its home
    /// seeded (files already there kept), and the environment it starts from: only PATH, HOME,
    /// TMPDIR, LANG, the trap as the proxy for every address but loopback, then the launch's
    /// own variables.
    pub fn prepare(
        &self,
        cli: &Cli<'_>,
        gateway: &str,
        prompt: &str,
        resume: Option<&str>,
    ) -> (Launch, Vec<(OsString, OsString)>) {
        let home = self.home.as_path();
        let launch = cli.kind.adapter().unwrap().launch(&Invocation {
            program: cli.program,
            workdir: &self.workdir,
            home,
            gateway,
            token: cli.token,
            model: cli.model,
            prompt,
            resume,
            extra_args: &[],
        });
        let tmp = home.join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        for (relative, content) in &launch.files {
            let path = home.join(relative);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            if !path.exists() {
                std::fs::write(&path, content).unwrap();
            }
        }
        let proxy = OsString::from(format!("http://127.0.0.1:{}", self.trap.port));
        let mut env: Vec<(OsString, OsString)> = vec![
            ("PATH".into(), std::env::var_os("PATH").unwrap_or_default()),
            ("HOME".into(), home.into()),
            ("TMPDIR".into(), tmp.into()),
            ("LANG".into(), "C.UTF-8".into()),
            ("HTTPS_PROXY".into(), proxy.clone()),
            ("HTTP_PROXY".into(), proxy.clone()),
            ("ALL_PROXY".into(), proxy),
            ("NO_PROXY".into(), "127.0.0.1".into()),
        ];
        env.extend(launch.env.iter().cloned());
        (launch, env)
    }

    /// Whether the CLI contacted any address but loopback.
    pub fn trapped(&self) -> usize {
        self.trap.hits.load(Ordering::SeqCst)
    }
}

/// Replay from the record of the run in `d`.
pub fn replay_of(d: &Dirs) -> Mode {
    Mode::Replay {
        record: d.run_dir.join("exchanges.jsonl"),
    }
}

/// Runs `job` (a replay, in `again`) and asserts it ended well after `exchanges` exchanges.
pub async fn assert_replays(job: Job<'_>, again: &Dirs, exchanges: u64) {
    let (replayed, _) = run_collecting(job).await;
    assert_eq!(
        replayed.exit_code,
        Some(0),
        "{replayed:#?}\n{}",
        stderr_of(again)
    );
    assert_eq!(replayed.exchanges, exchanges);
}
