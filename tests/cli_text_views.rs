//! What a newcomer reads in the terminal, through the real binary: a failed run's error as
//! code, message and hint with the command that goes on (never raw JSON); the first demo's
//! expected missing file said as expected, not as a red failure; a session chain's
//! late-bound arguments in words; `--color` after each command's own options in `--help`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::ralph_support;
use crate::session_player;

use ralph_support::{Fx, Out};
use session_player::{Player, Scenario};
use std::path::Path;
use std::process::{Command, Stdio};

fn baton(home: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
    cmd.env("BATON_HOME", home)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("BATON_MODEL")
        .env_remove("NO_COLOR")
        .stdin(Stdio::null());
    cmd
}

fn out(cmd: &mut Command) -> Out {
    let o = cmd.output().expect("baton runs");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// A port nothing listens on: bound, then closed.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[test]
fn runs_show_of_a_failed_run_prints_code_message_hint_and_the_retry() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let port = closed_port();
    let run = out(baton(&tmp.path().join("home"))
        .args(["run"])
        .arg(baton_testkit::repo().join("examples/packages/create-story-micro"))
        .args(["--project"])
        .arg(&project)
        .args(["--non-interactive", "--json", "--model", "m", "--base-url"])
        .arg(format!("http://127.0.0.1:{port}/v1"))
        .env("OPENAI_API_KEY", "sk-test"));
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let id = run.json()["runId"].as_str().unwrap().to_string();
    let show = out(baton(&tmp.path().join("home")).args(["runs", "show", &id]));
    assert_eq!(show.code, 0, "{}", show.stderr);
    let text = &show.stdout;
    assert!(!text.contains("{\""), "raw JSON in runs show:\n{text}");
    let line = |label: &str| {
        text.lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no `{label}` line:\n{text}"))
            .to_string()
    };
    assert!(line("error ").contains("LLM_CONNECT_ERROR: "), "{text}");
    assert!(
        line("hint ").contains("the model was never reached"),
        "{text}"
    );
    assert_eq!(
        line("next "),
        format!(
            "next      the run is kept; retry with: baton resume {}",
            &id[..13]
        )
    );
}

#[test]
fn the_first_demo_says_the_missing_sprint_status_is_expected() {
    let tmp = tempfile::tempdir().unwrap();
    let demo = out(baton(&tmp.path().join("home"))
        .args(["--color", "always", "demo", "--dir"])
        .arg(tmp.path().join("demo")));
    assert_eq!(demo.code, 0, "{}", demo.stderr);
    let missing = demo
        .stderr
        .lines()
        .find(|l| l.contains("sprint-status.yaml"))
        .unwrap_or_else(|| panic!("the read of the sprint status:\n{}", demo.stderr));
    assert!(
        !missing.contains('✗') && !missing.contains("ENOENT") && !missing.contains('\x1b'),
        "{missing:?}"
    );
    assert!(missing.contains("expected"), "{missing}");
    assert!(!demo.stderr.contains('✗'), "{}", demo.stderr);
}

#[test]
fn a_chain_says_late_bound_arguments_in_words() {
    let fx = Fx::bare();
    let player = Player::start(Scenario::default());
    let start = out(Command::new(env!("CARGO_BIN_EXE_baton"))
        .args([
            "session",
            "start",
            "build a csv summing tool",
            "--non-interactive",
        ])
        .current_dir(&fx.project)
        .env("HOME", &fx.home)
        .env("BATON_HOME", fx.tmp.path().join("baton-home"))
        .env_remove("MAESTRO_HOME")
        .env("OPENAI_BASE_URL", player.base_url())
        .env("BATON_MODEL", "played")
        .env("OPENAI_API_KEY", "sk-test")
        .stdin(Stdio::null()));
    let all = format!("{}{}", start.stdout, start.stderr);
    println!("{all}");
    assert!(!all.contains("{phase}"), "{all}");
    assert!(all.contains("<the phase the roadmap picks>"), "{all}");
}

#[test]
fn color_comes_after_each_commands_own_options() {
    let tmp = tempfile::tempdir().unwrap();
    for command in [
        &["resume", "--help"][..],
        &["run", "--help"],
        &["answer", "--help"],
        &["epic", "run", "--help"],
        &["session", "start", "--help"],
    ] {
        let help = out(baton(tmp.path()).args(command));
        assert_eq!(help.code, 0, "{}", help.stderr);
        let options: Vec<&str> = help
            .stdout
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("--"))
            .filter_map(|l| l.split([' ', '<', '=']).next())
            .filter(|o| *o != "help")
            .collect();
        assert_eq!(options.last(), Some(&"color"), "{command:?}: {options:?}");
        if command[0] == "resume" {
            let at = options.iter().position(|o| *o == "budget-tokens").unwrap();
            assert_eq!(options[at + 1], "budget-usd", "{options:?}");
        }
    }
}
