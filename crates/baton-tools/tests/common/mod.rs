//! A run of the create-story example on a copy of the sample project, with its ToolHost.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_package::Package;
use baton_store::{NewRun, Project, RunPaths, Store};
pub use baton_testkit::{copy_dir, repo};
use baton_tools::{
    CallContext, EffectivePolicy, RunBinding, SystemToolSettings, ToolCall, ToolHost, ToolOutcome,
};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};

pub struct Env {
    pub tmp: tempfile::TempDir,
    pub project_root: PathBuf,
    pub pkg_root: PathBuf,
    pub outside: PathBuf,
    pub paths: RunPaths,
    pub project: Project,
    pub run_id: String,
    pub host: ToolHost,
    pub policy: EffectivePolicy,
    pub node: String,
    calls: usize,
}

impl Env {
    pub fn new() -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let project_root = tmp.path().join("project");
        copy_dir(&repo().join("examples/projects/taskboard"), &project_root);
        let outside = tmp.path().join("outside");
        fs::create_dir_all(&outside).unwrap();
        fs::write(outside.join("secret.txt"), "top secret\n").unwrap();
        let store = Store::new(tmp.path().join("home"));
        let package = Package::load(&repo().join("examples/packages/create-story-micro")).unwrap();
        let installed = store.packages().install(&package, "test").unwrap().package;
        let project = store.project(&project_root).unwrap();
        let run = project
            .create_run(NewRun {
                package: &package,
                installed: &installed,
                workflow_ref: None,
                agent_id: "sm",
            })
            .unwrap();
        let paths = project.run_paths(&run.run_id);
        let binding = RunBinding {
            run_id: run.run_id.clone(),
            graph: package.workflows()[0].graph.clone(),
            state: project.state_file(&run.run_id),
            artifacts_dir: "artifacts".into(),
        };
        let host = ToolHost::open(
            &project_root,
            &installed.path,
            &paths.state_dir,
            &paths.execution_log,
            binding,
        )
        .unwrap();
        let policy = EffectivePolicy::merge(
            &SystemToolSettings::default(),
            package.agent("sm").and_then(|a| a.tools.as_ref()),
        );
        Env {
            pkg_root: installed.path.clone(),
            tmp,
            project_root,
            outside,
            paths,
            project,
            run_id: run.run_id,
            host,
            policy,
            node: "step-01-select-story".into(),
            calls: 0,
        }
    }

    pub fn call(&mut self, name: &str, args: Value) -> ToolOutcome {
        self.call_raw(name, &args.to_string())
    }

    pub fn call_raw(&mut self, name: &str, arguments: &str) -> ToolOutcome {
        self.calls += 1;
        let id = format!("tc{:02}", self.calls);
        let ctx = CallContext {
            agent_id: "sm",
            node_id: &self.node,
            policy: &self.policy,
        };
        self.host.execute(
            ToolCall {
                id: &id,
                name,
                arguments,
            },
            ctx,
        )
    }

    pub fn audit(&self) -> Vec<Value> {
        baton_store::jsonl::read(&self.paths.execution_log)
            .unwrap()
            .records
    }

    pub fn state(&self) -> serde_json::Map<String, Value> {
        self.project
            .state_file(&self.run_id)
            .read()
            .unwrap()
            .doc
            .fields()
            .clone()
    }
}

/// `(relative path, sha256)` of every file under `dir`, sorted: a fingerprint of a tree.
pub fn tree(dir: &Path) -> Vec<(String, String)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let ft = e.file_type().unwrap();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if ft.is_dir() {
                walk(root, &p, out);
            } else if ft.is_file() {
                out.push((
                    rel,
                    baton_package::digest::sha256_hex(&fs::read(&p).unwrap()),
                ));
            } else {
                out.push((rel, "special".into()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}
