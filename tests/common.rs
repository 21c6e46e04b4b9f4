//! Helpers shared by the end-to-end tests that drive the real `baton` binary.
#![allow(dead_code)]

pub use baton_testkit::{example, repo};
use std::path::Path;
use std::process::{Command, Output};

/// A `baton` invocation with its own `BATON_HOME`.
pub struct Baton {
    pub home: tempfile::TempDir,
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", self.stdout))
    }
}

impl Baton {
    pub fn new() -> Baton {
        Baton {
            home: tempfile::tempdir().unwrap(),
        }
    }

    pub fn run(&self, args: &[&str]) -> Run {
        self.run_in(&repo(), args)
    }

    pub fn run_in(&self, cwd: &Path, args: &[&str]) -> Run {
        let out: Output = Command::new(env!("CARGO_BIN_EXE_baton"))
            .args(args)
            .current_dir(cwd)
            .env("BATON_HOME", self.home.path())
            .env_remove("OPENAI_API_KEY")
            .env_remove("BATON_MODEL")
            .env_remove("OPENAI_BASE_URL")
            .output()
            .expect("baton runs");
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// Every file under `dir`, recursively.
pub fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// The demo trace up to its first question, without the recorded answer: a run replaying it
/// stops waiting for the user.
pub fn trace_until_question(dir: &Path) -> std::path::PathBuf {
    let mut trace: serde_json::Value =
        serde_json::from_slice(&std::fs::read(baton_testkit::demo_trace()).unwrap()).unwrap();
    let dialogues = trace["dialogues"].as_array_mut().unwrap();
    let question = dialogues
        .iter()
        .position(|d| d["type"] == "user_input")
        .unwrap();
    dialogues.truncate(question);
    let path = dir.join("until-question.trace.json");
    std::fs::write(&path, serde_json::to_vec(&trace).unwrap()).unwrap();
    path
}
