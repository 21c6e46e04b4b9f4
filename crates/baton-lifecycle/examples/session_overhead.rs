//! What a lifecycle session costs per tick when the model costs nothing, and how many prompt
//! tokens its task runs send compared with one long conversation doing the same steps.
//!
//! The session of `baton demo session` (the csvsum sample, 16 steps with one post-verify fix
//! loop and a goal audit) is replayed in process from `examples/traces/session-demo/`, `RUNS`
//! times on fresh copies under `target/` (so fsyncs are real). The model is the recorded traces
//! behind a timer: each call is answered by the replay of its conversation (picked from the
//! request: the step's or the gate's index) and its time is counted as model time. A tick's
//! overhead is its wall time minus its model time: claiming the step, the task run in the
//! store (conversation log, audit, state), the tools' file writes, the verdict, the gate's
//! evidence reading and settling, status.json and decisions.ndjson writes.
//!
//! Tokens (`o200k_base`, requests as sent, tool definitions included), from the first run's
//! requests: *task runs* is the sum over every call of its request (each step a fresh
//! conversation holding only its own prompt and turns; each gate one call); *one conversation*
//! is the same calls made in a single growing conversation, where each call also carries every
//! earlier call's conversation (its messages and the answer), as a chat session that does the
//! steps one after the other would.
//!
//! Usage: `cargo run --release -p baton-lifecycle --example session_overhead [RUNS]`, from the
//! repository root; `SESSION_BENCH_DIR=/dev/shm/x` puts the copies on a tmpfs instead of under
//! `target/`, to see the cost without the durable writes.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_engine::context::{Encoding, TokenCounter};
use baton_lifecycle::ralph::Context;
use baton_lifecycle::session::infer::QualityMode;
use baton_lifecycle::session::run::{self, RunSettings, SessionEnd, Tick};
use baton_lifecycle::session::start::{self, StartOptions, StartOutcome};
use baton_lifecycle::session::step_run::{ModelSource, gate_trace, step_trace};
use baton_llm::{
    BoxFuture, CallOptions, ChatModel, ChatRequest, ChatResponse, LlmError, Message, ReplayModel,
    Role, Trace,
};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const INTENT: &str = "phase 1: add a --header flag that skips the first line";

/// The recorded traces behind a timer, one replay per conversation.
struct Timed {
    dir: PathBuf,
    replays: Mutex<HashMap<String, Arc<ReplayModel>>>,
    spent: Mutex<Duration>,
    calls: Mutex<Vec<Call>>,
}

/// One model call: its conversation (the trace name), the request, the answer.
type Call = (String, ChatRequest, Message);

/// One tick: its kind, wall time and model time (ms).
type TickTime = (&'static str, f64, f64);

/// The trace that answers `request`: a step's (`<!-- …: step [i/n] …`) or a gate's
/// (`Gate: post-verify (step i)` and `Retry r of …`).
fn conversation(request: &ChatRequest) -> String {
    let user = request
        .messages
        .iter()
        .find(|m| m.role == Role::User)
        .map(Message::text)
        .unwrap_or_default();
    if let Some(line) = user.lines().find_map(|l| l.strip_prefix("Gate: ")) {
        let index = line
            .split_once("(step ")
            .and_then(|(_, r)| r.trim_end_matches(')').parse().ok())
            .unwrap_or(0);
        let retry = user
            .lines()
            .find_map(|l| l.strip_prefix("Retry "))
            .and_then(|r| r.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        return gate_trace(index, retry);
    }
    let index = user
        .find(": step [")
        .and_then(|at| {
            let rest = &user[at + 8..];
            rest[..rest.find('/')?].parse().ok()
        })
        .unwrap_or(0);
    step_trace(index, 1)
}

impl ChatModel for Timed {
    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
        options: CallOptions<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, LlmError>> {
        Box::pin(async move {
            let started = Instant::now();
            let name = conversation(request);
            let replay = {
                let mut replays = self.replays.lock().expect("replays");
                replays
                    .entry(name.clone())
                    .or_insert_with(|| {
                        let trace = Trace::load(&self.dir.join(&name)).expect("a recorded trace");
                        Arc::new(ReplayModel::new(trace))
                    })
                    .clone()
            };
            let answer = replay.chat(request, options).await;
            *self.spent.lock().expect("spent") += started.elapsed();
            if let Ok(a) = &answer {
                self.calls
                    .lock()
                    .expect("calls")
                    .push((name, request.clone(), a.message.clone()));
            }
            answer
        })
    }

    fn model_name(&self) -> &str {
        "replay"
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn p95(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[(v.len() * 95 / 100).min(v.len() - 1)]
}

fn kind(t: &Tick) -> &'static str {
    match t {
        Tick::Step { .. } => "step",
        Tick::Gate { gate, .. } if gate == "post-milestone" => "gate by code",
        Tick::Gate { .. } => "gate (model)",
        _ => "other",
    }
}

/// One replayed session on a fresh copy: per tick `(kind, wall ms, model ms)`, and the calls.
fn session(
    repo: &Path,
    base: &Path,
    runtime: &tokio::runtime::Runtime,
) -> (Vec<TickTime>, Vec<Call>) {
    let traces = repo.join("examples/traces/session-demo");
    let tmp = tempfile::tempdir_in(base).expect("a temp dir");
    let project = tmp.path().join("csvsum");
    baton_testkit::copy_dir(&repo.join("examples/projects/csvsum"), &project);
    let store = baton_store::Store::new(tmp.path().join("home"));
    let ctx = Context {
        project: project.clone(),
        home: None,
        maestro_home: None,
        cli: "baton ralph".into(),
        owner: "bench".into(),
        lock_timeout: Duration::from_secs(5),
        bundled_commands: None,
        warnings: Default::default(),
    }
    .with_bundled_skills(store.home())
    .expect("the bundled skills");
    let options = StartOptions {
        intent: INTENT.into(),
        quality: Some(QualityMode::Quick),
        auto: true,
        answers: BTreeMap::new(),
        platform: None,
    };
    let start_model = ReplayModel::new(
        Trace::load(&traces.join("start.trace.json")).expect("the decomposition trace"),
    );
    let created = runtime
        .block_on(start::start(
            &ctx,
            &options,
            &start_model,
            &CancellationToken::new(),
        ))
        .expect("the session is created");
    assert!(matches!(created, StartOutcome::Created(_)), "{created:?}");

    let model = Timed {
        dir: traces,
        replays: Mutex::new(HashMap::new()),
        spent: Mutex::new(Duration::ZERO),
        calls: Mutex::new(Vec::new()),
    };
    let mut ticks = Vec::new();
    let mut last = (Instant::now(), Duration::ZERO);
    let mut after = |t: &Tick| {
        let now = Instant::now();
        let spent = *model.spent.lock().expect("spent");
        ticks.push((
            kind(t),
            (now - last.0).as_secs_f64() * 1000.0,
            (spent - last.1).as_secs_f64() * 1000.0,
        ));
        last = (now, spent);
    };
    let mut settings = RunSettings::new("bench", &store, ModelSource::Live(&model));
    settings.after_tick = Some(&mut after);
    let report = runtime
        .block_on(run::run(&ctx, None, settings))
        .expect("the session runs");
    assert_eq!(report.end, SessionEnd::Completed);
    let calls = std::mem::take(&mut *model.calls.lock().expect("calls"));
    (ticks, calls)
}

/// Prompt tokens: the task runs' requests as sent, and the same calls in one conversation.
fn tokens(calls: &[Call]) -> (usize, usize, usize) {
    let mut counter = TokenCounter::new(Encoding::O200k);
    let mut per_run = 0;
    let mut one = 0;
    let mut largest = 0;
    // The earlier conversations, whole: what one long conversation carries into each call.
    let mut carried = 0;
    for (i, (name, request, answer)) in calls.iter().enumerate() {
        let sent = counter.request(&request.messages, &request.tools);
        per_run += sent;
        one += carried + sent;
        largest = largest.max(carried + sent);
        let last_of_conversation = calls.get(i + 1).is_none_or(|(next, _, _)| next != name);
        if last_of_conversation {
            carried += counter.messages(&request.messages) + counter.message(answer);
        }
    }
    (per_run, one, largest)
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20);
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // Where the copies live: target/ (a disk: fsyncs are real), or SESSION_BENCH_DIR (e.g. a
    // tmpfs, where they cost nothing: what is left is the work without the durable writes).
    let base = std::env::var_os("SESSION_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("target"));
    std::fs::create_dir_all(&base).expect("the bench folder exists");
    println!("copies under {}", base.display());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let mut by_kind: BTreeMap<&str, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    let mut all = Vec::new();
    let mut sessions = Vec::new();
    let mut first_calls = Vec::new();
    let mut ticks_per_session = 0;
    // Run 0 warms the caches and is not counted.
    for i in 0..=runs {
        let started = Instant::now();
        let (ticks, calls) = session(&repo, &base, &runtime);
        let wall = started.elapsed().as_secs_f64() * 1000.0;
        if i == 0 {
            first_calls = calls;
            ticks_per_session = ticks.len();
            continue;
        }
        sessions.push(wall);
        for (k, total, model) in ticks {
            let e = by_kind.entry(k).or_default();
            e.0.push(total - model);
            e.1.push(model);
            all.push(total - model);
        }
    }
    println!(
        "{runs} replayed sessions of {ticks_per_session} ticks ({} model calls each)",
        first_calls.len()
    );
    println!(
        "{:<16}{:>7}{:>16}{:>13}{:>14}",
        "tick", "count", "overhead med", "p95", "model med"
    );
    for (k, (overhead, model)) in &by_kind {
        println!(
            "{k:<16}{:>7}{:>13.2} ms{:>10.2} ms{:>11.3} ms",
            overhead.len(),
            median(overhead.clone()),
            p95(overhead.clone()),
            median(model.clone())
        );
    }
    println!(
        "{:<16}{:>7}{:>13.2} ms{:>10.2} ms",
        "every tick",
        all.len(),
        median(all.clone()),
        p95(all.clone())
    );
    println!(
        "whole session (build phase excluded): median {:.1} ms",
        median(sessions)
    );
    let (per_run, one, largest) = tokens(&first_calls);
    println!(
        "prompt tokens (o200k_base): task runs {per_run}, one conversation {one} ({:.1}x); \
         largest request: task runs {}, one conversation {largest}",
        one as f64 / per_run as f64,
        first_calls
            .iter()
            .map(|(_, r, _)| TokenCounter::new(Encoding::O200k).request(&r.messages, &r.tools))
            .max()
            .unwrap_or(0)
    );
}
