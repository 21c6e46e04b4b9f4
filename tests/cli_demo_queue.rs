//! `baton demo queue`: the work queue tried offline on one machine. With PostgreSQL's server
//! programs (Debian's `postgresql`): three replayed units on two workers, the first worker
//! killed mid-unit and its unit taken over by the other, the killed attempt's ref removed from
//! the remote, the status and the next commands shown, and nothing left behind — also after
//! Ctrl-C. Without the programs: a clear error naming the package. Skips without PostgreSQL
//! unless `BATON_REQUIRE_POSTGRES` is set.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn baton(home: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
    cmd.env("BATON_HOME", home)
        .env("NO_COLOR", "1")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("BATON_MODEL")
        .env_remove("PGPASSWORD")
        .current_dir(home);
    cmd
}

/// Whether the demo found no PostgreSQL here, and may be skipped (not in CI).
fn skipped(out: &Output, test: &str) -> bool {
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if all.contains("QUEUE_POSTGRES_NOT_INSTALLED") && !baton_testkit::pg::postgres_required() {
        eprintln!("{test}: skipped: no PostgreSQL server programs (set BATON_REQUIRE_POSTGRES=1)");
        return true;
    }
    false
}

/// The folder of the throwaway cluster named in a socket URL (`?host=DIR&…`).
fn cluster_dir(url: &str) -> PathBuf {
    let host = url.split("host=").nth(1).unwrap();
    PathBuf::from(host.split('&').next().unwrap())
}

fn alive(pid: u32) -> bool {
    Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
}

#[test]
fn three_units_two_workers_one_killed_and_taken_over_then_all_removed() {
    let home = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = baton(home.path())
        .args(["demo", "queue", "--json"])
        .output()
        .unwrap();
    if skipped(&out, "three_units_two_workers_one_killed") {
        return;
    }
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{out:?}");
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    let units = j["units"].as_array().unwrap();
    assert_eq!(units.len(), 3, "{j}");
    for u in units {
        assert_eq!(u["state"], "done", "{u}");
        assert!(
            u["branch"].as_str().unwrap().starts_with("baton/unit-"),
            "{u}"
        );
    }
    // The killed worker's unit was finished by the other one, at the next epoch.
    let killed = j["killed"]["worker"].as_str().unwrap();
    let unit = j["killed"]["unit"].as_i64().unwrap();
    let taker = j["takenOverBy"].as_str().unwrap();
    assert_ne!(killed, taker);
    let first = units.iter().find(|u| u["unit"] == unit).unwrap();
    assert_eq!(first["worker"], taker, "{first}");
    assert_eq!(first["epoch"], 2, "{first}");
    // The killed attempt pushed its checkpoint commit to refs/baton/runs/<unit>/1; the attempt
    // that took over removed it: one checkpoint ref per unit, its latest.
    let refs: Vec<&str> = j["remoteRefs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert!(
        refs.contains(&format!("refs/baton/runs/{unit}/2").as_str()),
        "{refs:?}"
    );
    assert!(
        !refs.contains(&format!("refs/baton/runs/{unit}/1").as_str()),
        "{refs:?}"
    );
    assert_eq!(refs.len(), 6, "{refs:?}");
    // The status: all done, nothing failed, the stopped worker said with when.
    let s = &j["status"];
    assert_eq!(s["counts"]["done"], 3, "{s}");
    assert_eq!(s["failed"].as_array().unwrap().len(), 0);
    assert_eq!(s["stoppedWorkers"][0]["id"], taker, "{s}");
    assert!(j["next"].as_array().unwrap().len() >= 3);
    // Nothing left: the cluster's folder is gone.
    let dir = cluster_dir(s["database"].as_str().unwrap());
    assert!(!dir.exists(), "{} left behind", dir.display());
    assert!(text.is_empty(), "--json prints no progress: {text}");
    eprintln!(
        "baton demo queue took {:.1}s",
        started.elapsed().as_secs_f64()
    );

    // The text: progress on stderr, the units, the status and the next commands on stdout.
    let out = baton(home.path()).args(["demo", "queue"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for said in [
        "worker A killed (SIGKILL)",
        "took unit 1 over at epoch 2",
        "removed",
    ] {
        assert!(stderr.contains(said), "{said}: {stderr}");
    }
    for said in [
        "unit 1 done by worker B at epoch 2",
        "units: 0 queued, 0 leased, 0 waiting, 3 done, 0 failed, 0 cancelled",
        "stopped (last 24 hours)",
        "Next, with a PostgreSQL of your own",
        "baton worker --db",
    ] {
        assert!(stdout.contains(said), "{said}: {stdout}");
    }
    assert!(
        stdout
            .trim_end()
            .ends_with("baton queue status --db postgresql://USER@HOST:5432/DBNAME"),
        "ends with the next commands: {stdout}"
    );
}

#[test]
fn ctrl_c_stops_the_workers_and_removes_the_database() {
    let home = tempfile::tempdir().unwrap();
    let mut child = baton(home.path())
        .args(["demo", "queue"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut dir = None;
    let mut workers = Vec::new();
    let mut seen = String::new();
    // Read progress until both workers run (worker ids are host:pid:tag).
    let deadline = Instant::now() + Duration::from_secs(120);
    while workers.len() < 2 || !seen.contains("worker B started") {
        assert!(Instant::now() < deadline, "no progress: {seen}");
        let Some(Ok(line)) = lines.next() else {
            let status = child.wait().unwrap();
            if seen.contains("QUEUE_POSTGRES_NOT_INSTALLED")
                && !baton_testkit::pg::postgres_required()
            {
                eprintln!("ctrl_c_stops_the_workers: skipped: no PostgreSQL server programs");
                return;
            }
            panic!("the demo ended early ({status}): {seen}");
        };
        seen.push_str(&line);
        seen.push('\n');
        if let Some(rest) = line.split("throwaway PostgreSQL ").nth(1) {
            let path = rest
                .split(" in ")
                .nth(1)
                .unwrap()
                .split(" (from")
                .next()
                .unwrap();
            dir = Some(PathBuf::from(path));
        }
        if line.contains("worker A (") {
            let id = line.split("worker A (").nth(1).unwrap();
            workers.push(id.split(':').nth(1).unwrap().parse::<u32>().unwrap());
        }
        if line.contains("worker B started") {
            // Worker B's pid: the newest `baton worker` child of the demo.
            let out = Command::new("pgrep")
                .args(["-P", &child.id().to_string()])
                .output()
                .unwrap();
            for pid in String::from_utf8_lossy(&out.stdout).lines() {
                let pid: u32 = pid.trim().parse().unwrap();
                if !workers.contains(&pid) {
                    workers.push(pid);
                }
            }
        }
    }
    let dir = dir.expect("the cluster's folder was said");
    assert!(dir.exists());
    // Ctrl-C (SIGINT to the demo).
    assert!(
        Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{seen}{}", rest.join("\n"));
    assert!(
        rest.iter()
            .any(|l| l.contains("stopped: the workers, the database")),
        "{rest:?}"
    );
    assert!(!dir.exists(), "{} left behind", dir.display());
    for pid in workers {
        assert!(!alive(pid), "worker {pid} still runs");
    }
}

#[test]
fn without_postgresql_the_error_names_the_package_to_install() {
    let home = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    let out = baton(home.path())
        .env("BATON_PG_BIN", empty.path())
        .args(["demo", "queue", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["error"]["code"], "QUEUE_POSTGRES_NOT_INSTALLED", "{j}");
    assert!(
        j["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("install the `postgresql` package"),
        "{j}"
    );
    let out = baton(home.path())
        .env("BATON_PG_BIN", empty.path())
        .args(["demo", "queue"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("error[QUEUE_POSTGRES_NOT_INSTALLED]")
            && stderr.contains("`postgresql` package"),
        "{stderr}"
    );
}
