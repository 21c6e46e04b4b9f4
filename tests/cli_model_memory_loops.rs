//! The orchestrators remember their model too: `baton epic answer` and `baton session answer`
//! go on with the model name and endpoint the epic or the session was started with (what their
//! newest run remembers), with only the key in the environment; `--model` still overrides.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::player;
use crate::session_player;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}{}", self.stdout, self.stderr))
    }
}

/// `baton` with its own store, a key, and `OPENAI_BASE_URL` only when given.
fn baton(home: &Path, cwd: &Path, base_url: Option<&str>, args: &[&str]) -> Out {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
    cmd.args(args)
        .current_dir(cwd)
        .env("BATON_HOME", home.join("baton-home"))
        .env("HOME", home.join("home"))
        .env("OPENAI_API_KEY", "sk-test")
        .env_remove("BATON_MODEL")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("MAESTRO_HOME")
        .stdin(Stdio::null());
    if let Some(url) = base_url {
        cmd.env("OPENAI_BASE_URL", url);
    }
    let o = cmd.output().expect("baton runs");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn epic_project(into: &Path) -> PathBuf {
    let project = into.join("project");
    baton_testkit::copy_dir(
        &baton_testkit::repo().join("examples/projects/taskboard-epic"),
        &project,
    );
    std::fs::create_dir_all(into.join("home")).unwrap();
    project
}

#[test]
fn epic_answer_goes_on_with_the_model_the_epic_was_run_with() {
    let tmp = tempfile::tempdir().unwrap();
    let project = epic_project(tmp.path());
    let p = project.to_str().unwrap();
    let played = player::Player::start(
        &project,
        player::Scenario {
            questions: vec![(
                "2-1-create-board".into(),
                "validate".into(),
                1,
                "Kanban or list?".into(),
            )],
            ..Default::default()
        },
    );
    let url = played.base_url();
    let run = baton(
        tmp.path(),
        tmp.path(),
        Some(&url),
        &["epic", "run", "2", "-p", p, "--model", "model-e", "--json"],
    );
    assert_eq!(run.code, 10, "{}{}", run.stdout, run.stderr);
    let asked = played.models().len();

    // Only the key: the model and the endpoint are the epic's.
    let answer = baton(
        tmp.path(),
        tmp.path(),
        None,
        &[
            "epic",
            "answer",
            "2-1-create-board",
            "Kanban",
            "-p",
            p,
            "--json",
        ],
    );
    assert_eq!(answer.code, 0, "{}{}", answer.stdout, answer.stderr);
    assert_eq!(answer.json()["epicDone"], true);
    let models = played.models();
    assert!(models.len() > asked);
    assert!(models.iter().all(|m| m == "model-e"), "{models:?}");
}

const INTENT: &str = "add a header row to the csvsum output";

#[test]
fn session_answer_goes_on_with_the_model_the_session_was_started_with() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    baton_testkit::copy_dir(
        &baton_testkit::repo().join("examples/projects/csvsum"),
        &project,
    );
    std::fs::create_dir_all(tmp.path().join("home")).unwrap();
    let scratch = project.join(".workflow/scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    // The evidence each quality gate reads (a gate without it settles proceed as fix).
    for (file, text) in [
        ("verification.json", r#"{"status":"passed","gaps":[]}"#),
        ("review.json", r#"{"verdict":"approved"}"#),
        ("test-results.json", r#"{"passed":3,"failed":0}"#),
    ] {
        std::fs::write(scratch.join(file), text).unwrap();
    }
    let played = session_player::Player::start(session_player::Scenario {
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
            (
                "quality-test".into(),
                ".workflow/scratch/test-results.json".into(),
            ),
            (
                "quality-auto-test".into(),
                ".workflow/scratch/test-results.json".into(),
            ),
        ],
        ..Default::default()
    });
    let url = played.base_url();
    let start = baton(
        tmp.path(),
        &project,
        Some(&url),
        &[
            "session", "start", INTENT, "-y", "--model", "model-s", "--json",
        ],
    );
    assert_eq!(start.code, 10, "{}{}", start.stdout, start.stderr);
    let asked = played.models().len();

    let answered = baton(
        tmp.path(),
        &project,
        None,
        &["session", "answer", "no, always on", "--json"],
    );
    assert_eq!(answered.code, 0, "{}{}", answered.stdout, answered.stderr);
    assert_eq!(answered.json()["outcome"], "completed");
    let models = played.models();
    assert!(models.len() > asked);
    assert!(models[asked..].iter().all(|m| m == "model-s"), "{models:?}");
}
