//! Kill test of `baton epic run --parallel 3`: the orchestrator is SIGKILLed at random moments
//! while stories are in flight in their worktrees (20 kills by default; `BATON_EPIC_KILLS=N`,
//! `BATON_EPIC_KILL_SEED`), and `baton epic resume` takes over each time. The epic ends as one
//! never killed: the same statuses, one commit per story with the same files, no worktree or
//! story branch left, `git fsck` clean, and no phase step of a story run twice.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;
use crate::player;

use common::{Baton, git, repo};
use player::{Player, Scenario};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const IMPL: &str = "_bmad-output/implementation-artifacts";

fn sample(into: &Path) -> PathBuf {
    let project = into.join("project");
    baton_testkit::copy_dir(&repo().join("examples/projects/taskboard-epic"), &project);
    std::fs::write(
        project.join("baton.toml"),
        "[autopilot.git]\ncommit = true\n",
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

fn baton_cmd(baton: &Baton, player: &Player, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
    cmd.args(args)
        .env("BATON_HOME", baton.home.path())
        .env("OPENAI_BASE_URL", player.base_url())
        .env("BATON_MODEL", "played")
        .env("OPENAI_API_KEY", "sk-test")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(baton.home.path().join("last-stderr.txt")).unwrap());
    cmd
}

fn last_stderr(baton: &Baton) -> String {
    std::fs::read_to_string(baton.home.path().join("last-stderr.txt")).unwrap_or_default()
}

/// The project's lock is still held just after a kill (by a process the killed orchestrator
/// forked, still exiting on a loaded machine): the next command is refused EPIC_BUSY. The test
/// then waits until the lock is free (a blocking shared lock on the folder, the event itself)
/// and tries again; a lock still held after a minute is a leak (a process the killed
/// orchestrator left behind holding its descriptor), reported with the processes that hold it.
fn busy(baton: &Baton, project: &Path, code: Option<i32>) -> bool {
    let busy = code == Some(1) && last_stderr(baton).contains("EPIC_BUSY");
    if busy {
        eprintln!("parallel kill test: EPIC_BUSY after a kill, waiting for the lock");
        let dir = std::fs::File::open(project.join(IMPL)).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(dir.lock_shared().map(|()| dir.unlock()));
        });
        if rx.recv_timeout(Duration::from_secs(60)).is_err() {
            panic!(
                "the project's lock is still held a minute after a kill, by: {}",
                holders(&project.join(IMPL))
            );
        }
    }
    busy
}

/// The processes with a descriptor open on `dir` (`pid command`), from /proc.
fn holders(dir: &Path) -> String {
    let dir = dir.canonicalize().unwrap_or(dir.to_path_buf());
    let mut out = Vec::new();
    for p in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let pid = p.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let fds = std::fs::read_dir(p.path().join("fd"))
            .into_iter()
            .flatten()
            .flatten();
        if fds
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .any(|target| target == dir)
        {
            let cmd = std::fs::read(p.path().join("cmdline")).unwrap_or_default();
            out.push(format!(
                "{pid} {}",
                String::from_utf8_lossy(&cmd).replace('\0', " ")
            ));
        }
    }
    if out.is_empty() {
        "no process found".into()
    } else {
        out.join("; ")
    }
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Stories with a worktree now (in flight).
fn in_flight(project: &Path) -> usize {
    std::fs::read(project.join(IMPL).join(".baton-epic-parallel.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v["started"].as_array().map(Vec::len))
        .unwrap_or(0)
}

/// What the driver did so far, shown when it fails.
#[derive(Debug, Default)]
struct Progress {
    invocations: usize,
    killed: usize,
    kills_outside_flight: usize,
    busy: usize,
    last_args: Vec<String>,
}

/// Drives epic-1 with --parallel 3 to done; kills it `kills` times while stories are in flight.
/// Every invocation that is let run is bounded: one that does not end is a hang, reported with
/// what the driver did so far and the epic's files.
fn drive(baton: &Baton, player: &Player, project: &Path, kills: usize, rng: &mut Rng) -> usize {
    let p = project.to_str().unwrap();
    let mut progress = Progress::default();
    let mut first = true;
    let mut blind_in_a_row = 0;
    let started_at = Instant::now();
    let report = |progress: &Progress, what: &str| -> String {
        let state = std::fs::read_to_string(project.join(IMPL).join(".run-epic-state.json"))
            .unwrap_or_default();
        let parallel =
            std::fs::read_to_string(project.join(IMPL).join(".baton-epic-parallel.json"))
                .unwrap_or_default();
        format!(
            "{what} after {:?}: {progress:?}\nparallel file: {parallel}\nstate file: {state}\nlast stderr: {}",
            started_at.elapsed(),
            last_stderr(baton)
        )
    };
    loop {
        // A kill only ever costs the phase step it interrupts: 20 kills and the runs between
        // them are done in well under this on a loaded machine (a few seconds idle).
        assert!(
            started_at.elapsed() < Duration::from_secs(900),
            "{}",
            report(&progress, "the epic did not finish")
        );
        // Until the epic's state file exists, the epic has not started: run it again.
        let started = project.join(IMPL).join(".run-epic-state.json").exists();
        let args: Vec<&str> = if first || !started {
            vec!["epic", "run", "epic-1", "--parallel", "3", "-p", p]
        } else {
            vec!["epic", "resume", "-p", p]
        };
        first = false;
        progress.invocations += 1;
        progress.last_args = args.iter().map(|a| a.to_string()).collect();
        let mut child = baton_cmd(baton, player, &args).spawn().unwrap();
        // Most kills are armed once stories are in flight (the moment the test is about), a
        // random 0-400 ms later; some land blind in the first 20-420 ms, start-up included. Blind
        // kills are not counted and at most two come in a row: on a loaded machine an
        // invocation with nothing in flight (the last merges, the end of the epic) can need
        // more than 420 ms, and blind kills alone would never let it finish.
        let want_kill = progress.killed < kills;
        let blind = want_kill && blind_in_a_row < 2 && rng.below(4) == 0;
        let mut kill_at =
            blind.then(|| Instant::now() + Duration::from_millis(20 + rng.below(400)));
        let delay_after_flight = Duration::from_millis(rng.below(400));
        // A run let go to its end must end: five minutes is a hang, not a slow machine.
        let hang_at = Instant::now() + Duration::from_secs(300);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            let now = Instant::now();
            if want_kill && kill_at.is_none() && in_flight(project) > 0 {
                kill_at = Some(now + delay_after_flight);
            }
            if kill_at.is_some_and(|at| now >= at) {
                break None;
            }
            if now >= hang_at {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{}",
                    report(&progress, "a run did not end in five minutes (hang)")
                );
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        let Some(status) = status else {
            let flying = in_flight(project);
            child.kill().unwrap();
            child.wait().unwrap();
            if flying > 0 {
                progress.killed += 1;
            } else {
                progress.kills_outside_flight += 1;
            }
            blind_in_a_row = if blind { blind_in_a_row + 1 } else { 0 };
            continue;
        };
        if busy(baton, project, status.code()) {
            progress.busy += 1;
            continue;
        }
        assert_eq!(
            status.code(),
            Some(0),
            "{}",
            report(&progress, "a run failed")
        );
        eprintln!(
            "parallel kill test: {progress:?} in {:?}",
            started_at.elapsed()
        );
        return progress.killed;
    }
}

/// (story, phase, review cycle) → runs, over every project of the store (a worktree is one).
fn phase_steps(baton: &Baton) -> BTreeMap<(String, String, String), usize> {
    let store = baton_store::Store::new(baton.home.path());
    let mut out = BTreeMap::new();
    for p in store.projects().unwrap().projects {
        let runs_dir = p.run_paths("x").dir.parent().unwrap().to_path_buf();
        let Ok(entries) = std::fs::read_dir(runs_dir) else {
            continue;
        };
        for e in entries.flatten() {
            let id = e.file_name().to_string_lossy().into_owned();
            if id.starts_with('.') {
                continue;
            }
            let state = p.state_file(&id).read().unwrap().doc.to_value();
            let v = &state["variables"];
            let key = |k: &str| v[k].as_str().unwrap_or("").to_string();
            *out.entry((key("storyKey"), key("phase"), key("reviewCycle")))
                .or_insert(0) += 1;
        }
    }
    out
}

fn end_state(project: &Path) -> (String, Vec<String>, Vec<(String, String)>) {
    let sprint: String = std::fs::read_to_string(project.join(IMPL).join("sprint-status.yaml"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("last_updated:"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut subjects: Vec<String> = git(project, &["log", "--format=%s"])
        .lines()
        .map(String::from)
        .collect();
    subjects.sort();
    let files = git(project, &["ls-files", "src"])
        .lines()
        .map(|f| {
            (
                f.to_string(),
                std::fs::read_to_string(project.join(f)).unwrap(),
            )
        })
        .collect();
    (sprint, subjects, files)
}

#[test]
fn parallel_epic_killed_at_random_moments_ends_as_if_never_killed() {
    let kills: usize = std::env::var("BATON_EPIC_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let seed: u64 = std::env::var("BATON_EPIC_KILL_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x9a7a_11e1);
    let scenario = Scenario {
        changes: vec![("1-3-password-reset".into(), 1)],
        delay: Duration::from_millis(40),
        ..Default::default()
    };
    let reference = Baton::new();
    let tmp_ref = tempfile::tempdir().unwrap();
    let project_ref = sample(tmp_ref.path());
    let player_ref = Player::start(&project_ref, scenario.clone());
    drive(&reference, &player_ref, &project_ref, 0, &mut Rng(seed));
    let expected = end_state(&project_ref);

    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample(tmp.path());
    let player = Player::start(&project, scenario);
    let done = drive(&baton, &player, &project, kills, &mut Rng(seed | 1));
    eprintln!("parallel kill test: {done} kills with stories in flight");
    assert!(
        done >= kills,
        "only {done} kills landed while stories were in flight"
    );

    assert_eq!(end_state(&project), expected);
    let list = git(&project, &["worktree", "list", "--porcelain"]);
    assert_eq!(list.matches("worktree ").count(), 1, "{list}");
    assert_eq!(git(&project, &["branch", "--list", "baton/*"]), "");
    git(&project, &["fsck", "--no-progress", "--strict"]);
    let ran = phase_steps(&baton);
    assert!(
        ran.values().all(|n| *n == 1),
        "a phase step ran twice: {ran:?}"
    );
    assert_eq!(ran, phase_steps(&reference));
}
