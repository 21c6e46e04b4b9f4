//! A replayed run killed with SIGKILL at random moments and resumed with `baton resume` ends
//! in the same state as an uninterrupted run, with no duplicated artifact — also when the model
//! names its tool calls `call_0, call_1, …` again on every turn, as a provider that sends no ids
//! looks through the OpenAI client. The replayer refuses requests OpenAI would refuse (a tool
//! call without its result, an orphan result), so a resume that pairs calls with the wrong
//! results fails the test.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;

use baton_testkit::copy_dir;
use baton_testkit::demo_trace;
use common::{Baton, example, repo};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The reference conversation when it is beside the repository (as in CI), else the demo trace.
fn trace() -> PathBuf {
    baton_testkit::seed_000().unwrap_or_else(demo_trace)
}

/// The parts of the final state that must not depend on interruptions.
fn essentials(state: &Value) -> Value {
    serde_json::json!({
        "currentNodeId": state["currentNodeId"],
        "stepsCompleted": state["stepsCompleted"],
        "artifacts": state["artifacts"],
        "variables": state["variables"],
    })
}

fn final_state(baton: &Baton, run_id: &str) -> Value {
    baton.run(&["runs", "show", run_id, "--json"]).json()["state"].clone()
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// The demo trace with every dialogue's tool-call ids renamed `call_0, call_1, …`.
fn trace_without_ids(dir: &std::path::Path) -> PathBuf {
    let mut trace: Value = serde_json::from_slice(&std::fs::read(demo_trace()).unwrap()).unwrap();
    for d in trace["dialogues"].as_array_mut().unwrap() {
        if let Some(calls) = d
            .pointer_mut("/response/assistant/toolCalls")
            .and_then(Value::as_array_mut)
        {
            for (i, call) in calls.iter_mut().enumerate() {
                call["id"] = Value::from(format!("call_{i}"));
            }
        }
    }
    let path = dir.join("no-ids.trace.json");
    std::fs::write(&path, serde_json::to_vec(&trace).unwrap()).unwrap();
    path
}

/// Whether a run's metadata is in the store under `home` yet.
fn run_exists(home: &std::path::Path) -> bool {
    let Ok(projects) = std::fs::read_dir(home.join("projects")) else {
        return false;
    };
    projects.flatten().any(|p| {
        std::fs::read_dir(p.path().join("runs")).is_ok_and(|mut runs| {
            runs.any(|r| r.is_ok_and(|r| r.path().join("run.json").is_file()))
        })
    })
}

fn kills() -> usize {
    std::env::var("BATON_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(24)
}

#[test]
fn killed_runs_resume_to_the_same_final_state() {
    kill_and_resume(&trace(), kills());
}

#[test]
fn killed_runs_resume_when_the_provider_repeats_tool_call_ids() {
    let dir = tempfile::tempdir().unwrap();
    kill_and_resume(&trace_without_ids(dir.path()), kills());
}

fn kill_and_resume(trace_path: &std::path::Path, kills: usize) {
    let pkg = example("create-story-micro");
    let reference = {
        let baton = Baton::new();
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("p");
        copy_dir(&repo().join("examples/projects/taskboard"), &project);
        let run = baton.run(&[
            "run",
            pkg.to_str().unwrap(),
            "--project",
            project.to_str().unwrap(),
            "--replay",
            trace_path.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let id = run.json()["runId"].as_str().unwrap().to_string();
        essentials(&final_state(&baton, &id))
    };
    let seed = std::env::var("BATON_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("kill test seed {seed} ({})", trace_path.display());
    let mut rng = Rng(seed);
    let mut resumed = 0;
    for i in 0..kills {
        let baton = Baton::new();
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("p");
        copy_dir(&repo().join("examples/projects/taskboard"), &project);
        let args = [
            "run",
            pkg.to_str().unwrap(),
            "--project",
            project.to_str().unwrap(),
            "--replay",
            trace_path.to_str().unwrap(),
            "--non-interactive",
            "--json",
        ];
        let mut child = Command::new(env!("CARGO_BIN_EXE_baton"))
            .args(args)
            .env("BATON_HOME", baton.home.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Three kills in four are timed from the moment the run exists (a loaded machine can
        // take longer than any fixed delay just to start baton, and kills that all land before
        // the run would test nothing); the others land blind in the first 5-155 ms, start-up
        // included.
        let delay = Duration::from_millis(rng.next() % 150);
        if rng.next().is_multiple_of(4) {
            std::thread::sleep(Duration::from_millis(5) + delay);
        } else {
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while !run_exists(baton.home.path()) && std::time::Instant::now() < deadline {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            std::thread::sleep(delay);
        }
        let _ = child.kill();
        let _ = child.wait();
        let runs = baton.run(&["runs", "list", "--json"]).json();
        let id = match runs.as_array().and_then(|r| r.first()) {
            Some(r) => r["runId"].as_str().unwrap().to_string(),
            None => {
                // Killed before the run existed: nothing to resume, start again.
                let again = baton.run(&args);
                assert_eq!(again.code, 0, "kill {i} (seed {seed}): {}", again.stderr);
                again.json()["runId"].as_str().unwrap().to_string()
            }
        };
        let phase = baton.run(&["runs", "show", &id, "--json"]).json()["run"]["phase"].clone();
        if phase != "completed" {
            resumed += 1;
            let r = baton.run(&[
                "resume",
                &id,
                "--replay",
                trace_path.to_str().unwrap(),
                "--non-interactive",
                "--json",
            ]);
            assert_eq!(
                r.code, 0,
                "kill {i} (seed {seed}) resume: {}{}",
                r.stdout, r.stderr
            );
        }
        let state = final_state(&baton, &id);
        assert_eq!(essentials(&state), reference, "kill {i} (seed {seed})");
        for a in state["artifacts"].as_array().unwrap() {
            assert!(
                project.join(a.as_str().unwrap()).is_file(),
                "kill {i}: {a} missing"
            );
        }
    }
    eprintln!("kill test: {kills} kills, {resumed} runs resumed, all ended in the reference state");
    assert!(resumed > 0, "some kills must land mid-run");
}
