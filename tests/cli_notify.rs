//! Webhooks end to end: a real `baton epic` with the played model, a loopback HTTP receiver as
//! the endpoint. The receiver gets the epic's events in order, signed; the question's `answer`
//! command works as printed; a receiver refusing the first tries still gets each event once; a
//! receiver that never answers slows the epic by at most one delivery timeout.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;
use crate::notify_support;
use crate::player;

use common::{Baton, Run, repo};
use notify_support::{Mode, Request, receiver};
use player::{Player, Scenario};
use serde_json::Value;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const SECRET: &str = "a shared secret";

fn sample(into: &Path, hook: &str) -> PathBuf {
    let project = into.join("project");
    baton_testkit::copy_dir(&repo().join("examples/projects/taskboard-epic"), &project);
    std::fs::write(project.join("baton.toml"), hook).unwrap();
    project
}

fn hook(url: &str, extra: &str) -> String {
    format!(
        "[[notify.webhooks]]\nurl = \"{url}\"\nsecret_env = \"HOOK_SECRET\"\ninclude_path = true\nbackoff_ms = 50\n{extra}\n"
    )
}

/// `baton ARGS` with the played model and the webhook's secret in the environment.
fn baton(baton: &Baton, player: &Player, args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(args)
        .env("BATON_HOME", baton.home.path())
        .env("OPENAI_BASE_URL", player.base_url())
        .env("BATON_MODEL", "played")
        .env("OPENAI_API_KEY", "sk-test")
        .env("HOOK_SECRET", SECRET)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn names(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e["story"].as_str() {
            Some(s) => format!("{} {s}", e["event"].as_str().unwrap()),
            None => e["event"].as_str().unwrap().to_string(),
        })
        .collect()
}

fn check_signed(all: &[Request]) {
    notify_support::check_signed(all, SECRET);
}

#[test]
fn an_epic_with_a_question_tells_the_receiver_everything_in_order_signed() {
    let endpoint = receiver(Mode::RefuseFirst(0));
    let b = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample(tmp.path(), &hook(&endpoint.url, ""));
    let p = project.to_str().unwrap();
    let player = Player::start(
        &project,
        Scenario {
            questions: vec![(
                "2-1-create-board".into(),
                "validate".into(),
                1,
                "Kanban or list?".into(),
            )],
            ..Default::default()
        },
    );
    let run = baton(&b, &player, &["epic", "run", "2", "-p", p, "--json"]);
    assert_eq!(run.code, 10, "{}{}", run.stdout, run.stderr);
    let mut all = Vec::new();
    let first = endpoint.accepted(1, &mut all);
    assert_eq!(names(&first), ["question 2-1-create-board"]);
    let q = &first[0];
    assert_eq!(q["question"]["text"], "Kanban or list?");
    assert_eq!(q["question"]["id"], "q1");
    assert_eq!(q["project"]["name"], "project");
    assert_eq!(q["epic"], "epic-2");

    // The answer command, run as printed (the answer in place of its placeholder).
    let command = q["answer"]["command"].as_str().unwrap();
    assert!(command.contains("'<your answer>'"), "{command}");
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_baton")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let answered = Command::new("sh")
        .args(["-c", &command.replace("<your answer>", "Kanban")])
        .current_dir(tmp.path())
        .env("PATH", path)
        .env("BATON_HOME", b.home.path())
        .env("OPENAI_BASE_URL", player.base_url())
        .env("BATON_MODEL", "played")
        .env("OPENAI_API_KEY", "sk-test")
        .env("HOOK_SECRET", SECRET)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        answered.status.code(),
        Some(0),
        "{command}\n{}",
        String::from_utf8_lossy(&answered.stderr)
    );

    let events = endpoint.accepted(7, &mut all);
    assert_eq!(
        names(&events),
        [
            "question 2-1-create-board",
            "answered 2-1-create-board",
            "story.approved 2-1-create-board",
            "story.done 2-1-create-board",
            "story.approved 2-2-move-task",
            "story.done 2-2-move-task",
            "epic.done",
        ]
    );
    assert_eq!(events[1]["question"]["id"], "q1");
    assert_eq!(events[1]["summary"], "Kanban");
    check_signed(&all);
    assert_eq!(all.len(), 7, "no request but these");

    // The log says the same.
    let log = b.played(&player.base_url(), &["notify", "log", "--json"]);
    let entries = log.json();
    let delivered: Vec<&str> = entries
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["outcome"] == "delivered")
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(delivered.len(), 7, "{entries:#}");
    assert!(!log.stdout.contains("/hook"), "{}", log.stdout);
}

#[test]
fn a_receiver_refusing_the_first_three_tries_gets_each_event_once() {
    let endpoint = receiver(Mode::RefuseFirst(3));
    let b = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample(tmp.path(), &hook(&endpoint.url, ""));
    let p = project.to_str().unwrap();
    let player = Player::start(&project, Scenario::default());
    let run = baton(&b, &player, &["epic", "run", "2", "-p", p, "--json"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let mut all = Vec::new();
    let events = endpoint.accepted(5, &mut all);
    assert_eq!(
        names(&events),
        [
            "story.approved 2-1-create-board",
            "story.done 2-1-create-board",
            "story.approved 2-2-move-task",
            "story.done 2-2-move-task",
            "epic.done",
        ]
    );
    // The first event took four tries (the same delivery id each time), the others one.
    assert_eq!(all.len(), 8);
    let ids: Vec<&str> = all
        .iter()
        .map(|r| r.headers["x-baton-delivery"].as_str())
        .collect();
    assert!(ids[..4].iter().all(|i| *i == ids[0]), "{ids:?}");
    check_signed(&all);
    let log = b.played(&player.base_url(), &["notify", "log"]);
    assert_eq!(log.stdout.matches("retry").count(), 3, "{}", log.stdout);
    assert_eq!(log.stdout.matches("delivered").count(), 5, "{}", log.stdout);
}

#[test]
fn a_receiver_that_never_answers_slows_the_epic_by_one_timeout_at_most() {
    const TIMEOUT: Duration = Duration::from_millis(1500);
    let timed = |hook_text: &str| -> (Duration, Baton) {
        let b = Baton::new();
        let tmp = tempfile::tempdir().unwrap();
        let project = sample(tmp.path(), hook_text);
        let p = project.to_str().unwrap();
        let player = Player::start(&project, Scenario::default());
        let started = Instant::now();
        let run = baton(&b, &player, &["epic", "run", "2", "-p", p, "--json"]);
        let took = started.elapsed();
        assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
        assert_eq!(run.json()["epicDone"], true);
        (took, b)
    };
    let (baseline, _) = timed("");
    let endpoint = receiver(Mode::Hang);
    let (hung, b) = timed(&hook(
        &endpoint.url,
        &format!("timeout_ms = {}", TIMEOUT.as_millis()),
    ));
    // Each event waits its turn behind the first one's timed-out tries: five of them would
    // take far more than one timeout if delivery held the epic.
    let bound = baseline + TIMEOUT + Duration::from_secs(4).max(baseline / 2);
    assert!(
        hung <= bound,
        "hung receiver: {hung:?}, no webhook: {baseline:?}, bound {bound:?}"
    );
    // The receiver was tried, and what was left when the grace period ended is logged.
    let first = endpoint.got.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(first.headers["x-baton-event"], "story.approved");
    let log = baton_notify::log::read(b.home.path()).unwrap();
    assert!(
        log.iter()
            .any(|e| e.outcome == baton_notify::log::Outcome::Abandoned && e.event == "epic.done"),
        "{log:#?}"
    );
}

#[test]
fn notify_test_sends_a_sample_to_every_webhook_and_says_how_each_went() {
    let endpoint = receiver(Mode::RefuseFirst(0));
    // A port nobody listens on: bound then released.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let b = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let project = sample(
        tmp.path(),
        &format!(
            "{}[[notify.webhooks]]\nurl = \"http://{closed}/x?token=hidden\"\nformat = \"slack\"\n",
            hook(&endpoint.url, "events = [\"epic.done\"]")
        ),
    );
    let p = project.to_str().unwrap();
    let player = Player::start(&project, Scenario::default());
    let run = baton(&b, &player, &["notify", "test", "-p", p, "--json"]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let out = run.json();
    assert_eq!(out["delivered"], false);
    let results = out["results"].as_array().unwrap();
    assert_eq!(results[0]["outcome"], "delivered");
    assert_eq!(results[1]["outcome"], "failed");
    assert!(!run.stdout.contains("token=hidden"), "{}", run.stdout);
    // Sent whatever events the webhook asks for, signed like any other.
    let mut all = Vec::new();
    let got = endpoint.accepted(1, &mut all);
    assert_eq!(got[0]["event"], "question");
    check_signed(&all);

    // No webhook: said with a code and a hint.
    std::fs::remove_file(project.join("baton.toml")).unwrap();
    let none = baton(&b, &player, &["notify", "test", "-p", p, "--json"]);
    assert_eq!(none.code, 2);
    assert_eq!(none.json()["error"]["code"], "NOTIFY_NO_WEBHOOK");
    // A broken configuration is refused before an epic starts.
    std::fs::write(
        project.join("baton.toml"),
        "[[notify.webhooks]]\nurl = \"http://127.0.0.1:9/\"\nevents = [\"story.merged\"]\n",
    )
    .unwrap();
    let refused = baton(&b, &player, &["epic", "run", "2", "-p", p, "--json"]);
    assert_eq!(refused.code, 2, "{}{}", refused.stdout, refused.stderr);
    assert_eq!(refused.json()["error"]["code"], "NOTIFY_EVENT_UNKNOWN");
    assert!(player.served().is_empty());
}
