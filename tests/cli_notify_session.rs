//! A lifecycle session's webhooks through the real binary: a step's question sends
//! `session.waiting` with the command that answers it, which works as printed; the session
//! completing sends `session.done`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::notify_support;
use crate::ralph_support;
use crate::session_player;

use notify_support::{Mode, check_signed, receiver};
use ralph_support::Fx;
use session_player::{Player, Scenario};
use std::path::Path;
use std::process::{Command, Stdio};

const INTENT: &str = "add a header row to the csvsum output";
const SECRET: &str = "session secret";

fn csvsum() -> Fx {
    let fx = Fx::bare();
    std::fs::remove_dir_all(&fx.project).unwrap();
    baton_testkit::copy_dir(
        &baton_testkit::repo().join("examples/projects/csvsum"),
        &fx.project,
    );
    fx.file(
        ".workflow/scratch/verification.json",
        r#"{"status":"passed","gaps":[]}"#,
    );
    fx.file(
        ".workflow/scratch/review.json",
        r#"{"status":"approved","findings":[]}"#,
    );
    fx.file(".workflow/scratch/uat.md", "# UAT\n\nAll scenarios pass.\n");
    fx.file(
        ".workflow/scratch/report.json",
        r#"{"status":"passed","failures":[]}"#,
    );
    fx
}

/// `cmd` with the played model, the store and the secret of the test.
fn env<'c>(cmd: &'c mut Command, fx: &Fx, player: &Player) -> &'c mut Command {
    cmd.env("HOME", &fx.home)
        .env("BATON_HOME", fx.tmp.path().join("baton-home"))
        .env_remove("MAESTRO_HOME")
        .env("OPENAI_BASE_URL", player.base_url())
        .env("BATON_MODEL", "played")
        .env("OPENAI_API_KEY", "sk-test")
        .env("HOOK_SECRET", SECRET)
        .stdin(Stdio::null())
}

#[test]
fn a_waiting_session_sends_its_question_and_answer_command_then_done() {
    let endpoint = receiver(Mode::RefuseFirst(0));
    let fx = csvsum();
    let player = Player::start(Scenario {
        questions: vec![(
            "maestro-plan".into(),
            "Should the header row be optional?".into(),
        )],
        evidence: vec![
            (
                "maestro-verify".into(),
                ".workflow/scratch/verification.json".into(),
            ),
            (
                "quality-review".into(),
                ".workflow/scratch/review.json".into(),
            ),
            ("quality-test".into(), ".workflow/scratch/uat.md".into()),
            (
                "quality-auto-test".into(),
                ".workflow/scratch/report.json".into(),
            ),
        ],
        ..Scenario::default()
    });
    std::fs::write(
        fx.project.join("baton.toml"),
        format!(
            "[[notify.webhooks]]\nurl = \"{}\"\nsecret_env = \"HOOK_SECRET\"\ninclude_path = true\nevents = [\"session.waiting\", \"session.done\"]\n",
            endpoint.url
        ),
    )
    .unwrap();
    let start = env(
        Command::new(env!("CARGO_BIN_EXE_baton"))
            .args(["session", "start", INTENT, "-y", "--json"]),
        &fx,
        &player,
    )
    .current_dir(&fx.project)
    .output()
    .unwrap();
    assert_eq!(
        start.status.code(),
        Some(10),
        "{}",
        String::from_utf8_lossy(&start.stderr)
    );
    let mut all = Vec::new();
    let first = endpoint.accepted(1, &mut all);
    let w = &first[0];
    assert_eq!(w["event"], "session.waiting", "{w:#}");
    assert_eq!(w["question"]["text"], "Should the header row be optional?");
    let id = w["session"].as_str().unwrap().to_string();
    let command = w["answer"]["command"].as_str().unwrap();
    assert!(
        command.starts_with("baton session answer '<your answer>' --session "),
        "{command}"
    );

    // Run as printed, from elsewhere: the command names the project.
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_baton")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let answered = env(
        Command::new("sh").args(["-c", &command.replace("<your answer>", "no, always on")]),
        &fx,
        &player,
    )
    .current_dir(fx.tmp.path())
    .env("PATH", path)
    .output()
    .unwrap();
    assert_eq!(
        answered.status.code(),
        Some(0),
        "{command}\n{}",
        String::from_utf8_lossy(&answered.stderr)
    );
    let events = endpoint.accepted(2, &mut all);
    assert_eq!(events[1]["event"], "session.done", "{:#}", events[1]);
    assert_eq!(events[1]["session"], id.as_str());
    assert_eq!(all.len(), 2, "only the events asked for");
    check_signed(&all, SECRET);
}
