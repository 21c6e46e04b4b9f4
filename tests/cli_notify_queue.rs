//! Webhooks of a queued epic (`baton epic run --queue`): the workers announce their units' ends
//! (`question`, `story.approved`, with the unit), the orchestrator the epic's (`answered`,
//! `story.done`, `epic.done`): each event reaches the loopback receiver once, signed. A real
//! throwaway PostgreSQL, a bare repository as the project's remote, the played model. Skips
//! without PostgreSQL unless BATON_REQUIRE_POSTGRES is set.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;
use crate::notify_support;
use crate::player;

use baton_testkit::git::git;
use baton_testkit::pg::postgres_or_skip;
use common::repo;
use notify_support::{Mode, check_signed, receiver};
use player::{Player, Scenario};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

const IMPL: &str = "_bmad-output/implementation-artifacts";
const SECRET: &str = "queue secret";

fn baton(home: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
    cmd.env("BATON_HOME", home)
        .env("NO_COLOR", "1")
        .env("OPENAI_API_KEY", "sk-notify-queue-test")
        .env("HOOK_SECRET", SECRET)
        .env_remove("PGPASSWORD")
        .env_remove("PGPASSFILE")
        .env_remove("BATON_MODEL")
        .env_remove("OPENAI_BASE_URL")
        .stdin(Stdio::null());
    cmd
}

fn epic(home: &Path, player: &Player, args: &[&str]) -> Output {
    baton(home)
        .args(args)
        .env("OPENAI_BASE_URL", player.base_url())
        .env("BATON_MODEL", "played")
        .output()
        .unwrap()
}

fn output(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The sample project (three stories in epic 1) with the webhook in its committed baton.toml
/// (the workers read it from the unit's commit), pushed to a bare remote `remote.git`.
fn sample(into: &Path, hook_url: &str) -> PathBuf {
    let project = into.join("project");
    baton_testkit::copy_dir(&repo().join("examples/projects/taskboard-epic"), &project);
    std::fs::write(
        project.join("baton.toml"),
        format!(
            "[autopilot.git]\ncommit = true\n\n[[notify.webhooks]]\nurl = \"{hook_url}\"\nsecret_env = \"HOOK_SECRET\"\nbackoff_ms = 50\n"
        ),
    )
    .unwrap();
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "init"]);
    let bare = into.join("remote.git");
    git(into, &["init", "-q", "--bare", bare.to_str().unwrap()]);
    git(
        &project,
        &["remote", "add", "origin", bare.to_str().unwrap()],
    );
    git(&project, &["push", "-q", "origin", "main"]);
    project
}

struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for w in &mut self.0 {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

#[test]
fn a_queued_epics_events_come_once_each_from_the_workers_and_the_orchestrator() {
    let Some(pg) = postgres_or_skip("a_queued_epics_events_come_once_each") else {
        return;
    };
    let endpoint = receiver(Mode::RefuseFirst(0));
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let url = pg.socket_url("postgres");
    let init = baton(&root.join("init-home"))
        .args(["queue", "init", "--db", &url])
        .output()
        .unwrap();
    assert!(init.status.success(), "{}", output(&init));
    let project = sample(root, &endpoint.url);
    let p = project.to_str().unwrap();
    let a = "1-1-project-scaffold";
    let question = "Which port does the API listen on?";
    let player = Player::start(
        &project,
        Scenario {
            questions: vec![(a.into(), "dev".into(), 1, question.into())],
            ..Scenario::default()
        },
    );
    let _workers = Workers(
        (0..2)
            .map(|i| {
                let home = root.join(format!("worker-{i}"));
                let log = std::fs::File::create(home.with_extension("log")).unwrap();
                baton(&home)
                    .args(["worker", "--db", &url, "--lease-s", "30"])
                    .stdout(Stdio::null())
                    .stderr(log)
                    .spawn()
                    .unwrap()
            })
            .collect(),
    );
    let home = root.join("orchestrator-home");
    let run = epic(
        &home,
        &player,
        &[
            "epic",
            "run",
            "epic-1",
            "-p",
            p,
            "--queue",
            &url,
            "--parallel",
            "3",
            "--non-interactive",
        ],
    );
    assert_eq!(run.status.code(), Some(10), "{}", output(&run));
    let answered = epic(
        &home,
        &player,
        &[
            "epic",
            "answer",
            a,
            "port 8080",
            "-p",
            p,
            "--non-interactive",
        ],
    );
    assert_eq!(answered.status.code(), Some(0), "{}", output(&answered));
    let sprint = std::fs::read_to_string(project.join(IMPL).join("sprint-status.yaml")).unwrap();
    assert!(sprint.contains("  epic-1: done"), "{sprint}");

    // question 1, answered 1, story.approved 3, story.done 3, epic.done 1.
    let mut all = Vec::new();
    let events = endpoint.accepted(9, &mut all);
    let mut by_kind: BTreeMap<String, Vec<&serde_json::Value>> = BTreeMap::new();
    for e in &events {
        by_kind
            .entry(e["event"].as_str().unwrap().to_string())
            .or_default()
            .push(e);
    }
    let counts: BTreeMap<&str, usize> =
        by_kind.iter().map(|(k, v)| (k.as_str(), v.len())).collect();
    assert_eq!(
        counts,
        BTreeMap::from([
            ("answered", 1),
            ("epic.done", 1),
            ("question", 1),
            ("story.approved", 3),
            ("story.done", 3),
        ]),
        "{events:#?}"
    );
    let ids: BTreeSet<&str> = events
        .iter()
        .map(|e| e["delivery"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), events.len(), "each delivery once");
    // The workers' events name their unit and the project by its repository.
    let q = by_kind["question"][0];
    assert_eq!(q["story"], a);
    assert_eq!(q["question"]["text"], question);
    assert!(q["unit"].as_str().unwrap().parse::<i64>().is_ok(), "{q:#}");
    assert_eq!(q["project"]["name"], "remote");
    let approved: BTreeSet<&str> = by_kind["story.approved"]
        .iter()
        .map(|e| {
            assert!(!e["unit"].is_null(), "{e:#}");
            e["story"].as_str().unwrap()
        })
        .collect();
    assert_eq!(approved.len(), 3);
    // The orchestrator's events name the project by its folder.
    assert!(
        by_kind["story.done"]
            .iter()
            .all(|e| e["unit"].is_null() && e["project"]["name"] == "project")
    );
    check_signed(&all, SECRET);
}
