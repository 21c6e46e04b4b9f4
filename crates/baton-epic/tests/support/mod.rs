//! Shared by the epic autopilot tests: a copy of the sample project, a store, the played model
//! behind the real HTTP client, and one call that runs a command to its end.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

pub mod player;

use baton_epic::{Command, EpicError, EpicReport, EpicSettings, ModelSource, execute};
use baton_llm::HttpChatModel;
use baton_store::Store;
use player::{Player, Scenario};
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

pub const IMPL: &str = "_bmad-output/implementation-artifacts";

pub struct Fixture {
    pub tmp: tempfile::TempDir,
    pub project: PathBuf,
    pub store: Store,
    pub player: Player,
    pub model: HttpChatModel,
}

pub fn sample_project(into: &Path) -> PathBuf {
    let project = into.join("project");
    baton_testkit::copy_dir(
        &baton_testkit::repo().join("examples/projects/taskboard-epic"),
        &project,
    );
    project
}

impl Fixture {
    pub fn new(scenario: Scenario) -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let project = sample_project(tmp.path());
        let store = Store::new(tmp.path().join("home"));
        let player = Player::start(&project, scenario);
        let model = baton_llm::testing::played_model(player.base_url()).unwrap();
        Fixture {
            tmp,
            project,
            store,
            player,
            model,
        }
    }

    pub fn file(&self, rel: &str) -> PathBuf {
        self.project.join(rel)
    }

    pub fn impl_file(&self, name: &str) -> PathBuf {
        self.project.join(IMPL).join(name)
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.file(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    pub fn json(&self, name: &str) -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(self.impl_file(name)).unwrap()).unwrap()
    }

    pub fn sprint(&self) -> String {
        self.read(&format!("{IMPL}/sprint-status.yaml"))
    }

    pub fn config(&self, toml: &str) {
        std::fs::write(self.file("baton.toml"), toml).unwrap();
    }

    pub async fn run(&self, command: Command) -> Result<EpicReport, EpicError> {
        execute(
            &self.store,
            &self.project,
            command,
            EpicSettings {
                source: ModelSource::Live(&self.model),
                record: None,
                ask: None,
                on_event: None,
                cancel: CancellationToken::new(),
                dry_run: false,
                budget: Default::default(),
            },
        )
        .await
    }

    pub async fn run_epic(&self, epic: &str) -> EpicReport {
        self.run(Command::Run {
            epic: epic.into(),
            max_stories: None,
        })
        .await
        .unwrap()
    }
}

/// Every file under `dir` with its bytes, for "nothing was written" checks.
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// The sample's sprint-status with some values changed, line by line: what an in-place edit
/// must produce (plus `last_updated`, compared separately).
pub fn expected_sprint(original: &str, changes: &[(&str, &str)]) -> String {
    original
        .lines()
        .map(|line| {
            for (key, status) in changes {
                let prefix = format!("  {key}: ");
                if line.starts_with(&prefix) {
                    return format!("{prefix}{status}");
                }
            }
            line.to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// The text without its `last_updated` line.
pub fn without_last_updated(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with("last_updated:"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `git -C dir args…`, checked: its standard output.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Fixture {
    /// Makes the project a git repository on `main` with everything in one commit.
    pub fn git_init(&self) {
        git(&self.project, &["init", "-q", "-b", "main"]);
        self.commit_all("init");
    }

    /// Commits everything in the project as a test author.
    pub fn commit_all(&self, message: &str) {
        git(&self.project, &["add", "-A"]);
        git(
            &self.project,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-q",
                "-m",
                message,
            ],
        );
    }
}
