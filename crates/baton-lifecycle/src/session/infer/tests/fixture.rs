use crate::session::infer::{Inference, Options, infer};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// A temporary project with an optional `.workflow/`.
pub struct Project {
    pub dir: tempfile::TempDir,
}

impl Project {
    /// An empty directory: no `.workflow/`, no sources.
    pub fn empty() -> Project {
        Project {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// A project with `.workflow/state.json` holding `state`.
    pub fn with_state(state: Value) -> Project {
        let p = Project::empty();
        p.write(
            ".workflow/state.json",
            &serde_json::to_string_pretty(&state).unwrap(),
        );
        p
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn workflow(&self) -> PathBuf {
        self.root().join(".workflow")
    }

    pub fn write(&self, rel: &str, text: &str) {
        let path = self.root().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    pub fn write_json(&self, rel: &str, v: Value) {
        self.write(rel, &v.to_string());
    }

    pub fn infer(&self, intent: &str) -> Inference {
        infer(self.root(), intent, &Options::default()).unwrap()
    }

    pub fn infer_auto(&self, intent: &str) -> Inference {
        infer(self.root(), intent, &auto()).unwrap()
    }

    pub fn infer_with(&self, intent: &str, opts: &Options) -> Inference {
        infer(self.root(), intent, opts).unwrap()
    }

    pub fn infer_err(&self, intent: &str) -> crate::session::infer::InferError {
        infer(self.root(), intent, &Options::default()).unwrap_err()
    }
}

pub fn auto() -> Options {
    Options {
        auto: true,
        ..Options::default()
    }
}

pub fn answered(pairs: &[(&str, &str)], auto: bool) -> Options {
    Options {
        auto,
        answers: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Options::default()
    }
}

/// One milestone `M1` (current) with phases 1 `auth` and 2 `billing`.
pub fn two_phases() -> Value {
    json!({
        "version": "3.1",
        "current_milestone": "M1",
        "milestones": [
            {"id": "M1", "name": "First", "status": "active", "phases": [1, 2],
             "phase_slugs": {"1": "auth", "2": "billing"}}
        ],
        "artifacts": []
    })
}

/// One milestone `M1` (current) with the single phase 1 `auth`.
pub fn one_phase() -> Value {
    json!({
        "current_milestone": "M1",
        "milestones": [{"id": "M1", "status": "active", "phases": [1], "phase_slugs": {"1": "auth"}}],
        "artifacts": []
    })
}

/// A registry entry with its directory under `.workflow/scratch/`.
pub fn artifact(id: &str, kind: &str, phase: Option<u64>, status: &str, at: &str) -> Value {
    let dir = format!(
        "scratch/{}-{kind}-{}{id}",
        &at[..10].replace('-', ""),
        phase.map_or(String::new(), |n| format!("P{n}-"))
    );
    json!({"id": id, "type": kind, "milestone": "M1", "phase": phase,
           "scope": if phase.is_some() { "phase" } else { "macro" },
           "path": dir, "status": status, "depends_on": [], "harvested": false,
           "created_at": at, "completed_at": null})
}

/// `state` with `artifacts` set, each artifact's directory created.
pub fn with_artifacts(mut state: Value, artifacts: Vec<Value>) -> Project {
    state["artifacts"] = Value::Array(artifacts.clone());
    let p = Project::with_state(state);
    for a in &artifacts {
        if let Some(path) = a["path"].as_str() {
            std::fs::create_dir_all(p.workflow().join(path)).unwrap();
        }
    }
    p
}

/// The directory of `artifact`'s entry.
pub fn dir(a: &Value) -> String {
    format!(".workflow/{}", a["path"].as_str().unwrap())
}
