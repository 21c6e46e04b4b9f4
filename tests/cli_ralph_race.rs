//! Concurrency and crash safety of `baton ralph`, across real processes.
//!
//! - Races: 2 and 8 workers drive one session with `next`/`complete` at once, while a reader
//!   parses status.json continuously. Per trial: every step claimed exactly once (no double
//!   claim), every `complete` of a held claim succeeds and is in the final file (no lost
//!   completion), no crash (only the documented exit codes), the file valid JSON at every read
//!   and `revision` equal to the number of writes.
//! - Kills: SIGKILL at random moments of mutating verbs; status.json always parses, validates
//!   and holds either the old or the new revision.
//!
//! - Leases (maestro v0.5.50's `--execution-owner`/`--lease-id`/`--owner-epoch`): workers
//!   with their own lease race for a session nobody leases: exactly one holds it and claims
//!   every step, the others are refused; a newer epoch of the same owner fences the older one
//!   out; concurrent completes of one claim write once (an identical repeat is an idempotent
//!   success, a different one is refused).
//!
//! `BATON_RALPH_TRIALS` (default 50 per worker count, so 100 trials) and `BATON_RALPH_KILLS`
//! (default 120) scale the runs; docs/RELIABILITY.md records a 1,000-trial run.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::ralph_support;

use ralph_support::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::process::{Child, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A session of `steps` execution steps (the sample `maestro-plan` command).
fn race_session(fx: &Fx, id: &str, steps: usize) {
    let path = fx.command_path("maestro-plan");
    let steps = (0..steps)
        .map(|i| exec(i, "maestro-plan", &i.to_string(), "pending", &path))
        .collect();
    fx.put(id, &session(id, steps));
}

#[derive(Default)]
struct Tally {
    claims: Vec<(usize, u64)>,
    completions: Vec<(usize, u64)>,
    busy: u64,
    conflicts: u64,
}

/// One worker: claim, complete, until nothing is left.
fn worker(fx: &Fx, id: &str, me: usize, tally: &Mutex<Tally>) {
    let owner = format!("worker-{me}");
    loop {
        let out = fx.ralph(&["next", "--session", id, "--owner", &owner, "--json"]);
        match out.code {
            0 => {
                let index = out.json()["index"].as_u64().unwrap();
                tally.lock().unwrap().claims.push((me, index));
                let done = fx.ralph(&[
                    "complete",
                    &index.to_string(),
                    "--status",
                    "DONE",
                    "--owner",
                    &owner,
                    "--session",
                    id,
                    "--evidence",
                    &owner,
                ]);
                assert_eq!(
                    done.code, 0,
                    "the holder's complete failed: {}",
                    done.stderr
                );
                tally.lock().unwrap().completions.push((me, index));
            }
            2 => return,
            3 => {
                tally.lock().unwrap().busy += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            4 => tally.lock().unwrap().conflicts += 1,
            other => panic!("worker {me}: exit {other}\n{}\n{}", out.stdout, out.stderr),
        }
    }
}

fn race(workers: usize, trials: usize) {
    const STEPS: usize = 3;
    let fx = Fx::new();
    let start = Instant::now();
    let mut busy = 0;
    let mut reads = 0;
    for trial in 0..trials {
        let id = format!("ralph-20260524-{:06}", trial);
        race_session(&fx, &id, STEPS);
        let tally = Mutex::new(Tally::default());
        let stop = AtomicBool::new(false);
        let parsed = AtomicU64::new(0);
        let status = fx.dir(&id).join("status.json");
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let bytes = std::fs::read(&status).unwrap();
                    let v: Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                        panic!("torn read ({e}): {}", String::from_utf8_lossy(&bytes))
                    });
                    assert!(v["steps"].is_array());
                    parsed.fetch_add(1, Ordering::Relaxed);
                }
            });
            let handles: Vec<_> = (0..workers)
                .map(|me| {
                    let (fx, id, tally) = (&fx, &id, &tally);
                    s.spawn(move || worker(fx, id, me, tally))
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
            stop.store(true, Ordering::Relaxed);
            reader.join().unwrap();
        });
        let t = tally.into_inner().unwrap();
        let mut claimed: BTreeMap<u64, usize> = BTreeMap::new();
        for (_, i) in &t.claims {
            *claimed.entry(*i).or_default() += 1;
        }
        assert_eq!(claimed.len(), STEPS, "trial {trial}: claims {:?}", t.claims);
        assert!(
            claimed.values().all(|n| *n == 1),
            "trial {trial}: double claim {:?}",
            t.claims
        );
        assert_eq!(t.completions.len(), STEPS, "trial {trial}");
        let doc = fx.get(&id);
        for (who, i) in &t.completions {
            let step = &doc["steps"][*i as usize];
            assert_eq!(
                step["status"], "completed",
                "trial {trial}: lost completion of {i}"
            );
            assert_eq!(
                step["completion_evidence"],
                format!("worker-{who}"),
                "trial {trial}"
            );
        }
        assert_eq!(
            doc["revision"],
            json!(2 * STEPS),
            "trial {trial}: one write per verb"
        );
        assert_eq!(doc["active_step_index"], Value::Null);
        assert_eq!(t.conflicts, 0);
        busy += t.busy;
        reads += parsed.load(Ordering::Relaxed);
    }
    eprintln!(
        "{workers} workers: {trials} trials of {STEPS} steps in {:.1?}; {busy} exit-3 answers, {reads} concurrent reads, 0 double claims, 0 lost completions",
        start.elapsed()
    );
}

#[test]
fn two_processes_race_next_and_complete() {
    race(2, env_count("BATON_RALPH_TRIALS", 50));
}

#[test]
fn eight_processes_race_next_and_complete() {
    race(8, env_count("BATON_RALPH_TRIALS", 50));
}

/// Four completes of one claim at once, two DONE and two BLOCKED: one is written; the other
/// of the same outcome is an idempotent success (maestro v0.5.50), the two others are refused
/// as conflicting.
#[test]
fn concurrent_completes_of_one_claim_write_once() {
    let fx = Fx::new();
    for trial in 0..20 {
        let id = format!("ralph-20260524-{:06}", trial);
        race_session(&fx, &id, 2);
        fx.ralph(&["next", "--session", &id]).code(0);
        let outs: Vec<(&str, i32, String)> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|k| {
                    let (fx, id) = (&fx, &id);
                    s.spawn(move || {
                        let status = if k % 2 == 0 { "DONE" } else { "BLOCKED" };
                        let out = fx.ralph(&["complete", "0", "--status", status, "--session", id]);
                        (status, out.code, out.stderr)
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let doc = fx.get(&id);
        assert_eq!(doc["revision"], 2, "trial {trial}: one write");
        let written = doc["steps"][0]["completion_status"].as_str().unwrap();
        for (status, code, stderr) in &outs {
            if *status == written {
                assert_eq!(*code, 0, "trial {trial}: {outs:?}");
            } else {
                assert_eq!(*code, 1, "trial {trial}: {outs:?}");
                assert!(
                    stderr.starts_with("[ralph complete] BLOCK: conflicting completion result"),
                    "trial {trial}: {stderr}"
                );
            }
        }
        assert_eq!(
            outs.iter()
                .filter(|(_, _, e)| e.contains("idempotent success"))
                .count(),
            1,
            "trial {trial}: {outs:?}"
        );
    }
}

/// One lease worker: `next`/`complete` with its own `--execution-owner`, `--lease-id` and
/// `--owner-epoch`, until nothing is left or the lease is someone else's.
fn lease_worker(fx: &Fx, id: &str, me: usize, epoch: u64, owner: &str, tally: &Mutex<LeaseTally>) {
    let (lease, epoch) = (format!("L-{owner}"), epoch.to_string());
    let flags = [
        "--execution-owner",
        owner,
        "--lease-id",
        &lease,
        "--owner-epoch",
        &epoch,
        "--session",
        id,
    ];
    loop {
        let out = fx.ralph(&[&["next", "--json"][..], &flags[..]].concat());
        match out.code {
            0 => {
                let index = out.json()["index"].as_u64().unwrap();
                tally.lock().unwrap().claims.push((me, index));
                let done = fx.ralph(
                    &[
                        &["complete", &index.to_string(), "--status", "DONE"][..],
                        &["--evidence", owner],
                        &flags[..],
                    ]
                    .concat(),
                );
                assert_eq!(done.code, 0, "the lease holder's complete: {}", done.stderr);
                tally.lock().unwrap().completions.push((me, index));
            }
            1 => {
                let error = &out.json()["error"];
                assert_eq!(error["code"], "LEASE_CONFLICT", "worker {me}: {error}");
                assert!(
                    error["message"]
                        .as_str()
                        .unwrap()
                        .starts_with("lease conflict: session "),
                    "worker {me}: {error}"
                );
                tally.lock().unwrap().refused.push(me);
                return;
            }
            2 => return,
            3 => std::thread::sleep(Duration::from_millis(1)),
            other => panic!("worker {me}: exit {other}\n{}\n{}", out.stdout, out.stderr),
        }
    }
}

#[derive(Default)]
struct LeaseTally {
    claims: Vec<(usize, u64)>,
    completions: Vec<(usize, u64)>,
    refused: Vec<usize>,
}

/// maestro v0.5.50's lease race: `workers` agents, each its own execution owner and lease,
/// call `next` at once on a session nobody leases yet. maestro reads "no owner" in each and
/// lets several claim (14 double claims in 50 trials of two workers); under the session lock
/// exactly one takes the lease, every step is claimed once by it, the others are refused
/// (LEASE_CONFLICT, exit 1) and never claim.
fn lease_race(workers: usize, trials: usize) {
    const STEPS: usize = 3;
    let fx = Fx::new();
    let start = Instant::now();
    let mut refused = 0;
    for trial in 0..trials {
        let id = format!("ralph-20260525-{:06}", trial);
        race_session(&fx, &id, STEPS);
        let tally = Mutex::new(LeaseTally::default());
        std::thread::scope(|s| {
            for me in 0..workers {
                let (fx, id, tally) = (&fx, &id, &tally);
                s.spawn(move || lease_worker(fx, id, me, 1, &format!("worker-{me}"), tally));
            }
        });
        let t = tally.into_inner().unwrap();
        let holders: BTreeMap<usize, usize> =
            t.claims.iter().fold(BTreeMap::new(), |mut m, (who, _)| {
                *m.entry(*who).or_default() += 1;
                m
            });
        assert_eq!(holders.len(), 1, "trial {trial}: claims by {holders:?}");
        let holder = *holders.keys().next().unwrap();
        let mut claimed: Vec<u64> = t.claims.iter().map(|(_, i)| *i).collect();
        claimed.sort_unstable();
        assert_eq!(claimed, [0, 1, 2], "trial {trial}: double or lost claims");
        assert_eq!(t.completions.len(), STEPS);
        assert_eq!(t.refused.len(), workers - 1, "trial {trial}");
        assert!(!t.refused.contains(&holder));
        let doc = fx.get(&id);
        assert_eq!(doc["execution_owner"], format!("worker-{holder}"));
        assert_eq!(doc["lease_id"], format!("L-worker-{holder}"));
        for i in 0..STEPS {
            assert_eq!(doc["steps"][i]["status"], "completed", "trial {trial}");
            assert_eq!(
                doc["steps"][i]["completion_evidence"],
                format!("worker-{holder}")
            );
        }
        assert_eq!(doc["revision"], json!(2 * STEPS), "trial {trial}");
        refused += t.refused.len();
    }
    eprintln!(
        "{workers} lease workers: {trials} trials in {:.1?}; one holder each, {refused} refusals, 0 double claims",
        start.elapsed()
    );
}

#[test]
fn two_processes_race_for_the_lease() {
    lease_race(2, env_count("BATON_RALPH_TRIALS", 50));
}

#[test]
fn eight_processes_race_for_the_lease() {
    lease_race(8, env_count("BATON_RALPH_TRIALS", 50) / 2);
}

/// The same owner at two epochs (a restarted agent and its stale twin) drive one session at
/// once: the older one claims only until the newer one's first claim records its epoch, and
/// is fenced out from then on; no step is claimed twice, none is lost.
#[test]
fn a_newer_epoch_fences_out_the_older_one() {
    const STEPS: usize = 4;
    let fx = Fx::new();
    let trials = env_count("BATON_RALPH_TRIALS", 50) / 2;
    let mut fenced = 0;
    for trial in 0..trials {
        let id = format!("ralph-20260526-{:06}", trial);
        race_session(&fx, &id, STEPS);
        let tally = Mutex::new(LeaseTally::default());
        std::thread::scope(|s| {
            for (me, epoch) in [(0, 1), (1, 2)] {
                let (fx, id, tally) = (&fx, &id, &tally);
                s.spawn(move || lease_worker(fx, id, me, epoch, "agent", tally));
            }
        });
        let t = tally.into_inner().unwrap();
        let mut claimed: Vec<u64> = t.claims.iter().map(|(_, i)| *i).collect();
        claimed.sort_unstable();
        assert_eq!(
            claimed,
            (0..STEPS as u64).collect::<Vec<_>>(),
            "trial {trial}"
        );
        assert_eq!(t.completions.len(), STEPS);
        // The stale epoch's steps all come before the newer one's first.
        let old: Vec<u64> = t.claims.iter().filter(|c| c.0 == 0).map(|c| c.1).collect();
        let new: Vec<u64> = t.claims.iter().filter(|c| c.0 == 1).map(|c| c.1).collect();
        if let (Some(o), Some(n)) = (old.iter().max(), new.iter().min()) {
            assert!(
                o < n,
                "trial {trial}: epoch 1 claimed {old:?} after epoch 2 {new:?}"
            );
        }
        assert!(!t.refused.contains(&1), "the newer epoch is never refused");
        if !new.is_empty() {
            assert_eq!(fx.get(&id)["owner_epoch"], 2);
        }
        fenced += t.refused.len();
    }
    eprintln!("two epochs: {trials} trials; the older one fenced out in {fenced}");
}

/// A small deterministic generator (no dependency for a few random delays).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n.max(1)
    }
}

fn spawn(fx: &Fx, id: &str, args: &[&str]) -> Child {
    let mut all = args.to_vec();
    all.extend(["--session", id]);
    fx.cmd(&all)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn sigkill_during_writes_leaves_the_old_or_the_new_revision() {
    let kills = env_count("BATON_RALPH_KILLS", 120);
    let fx = Fx::new();
    let id = "ralph-20260524-101500";
    race_session(&fx, id, 30);
    // How long a mutating verb lives, to aim the kills inside it.
    let t0 = Instant::now();
    for _ in 0..5 {
        fx.ralph(&["pause", "--session", id]).code(0);
        fx.ralph(&["resume", "--session", id]).code(0);
    }
    let life_us = (t0.elapsed().as_micros() / 10) as u64;
    let mut rng = Lcg(0x5eed);
    let mut aim_us = life_us * 12 / 10;
    let mut revision = fx.get(id)["revision"].as_u64().unwrap();
    let (mut mid_flight, mut advanced) = (0, 0);
    let (mut claimed, mut cycles) = (None::<u64>, 0);
    for k in 0..kills {
        let args: Vec<String> = match claimed {
            None => vec!["next".into()],
            Some(i) => match k % 3 {
                0 => vec!["retry".into(), i.to_string()],
                _ => vec![
                    "complete".into(),
                    i.to_string(),
                    "--status".into(),
                    "DONE".into(),
                ],
            },
        };
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut child = spawn(&fx, id, &refs);
        std::thread::sleep(Duration::from_micros(rng.below(aim_us)));
        // The verbs killed here live shorter or longer than pause/resume, and a loaded
        // machine stretches them: steer the aim so about half the kills land mid-verb.
        if child.try_wait().unwrap().is_none() {
            mid_flight += 1;
            aim_us = (aim_us * 21 / 20).min(life_us * 4);
        } else {
            aim_us = (aim_us * 9 / 10).max(life_us / 20 + 1);
        }
        let _ = child.kill();
        let _ = child.wait();

        let bytes = fx.raw(id);
        let doc: Value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("kill {k}: status.json does not parse ({e})"));
        let check = fx.ralph(&["check", "--session", id, "--json"]);
        let findings = check.json()["findings"].clone();
        assert!(
            findings
                .as_array()
                .unwrap()
                .iter()
                .all(|f| f["code"] != "E010" && f["code"] != "E008"),
            "kill {k}: {findings}"
        );
        let now = doc["revision"].as_u64().unwrap();
        assert!(
            now == revision || now == revision + 1,
            "kill {k}: revision {revision} → {now}"
        );
        if now == revision + 1 {
            advanced += 1;
        }
        revision = now;
        claimed = doc["active_step_index"].as_u64();
        if doc["steps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["status"] == "completed")
        {
            // Start the chain again so every kill hits a real write.
            cycles += 1;
            race_session(&fx, id, 30);
            let mut d = fx.get(id);
            set(&mut d, "revision", json!(revision));
            fx.put(id, &d);
            claimed = None;
        }
    }
    // The survivors leave no damage a later writer trips on: a full walk still works.
    fx.ralph(&["resume", "--session", id]).code(0);
    eprintln!(
        "{kills} SIGKILLs ({mid_flight} while the verb ran, {advanced} after its write), {cycles} chain restarts; status.json parsed and validated after every kill; average verb life {life_us} µs"
    );
    assert!(
        mid_flight * 3 >= kills,
        "too few kills landed while the verb ran: {mid_flight}/{kills}"
    );
}
