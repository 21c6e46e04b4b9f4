//! The runner around a scripted stand-in for a CLI (a shell script speaking Claude Code's
//! stream-json): what it is given, how its output is bounded, and that its end is the run's
//! end. Runs everywhere (no real CLI needed).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_executor::claude_code::ClaudeCode;
use baton_executor::{
    Adapter, Event, ExecutorKind, Invocation, Job, Launch, Mode, Outcome, SandboxPaths, group, run,
};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `sh -c SCRIPT`, read as Claude Code's stream.
struct Script(String);

impl Adapter for Script {
    fn kind(&self) -> ExecutorKind {
        ExecutorKind::ClaudeCode
    }
    fn launch(&self, inv: &Invocation<'_>) -> Launch {
        Launch {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), OsString::from(&self.0)],
            env: vec![
                ("ANTHROPIC_API_KEY".into(), inv.token.into()),
                ("ANTHROPIC_BASE_URL".into(), inv.gateway.into()),
            ],
            files: vec![(PathBuf::from(".cli/seed.json"), b"{}".to_vec())],
        }
    }
    fn parse_line(&self, line: &str) -> Vec<Event> {
        ClaudeCode.parse_line(line)
    }
}

const RESULT: &str = r#"{"type":"result","subtype":"success","is_error":false,"result":"done"}"#;

async fn run_script(script: &str, root: &Path) -> Outcome {
    let sandbox = SandboxPaths {
        allow_unconfined: true,
        ..SandboxPaths::default()
    };
    run_cli(
        &Script(script.to_string()),
        Path::new("/bin/sh"),
        root,
        sandbox,
    )
    .await
}

/// Runs `adapter`'s CLI (`program`) in `root/project`, its run folder `root/run`.
async fn run_cli(
    adapter: &dyn Adapter,
    program: &Path,
    root: &Path,
    sandbox: SandboxPaths,
) -> Outcome {
    let workdir = root.join("project");
    std::fs::create_dir_all(&workdir).unwrap();
    let job = Job {
        adapter,
        program,
        workdir: &workdir,
        run_dir: &root.join("run"),
        model: "m",
        prompt: "p",
        resume: None,
        extra_args: &[],
        mode: Mode::Live {
            upstream: "http://127.0.0.1:9".into(),
            api_key: "sk-operator-secret".into(),
        },
        meter: None,
        max_output_tokens: None,
        sandbox,
    };
    // A bound on a hang, not a wait: every run here ends in well under a second.
    tokio::time::timeout(Duration::from_secs(120), run(job, &mut |_| {}))
        .await
        .expect("the run hung")
        .unwrap()
}

/// The CLI starts from an empty environment plus `PATH`, `HOME`, `TMPDIR`, `LANG` and its
/// adapter's variables (the token, never the operator's key), with stdin at end of file and
/// its home seeded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_gets_only_its_own_environment_and_an_empty_stdin() {
    let root = tempfile::tempdir().unwrap();
    let outcome = run_script(
        &format!(
            "env > \"$HOME/env.txt\"; cat > \"$HOME/stdin.txt\"; pwd > \"$HOME/pwd.txt\"; echo '{RESULT}'"
        ),
        root.path(),
    )
    .await;
    assert_eq!(outcome.exit_code, Some(0));
    let home = root.path().join("run/home");
    let env = std::fs::read_to_string(home.join("env.txt")).unwrap();
    let mut names: Vec<&str> = env
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        // What the shell itself sets.
        .filter(|k| !["PWD", "SHLVL", "_", "OLDPWD"].contains(k))
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
            "HOME",
            "LANG",
            "PATH",
            "TMPDIR"
        ],
        "{env}"
    );
    assert!(!env.contains("sk-operator-secret"), "{env}");
    assert!(env.contains(&format!("HOME={}\n", home.display())), "{env}");
    assert!(
        env.contains(&format!("TMPDIR={}\n", home.join("tmp").display())),
        "{env}"
    );
    assert!(env.contains("ANTHROPIC_API_KEY=baton-"), "{env}");
    assert_eq!(std::fs::read_to_string(home.join("stdin.txt")).unwrap(), "");
    assert_eq!(
        std::fs::read_to_string(home.join("pwd.txt"))
            .unwrap()
            .trim(),
        root.path()
            .join("project")
            .canonicalize()
            .unwrap()
            .to_str()
            .unwrap()
    );
    assert_eq!(std::fs::read(home.join(".cli/seed.json")).unwrap(), b"{}");
}

/// A CLI that ends while a job it started still holds its stdout open: the run ends with the
/// CLI, and the job with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_s_end_is_the_run_s_end_even_when_its_job_holds_the_pipe() {
    let root = tempfile::tempdir().unwrap();
    let outcome = run_script(
        &format!(
            "echo '{{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"'$$'\"}}'; \
             tail -f /dev/null & echo '{RESULT}'; exit 3"
        ),
        root.path(),
    )
    .await;
    assert_eq!(outcome.exit_code, Some(3));
    assert_eq!(
        outcome.result,
        Some(Event::Result {
            text: "done".into(),
            is_error: false
        })
    );
    let pgid: u32 = outcome.session.unwrap().parse().unwrap();
    assert_eq!(group::members(pgid), Vec::<u32>::new());
}

/// A line longer than the cap is skipped (the rest still read); stderr is kept up to its cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_is_bounded() {
    let root = tempfile::tempdir().unwrap();
    let outcome = run_script(
        &format!(
            "head -c 9000000 /dev/zero | tr '\\0' x; echo; echo '{RESULT}'; \
             head -c 3000000 /dev/zero >&2"
        ),
        root.path(),
    )
    .await;
    assert_eq!(outcome.exit_code, Some(0));
    assert_eq!(outcome.skipped_lines, 1);
    assert_eq!(outcome.events, 1);
    let transcript = std::fs::read_to_string(root.path().join("run/transcript.jsonl")).unwrap();
    assert_eq!(transcript.lines().count(), 1, "{transcript}");
    let stderr = std::fs::metadata(root.path().join("run/stderr.log")).unwrap();
    assert_eq!(stderr.len(), 1024 * 1024);
}

/// A CLI launched as it is installed: `program` with no arguments.
struct Installed(PathBuf);

impl Adapter for Installed {
    fn kind(&self) -> ExecutorKind {
        ExecutorKind::ClaudeCode
    }
    fn launch(&self, _inv: &Invocation<'_>) -> Launch {
        Launch {
            program: self.0.clone(),
            args: Vec::new(),
            env: Vec::new(),
            files: Vec::new(),
        }
    }
    fn parse_line(&self, line: &str) -> Vec<Event> {
        ClaudeCode.parse_line(line)
    }
}

/// A CLI installed per user (beneath the operator's home, which the CLI may not read) starts
/// and reads its own package, while the rest of that home stays unreadable: the hole
/// `SandboxPaths::operator` opens reaches the sandbox. Where Landlock is missing there is no
/// home to hide, and the test says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cli_installed_beneath_the_hidden_home_starts_and_the_rest_of_the_home_stays_hidden() {
    if baton_sandbox::capabilities().landlock_abi.is_none() {
        eprintln!("no Landlock here: the operator's home cannot be hidden");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let root = root.path().canonicalize().unwrap();
    let operator_home = root.join("operator");
    let package = operator_home.join(".cache/clis/node_modules/some-cli");
    std::fs::create_dir_all(package.join("bin")).unwrap();
    std::fs::write(package.join("data.txt"), "package data\n").unwrap();
    std::fs::write(operator_home.join("secret.txt"), "operator secret\n").unwrap();
    let cli = package.join("bin/cli");
    std::fs::write(
        &cli,
        format!(
            "#!/bin/sh\ncat {data:?} > \"$HOME/package.txt\"\n\
             cat {secret:?} > \"$HOME/secret.txt\" 2>/dev/null\necho '{RESULT}'\n",
            data = package.join("data.txt"),
            secret = operator_home.join("secret.txt"),
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cli, std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = operator_home.join(".cache/clis/node_modules/.bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink("../some-cli/bin/cli", bin.join("cli")).unwrap();

    let program = bin.join("cli");
    let sandbox = SandboxPaths {
        read_denied: vec![operator_home.clone()],
        read_allowed: vec![operator_home.join(".cache/clis/node_modules")],
        allow_unconfined: true,
        ..SandboxPaths::default()
    };
    let outcome = run_cli(&Installed(program.clone()), &program, &root, sandbox).await;
    assert_eq!(outcome.exit_code, Some(0), "{:?}", outcome.confinement);
    assert!(
        outcome
            .confinement
            .iter()
            .any(|(layer, _)| layer == "filesystem"),
        "{:?}",
        outcome.confinement
    );
    let home = root.join("run/home");
    assert_eq!(
        std::fs::read_to_string(home.join("package.txt")).unwrap(),
        "package data\n"
    );
    assert_eq!(
        std::fs::read_to_string(home.join("secret.txt")).unwrap(),
        ""
    );
}
