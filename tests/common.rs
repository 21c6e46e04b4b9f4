//! Helpers shared by the end-to-end tests that drive the real `baton` binary.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

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

impl Baton {
    /// `baton ARGS` with the played model at `base_url` as the configured model (and a dummy
    /// key), stdin closed.
    pub fn played(&self, base_url: &str, args: &[&str]) -> Run {
        self.played_with(base_url, args, &[])
    }

    /// [`Baton::played`] with more environment variables.
    pub fn played_with(&self, base_url: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
        let out: Output = Command::new(env!("CARGO_BIN_EXE_baton"))
            .args(args)
            .env("BATON_HOME", self.home.path())
            .env("OPENAI_BASE_URL", base_url)
            .env("BATON_MODEL", "played")
            .env("OPENAI_API_KEY", "sk-test")
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null())
            .output()
            .expect("baton runs");
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// `git -C dir ARGS`, which must succeed; its stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every file under `root` with its bytes (to show a command left a project as it was).
pub fn files(root: &Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    walk(root)
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
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

/// A terminal for one test: its own tmux server (socket), one window named `target`. Tests
/// skip, saying so, when [`tmux_missing`].
pub struct Tmux {
    pub socket: String,
    pub target: String,
}

/// Whether tmux is absent (the terminal tests are then skipped).
pub fn tmux_missing() -> bool {
    Command::new("tmux").arg("-V").output().is_err()
}

impl Tmux {
    pub fn cmd(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap()
    }

    /// Runs `script` in a new detached window of `width` x `height`.
    pub fn run(&self, width: u16, height: u16, script: &str) {
        let (w, h) = (width.to_string(), height.to_string());
        let started = self.cmd(&[
            "new-session",
            "-d",
            "-s",
            &self.target,
            "-x",
            &w,
            "-y",
            &h,
            script,
        ]);
        assert!(started.status.success(), "{started:?}");
    }

    pub fn screen(&self) -> String {
        let out = self.cmd(&["capture-pane", "-p", "-J", "-S", "-300", "-t", &self.target]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits (60 s at most: a loaded 2-core machine) until the screen shows `what`; returns
    /// the screen.
    pub fn wait_for(&self, what: &str) -> String {
        let start = std::time::Instant::now();
        loop {
            let screen = self.screen();
            if screen.contains(what) {
                return screen;
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(60),
                "waited for {what:?}; the screen shows:\n{screen}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// Waits (60 s at most) until the screen is no longer `before` (a line typed was echoed
    /// or answered); returns the screen. A prompt still on the screen after typing is then
    /// never answered twice.
    pub fn wait_for_change(&self, before: &str) -> String {
        let start = std::time::Instant::now();
        loop {
            let screen = self.screen();
            if screen != before {
                return screen;
            }
            assert!(
                start.elapsed() < std::time::Duration::from_secs(60),
                "the screen did not change; it shows:\n{screen}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    pub fn type_line(&self, text: &str) {
        assert!(
            self.cmd(&["send-keys", "-t", &self.target, "-l", text])
                .status
                .success()
        );
        assert!(
            self.cmd(&["send-keys", "-t", &self.target, "Enter"])
                .status
                .success()
        );
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        // Only the server of this test's own socket.
        let _ = self.cmd(&["kill-server"]);
    }
}

/// A played Claude model's answer that calls tool `name` with `input`.
pub fn claude_call(id: &str, name: &str, input: serde_json::Value) -> serde_json::Value {
    baton_llm::testing::anthropic::message(None, "", &[(id.to_string(), name.to_string(), input)])
}

/// The played Anthropic API's address as Claude Code takes it (no `/v1`).
pub fn claude_origin(upstream: &baton_llm::testing::anthropic::AnthropicServer) -> String {
    upstream.base_url().trim_end_matches("/v1").to_string()
}

/// Every request reached the played Anthropic API, and was answered, with the operator's `key`.
pub fn assert_all_keyed(exchanges: &[baton_llm::testing::anthropic::Exchange], key: &str) {
    for e in exchanges {
        assert_eq!(e.status, 200, "{e:#?}");
        assert_eq!(e.header("x-api-key"), Some(key));
    }
}

/// What Claude Code's shell printed of its environment (as it reached the model) holds the
/// run's token as its key, never the operator's `key`.
pub fn assert_claude_env_holds_the_token_only(env_output: &str, key: &str) {
    assert!(
        env_output.contains("ANTHROPIC_API_KEY=baton-run-"),
        "{env_output}"
    );
    assert!(!env_output.contains(key), "the real key reached the CLI");
}

/// Whether this system cannot give a CLI a private network (not root), saying the test is
/// skipped: a confinement test would see the CLI run unconfined.
pub fn no_private_network() -> bool {
    let missing = baton_sandbox::PrivateNetwork::new().is_err();
    if missing {
        eprintln!("no private network here (not root): the CLI would run unconfined; skipped");
    }
    missing
}
