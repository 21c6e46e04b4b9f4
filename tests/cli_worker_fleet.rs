//! The work queue under fire: N runs queued with a played model (a fixed delay per answer, a
//! few turns per run, each but the last writing a file through the tools) on four `baton
//! worker` processes with a short lease, while the test SIGKILLs a random worker at random
//! moments — mid-run, once the unit it holds has checkpointed — and starts a replacement
//! (half of them on the dead worker's home, as a restarted service would, half on a fresh
//! one). Each killed worker's lease expires by the database's clock and its units are claimed
//! again and resumed from their checkpoints.
//!
//! Checked: every run completed exactly once (`baton queue status --json`, each unit done with
//! its result on the branch of its last epoch), the files each run wrote are in its result,
//! and no turn was done twice beyond the one in flight at each takeover (the played model
//! counts each run's requests; a repeated turn is the resumed request of the next worker).
//!
//! Small by default (24 runs, 6 kills); the acceptance figure is
//! `BATON_FLEET_RUNS=200 BATON_FLEET_KILLS=20`. Also BATON_FLEET_DELAY_MS (the model's delay,
//! default 150), BATON_FLEET_STEPS (default 3), BATON_FLEET_SEED. Against a real throwaway
//! PostgreSQL; skips without one unless BATON_REQUIRE_POSTGRES is set (CI sets it).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::fleet_support;
use crate::worker_support;

use baton_testkit::git::{git, project_with_remote};
use baton_testkit::pg::{PgServer, postgres_or_skip};
use baton_testkit::rng::{self, Rng};
use fleet_support::{Player, turns, write_package, written};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use worker_support::{baton_at, psql, queue_with};

const KEY: &str = "sk-fleet-test-0123456789";
const LEASE_S: &str = "3";
/// Units each of the four worker processes runs at once.
const CONCURRENCY: [u32; 4] = [2, 2, 1, 1];

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The `baton` binary this test runs: a hard link (else a copy) of the one cargo built, taken
/// when the test starts, so that a rebuild of the workspace during the minutes the test runs
/// cannot hand its later workers another baton.
static BATON: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

fn pin_baton(dir: &Path) {
    let pinned = dir.join("baton");
    let built = Path::new(env!("CARGO_BIN_EXE_baton"));
    if std::fs::hard_link(built, &pinned).is_err() {
        std::fs::copy(built, &pinned).unwrap();
    }
    BATON.set(pinned).unwrap();
}

fn baton(home: &Path) -> Command {
    baton_at(BATON.get().expect("pin_baton first"), home, KEY)
}

/// Polls `ready` (a question to the database or the processes, never a fixed wait) until it
/// is true; false when `within` passed first.
fn wait_until(within: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if ready() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One of the four worker places: the process in it now and the homes it has had.
struct Slot {
    home: PathBuf,
    child: Child,
    log: PathBuf,
    started: usize,
}

struct Fleet<'a> {
    tmp: &'a Path,
    url: String,
    slots: Vec<Slot>,
    /// Every worker log, for the resumes they report.
    logs: Vec<PathBuf>,
    /// Workers that exited on their own with LEASE_LOST (a heartbeat too late on a loaded
    /// machine): each is a takeover the test did not cause.
    lease_losses: Vec<String>,
}

impl Fleet<'_> {
    fn spawn(&mut self, index: usize, home: PathBuf) -> Slot {
        let started = self.slots.get(index).map_or(0, |s| s.started + 1);
        let log = self.tmp.join(format!("worker-{index}-{started}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let child = baton(&home)
            .args([
                "worker",
                "--db",
                &self.url,
                "--lease-s",
                LEASE_S,
                "--concurrency",
                &CONCURRENCY[index].to_string(),
            ])
            .stdout(Stdio::from(file.try_clone().unwrap()))
            .stderr(Stdio::from(file))
            .spawn()
            .unwrap();
        self.logs.push(log.clone());
        Slot {
            home,
            child,
            log,
            started,
        }
    }

    /// Replaces the worker of slot `index` (already dead): on the same home or a fresh one.
    fn replace(&mut self, index: usize, same_home: bool) {
        let home = if same_home {
            self.slots[index].home.clone()
        } else {
            self.tmp
                .join(format!("home-{index}-{}", self.slots[index].started + 1))
        };
        let slot = self.spawn(index, home);
        self.slots[index] = slot;
    }

    /// Workers that exited on their own: with LEASE_LOST they are counted and replaced (on the
    /// same home); any other exit fails the test with the worker's log.
    fn reap(&mut self) {
        for i in 0..self.slots.len() {
            let Some(status) = self.slots[i].child.try_wait().unwrap() else {
                continue;
            };
            let log = std::fs::read_to_string(&self.slots[i].log).unwrap_or_default();
            assert!(
                status.code() == Some(1) && log.contains("LEASE_LOST"),
                "worker {} exited on its own ({status}):\n{log}",
                self.slots[i].child.id()
            );
            self.lease_losses.push(
                log.lines()
                    .find(|l| l.contains("LEASE_LOST"))
                    .unwrap_or("")
                    .to_string(),
            );
            self.replace(i, true);
        }
    }
}

/// `owner LIKE` pattern of the worker with process id `pid` (ids are `host:pid:nonce`).
fn owner_of(pid: u32) -> String {
    format!("%:{pid}:%")
}

/// Checkpoints written under the current epoch of each unit `pid` holds a lease on:
/// `(unit, epoch, checkpoints)`.
fn held(pg: &PgServer, pid: u32) -> Vec<(i64, i64, i64)> {
    let text = psql(
        pg,
        &format!(
            "SELECT coalesce(string_agg(w.id || ':' || w.epoch || ':' || (SELECT count(*) FROM \
             baton.unit_writes x WHERE x.unit_id = w.id AND x.epoch = w.epoch AND x.kind = \
             'checkpoint'), ',' ORDER BY w.id), '') FROM baton.work_units w WHERE w.state = \
             'leased' AND w.owner LIKE '{}'",
            owner_of(pid)
        ),
    );
    text.split(',')
        .filter(|t| !t.is_empty())
        .map(|t| {
            let f: Vec<i64> = t.split(':').map(|n| n.parse().unwrap()).collect();
            (f[0], f[1], f[2])
        })
        .collect()
}

fn count(pg: &PgServer, condition: &str) -> usize {
    psql(
        pg,
        &format!("SELECT count(*) FROM baton.work_units WHERE {condition}"),
    )
    .parse()
    .unwrap()
}

/// The process ids of the workers holding a unit with at least `checkpoints` checkpoints
/// under its current epoch.
fn holders(pg: &PgServer, checkpoints: i64) -> BTreeSet<u32> {
    psql(
        pg,
        &format!(
            "SELECT coalesce(string_agg(DISTINCT split_part(w.owner, ':', 2), ','), '') FROM \
             baton.work_units w WHERE w.state = 'leased' AND (SELECT count(*) FROM \
             baton.unit_writes x WHERE x.unit_id = w.id AND x.epoch = w.epoch AND x.kind = \
             'checkpoint') >= {checkpoints}"
        ),
    )
    .split(',')
    .filter_map(|p| p.parse().ok())
    .collect()
}

/// A kill and what it hit.
struct Kill {
    pid: u32,
    /// `(unit, epoch, checkpoints under that epoch)` of the units it held.
    hit: Vec<(i64, i64, i64)>,
}

#[test]
fn four_workers_complete_every_run_exactly_once_through_random_kills() {
    let Some(pg) = postgres_or_skip("four_workers_complete_every_run_exactly_once") else {
        return;
    };
    let runs = env_usize("BATON_FLEET_RUNS", 24);
    let kills_wanted = env_usize("BATON_FLEET_KILLS", 6);
    let delay = Duration::from_millis(env_usize("BATON_FLEET_DELAY_MS", 150) as u64);
    let steps = env_usize("BATON_FLEET_STEPS", 3).max(1);
    let seed = rng::seed("BATON_FLEET_SEED");
    eprintln!("fleet: {runs} runs, {kills_wanted} kills, seed {seed}");
    let mut rng = Rng(seed);
    let tmp = tempfile::tempdir().unwrap();
    pin_baton(tmp.path());
    let submitter = tmp.path().join("submitter-home");
    let url = queue_with(baton(&submitter), &pg);
    let (project, bare) = project_with_remote(tmp.path());
    let base = git(&project, &["rev-parse", "HEAD"]);
    let pkg = write_package(tmp.path(), steps);
    let player = Player::start(steps, delay);
    let needed = turns(steps);

    // Every run queued first, four submissions at a time; each run is told apart by the model
    // name it was submitted with.
    let started = Instant::now();
    let mut models: BTreeMap<i64, String> = BTreeMap::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let (pkg, project, url, base_url, submitter) =
                    (&pkg, &project, &url, player.base_url(), &submitter);
                s.spawn(move || {
                    let mut mine = Vec::new();
                    for i in (t..runs).step_by(4) {
                        let model = format!("fleet-{i:03}");
                        let out = baton(submitter)
                            .args(["run", pkg.to_str().unwrap(), "--project"])
                            .arg(project)
                            .args(["--queue", url, "--model", &model, "--base-url", &base_url])
                            .arg("--json")
                            .output()
                            .unwrap();
                        assert!(out.status.success(), "{out:?}");
                        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
                        mine.push((doc["unit"].as_i64().unwrap(), model));
                    }
                    mine
                })
            })
            .collect();
        for h in handles {
            models.extend(h.join().unwrap());
        }
    });
    assert_eq!(models.len(), runs);
    assert_eq!(count(&pg, "state = 'queued'"), runs);
    let submitted = started.elapsed();

    let started = Instant::now();
    let mut fleet = Fleet {
        tmp: tmp.path(),
        url: url.clone(),
        slots: Vec::new(),
        logs: Vec::new(),
        lease_losses: Vec::new(),
    };
    for i in 0..CONCURRENCY.len() {
        let slot = fleet.spawn(i, tmp.path().join(format!("home-{i}-0")));
        fleet.slots.push(slot);
    }

    // The kills, spread over the whole batch: the k-th waits until k/(K+1) of the runs were
    // claimed (so some are always left to run), then for a worker to hold a unit with 1 or 2
    // checkpoints under its epoch (one of them picked at random when several do), then a
    // random part of a model turn.
    let mut kills: Vec<Kill> = Vec::new();
    let mut misses = 0;
    while kills.len() < kills_wanted {
        let due = runs * (kills.len() + 1) / (kills_wanted + 1);
        assert!(
            wait_until(Duration::from_secs(300), || {
                fleet.reap();
                count(&pg, "epoch > 0") >= due
            }),
            "{due} runs never claimed"
        );
        let checkpoints = 1 + rng.below(2) as i64;
        let mut ready: Vec<usize> = Vec::new();
        let mid_run = wait_until(Duration::from_secs(60), || {
            fleet.reap();
            let holders = holders(&pg, checkpoints);
            ready = (0..fleet.slots.len())
                .filter(|&i| holders.contains(&fleet.slots[i].child.id()))
                .collect();
            !ready.is_empty()
        });
        if !mid_run {
            // No unit checkpointed that far in a minute: only if the queue ran dry.
            panic!(
                "no worker held a unit with {checkpoints} checkpoints after {} of \
                 {kills_wanted} kills (seed {seed}); queued or leased: {}",
                kills.len(),
                count(&pg, "state IN ('queued', 'leased')")
            );
        }
        let index = ready[rng.below(ready.len() as u64) as usize];
        let pid = fleet.slots[index].child.id();
        std::thread::sleep(Duration::from_millis(
            rng.below(delay.as_millis() as u64 + 100),
        ));
        let slot = &mut fleet.slots[index];
        if slot.child.try_wait().unwrap().is_some() {
            fleet.reap();
            continue;
        }
        slot.child.kill().unwrap();
        slot.child.wait().unwrap();
        // The dead worker's leases stand until they expire: what it held when it died.
        let hit = held(&pg, pid);
        eprintln!(
            "kill {} at {:.1} s: worker {pid} held (unit, epoch, checkpoints) {hit:?}",
            kills.len() + 1,
            started.elapsed().as_secs_f64()
        );
        if hit.is_empty() {
            misses += 1;
        } else {
            kills.push(Kill { pid, hit });
        }
        let same_home = rng.below(2) == 0;
        fleet.replace(index, same_home);
    }

    // Every run finished; the workers idle.
    let within = Duration::from_secs(120 + 3 * runs as u64);
    assert!(
        wait_until(within, || {
            fleet.reap();
            count(&pg, "state IN ('done', 'failed', 'cancelled')") == runs
        }),
        "not every run finished within {within:?} (seed {seed}): {}",
        psql(
            &pg,
            "SELECT string_agg(id || ':' || state || ':' || epoch, ',' ORDER BY id) FROM \
             baton.work_units WHERE state NOT IN ('done')"
        )
    );
    let wall = started.elapsed();
    // The workers, idle, stop on SIGTERM with exit 0.
    for slot in &mut fleet.slots {
        let pid = slot.child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
    }
    for slot in &mut fleet.slots {
        let status = slot.child.wait().unwrap();
        assert!(
            status.success(),
            "{status}: {}",
            std::fs::read_to_string(&slot.log).unwrap_or_default()
        );
    }
    // What killed workers left on their hosts: their units' folders (worktree, scratch store).
    let left_behind: usize = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("home-"))
        .map(|e| std::fs::read_dir(e.path().join("worker/units")).map_or(0, |d| d.count()))
        .sum();

    // The queue says every run is done, none failed, none still leased.
    let status = baton(&submitter)
        .args(["queue", "status", "--db", &url, "--json"])
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    let counts = &status["counts"];
    assert_eq!(
        counts,
        &serde_json::json!({"queued": 0, "leased": 0, "waiting": 0, "done": runs,
                            "failed": 0, "cancelled": 0}),
        "seed {seed}: {}",
        psql(
            &pg,
            "SELECT string_agg(id || ':' || state || ':' || coalesce(outcome::text, ''), E'\\n') \
             FROM baton.work_units WHERE state <> 'done'"
        )
    );

    // Each unit: done once, at its last epoch, its result on the branch that carries that
    // epoch; an older branch of it can only be a dead worker's push before it completed.
    let rows = psql(
        &pg,
        "SELECT string_agg(id || ' ' || epoch || ' ' || (outcome->>'branch') || ' ' || \
         (outcome->>'commit'), E'\\n' ORDER BY id) FROM baton.work_units",
    );
    let mut epochs: BTreeMap<i64, i64> = BTreeMap::new();
    let refs = git(
        &bare,
        &["for-each-ref", "--format=%(refname)", "refs/heads/baton/"],
    );
    let mut stale_branches = 0;
    for row in rows.lines() {
        let f: Vec<&str> = row.split(' ').collect();
        let (id, epoch): (i64, i64) = (f[0].parse().unwrap(), f[1].parse().unwrap());
        epochs.insert(id, epoch);
        let branch = format!("baton/unit-{id}/epoch-{epoch}");
        assert_eq!(f[2], branch, "unit {id}");
        let commit = git(&bare, &["rev-parse", &format!("refs/heads/{branch}")]);
        assert_eq!(f[3], commit, "unit {id}");
        git(&bare, &["merge-base", "--is-ancestor", &base, &commit]);
        for other in refs
            .lines()
            .filter(|r| r.starts_with(&format!("refs/heads/baton/unit-{id}/")))
        {
            let e: i64 = other.rsplit("epoch-").next().unwrap().parse().unwrap();
            assert!(
                e <= epoch,
                "unit {id}: {other} after its last epoch {epoch}"
            );
            if e < epoch {
                stale_branches += 1;
            }
        }
        // The files its run wrote, as it wrote them.
        let model = &models[&id];
        let files = git(&bare, &["ls-tree", "-r", "--name-only", &commit, "fleet/"]);
        let mut want: Vec<String> = needed[..needed.len() - 1]
            .iter()
            .map(|n| written(model, n).0)
            .collect();
        want.sort();
        assert_eq!(files.lines().collect::<Vec<_>>(), want, "unit {id}");
        for node in &needed[..needed.len() - 1] {
            let (path, text) = written(model, node);
            assert_eq!(
                git(&bare, &["show", &format!("{commit}:{path}")]),
                text.trim_end(),
                "unit {id}"
            );
        }
    }
    assert_eq!(epochs.len(), runs);

    // The model's side: every turn asked; a turn asked again only by the worker that took the
    // unit over (its first request, resuming, or starting again when nothing was
    // checkpointed), at most once per takeover.
    let violations = player.violations();
    assert!(violations.is_empty(), "seed {seed}: {violations:#?}");
    let asked = player.runs();
    let mut extra_total = 0;
    let mut per_run: BTreeMap<usize, usize> = BTreeMap::new();
    for (id, model) in &models {
        let turns_asked = asked.get(model).cloned().unwrap_or_default();
        let labels: Vec<&str> = turns_asked.iter().map(|t| t.label.as_str()).collect();
        let takeovers = (epochs[id] - 1) as usize;
        *per_run.entry(labels.len()).or_default() += 1;
        let distinct: BTreeSet<&str> = labels.iter().copied().collect();
        let want: BTreeSet<&str> = needed.iter().map(String::as_str).collect();
        assert_eq!(distinct, want, "unit {id} ({model}): {labels:?}");
        let extra = labels.len() - needed.len();
        assert!(
            extra <= takeovers,
            "unit {id} ({model}), {takeovers} takeovers: a turn done twice: {labels:?}"
        );
        if takeovers == 0 {
            assert_eq!(labels, needed, "unit {id} ({model})");
        }
        let mut seen = BTreeSet::new();
        for t in &turns_asked {
            if !seen.insert(t.label.as_str()) {
                assert!(
                    t.intent == "resume" || (t.intent == "start" && t.label == needed[0]),
                    "unit {id} ({model}): {} asked again as {}: {labels:?}",
                    t.label,
                    t.intent
                );
            }
        }
        extra_total += extra;
    }

    // The kills: each hit a unit and its lease expired; every unit hit mid-run was resumed
    // from its checkpoint by another worker.
    assert_eq!(kills.len(), kills_wanted);
    let hits: usize = kills.iter().map(|k| k.hit.len()).sum();
    let mid_run: BTreeSet<i64> = kills
        .iter()
        .flat_map(|k| k.hit.iter().filter(|(_, _, n)| *n > 0).map(|(u, _, _)| *u))
        .collect();
    assert!(!mid_run.is_empty(), "no kill landed mid-run (seed {seed})");
    for k in &kills {
        for (unit, epoch, _) in &k.hit {
            assert!(
                epochs[unit] > *epoch,
                "unit {unit} held by killed worker {} at epoch {epoch} was not claimed again",
                k.pid
            );
        }
    }
    let resumed: BTreeSet<i64> = psql(
        &pg,
        "SELECT coalesce(string_agg(DISTINCT x.unit_id::text, ','), '') FROM baton.unit_writes x \
         JOIN baton.work_units w ON w.id = x.unit_id WHERE x.kind = 'checkpoint' AND x.epoch < \
         w.epoch",
    )
    .split(',')
    .filter(|t| !t.is_empty())
    .map(|t| t.parse().unwrap())
    .collect();
    assert!(
        mid_run.is_subset(&resumed),
        "units hit mid-run {mid_run:?}, resumed from a checkpoint {resumed:?}"
    );
    // Each says so: resumed by a worker ("resuming run"), or, when its run had completed in
    // the last checkpoint, completed from it without a model call.
    let logs: String = fleet
        .logs
        .iter()
        .map(|l| std::fs::read_to_string(l).unwrap_or_default())
        .collect();
    let from_checkpoint: BTreeSet<i64> = psql(
        &pg,
        "SELECT coalesce(string_agg(id::text, ','), '') FROM baton.work_units WHERE \
         outcome->>'message' = 'completed by an earlier worker before it stopped'",
    )
    .split(',')
    .filter(|t| !t.is_empty())
    .map(|t| t.parse().unwrap())
    .collect();
    for unit in &resumed {
        assert!(
            from_checkpoint.contains(unit) || logs.contains(&format!("unit {unit}: resuming run")),
            "unit {unit} went on from a checkpoint, but no worker said it resumed it"
        );
    }
    let takeovers: i64 = epochs.values().map(|e| e - 1).sum();
    assert!(
        takeovers as usize <= hits + fleet.lease_losses.len() * 2,
        "{takeovers} takeovers for {hits} units hit and {} lease losses",
        fleet.lease_losses.len()
    );
    eprintln!(
        "fleet figures (seed {seed}): {runs} runs of {} turns, model delay {delay:?}, lease \
         {LEASE_S} s, workers {CONCURRENCY:?}: submitted in {:.1} s, all done {:.1} s after the \
         workers started; {} kills ({misses} missed) hit {hits} leased units, {} of them \
         mid-run; {} units went on from a checkpoint ({} of them completed from it); {} \
         takeovers; {} lease losses not caused by a kill {:?}; requests {} for {} turns needed \
         ({extra_total} asked again), runs by requests {per_run:?}; {stale_branches} stale \
         result branches; {left_behind} unit folders left on the workers' homes",
        needed.len(),
        submitted.as_secs_f64(),
        wall.as_secs_f64(),
        kills.len(),
        mid_run.len(),
        resumed.len(),
        from_checkpoint.len(),
        takeovers,
        fleet.lease_losses.len(),
        fleet.lease_losses,
        asked.values().map(Vec::len).sum::<usize>(),
        runs * needed.len(),
    );
}
