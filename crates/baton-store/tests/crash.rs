//! Crash and concurrency tests: real processes, killed with SIGKILL at random moments.
//!
//! The test binary re-runs itself as the child (`child_*` tests do nothing unless the
//! `BATON_TEST_CHILD` environment variable is set). Children print `ACK …` after each operation
//! returned; whatever was acknowledged before a kill must be on disk afterwards.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_package::Package;
use baton_store::jsonl::{self, JsonlWriter};
use baton_store::{GuardOptions, NewRun, Store};
use baton_testkit::example;
use serde_json::json;
use std::collections::HashMap;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD: &str = "BATON_TEST_CHILD";

fn child_env() -> Option<(PathBuf, PathBuf)> {
    let role = std::env::var(CHILD).ok()?;
    let mut parts = role.splitn(2, '|');
    let home = PathBuf::from(parts.next()?);
    let project = PathBuf::from(parts.next()?);
    Some((home, project))
}

fn ack(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "ACK {line}");
    let _ = out.flush();
}

/// Child: create runs and patch their state in a loop until killed.
#[test]
fn child_create_and_patch_loop() {
    let Some((home, project_root)) = child_env() else {
        return;
    };
    let store = Store::new(home);
    let installed = store.packages().list().unwrap().remove(0);
    let package = Package::load(&installed.path).unwrap();
    let graph = package.workflows()[0].graph.clone();
    let project = store.project(&project_root).unwrap();
    loop {
        let run = project
            .create_run(NewRun {
                package: &package,
                installed: &installed,
                workflow_ref: None,
                agent_id: "sm",
            })
            .unwrap();
        ack(&format!("created {}", run.run_id));
        let state = project.state_file(&run.run_id);
        let mut log = JsonlWriter::open(&project.run_paths(&run.run_id).execution_log).unwrap();
        for n in 1..=6u64 {
            let update = json!({"variables": {"set": {"counter": n, "filler": "x".repeat(200 * n as usize)}}});
            state
                .patch(&graph, &update, None, GuardOptions::default())
                .unwrap();
            log.append(
                &json!({"kind": "test.patch", "n": n, "pad": "y".repeat(500)}),
                true,
            )
            .unwrap();
            ack(&format!("patched {} {n}", run.run_id));
        }
    }
}

/// Child: create a fixed number of runs as fast as possible.
#[test]
fn child_create_runs() {
    let Some((home, project_root)) = child_env() else {
        return;
    };
    let count: usize = std::env::var("BATON_TEST_COUNT")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(10);
    let store = Store::new(home);
    let installed = store.packages().list().unwrap().remove(0);
    let package = Package::load(&installed.path).unwrap();
    let project = store.project(&project_root).unwrap();
    for _ in 0..count {
        let run = project
            .create_run(NewRun {
                package: &package,
                installed: &installed,
                workflow_ref: None,
                agent_id: "sm",
            })
            .unwrap();
        ack(&format!("created {}", run.run_id));
    }
}

fn spawn_child(
    test: &str,
    home: &Path,
    project: &Path,
    count: Option<usize>,
) -> std::process::Child {
    let test = baton_testkit::harness_name(module_path!(), test);
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([test.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, format!("{}|{}", home.display(), project.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(c) = count {
        cmd.env("BATON_TEST_COUNT", c.to_string());
    }
    cmd.spawn().unwrap()
}

fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let project = tmp.path().join("project");
    fs::create_dir_all(&project).unwrap();
    let package = Package::load(&example("create-story-micro")).unwrap();
    Store::new(&home)
        .packages()
        .install(&package, "test")
        .unwrap();
    (tmp, home, project)
}

/// xorshift64*: a reproducible random sequence without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[derive(Default)]
struct Tally {
    kills: usize,
    runs_acked: usize,
    patches_acked: usize,
    torn_tails: usize,
    staging_left: usize,
    unindexed_dirs: usize,
}

/// Checks every invariant; returns the problems found.
fn verify(
    home: &Path,
    project_root: &Path,
    acked_runs: &[String],
    acked_patch: &HashMap<String, u64>,
    tally: &mut Tally,
) -> Vec<String> {
    let mut problems = Vec::new();
    let store = Store::new(home);
    let project = store.project(project_root).unwrap();
    let runs = match project.runs(None) {
        Ok(listing) if listing.warnings.is_empty() => listing.runs,
        Ok(listing) => {
            return vec![format!("the index needed a repair: {:?}", listing.warnings)];
        }
        Err(e) => return vec![format!("the runs index is unreadable: {e}")],
    };
    let indexed: HashMap<&str, _> = runs.iter().map(|r| (r.run_id.as_str(), r)).collect();
    for id in acked_runs {
        if !indexed.contains_key(id.as_str()) {
            problems.push(format!("acknowledged run {id} missing from the index"));
        }
    }
    for run in &runs {
        let state = match project.state_file(&run.run_id).read() {
            Ok(s) => s,
            Err(e) => {
                problems.push(format!(
                    "run {} in the index has no readable state: {e}",
                    run.run_id
                ));
                continue;
            }
        };
        let counter = state
            .doc
            .variables()
            .and_then(|v| v.get("counter"))
            .and_then(|c| c.as_u64())
            .unwrap_or(0);
        if let Some(&n) = acked_patch.get(&run.run_id)
            && counter < n
        {
            problems.push(format!(
                "run {}: acknowledged patch {n} lost (state has {counter})",
                run.run_id
            ));
        }
        match jsonl::read(&project.run_paths(&run.run_id).execution_log) {
            Ok(log) => {
                if !log.bad_lines.is_empty() {
                    problems.push(format!(
                        "run {}: corrupt audit lines {:?}",
                        run.run_id, log.bad_lines
                    ));
                }
                if log.torn_tail_bytes > 0 {
                    tally.torn_tails += 1;
                }
                let acked = acked_patch.get(&run.run_id).copied().unwrap_or(0) as usize;
                if log.records.len() < acked {
                    problems.push(format!(
                        "run {}: {} audit lines, {acked} acknowledged",
                        run.run_id,
                        log.records.len()
                    ));
                }
            }
            Err(e) => problems.push(format!("run {}: audit log unreadable: {e}", run.run_id)),
        }
    }
    let runs_dir = project.run_paths("x").dir.parent().unwrap().to_path_buf();
    tally.staging_left = 0;
    tally.unindexed_dirs = 0;
    if let Ok(entries) = fs::read_dir(project.dir.join("staging")) {
        tally.staging_left += entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with('.'))
            .count();
    }
    for entry in fs::read_dir(&runs_dir).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            problems.push(format!("a staging directory in runs/: {name}"));
        } else if !indexed.contains_key(name.as_str()) {
            tally.unindexed_dirs += 1;
            // Killed between the rename and the index write: the run is complete, just unlisted.
            let paths = project.run_paths(&name);
            if project.state_file(&name).read().is_err() || !paths.metadata_file().exists() {
                problems.push(format!("unindexed run directory {name} is incomplete"));
            }
        }
    }
    problems
}

#[test]
fn sigkill_at_random_moments_loses_nothing_acknowledged() {
    let kills: usize = std::env::var("BATON_CRASH_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(200);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("crash test seed {seed}");
    let mut rng = Rng(seed);
    let (_tmp, home, project) = setup();
    let mut acked_runs = Vec::new();
    let mut acked_patch: HashMap<String, u64> = HashMap::new();
    let mut tally = Tally::default();
    let started = Instant::now();
    for i in 0..kills {
        let mut child = spawn_child("child_create_and_patch_loop", &home, &project, None);
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .collect::<Vec<_>>()
        });
        // Kill somewhere between start-up and well into the loop.
        std::thread::sleep(Duration::from_micros(2_000 + rng.next() % 60_000));
        child.kill().unwrap();
        child.wait().unwrap();
        tally.kills += 1;
        for line in reader.join().unwrap() {
            let Some(start) = line.find("ACK ") else {
                continue;
            };
            let mut words = line[start..].split_whitespace();
            match (words.next(), words.next(), words.next(), words.next()) {
                (Some("ACK"), Some("created"), Some(id), None) => {
                    acked_runs.push(id.to_string());
                    tally.runs_acked += 1;
                }
                (Some("ACK"), Some("patched"), Some(id), Some(n)) => {
                    acked_patch.insert(id.to_string(), n.parse().unwrap());
                    tally.patches_acked += 1;
                }
                _ => {}
            }
        }
        let problems = verify(&home, &project, &acked_runs, &acked_patch, &mut tally);
        assert!(
            problems.is_empty(),
            "after kill {i} (seed {seed}): {problems:#?}"
        );
    }
    eprintln!(
        "crash test: {} kills in {:.1}s, {} runs and {} patches acknowledged, all present; {} audit logs with a torn tail (skipped by readers), {} staging dirs and {} complete-but-unindexed runs left by kills (before garbage collection)",
        tally.kills,
        started.elapsed().as_secs_f64(),
        tally.runs_acked,
        tally.patches_acked,
        tally.torn_tails,
        tally.staging_left,
        tally.unindexed_dirs
    );
    assert!(
        tally.runs_acked > 0 && tally.patches_acked > 0,
        "the children did work before being killed"
    );
    let project_handle = Store::new(&home).project(&project).unwrap();
    let gc = project_handle.collect_garbage(Duration::ZERO).unwrap();
    assert_eq!(
        (gc.staging_removed, gc.unindexed_added),
        (tally.staging_left, tally.unindexed_dirs),
        "staging leftovers are removed, complete run directories are indexed"
    );
    let problems = verify(&home, &project, &acked_runs, &acked_patch, &mut tally);
    assert!(
        problems.is_empty(),
        "after garbage collection: {problems:#?}"
    );
    assert_eq!((tally.staging_left, tally.unindexed_dirs), (0, 0));
    let listed = project_handle.list_runs().unwrap().len();
    let dirs = fs::read_dir(project_handle.run_paths("x").dir.parent().unwrap())
        .unwrap()
        .count();
    assert_eq!(
        listed, dirs,
        "every run directory is listed, none was removed"
    );
}

#[test]
fn eight_processes_creating_runs_lose_no_update() {
    let (_tmp, home, project) = setup();
    let per_child = 12;
    let children: Vec<_> = (0..8)
        .map(|_| spawn_child("child_create_runs", &home, &project, Some(per_child)))
        .collect();
    let mut acked = Vec::new();
    for mut child in children {
        let stdout = child.stdout.take().unwrap();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // libtest prints "test <name> ... " without a newline before the test's own output.
            if let Some(id) = line
                .find("ACK ")
                .and_then(|i| line[i..].strip_prefix("ACK created "))
            {
                acked.push(id.to_string());
            }
        }
        assert!(child.wait().unwrap().success());
    }
    assert_eq!(acked.len(), 8 * per_child);
    let runs = Store::new(&home)
        .project(&project)
        .unwrap()
        .list_runs()
        .unwrap();
    assert_eq!(runs.len(), 8 * per_child, "every run is in the index");
    let mut ids: Vec<&str> = runs.iter().map(|r| r.run_id.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 8 * per_child, "no duplicates");
    for id in &acked {
        assert!(
            ids.binary_search(&id.as_str()).is_ok(),
            "{id} acknowledged but not indexed"
        );
    }
}
