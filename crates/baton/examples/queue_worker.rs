//! What a queued run costs against the same run on the file store: one played multi-turn run
//! (the fleet test's workflow, `tests/fleet_support.rs`: each turn but the last writes a file
//! through the tools) timed
//!
//! - (a) with `baton run` on a clone of the project (the file store), and
//! - (b) submitted with `baton run --queue` and run by one `baton worker --exit-when-idle`
//!   (its home kept between repetitions, as a long-lived worker's mirror cache is) against a
//!   throwaway PostgreSQL cluster with fsync on, the project's remote a bare repository on the
//!   same disk,
//!
//! alternately, `--reps` times. Per turn: the time between the model's answer and the next
//! request (what baton does between two model calls: the tools, the durable flush, and for
//! the worker its checkpoint), from the played model's clock. Per run: the wall time of the
//! process, and its parts before the first request and after the last answer. Also, for
//! comparison, the git commands a checkpoint ran before checkpoints were committed in-process
//! and pushed in the background (`status`, `add -A`, `commit`, `rev-parse`, `push` of one
//! changed file to the bare remote), `--reps` × 4 times. The last line says whether the
//! worker's median turn is within the target (10 ms, issue 37).
//!
//! Usage: queue_worker --baton PATH [--reps 7] [--steps 3] [--delay-ms 0]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a failed step ends it

#[path = "../../../tests/fleet_support.rs"]
mod fleet_support;

use baton_testkit::git::{git, project_with_remote};
use baton_testkit::pg::{PgOptions, PgServer};
use fleet_support::{Player, Turn, write_package};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn arg(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_string())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn baton(bin: &Path, home: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.env("BATON_HOME", home)
        .env("NO_COLOR", "1")
        .env("OPENAI_API_KEY", "sk-bench-0123456789")
        .env_remove("PGPASSWORD")
        .env_remove("PGPASSFILE")
        .env_remove("BATON_MODEL")
        .env_remove("OPENAI_BASE_URL");
    cmd
}

fn check(out: std::process::Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One run's timings from the process and the played model's clock.
struct Timed {
    wall: f64,
    /// From the start of the process to the first request.
    before: f64,
    /// Between each answer and the next request.
    gaps: Vec<f64>,
    /// From the last answer to the end of the process.
    after: f64,
}

fn timed(started: Instant, ended: Instant, turns: &[Turn], needed: usize) -> Timed {
    assert_eq!(turns.len(), needed, "each turn asked once");
    let gaps = turns
        .windows(2)
        .map(|w| ms(w[1].arrived - w[0].answered.unwrap()))
        .collect();
    Timed {
        wall: ms(ended - started),
        before: ms(turns[0].arrived - started),
        gaps,
        after: ms(ended - turns.last().unwrap().answered.unwrap()),
    }
}

/// The git commands of one checkpoint, `n` times, in a worktree of a mirror of `bare` (one
/// file changed each time); milliseconds each.
fn checkpoint_git(tmp: &Path, bare: &Path, n: usize) -> Vec<f64> {
    let mirror = tmp.join("git-mirror");
    git(
        tmp,
        &[
            "clone",
            "--quiet",
            "--mirror",
            bare.to_str().unwrap(),
            mirror.to_str().unwrap(),
        ],
    );
    let tree = tmp.join("git-tree");
    git(
        &mirror,
        &[
            "worktree",
            "add",
            "--quiet",
            "--detach",
            tree.to_str().unwrap(),
            "main",
        ],
    );
    let remote = bare.to_str().unwrap();
    (0..n)
        .map(|i| {
            std::fs::create_dir_all(tree.join("fleet")).unwrap();
            std::fs::write(
                tree.join(format!("fleet/bench-{i}.md")),
                format!("bench {i}\n"),
            )
            .unwrap();
            let t = Instant::now();
            assert!(!git(&tree, &["status", "--porcelain"]).is_empty());
            git(&tree, &["add", "-A"]);
            git(&tree, &["commit", "--quiet", "--no-verify", "-m", "bench"]);
            git(&tree, &["rev-parse", "HEAD"]);
            git(
                &tree,
                &["push", "--quiet", remote, "+HEAD:refs/baton/runs/0/1"],
            );
            ms(t.elapsed())
        })
        .collect()
}

fn main() {
    let bin = PathBuf::from(arg("--baton", "target/release/baton"));
    let reps: usize = arg("--reps", "7").parse().unwrap();
    let steps: usize = arg("--steps", "3").parse().unwrap();
    let delay = Duration::from_millis(arg("--delay-ms", "0").parse().unwrap());
    assert!(bin.is_file(), "no baton binary at {}", bin.display());
    let pg = PgServer::start_with(&PgOptions {
        fsync: true,
        shared_buffers: "128MB".into(),
        ..PgOptions::default()
    })
    .unwrap_or_else(|e| panic!("no PostgreSQL cluster: {e}"));
    let tmp = tempfile::tempdir().unwrap();
    let url = pg.socket_url("postgres");
    let (project, bare) = project_with_remote(tmp.path());
    let pkg = write_package(tmp.path(), steps);
    let player = Player::start(steps, delay);
    let needed = fleet_support::turns(steps).len();
    let (local_home, worker_home, submit_home) = (
        tmp.path().join("local-home"),
        tmp.path().join("worker-home"),
        tmp.path().join("submit-home"),
    );
    check(
        baton(&bin, &submit_home)
            .args(["queue", "init", "--db", &url])
            .output()
            .unwrap(),
        "queue init",
    );
    println!(
        "{} turns a run ({} writing a file), model delay {} ms, PostgreSQL {} (fsync on), \
         {reps} repetitions",
        needed,
        needed - 1,
        delay.as_millis(),
        pg.version()
    );
    let (mut local, mut queued, mut submits) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..reps {
        // (a) On the file store, in a clone of the project.
        let clone = tmp.path().join(format!("local-{rep}"));
        git(
            tmp.path(),
            &[
                "clone",
                "--quiet",
                bare.to_str().unwrap(),
                clone.to_str().unwrap(),
            ],
        );
        let model = format!("bench-local-{rep}");
        let started = Instant::now();
        let out = baton(&bin, &local_home)
            .args(["run", pkg.to_str().unwrap(), "--project"])
            .arg(&clone)
            .args([
                "--model",
                &model,
                "--base-url",
                &player.base_url(),
                "--json",
            ])
            .output()
            .unwrap();
        let ended = Instant::now();
        check(out, "baton run");
        local.push(timed(started, ended, &player.run(&model), needed));

        // (b) Queued, then run by one worker that exits once the queue is empty.
        let model = format!("bench-queued-{rep}");
        let t = Instant::now();
        let out = baton(&bin, &submit_home)
            .args(["run", pkg.to_str().unwrap(), "--project"])
            .arg(&project)
            .args(["--queue", &url, "--model", &model, "--base-url"])
            .arg(player.base_url())
            .output()
            .unwrap();
        submits.push(ms(t.elapsed()));
        check(out, "baton run --queue");
        let started = Instant::now();
        let out = baton(&bin, &worker_home)
            .args(["worker", "--db", &url, "--exit-when-idle"])
            .output()
            .unwrap();
        let ended = Instant::now();
        check(out, "baton worker");
        queued.push(timed(started, ended, &player.run(&model), needed));
        let last = pg
            .psql(
                "postgres",
                "SELECT state FROM baton.work_units ORDER BY id DESC LIMIT 1",
            )
            .unwrap();
        assert_eq!(last.trim(), "done");
    }
    let git_ms = checkpoint_git(tmp.path(), &bare, reps * 4);

    println!(
        "\n{:<5}{:>10}{:>10}{:>13}{:>13}{:>12}{:>12}{:>11}{:>11}",
        "rep",
        "local ms",
        "worker ms",
        "local start",
        "worker start",
        "local turn",
        "worker turn",
        "local end",
        "worker end"
    );
    for (i, (a, b)) in local.iter().zip(&queued).enumerate() {
        println!(
            "{:<5}{:>10.1}{:>10.1}{:>13.1}{:>13.1}{:>12.1}{:>12.1}{:>11.1}{:>11.1}",
            i + 1,
            a.wall,
            b.wall,
            a.before,
            b.before,
            median(a.gaps.clone()),
            median(b.gaps.clone()),
            a.after,
            b.after
        );
    }
    let all = |v: &[Timed], f: &dyn Fn(&Timed) -> Vec<f64>| -> f64 {
        median(v.iter().flat_map(f).collect())
    };
    let (lt, qt) = (
        all(&local, &|t| t.gaps.clone()),
        all(&queued, &|t| t.gaps.clone()),
    );
    let (lw, qw) = (
        all(&local, &|t| vec![t.wall]),
        all(&queued, &|t| vec![t.wall]),
    );
    let (lb, qb) = (
        all(&local, &|t| vec![t.before]),
        all(&queued, &|t| vec![t.before]),
    );
    let (la, qa) = (
        all(&local, &|t| vec![t.after]),
        all(&queued, &|t| vec![t.after]),
    );
    let g = median(git_ms.clone());
    println!("\nmedians (ms)                         local    worker   worker-local  ratio");
    println!(
        "between two model calls (per turn) {lt:>8.1}  {qt:>8.1}  {:>12.1}  {:>5.2}",
        qt - lt,
        qt / lt
    );
    println!(
        "process start to first request     {lb:>8.1}  {qb:>8.1}  {:>12.1}  {:>5.2}",
        qb - lb,
        qb / lb
    );
    println!(
        "last answer to process exit        {la:>8.1}  {qa:>8.1}  {:>12.1}  {:>5.2}",
        qa - la,
        qa / la
    );
    println!(
        "whole run                          {lw:>8.1}  {qw:>8.1}  {:>12.1}  {:>5.2}",
        qw - lw,
        qw / lw
    );
    println!(
        "submission (baton run --queue)     {:>8.1}",
        median(submits)
    );
    println!(
        "the git commands a checkpoint ran before (status, add, commit, rev-parse, push), {} \
         times: median {g:.1}, min {:.1}, max {:.1}",
        git_ms.len(),
        git_ms.iter().copied().fold(f64::INFINITY, f64::min),
        git_ms.iter().copied().fold(0.0, f64::max)
    );
    // A record whose base is not its commit carried the files its push had not landed yet.
    let carried = pg
        .psql(
            "postgres",
            "SELECT count(*) FILTER (WHERE body->'tree'->>'base' <> body->>'commit') || ' of ' \
             || count(*) FROM baton.unit_writes WHERE kind = 'checkpoint'",
        )
        .unwrap();
    println!(
        "checkpoint records written before their commit's push landed (carrying its files): {}",
        carried.trim()
    );
    let turns: Vec<f64> = queued.iter().flat_map(|t| t.gaps.clone()).collect();
    println!(
        "worker turns: {} gaps, median {qt:.1} ms, p90 {:.1} ms; median within {TARGET_MS} ms: {}",
        turns.len(),
        quantile(turns.clone(), 0.9),
        if qt <= TARGET_MS { "yes" } else { "NO" }
    );
}

/// The worker's per-turn target (issue 37), in milliseconds.
const TARGET_MS: f64 = 10.0;

fn quantile(mut v: Vec<f64>, q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}
