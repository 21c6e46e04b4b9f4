//! Claim latency and throughput of the queue with concurrent clients, at several queue depths,
//! on a throwaway PostgreSQL cluster started for the run (fsync on: commits reach the disk).
//!
//! For each depth N: the schema is made afresh, N units are queued, then
//! 1. claims only: the clients claim K units between them (claims/s, latency per claim);
//! 2. a worker's cycle on K more: claim, heartbeat, one fenced write, complete (cycles/s and
//!    latency per operation);
//! 3. `status` once at that depth, and one expiry sweep over K expired leases.
//!
//! Usage: cargo run --release -p baton-queue --example queue_claims -- \
//!            [--clients 16] [--claims 4000] [--sizes 1000,10000,100000] [--set NAME=VALUE]...
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a failed step ends it

use baton_queue::{DbConfig, NewWrite, Queue, UrlSource, init};
use baton_testkit::pg::{PgOptions, PgServer};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
const LEASE: Duration = Duration::from_secs(300);

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_string())
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn summary(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    (percentile(&v, 0.5), percentile(&v, 0.99))
}

#[derive(Default)]
struct Timings {
    claim: Vec<Duration>,
    heartbeat: Vec<Duration>,
    write: Vec<Duration>,
    complete: Vec<Duration>,
}

/// `clients` tasks share `k` units of work; `cycle` adds heartbeat, write and complete.
async fn run(cfg: &DbConfig, clients: usize, k: usize, cycle: bool) -> (Duration, Timings) {
    let next = Arc::new(AtomicUsize::new(0));
    let mut queues = Vec::new();
    for _ in 0..clients {
        queues.push(Queue::open(cfg).await.unwrap());
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (w, mut q) in queues.into_iter().enumerate() {
        let next = next.clone();
        tasks.push(tokio::spawn(async move {
            let owner = format!("bench-{w}");
            let mut t = Timings::default();
            while next.fetch_add(1, Ordering::Relaxed) < k {
                let t0 = Instant::now();
                let Some(mut lease) = q.claim(&owner, "default", LEASE).await.unwrap() else {
                    break;
                };
                t.claim.push(t0.elapsed());
                if cycle {
                    let t0 = Instant::now();
                    q.heartbeat(&mut lease, LEASE).await.unwrap();
                    t.heartbeat.push(t0.elapsed());
                    let t0 = Instant::now();
                    q.write(
                        &lease,
                        &[NewWrite {
                            kind: "conversation".into(),
                            body: json!({"role": "assistant", "content": "a turn of about a hundred bytes, as a conversation line would be"}),
                        }],
                    )
                    .await
                    .unwrap();
                    t.write.push(t0.elapsed());
                    let t0 = Instant::now();
                    q.complete(&lease, &json!({"ok": true})).await.unwrap();
                    t.complete.push(t0.elapsed());
                }
            }
            t
        }));
    }
    let mut all = Timings::default();
    for task in tasks {
        let t = task.await.unwrap();
        all.claim.extend(t.claim);
        all.heartbeat.extend(t.heartbeat);
        all.write.extend(t.write);
        all.complete.extend(t.complete);
    }
    (started.elapsed(), all)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let clients: usize = arg("--clients", "16").parse().unwrap();
    let claims: usize = arg("--claims", "4000").parse().unwrap();
    let sizes: Vec<usize> = arg("--sizes", "1000,10000,100000")
        .split(',')
        .map(|s| s.trim().parse().unwrap())
        .collect();
    // Server settings to try (`--set autovacuum=off`), shown with the figures.
    let args: Vec<String> = std::env::args().collect();
    let settings: Vec<(String, String)> = args
        .windows(2)
        .filter(|w| w[0] == "--set")
        .filter_map(|w| w[1].split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let pg = PgServer::start_with(&PgOptions {
        fsync: true,
        shared_buffers: "128MB".into(),
        max_connections: (clients as u32 + 20).max(60),
        settings: settings.clone(),
        ..PgOptions::default()
    })
    .unwrap_or_else(|e| panic!("no PostgreSQL: {e}"));
    let cfg = DbConfig::from_url(&pg.socket_url("postgres"), UrlSource::Given).unwrap();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "PostgreSQL {} (fsync on, synchronous_commit on, Unix socket{}), {cores} cores shared \
         by server and clients, {clients} clients, lease {} s",
        pg.version(),
        settings
            .iter()
            .map(|(k, v)| format!(", {k}={v}"))
            .collect::<String>(),
        LEASE.as_secs()
    );
    println!();
    println!(
        "| queued | claims | claims/s | claim p50 ms | claim p99 ms | cycles/s | claim p50/p99 \
         | heartbeat p50/p99 | fenced write p50/p99 | complete p50/p99 | status ms | sweep of K ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for n in sizes {
        pg.psql("postgres", "DROP SCHEMA IF EXISTS baton CASCADE")
            .unwrap();
        init(&cfg).await.unwrap();
        pg.psql(
            "postgres",
            &format!(
                "INSERT INTO baton.work_units (kind, queue, payload, project_remote, base_commit) \
                 SELECT 'run', 'default', jsonb_build_object('n', g), \
                 'https://git.example/p.git', '{COMMIT}' FROM generate_series(1, {n}) g"
            ),
        )
        .unwrap();
        pg.psql("postgres", "VACUUM ANALYZE baton.work_units")
            .unwrap();
        let k = claims.min(n / 2);
        let (wall_a, a) = run(&cfg, clients, k, false).await;
        let (wall_b, b) = run(&cfg, clients, k, true).await;
        assert_eq!(a.claim.len(), k, "claims only");
        assert_eq!(b.complete.len(), k, "cycles");
        let q = Queue::open(&cfg).await.unwrap();
        let t0 = Instant::now();
        let s = q.status(50).await.unwrap();
        let status_ms = t0.elapsed().as_secs_f64() * 1000.0;
        assert_eq!(s.counts.leased as usize, k);
        // The K leases of phase 1, expired by hand, then taken back by one sweep.
        pg.psql(
            "postgres",
            "UPDATE baton.work_units SET lease_expires_at = now() - interval '1 s' \
             WHERE state = 'leased'",
        )
        .unwrap();
        let t0 = Instant::now();
        let swept = q.sweep_expired(k as i64).await.unwrap();
        let sweep_ms = t0.elapsed().as_secs_f64() * 1000.0;
        assert_eq!(swept.len(), k);
        let (c50, c99) = summary(a.claim.clone());
        let cb = summary(b.claim);
        let hb = summary(b.heartbeat);
        let wr = summary(b.write);
        let co = summary(b.complete);
        println!(
            "| {n} | {k} | {:.0} | {c50:.2} | {c99:.2} | {:.0} | {:.2} / {:.2} | {:.2} / {:.2} | \
             {:.2} / {:.2} | {:.2} / {:.2} | {status_ms:.1} | {sweep_ms:.1} |",
            k as f64 / wall_a.as_secs_f64(),
            k as f64 / wall_b.as_secs_f64(),
            cb.0,
            cb.1,
            hb.0,
            hb.1,
            wr.0,
            wr.1,
            co.0,
            co.1,
        );
    }
}
