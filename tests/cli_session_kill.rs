//! Kill test of `baton session`: a whole lifecycle session on the csvsum sample, across two
//! milestones (M1: analyze → plan → execute → verify → post-verify `fix` → the fix loop →
//! proceed → review → goal audit → milestone-complete → post-milestone, which advances the
//! session to M2 and inserts M2's chain; M2: analyze → … → milestone-complete → the session
//! completes) is driven by `baton session start -y` and `baton session continue` against a
//! played model on 127.0.0.1, and SIGKILLed at random moments (30 kills by default;
//! `BATON_SESSION_KILLS=N` for more, `BATON_SESSION_KILL_SEED` to pick the moments), in both
//! milestones and around the advance. Each time `baton session continue` takes over, until
//! the session is completed. Then:
//!
//! - status.json is the one of a session that was never killed (times, ids and the write
//!   counter blanked), and so are decisions.ndjson (no line twice) and the project's files;
//! - no step and no gate was asked of the model after its completion was recorded: every
//!   request is checked against status.json as it arrives (the driver waits for the answer,
//!   so the file is what the driver saw), and the requests seen, per step and turn, are those
//!   of the unkilled session;
//! - `baton ralph check --json` finds no E finding after every kill, and, in the unkilled
//!   session, at every model call (the point each tick that asks the model waits at) and at
//!   the end;
//! - the store holds one completed task run per step run, as without kills, each in the runs
//!   index: none left idle, none made twice.
//!
//! A session that completes before enough kills landed is played again on a fresh copy, so
//! every run of the test kills at least the number asked for.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;
use crate::csvsum_player as session_player;

use serde_json::Value;
use session_player::SessionPlayer;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const INTENT: &str = "phase 1: add a --header flag that skips the first line";

/// One request the model was asked: what it was for and how far its conversation was.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Asked {
    /// `decompose`, `step` or `gate`.
    kind: String,
    /// The step's or gate's index in the chain.
    index: usize,
    /// The skill or the gate.
    name: String,
    /// Assistant turns already done in the conversation (0 for a step's first call).
    turn: usize,
}

struct ProxyState {
    project: PathBuf,
    baton_home: PathBuf,
    home: PathBuf,
    upstream: String,
    /// Run `baton ralph check --json` before answering each request.
    check_each: bool,
    delay: Duration,
    asked: Mutex<Vec<Asked>>,
    /// Requests for a step or gate whose completion status.json had already recorded.
    after_completion: Mutex<Vec<String>>,
    /// E findings of the checks run at requests.
    findings: Mutex<Vec<String>>,
    /// Requests received and not yet answered.
    in_flight: AtomicUsize,
    stop: AtomicBool,
}

/// A loopback proxy in front of the played model: it notes and checks each request, then
/// passes it on unchanged.
struct Proxy {
    port: u16,
    state: Arc<ProxyState>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

impl Proxy {
    fn start(world: &World, upstream: &SessionPlayer, check_each: bool, delay: Duration) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let upstream = upstream
            .base_url()
            .trim_start_matches("http://")
            .trim_end_matches("/v1")
            .to_string();
        let state = Arc::new(ProxyState {
            project: world.project.clone(),
            baton_home: world.baton_home(),
            home: world.home(),
            upstream,
            check_each,
            delay,
            asked: Mutex::new(Vec::new()),
            after_completion: Mutex::new(Vec::new()),
            findings: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        });
        let s = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if s.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let s = s.clone();
                std::thread::spawn(move || {
                    let _ = relay(stream, &s);
                });
            }
        });
        Proxy { port, state }
    }

    fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    fn asked(&self) -> Vec<Asked> {
        self.state.asked.lock().unwrap().clone()
    }
}

/// One whole HTTP request (head and body), as bytes.
fn read_request(stream: &mut TcpStream) -> std::io::Result<Option<(Vec<u8>, usize)>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    let head_end = loop {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(Some((buf, head_end)))
}

fn relay(mut client: TcpStream, s: &ProxyState) -> std::io::Result<()> {
    let Some((request, head_end)) = read_request(&mut client)? else {
        return Ok(());
    };
    s.in_flight.fetch_add(1, Ordering::SeqCst);
    let relayed = check_and_pass_on(&mut client, s, &request, head_end);
    s.in_flight.fetch_sub(1, Ordering::SeqCst);
    relayed
}

fn check_and_pass_on(
    client: &mut TcpStream,
    s: &ProxyState,
    request: &[u8],
    head_end: usize,
) -> std::io::Result<()> {
    let body: Value = serde_json::from_slice(&request[head_end..]).unwrap_or(Value::Null);
    if let Some(asked) = classify(&body) {
        // status.json as the driver left it before asking: the asked step must still be open.
        if let Some(status) = step_status(&s.project, &asked) {
            let open = match asked.kind.as_str() {
                "step" => status == "running",
                "gate" => status == "pending",
                _ => true,
            };
            if !open {
                s.after_completion
                    .lock()
                    .unwrap()
                    .push(format!("{asked:?} asked while the step was {status}"));
            }
        }
        if s.check_each {
            let found = e_findings(&s.project, &s.home, &s.baton_home);
            if !found.is_empty() {
                s.findings
                    .lock()
                    .unwrap()
                    .push(format!("at {asked:?}: {found:?}"));
            }
        }
        s.asked.lock().unwrap().push(asked);
    }
    std::thread::sleep(s.delay);
    let mut upstream = TcpStream::connect(&s.upstream)?;
    upstream.write_all(request)?;
    let mut response = Vec::new();
    upstream.read_to_end(&mut response)?;
    client.write_all(&response)?;
    client.flush()
}

fn content(m: &Value) -> &str {
    m.get("content").and_then(Value::as_str).unwrap_or("")
}

/// What a request to the model is for.
fn classify(body: &Value) -> Option<Asked> {
    let messages = body["messages"].as_array()?;
    let system: String = messages
        .iter()
        .filter(|m| m["role"] == "system")
        .map(content)
        .collect();
    let user = messages
        .iter()
        .find(|m| m["role"] == "user")
        .map(content)
        .unwrap_or("");
    // A turn a kill interrupted is played again; counted as the player counts.
    let turn = session_player::turns_done(messages);
    if system.contains("You decompose") {
        return Some(Asked {
            kind: "decompose".into(),
            index: 0,
            name: String::new(),
            turn,
        });
    }
    // A gate: "Gate: post-verify (step 5)".
    if let Some(line) = user.lines().find_map(|l| l.strip_prefix("Gate: ")) {
        let (name, rest) = line.split_once(" (step ")?;
        let index = rest.trim_end_matches(')').parse().ok()?;
        return Some(Asked {
            kind: "gate".into(),
            index,
            name: name.into(),
            turn,
        });
    }
    // A step: "<!-- baton ralph: step [3/14] skill=maestro-execute …".
    let line = user.lines().find(|l| l.contains(": step ["))?;
    let after = &line[line.find(": step [")? + 8..];
    let index = after[..after.find('/')?].parse().ok()?;
    let name = after[after.find("skill=")? + 6..]
        .split_whitespace()
        .next()?
        .to_string();
    Some(Asked {
        kind: "step".into(),
        index,
        name,
        turn,
    })
}

/// The session's folder (there is one session per project here).
fn session_dir(project: &Path) -> Option<PathBuf> {
    std::fs::read_dir(project.join(".workflow/.maestro"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("status.json").is_file())
}

fn status_json(project: &Path) -> Option<Value> {
    let dir = session_dir(project)?;
    serde_json::from_slice(&std::fs::read(dir.join("status.json")).ok()?).ok()
}

fn step_status(project: &Path, asked: &Asked) -> Option<String> {
    if asked.kind == "decompose" {
        return None;
    }
    let doc = status_json(project)?;
    let step = doc["steps"]
        .as_array()?
        .iter()
        .find(|st| st["index"].as_u64() == Some(asked.index as u64))?;
    Some(step["status"].as_str()?.to_string())
}

/// The E findings `baton ralph check --json` reports on the project's session (none when
/// there is no session yet).
fn e_findings(project: &Path, home: &Path, baton_home: &Path) -> Vec<String> {
    if session_dir(project).is_none() {
        return Vec::new();
    }
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["ralph", "check", "--json"])
        .current_dir(project)
        .env("HOME", home)
        .env("BATON_HOME", baton_home)
        .env_remove("MAESTRO_HOME")
        .env_remove("BATON_RALPH_CLI")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "ralph check --json printed no JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    v["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["level"] == "E")
        .map(Value::to_string)
        .collect()
}

/// A copy of the csvsum sample, a HOME without command files (the bundled skills are used)
/// and a store.
struct World {
    tmp: tempfile::TempDir,
    project: PathBuf,
}

impl World {
    fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("csvsum");
        baton_testkit::copy_dir(&common::repo().join("examples/projects/csvsum"), &project);
        session_player::add_second_milestone(&project);
        std::fs::create_dir_all(tmp.path().join("home")).unwrap();
        World { tmp, project }
    }

    fn home(&self) -> PathBuf {
        self.tmp.path().join("home")
    }

    fn baton_home(&self) -> PathBuf {
        self.tmp.path().join("baton-home")
    }

    /// The command that takes the session on from where its files stand.
    fn next_command(&self, proxy: &Proxy) -> (Command, &'static str) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
        let verb = if session_dir(&self.project).is_some() {
            cmd.args(["session", "continue", "--json"]);
            "continue"
        } else {
            cmd.args([
                "session",
                "start",
                INTENT,
                "-y",
                "--quality",
                "quick",
                "--json",
            ]);
            "start"
        };
        cmd.current_dir(&self.project)
            .env("HOME", self.home())
            .env("BATON_HOME", self.baton_home())
            .env("OPENAI_BASE_URL", proxy.base_url())
            .env("BATON_MODEL", "played")
            .env("OPENAI_API_KEY", "sk-test")
            .env_remove("MAESTRO_HOME")
            .env_remove("BATON_RALPH_CLI")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        (cmd, verb)
    }

    fn e_findings(&self) -> Vec<String> {
        e_findings(&self.project, &self.home(), &self.baton_home())
    }
}

/// Kills that landed: in all, while the model was asked, during `start` (before the session
/// existed or while its first ticks ran), and after which the session stood in M1 or in M2
/// (moved on by the post-milestone gate).
#[derive(Debug, Default, Clone, Copy)]
struct Kills {
    total: usize,
    in_model_call: usize,
    in_start: usize,
    in_m1: usize,
    in_m2: usize,
}

/// When the kills land: at random moments, or once, at the milestone advance (when the first
/// post-milestone gate is next, or just after it moved the session to M2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Aim {
    Random,
    Advance,
}

/// The session stands at the advance: M1 done up to its post-milestone gate, or already in M2.
fn at_advance(project: &Path) -> bool {
    let Some(doc) = status_json(project) else {
        return false;
    };
    if doc["milestone"] == "M2" {
        return true;
    }
    doc["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|s| s["status"] != "completed" && s["status"] != "skipped")
        .is_some_and(|s| s["decision"] == "post-milestone")
}

/// A small deterministic generator (xorshift), so a failing seed can be replayed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Drives the session to completed; kills the driving process at random moments, at most
/// `kills` times, and checks the session files after each kill. Returns the kills landed.
fn drive(world: &World, proxy: &Proxy, kills: usize, rng: &mut Rng, aim: Aim) -> Kills {
    let mut killed = Kills::default();
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        assert!(Instant::now() < deadline, "the session did not complete");
        // Killed after the session completed, before the process ended: nothing to continue
        // (`continue` finds no running or paused session).
        if status_json(&world.project).is_some_and(|s| s["status"] == "completed") {
            return killed;
        }
        let (mut cmd, verb) = world.next_command(proxy);
        let mut child = cmd.spawn().unwrap();
        if killed.total < kills {
            let started = Instant::now();
            match aim {
                Aim::Random => {
                    let until = started + Duration::from_millis(3 + rng.below(150));
                    while Instant::now() < until && child.try_wait().unwrap().is_none() {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                Aim::Advance => {
                    while !at_advance(&world.project) && child.try_wait().unwrap().is_none() {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    // Just before the advance's write, or just after it.
                    std::thread::sleep(Duration::from_millis(rng.below(15)));
                }
            }
            let wait = started.elapsed();
            if child.try_wait().unwrap().is_none() {
                let in_call = proxy.state.in_flight.load(Ordering::SeqCst) > 0;
                child.kill().unwrap();
                child.wait().unwrap();
                killed.total += 1;
                killed.in_model_call += usize::from(in_call);
                killed.in_start += usize::from(verb == "start");
                match status_json(&world.project).map(|s| s["milestone"].clone()) {
                    Some(m) if m == "M2" => killed.in_m2 += 1,
                    Some(_) => killed.in_m1 += 1,
                    None => {}
                }
                let found = world.e_findings();
                assert!(
                    found.is_empty(),
                    "after kill {} ({verb} at {} ms), ralph check: {found:?}",
                    killed.total,
                    wait.as_millis()
                );
                continue;
            }
        }
        let out = child.wait_with_output().unwrap();
        let code = out.status.code();
        let found = world.e_findings();
        assert!(found.is_empty(), "after {verb}, ralph check: {found:?}");
        match code {
            Some(0) => return killed,
            other => panic!(
                "{verb} exited with {other:?}:\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }
}

fn looks_like_time(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 19
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
}

/// `v` with what legitimately differs between two sessions blanked: times, the session id,
/// the temporary folder (command paths are in the store's bundled skills), and `revision` (a
/// write counter: a killed step's claim is released and taken again).
fn normalized(v: &Value, session_id: &str, tmp: &str) -> Value {
    match v {
        Value::String(s) if looks_like_time(s) => Value::String("<time>".into()),
        Value::String(s) => Value::String(s.replace(session_id, "<session>").replace(tmp, "<tmp>")),
        Value::Array(a) => Value::Array(a.iter().map(|x| normalized(x, session_id, tmp)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| {
                    let x = if k == "revision" {
                        Value::from(0)
                    } else {
                        normalized(x, session_id, tmp)
                    };
                    (k.clone(), x)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The session's final files and the project's, normalized.
struct Outcome {
    status: Value,
    /// The decisions' ids as written (`DEC-<ms>-<revision>`: a time and the write counter).
    decision_ids: Vec<String>,
    /// The decisions, ids blanked.
    decisions: Vec<Value>,
    files: BTreeMap<String, String>,
}

fn outcome(world: &World) -> Outcome {
    let dir = session_dir(&world.project).expect("a session");
    let id = dir.file_name().unwrap().to_string_lossy().into_owned();
    let tmp = world.tmp.path().to_string_lossy().into_owned();
    let status = normalized(&status_json(&world.project).unwrap(), &id, &tmp);
    let text = std::fs::read_to_string(dir.join("decisions.ndjson")).unwrap_or_default();
    let raw: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("a damaged line in decisions.ndjson ({e}): {l}"))
        })
        .collect();
    let decision_ids = raw.iter().map(|d| d["id"].to_string()).collect();
    let decisions = raw
        .iter()
        .map(|d| {
            let mut d = normalized(d, &id, &tmp);
            d["id"] = Value::from("<decision>");
            d
        })
        .collect();
    let mut files = BTreeMap::new();
    for p in common::walk(&world.project) {
        let rel = p
            .strip_prefix(&world.project)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        // The session's own folder is compared above, field by field.
        if rel.starts_with(".workflow/.maestro/") {
            continue;
        }
        // A file tool killed mid-write may leave its temporary sibling (`.name.tmp-PID-N`);
        // the file itself is whole.
        let name = p.file_name().unwrap().to_string_lossy();
        if name.starts_with('.') && name.contains(".tmp-") {
            continue;
        }
        files.insert(
            rel,
            String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned(),
        );
    }
    Outcome {
        status,
        decision_ids,
        decisions,
        files,
    }
}

/// Fails with the first line where the pretty forms of `got` and `want` differ.
fn same(got: &Value, want: &Value, what: &str) {
    if got == want {
        return;
    }
    let got = serde_json::to_string_pretty(got).unwrap();
    let want = serde_json::to_string_pretty(want).unwrap();
    let at = got
        .lines()
        .zip(want.lines())
        .position(|(a, b)| a != b)
        .unwrap_or(0);
    let around = |t: &str| {
        t.lines()
            .skip(at.saturating_sub(6))
            .take(40)
            .collect::<Vec<_>>()
            .join("\n")
    };
    panic!(
        "{what} differs from the unkilled session at line {at}:\n--- killed\n{}\n--- unkilled\n{}",
        around(&got),
        around(&want)
    );
}

/// The task runs in the store, from the run directories (the truth): `Completed` for a
/// completed run the index lists, else its phase, the size of its conversation log and whether
/// the index lists it.
fn task_runs(world: &World) -> BTreeMap<String, usize> {
    let store = baton_store::Store::new(world.baton_home());
    let p = store.project(&world.project).unwrap();
    let runs_dir = p.run_paths("x").dir.parent().unwrap().to_path_buf();
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(runs_dir).into_iter().flatten().flatten() {
        let id = e.file_name().to_string_lossy().into_owned();
        if id.starts_with('.') {
            continue;
        }
        let run = p.get_run(&id).unwrap();
        let log = std::fs::read(p.run_paths(&id).conversation_log).unwrap_or_default();
        let indexed = p.list_runs().unwrap().iter().any(|r| r.run_id == id);
        let key = if run.phase == baton_store::Phase::Completed && indexed {
            "Completed".to_string()
        } else {
            format!("{:?} log={}B indexed={indexed}", run.phase, log.len())
        };
        *out.entry(key).or_insert(0) += 1;
    }
    out
}

/// No decision id twice, and no gate (step, node, retry) decided twice.
fn no_duplicate_decisions(o: &Outcome) {
    let mut seen = BTreeSet::new();
    for id in &o.decision_ids {
        assert!(
            seen.insert(id),
            "decision {id} recorded twice: {:#?}",
            o.decisions
        );
    }
    let mut gates = BTreeSet::new();
    for d in &o.decisions {
        let key = (
            d["step_index"].to_string(),
            d["node_id"].to_string(),
            d["retry_count"].to_string(),
        );
        assert!(gates.insert(key.clone()), "gate {key:?} decided twice");
    }
}

#[test]
fn killed_at_random_moments_the_session_ends_as_if_never_killed() {
    let kills: usize = std::env::var("BATON_SESSION_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let seed: u64 = std::env::var("BATON_SESSION_KILL_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5e55_10f1);
    eprintln!("session kill test: {kills} kills, seed {seed}");

    // The reference: the same session, never killed, checked at every model call.
    let reference = World::new();
    let player = SessionPlayer::start(&reference.project);
    let proxy = Proxy::start(&reference, &player, true, Duration::ZERO);
    let started = Instant::now();
    assert_eq!(
        drive(&reference, &proxy, 0, &mut Rng(seed), Aim::Random).total,
        0
    );
    eprintln!(
        "session kill test: unkilled session in {:.1} s, {} model calls",
        started.elapsed().as_secs_f64(),
        proxy.asked().len()
    );
    let findings = proxy.state.findings.lock().unwrap().clone();
    assert!(
        findings.is_empty(),
        "ralph check during the session: {findings:#?}"
    );
    assert!(proxy.state.after_completion.lock().unwrap().is_empty());
    let expected = outcome(&reference);
    let expected_asked: BTreeSet<Asked> = proxy.asked().into_iter().collect();
    let expected_runs = task_runs(&reference);
    eprintln!("session kill test: task runs of the unkilled session: {expected_runs:?}");
    no_duplicate_decisions(&expected);
    // The story the player tells: one fix loop, a goal audit, completed.
    assert_eq!(expected.status["status"], "completed");
    let gates: Vec<(String, String)> = expected
        .decisions
        .iter()
        .map(|d| {
            (
                d["node_id"].as_str().unwrap_or("").to_string(),
                d["verdict"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert!(
        gates.contains(&("post-verify".into(), "fix".into())),
        "{gates:?}"
    );
    assert!(
        gates.iter().any(|(g, _)| g == "post-goal-audit"),
        "{gates:?}"
    );
    // Two milestones: the first post-milestone gate advanced the session, the second ended it.
    let milestone_effects: Vec<&str> = expected
        .decisions
        .iter()
        .filter(|d| d["node_id"] == "post-milestone")
        .map(|d| d["effect"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        milestone_effects,
        ["milestone-advanced", "session-completed"],
        "{gates:?}"
    );
    assert_eq!(expected.status["milestone"], "M2");
    drop(proxy);
    drop(player);

    // Killed sessions, on fresh copies, until enough kills landed.
    let mut rng = Rng(seed | 1);
    let (mut landed, mut in_model_call, mut in_start) = (0, 0, 0);
    let (mut in_m1, mut in_m2) = (0, 0);
    let mut rounds = 0;
    let started = Instant::now();
    // Random rounds until enough kills landed, then rounds with one kill aimed at the
    // milestone advance.
    let mut at_advance_rounds = 0;
    let (mut advance_before, mut advance_after) = (0, 0);
    while landed < kills || at_advance_rounds < ADVANCE_ROUNDS {
        rounds += 1;
        let aim = if landed < kills {
            Aim::Random
        } else {
            at_advance_rounds += 1;
            Aim::Advance
        };
        let world = World::new();
        let player = SessionPlayer::start(&world.project);
        // A model that takes a moment, so kills land inside model calls as well as between.
        let proxy = Proxy::start(&world, &player, false, Duration::from_millis(8));
        let budget = if aim == Aim::Advance {
            1
        } else {
            kills - landed
        };
        let done = drive(&world, &proxy, budget, &mut rng, aim);
        if aim == Aim::Advance {
            assert_eq!(
                done.total, 1,
                "round {rounds}: the kill at the advance landed"
            );
            advance_before += done.in_m1;
            advance_after += done.in_m2;
        }
        if aim == Aim::Random {
            landed += done.total;
        }
        in_model_call += done.in_model_call;
        in_start += done.in_start;
        in_m1 += done.in_m1;
        in_m2 += done.in_m2;
        eprintln!("session kill test: round {rounds}: {done:?}");

        let after = proxy.state.after_completion.lock().unwrap().clone();
        assert!(
            after.is_empty(),
            "round {rounds}: asked after completion: {after:#?}"
        );
        // One completed (and indexed) task run per step run of the unkilled session: none
        // left behind, no step started over in a second run.
        let runs = task_runs(&world);
        assert_eq!(runs, expected_runs, "round {rounds}: task runs");
        let got = outcome(&world);
        no_duplicate_decisions(&got);
        same(
            &got.status,
            &expected.status,
            &format!("round {rounds}: status.json"),
        );
        same(
            &Value::from(got.decisions.clone()),
            &Value::from(expected.decisions.clone()),
            &format!("round {rounds}: decisions.ndjson"),
        );
        assert_eq!(
            got.files.keys().collect::<Vec<_>>(),
            expected.files.keys().collect::<Vec<_>>(),
            "round {rounds}"
        );
        for (path, text) in &expected.files {
            assert_eq!(
                &got.files[path], text,
                "round {rounds}: {path} differs from the unkilled session"
            );
        }
        // The same requests (step, turn) as without kills: a killed call may be asked again,
        // but nothing beyond what the unkilled session asked.
        let asked: BTreeSet<Asked> = proxy.asked().into_iter().collect();
        assert_eq!(asked, expected_asked, "round {rounds}: the requests differ");
    }
    eprintln!(
        "session kill test: {landed} random kills and {ADVANCE_ROUNDS} at the advance ({advance_before} \
         before its write, {advance_after} after) in {rounds} rounds ({in_model_call} during a \
         model call, {in_start} during start; {in_m1} left the session in M1, {in_m2} in M2), {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Rounds with one kill aimed at the milestone advance.
const ADVANCE_ROUNDS: usize = 3;
