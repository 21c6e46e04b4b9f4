//! A throwaway cluster does not outlive a test process killed before it could drop the server
//! (Ctrl-C on `cargo test`, a killed CI job): its watcher stops it and removes its folder.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use baton_testkit::pg::postgres_or_skip;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Run by the test below in a child process of this same binary: starts a cluster, says where
/// it is, and waits to be killed.
#[test]
fn hold_a_cluster_until_killed() {
    if std::env::var_os("BATON_PG_HOLD").is_none() {
        return;
    }
    let pg = postgres_or_skip("hold_a_cluster_until_killed").unwrap();
    println!("CLUSTER {}", pg.socket_dir().display());
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    std::thread::sleep(Duration::from_secs(3600));
}

#[test]
fn a_cluster_whose_test_was_killed_is_stopped_and_removed() {
    if postgres_or_skip("a_cluster_whose_test_was_killed").is_none() {
        return;
    }
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "hold_a_cluster_until_killed",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("BATON_PG_HOLD", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut dir = None;
    let mut line = String::new();
    while out.read_line(&mut line).unwrap() > 0 {
        // The harness prints the test's name first, on the same line.
        if let Some((_, d)) = line.trim().split_once("CLUSTER ") {
            dir = Some(std::path::PathBuf::from(d));
            break;
        }
        line.clear();
    }
    let dir = dir.expect("the child started a cluster");
    let pid_file = dir.join("data/postmaster.pid");
    assert!(pid_file.exists(), "{}", pid_file.display());
    let postmaster: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    // The watcher looks every second; give it a while on a loaded machine.
    let deadline = Instant::now() + Duration::from_secs(60);
    let alive = |pid: i32| std::path::Path::new(&format!("/proc/{pid}")).exists();
    while alive(postmaster) || dir.exists() {
        assert!(
            Instant::now() < deadline,
            "the killed test's cluster (postmaster {postmaster}, {}) is still there",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
