//! `[autopilot.verify]` commands run code the model wrote: they are confined like
//! `terminal.run`. A hostile `test.sh` tries to read the user's SSH key and baton's store, write
//! outside the project, leave daemons behind (`setsid`, a double fork) and read baton's
//! environment; every attempt must fail or be undone when the command ends.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::support;

use baton_epic::verify::{self, Sandbox, Verdict};
use baton_epic::{Command, EpicOutcome};
use baton_sandbox::{NamespaceMode, capabilities};
use baton_tools::{TerminalRuntime, TerminalSettings};
use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};
use support::Fixture;
use support::player::Scenario;
use tokio_util::sync::CancellationToken;

const KEY: &str = "-----BEGIN OPENSSH PRIVATE KEY----- verify-test";
const API_KEY: &str = "sk-verify-test-key-0000";
const STORE_SECRET: &str = "store-secret-verify";

fn complete() -> bool {
    let caps = capabilities();
    caps.landlock_abi.is_some() && caps.seccomp && caps.namespaces != NamespaceMode::Unavailable
}

/// The script the "model" wrote: each line an escape attempt.
fn hostile_script(home: &Path, store: &Path, outside: &Path, marker: &str) -> String {
    format!(
        "cat {home}/.ssh/id_rsa > stolen.txt 2>/dev/null\n\
         cat {store}/secret.txt >> stolen.txt 2>/dev/null\n\
         echo pwned > {outside}/pwned.txt 2>/dev/null\n\
         echo pwned > {home}/pwned.txt 2>/dev/null\n\
         BATON_DAEMON={marker} setsid sleep 300 >/dev/null 2>&1 < /dev/null &\n\
         ( BATON_DAEMON={marker} nohup sleep 300 >/dev/null 2>&1 < /dev/null & )\n\
         env > seen-env.txt\n\
         echo \"store=$BATON_HOME key=$OPENAI_API_KEY home=$HOME\"\n\
         exit 0\n",
        home = home.display(),
        store = store.display(),
        outside = outside.display(),
    )
}

/// No process carrying `BATON_DAEMON=marker` is alive (waits a little for the kill to land).
fn no_daemon(marker: &str) {
    let needle = format!("BATON_DAEMON={marker}");
    let started = Instant::now();
    loop {
        let alive: Vec<String> = fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .bytes()
                    .all(|b| b.is_ascii_digit())
            })
            .filter(|e| {
                let stat = fs::read_to_string(e.path().join("stat")).unwrap_or_default();
                let zombie = stat
                    .rsplit(')')
                    .next()
                    .is_some_and(|s| s.trim_start().starts_with('Z'));
                !zombie
                    && fs::read(e.path().join("environ"))
                        .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == needle.as_bytes()))
            })
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        if alive.is_empty() {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "daemons survived the verify command: {alive:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_hostile_verify_script_is_confined() {
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("project");
    let home = tmp.path().join("userhome");
    let store = tmp.path().join("store");
    let outside = tmp.path().join("outside");
    let temp_root = tmp.path().join("tmproot");
    for d in [&project, &home.join(".ssh"), &store, &outside, &temp_root] {
        fs::create_dir_all(d).unwrap();
    }
    fs::write(home.join(".ssh/id_rsa"), KEY).unwrap();
    fs::write(store.join("secret.txt"), STORE_SECRET).unwrap();
    let marker = format!("verify-{}", std::process::id());
    fs::write(
        project.join("test.sh"),
        hostile_script(&home, &store, &outside, &marker),
    )
    .unwrap();
    let settings = TerminalSettings {
        kill_grace_ms: 200,
        ..TerminalSettings::default()
    };
    let runtime = TerminalRuntime {
        store_home: Some(store.clone()),
        user_home: Some(home.clone()),
        parent_env: Some(vec![
            ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
            ("LANG".into(), "C.UTF-8".into()),
            ("BATON_HOME".into(), store.display().to_string()),
            ("OPENAI_API_KEY".into(), API_KEY.into()),
        ]),
        temp_root: Some(temp_root.clone()),
        ..TerminalRuntime::default()
    };
    let sandbox = Sandbox::new(&project, &settings, false, runtime).unwrap();
    let r = verify::run(
        "sh test.sh",
        &sandbox,
        Duration::from_secs(30),
        &CancellationToken::new(),
    );
    if !complete() {
        assert!(matches!(r.verdict, Verdict::Refused { .. }), "{r:?}");
        assert!(!project.join("stolen.txt").exists());
        return;
    }
    assert_eq!(r.verdict, Verdict::Passed, "{}", r.report());
    let stolen = fs::read_to_string(project.join("stolen.txt")).unwrap_or_default();
    assert!(!stolen.contains(KEY), "the SSH key was read: {stolen}");
    assert!(
        !stolen.contains(STORE_SECRET),
        "the store was read: {stolen}"
    );
    assert!(
        !outside.join("pwned.txt").exists(),
        "wrote outside the project"
    );
    assert!(
        !home.join("pwned.txt").exists(),
        "wrote into the user's home"
    );
    no_daemon(&marker);
    let seen = fs::read_to_string(project.join("seen-env.txt")).unwrap();
    for leak in [API_KEY, "BATON_HOME"] {
        assert!(!seen.contains(leak), "{leak} in the environment: {seen}");
        assert!(!r.tail.contains(leak), "{leak} in the output: {}", r.tail);
    }
    let home_seen = r
        .tail
        .lines()
        .find_map(|l| l.strip_prefix("store= key= home="))
        .unwrap_or_else(|| panic!("{}", r.tail));
    assert!(
        Path::new(home_seen).starts_with(&temp_root),
        "HOME is the command's own temporary home: {home_seen}"
    );
    drop(sandbox);
    // The temporary home went with the sandbox.
    assert_eq!(fs::read_dir(&temp_root).unwrap().count(), 0);
}

/// Through the orchestrator: the story's verify command runs confined, with the store
/// unreadable, and the epic goes on (the script itself exits 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_epic_runs_its_verify_commands_confined() {
    let f = Fixture::new(Scenario::default());
    let outside = f.tmp.path().join("outside");
    fs::create_dir_all(&outside).unwrap();
    fs::create_dir_all(f.store.home()).unwrap();
    fs::write(f.store.home().join("secret.txt"), STORE_SECRET).unwrap();
    let marker = format!("epic-verify-{}", std::process::id());
    let real_home = std::env::var_os("HOME").unwrap_or_default();
    // The orchestrator denies the real $HOME (see the test above); here the store, outside
    // writes, daemons and the environment are what is checked.
    let fake_home = f.tmp.path().join("userhome");
    fs::create_dir_all(&fake_home).unwrap();
    fs::write(
        f.file("test.sh"),
        hostile_script(&fake_home, f.store.home(), &outside, &marker),
    )
    .unwrap();
    f.config("[autopilot.verify]\ncommands = [\"sh test.sh\"]\ntimeout_s = 30\n");
    let report = f
        .run(Command::Story {
            key: "1-1-project-scaffold".into(),
        })
        .await;
    if !complete() {
        let e = report.unwrap_err();
        assert_eq!(e.code, "SANDBOX_UNAVAILABLE", "{e:?}");
        return;
    }
    let report = report.unwrap();
    assert_eq!(report.outcome, EpicOutcome::Done { epic_done: false });
    let stolen = fs::read_to_string(f.file("stolen.txt")).unwrap_or_default();
    assert!(
        !stolen.contains(STORE_SECRET),
        "the store was read: {stolen}"
    );
    assert!(
        !outside.join("pwned.txt").exists(),
        "wrote outside the project"
    );
    no_daemon(&marker);
    let seen = fs::read_to_string(f.file("seen-env.txt")).unwrap();
    assert!(!seen.contains("BATON_HOME"), "{seen}");
    let home_line = seen.lines().find(|l| l.starts_with("HOME=")).unwrap();
    assert_ne!(
        home_line,
        format!("HOME={}", real_home.to_string_lossy()),
        "the command gets its own temporary home"
    );
}
