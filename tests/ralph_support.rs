//! Helpers for the `baton ralph` end-to-end tests: a project and a fake HOME holding the sample
//! command files of `examples/skills/`, maestro-style sessions written by hand, and the real
//! binary run inside the project.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub struct Fx {
    pub tmp: tempfile::TempDir,
    pub project: PathBuf,
    pub home: PathBuf,
}

#[derive(Debug)]
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}): {}\nstderr: {}",
                self.stdout, self.stderr
            )
        })
    }

    /// Asserts the exit code, showing both streams when it differs.
    pub fn code(&self, expected: i32) -> &Out {
        assert_eq!(
            self.code, expected,
            "exit code\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

impl Fx {
    /// A project and a HOME with the sample command files installed globally.
    pub fn new() -> Fx {
        let fx = Fx::bare();
        // The baton crate's manifest dir, not the testkit's: the shared target dir may hold a
        // testkit built from another checkout.
        let skills = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/skills");
        baton_testkit::copy_dir(&skills.join("claude"), &fx.home.join(".claude"));
        baton_testkit::copy_dir(&skills.join("maestro"), &fx.home.join(".maestro"));
        fx
    }

    /// A project and an empty HOME.
    pub fn bare() -> Fx {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("project");
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        Fx { tmp, project, home }
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
        cmd.arg("ralph")
            .args(args)
            .current_dir(&self.project)
            .env("HOME", &self.home)
            .env("BATON_HOME", self.tmp.path().join("baton-home"))
            .env_remove("MAESTRO_HOME")
            .env_remove("BATON_RALPH_CLI")
            .stdin(Stdio::null());
        cmd
    }

    pub fn ralph(&self, args: &[&str]) -> Out {
        let out = self.cmd(args).output().expect("baton runs");
        Out {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    pub fn command_path(&self, skill: &str) -> String {
        self.home
            .join(".claude/commands")
            .join(format!("{skill}.md"))
            .display()
            .to_string()
    }

    pub fn sessions(&self) -> PathBuf {
        self.project.join(".workflow/.maestro")
    }

    pub fn dir(&self, id: &str) -> PathBuf {
        self.sessions().join(id)
    }

    /// Writes a session as maestro does (`JSON.stringify(data, null, 2)`).
    pub fn put(&self, id: &str, doc: &Value) {
        let dir = self.dir(id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("status.json"), stringify(doc)).unwrap();
    }

    pub fn put_raw(&self, id: &str, bytes: &[u8]) {
        let dir = self.dir(id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("status.json"), bytes).unwrap();
    }

    pub fn raw(&self, id: &str) -> Vec<u8> {
        std::fs::read(self.dir(id).join("status.json")).unwrap()
    }

    pub fn get(&self, id: &str) -> Value {
        serde_json::from_slice(&self.raw(id)).unwrap()
    }

    /// A session of the sample chain created with `ralph new`; returns its id.
    pub fn created(&self, chain: &str) -> String {
        let out = self.ralph(&[
            "new",
            "add CSV export",
            "--chain",
            chain,
            "--phase",
            "1",
            "--json",
        ]);
        out.code(0);
        out.json()["session_id"].as_str().unwrap().to_string()
    }

    /// Writes a file under the project.
    pub fn file(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.project.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }
}

/// `JSON.stringify(v, null, 2)`
pub fn stringify(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap()
}

/// A step as maestro's skill builds it.
pub fn exec(i: usize, skill: &str, args: &str, status: &str, command_path: &str) -> Value {
    json!({
        "index": i, "skill": skill, "args": args, "stage": stage_of(skill), "scope": null,
        "decision": null, "retry_count": 0, "max_retries": 2,
        "command_scope": "global", "command_path": command_path,
        "milestone_id": null, "source_artifact_ref": null, "status": status, "goal_ref": null,
        "completion_confirmed": status == "completed", "completion_status": null,
        "completion_evidence": null, "completed_at": null, "deferred_reads": [], "load": null
    })
}

pub fn gate(i: usize, gate: &str, status: &str) -> Value {
    json!({
        "index": i, "skill": "", "args": "", "stage": gate.trim_start_matches("post-"),
        "scope": null, "decision": gate, "retry_count": 0, "max_retries": 2,
        "command_scope": null, "command_path": null, "milestone_id": null,
        "source_artifact_ref": null, "status": status, "goal_ref": null,
        "completion_confirmed": status == "completed", "completion_status": null,
        "completion_evidence": null, "completed_at": null, "deferred_reads": [], "load": null
    })
}

fn stage_of(skill: &str) -> &str {
    skill.rsplit('-').next().unwrap_or(skill)
}

/// A maestro session document (protocol version omitted: maestro's `next` adds it).
pub fn session(id: &str, steps: Vec<Value>) -> Value {
    json!({
        "session_id": id, "source": "ralph", "status": "running", "active_step_index": null,
        "intent": "add CSV export", "lifecycle_position": "plan", "phase": 1,
        "phase_is_new": false, "milestone": "M1", "auto_mode": true,
        "quality_mode": "standard", "planning_mode": "independent", "scope_verdict": null,
        "analyze_macro_id": null, "blueprint_id": null, "cli_tool": "claude",
        "passed_gates": [], "consec_exit2_count": 0,
        "context": {"issue_id": null, "scratch_dir": null, "plan_dir": null,
                    "analysis_dir": null, "brainstorm_dir": null, "blueprint_dir": null},
        "steps": steps, "current_step": 0
    })
}

/// The usual three-step session: plan, execute, milestone-complete.
pub fn simple(fx: &Fx, id: &str) -> Value {
    session(
        id,
        vec![
            exec(
                0,
                "maestro-plan",
                "1",
                "pending",
                &fx.command_path("maestro-plan"),
            ),
            exec(
                1,
                "maestro-execute",
                "1",
                "pending",
                &fx.command_path("maestro-execute"),
            ),
            exec(
                2,
                "maestro-milestone-complete",
                "",
                "pending",
                &fx.command_path("maestro-milestone-complete"),
            ),
        ],
    )
}

/// Sets a field of a JSON object (the position kept when present).
pub fn set(v: &mut Value, key: &str, value: Value) {
    v.as_object_mut().unwrap().insert(key.into(), value);
}

pub fn step_mut(v: &mut Value, i: usize) -> &mut Map<String, Value> {
    v["steps"][i].as_object_mut().unwrap()
}

/// Sets a directory's mtime (discovery ranks sessions by it).
pub fn set_mtime(dir: &Path, secs_ago: u64) {
    let t = std::time::SystemTime::now() - std::time::Duration::from_secs(secs_ago);
    let f = std::fs::File::open(dir).unwrap();
    f.set_modified(t).unwrap();
}

/// The keys of a JSON object, in order.
pub fn keys(v: &Value) -> Vec<String> {
    v.as_object().unwrap().keys().cloned().collect()
}
