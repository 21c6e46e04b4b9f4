//! The recorded session of `baton demo session` (`examples/traces/session-demo/`): the
//! committed traces replay offline to exactly what the played model does live (same files,
//! same steps, same decisions), so they cannot drift from the player, the bundled skills or the
//! session code. Record them again with
//! `BATON_RECORD_SESSION_DEMO=1 cargo test -p baton-lifecycle --test lifecycle session_demo::`. The player
//! is played behind a played provider cache, so each call's usage is what a caching provider
//! reports for its request (prompt tokens at 4 bytes a token, the cached prefix in blocks of
//! 128 from 1,024) and a replay shows those tokens.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::session_player;

use baton_lifecycle::ralph::Context;
use baton_lifecycle::session::run::{RunSettings, SessionEnd, run};
use baton_lifecycle::session::start::{self, StartOptions, StartOutcome};
use baton_lifecycle::session::step_run::ModelSource;
use baton_llm::testing::caching::CachingProvider;
use baton_llm::{RecordingModel, ReplayModel, Trace, TraceRecorder};
use baton_store::Store;
use baton_testkit::json_server::JsonServer;
use baton_testkit::trim_trace::trim_trace;
use serde_json::{Value, json};
use session_player::SessionPlayer;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What the demo asks for (kept in step with `crates/baton/src/commands/session_demo.rs`).
const INTENT: &str = "phase 1: add a --header flag that skips the first line";
const OWNER: &str = "baton-demo";
/// The decomposition call's trace, beside the session's step and gate traces.
const START_TRACE: &str = "start.trace.json";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn demo_dir() -> PathBuf {
    repo().join("examples/traces/session-demo")
}

struct Copy {
    _tmp: tempfile::TempDir,
    project: PathBuf,
    store: Store,
    ctx: Context,
}

/// A fresh copy of the csvsum sample; only the bundled skills (no home directory).
fn copy() -> Copy {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("csvsum");
    baton_testkit::copy_dir(&repo().join("examples/projects/csvsum"), &project);
    let store = Store::new(tmp.path().join("baton-home"));
    let ctx = Context {
        project: project.clone(),
        home: None,
        maestro_home: None,
        cli: "baton ralph".into(),
        owner: OWNER.into(),
        lock_timeout: Duration::from_secs(5),
        bundled_commands: None,
        warnings: Default::default(),
    }
    .with_bundled_skills(store.home())
    .unwrap();
    Copy {
        _tmp: tmp,
        project,
        store,
        ctx,
    }
}

fn options() -> StartOptions {
    StartOptions {
        intent: INTENT.into(),
        quality: Some(baton_lifecycle::session::infer::QualityMode::Quick),
        auto: true,
        answers: BTreeMap::new(),
        platform: None,
    }
}

async fn create(c: &Copy, model: &dyn baton_llm::ChatModel) {
    let out = start::start(&c.ctx, &options(), model, &CancellationToken::new())
        .await
        .unwrap();
    assert!(matches!(out, StartOutcome::Created(_)), "{out:?}");
}

/// Plays the session live against the player (behind a played provider cache), recording
/// every trace into `record`.
async fn play_live(c: &Copy, record: Option<&Path>) {
    let player = SessionPlayer::start(&c.project);
    let provider = Arc::new(CachingProvider::new());
    let upstream = player.base_url();
    let proxy = JsonServer::start(Arc::new(move |body: &Value| {
        provider.proxy(&upstream, body)
    }));
    let model = baton_llm::testing::played_model(proxy.base_url()).unwrap();
    let recorder = Arc::new(Mutex::new(TraceRecorder::default()));
    let recording = RecordingModel::new(&model, recorder.clone());
    create(c, &recording).await;
    if let Some(dir) = record {
        let bytes = recorder.lock().unwrap().to_bytes();
        std::fs::write(dir.join(START_TRACE), bytes).unwrap();
    }
    let mut settings = RunSettings::new(OWNER, &c.store, ModelSource::Live(&model));
    settings.record = record;
    let report = run(&c.ctx, None, settings).await;
    let report = report.unwrap_or_else(|e| {
        panic!(
            "{e:?}\nserved: {:?}\n{:#}",
            player.served(),
            outline(&c.project)
        )
    });
    assert_eq!(report.end, SessionEnd::Completed, "{:?}", player.served());
}

/// Replays the traces of `dir`, offline.
async fn replay(c: &Copy, dir: &Path) {
    let start_model = ReplayModel::new(Trace::load(&dir.join(START_TRACE)).unwrap());
    create(c, &start_model).await;
    let settings = RunSettings::new(OWNER, &c.store, ModelSource::Replay(dir));
    let report = run(&c.ctx, None, settings).await.unwrap();
    assert_eq!(report.end, SessionEnd::Completed);
}

fn session_dir(project: &Path) -> PathBuf {
    let root = project.join(".workflow/.maestro");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs.remove(0)
}

/// The session as a person reads it: steps and decisions without times, ids and paths.
fn outline(project: &Path) -> Value {
    let dir = session_dir(project);
    let doc: Value =
        serde_json::from_slice(&std::fs::read(dir.join("status.json")).unwrap()).unwrap();
    let steps: Vec<Value> = doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            json!([
                s["skill"],
                s["args"],
                s["decision"],
                s["retry_count"],
                s["status"],
                s["completion_status"],
                s["completion_evidence"],
                s["verdict"],
                s["goal_ref"]
            ])
        })
        .collect();
    let decisions: Vec<Value> = std::fs::read_to_string(dir.join("decisions.ndjson"))
        .unwrap()
        .lines()
        .map(|l| {
            let d: Value = serde_json::from_str(l).unwrap();
            json!([
                d["node_id"],
                d["verdict"],
                d["step_index"],
                d["retry_count"],
                d["effect"],
                d["inserted"]
            ])
        })
        .collect();
    json!({"status": doc["status"], "steps": steps, "decisions": decisions})
}

/// Every file of the project outside the session folder, by path.
fn files(project: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![project.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let rel = p
                .strip_prefix(project)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if rel == ".workflow/.maestro" {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_the_demo_session_again() {
    if std::env::var("BATON_RECORD_SESSION_DEMO").as_deref() != Ok("1") {
        eprintln!(
            "skipped: set BATON_RECORD_SESSION_DEMO=1 to record examples/traces/session-demo again"
        );
        return;
    }
    let c = copy();
    let out = tempfile::tempdir().unwrap();
    play_live(&c, Some(out.path())).await;
    let dir = demo_dir();
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(out.path()).unwrap().flatten() {
        let target = dir.join(e.file_name());
        std::fs::copy(e.path(), &target).unwrap();
        trim_trace(
            &target,
            "Recorded by baton's session loop against a played model (crates/baton-lifecycle/tests/support/session_player.rs) behind a played provider cache (usage: prompt tokens at 4 bytes a token, cached tokens the longest prefix seen before, from 1,024 in blocks of 128); requests trimmed.",
            None,
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_committed_traces_replay_to_what_the_player_plays() {
    let live = copy();
    play_live(&live, None).await;
    let replayed = copy();
    replay(&replayed, &demo_dir()).await;

    assert_eq!(outline(&replayed.project), outline(&live.project));
    let (a, b) = (files(&replayed.project), files(&live.project));
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "the same files"
    );
    for (path, bytes) in &a {
        assert!(
            b[path] == *bytes,
            "{path} differs between replay and live play"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_played_session_fixes_the_phase_once_and_completes() {
    let c = copy();
    play_live(&c, None).await;
    let o = outline(&c.project);
    assert_eq!(o["status"], "completed");
    let skills: Vec<String> = o["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let name = s[0].as_str().filter(|n| !n.is_empty());
            name.or(s[2].as_str()).unwrap_or("?").to_string()
        })
        .collect();
    assert_eq!(
        skills,
        [
            "maestro-analyze",
            "maestro-plan",
            "maestro-execute",
            "maestro-verify",
            "post-verify",
            "quality-debug",
            "maestro-plan",
            "maestro-execute",
            "maestro-verify",
            "post-verify",
            "quality-review",
            "post-review",
            "maestro-milestone-audit",
            "post-goal-audit",
            "maestro-milestone-complete",
            "post-milestone",
        ]
    );
    let verdicts: Vec<(String, String)> = o["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d[0].as_str().unwrap_or("").into(),
                d[1].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    assert_eq!(verdicts[0], ("post-verify".into(), "fix".into()));
    assert_eq!(verdicts[1], ("post-verify".into(), "proceed".into()));
    let tests = std::process::Command::new("sh")
        .arg("test.sh")
        .current_dir(&c.project)
        .output()
        .unwrap();
    assert!(
        tests.status.success(),
        "{}",
        String::from_utf8_lossy(&tests.stdout)
    );
}
