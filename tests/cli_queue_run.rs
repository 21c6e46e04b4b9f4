//! `baton run <PKG> --queue URL`: the run is submitted, not run. The project must be a git
//! repository with a remote (QUEUE_PROJECT_NOT_GIT, QUEUE_NO_REMOTE, said before any database
//! is reached); the package is pinned by content; the model travels by name and endpoint,
//! never its key. The database tests use a real throwaway PostgreSQL and skip without one
//! unless BATON_REQUIRE_POSTGRES is set (CI sets it).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::worker_support;

use baton_testkit::git::{committed_project, git};
use baton_testkit::pg::postgres_or_skip;
use baton_testkit::{example, sample_project};
use serde_json::Value;
use std::path::Path;
use worker_support::baton_at;

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Out {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", self.stdout, self.stderr))
    }

    fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

fn baton(args: &[&str], home: &Path) -> Out {
    let bin = Path::new(env!("CARGO_BIN_EXE_baton"));
    let out = baton_at(bin, home, "sk-never-travels-4242")
        .env("BATON_HOME", home.join("baton-home"))
        .args(args)
        .output()
        .expect("baton runs");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

const URL: &str = "postgresql://baton@127.0.0.1:1/none";

/// `out` is a usage error (2) with `error[<code>]` and `hint` on stderr.
fn refused(out: &Out, code: &str, hint: &str) {
    assert_eq!(out.code, 2, "{}", out.all());
    assert!(
        out.stderr.contains(&format!("error[{code}]")),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains(hint), "{}", out.stderr);
}

#[test]
fn a_project_that_cannot_travel_is_refused_before_the_database() {
    let tmp = tempfile::tempdir().unwrap();
    let pkg = example("create-story-micro");
    let pkg = pkg.to_str().unwrap();

    // `baton run` of the package on `project`, submitted to a database nobody listens at.
    let queue_run = |project: &Path, extra: &[&str]| {
        let mut args = vec![
            "run",
            pkg,
            "--project",
            project.to_str().unwrap(),
            "--queue",
            URL,
        ];
        args.extend_from_slice(extra);
        baton(&args, tmp.path())
    };

    // Not a git repository.
    let project = sample_project(tmp.path());
    let out = queue_run(&project, &[]);
    refused(&out, "QUEUE_PROJECT_NOT_GIT", "git remote add origin");

    // A repository without a commit.
    git(&project, &["init", "-q", "-b", "main"]);
    let out = queue_run(&project, &["--json"]);
    assert_eq!(out.code, 2, "{}", out.all());
    assert_eq!(out.json()["error"]["code"], "QUEUE_PROJECT_NOT_GIT");

    // Committed, without a remote.
    let other = tempfile::tempdir().unwrap();
    let project = committed_project(other.path());
    let out = queue_run(&project, &[]);
    refused(&out, "QUEUE_NO_REMOTE", "bare repository");

    // A remote that does not answer.
    git(
        &project,
        &["remote", "add", "origin", "../no-such-remote.git"],
    );
    let out = queue_run(&project, &[]);
    refused(&out, "QUEUE_REMOTE_UNREACHABLE", "git ls-remote");

    // A remote that answers but lacks the commit to start from.
    let bare = other.path().join("remote.git");
    git(
        other.path(),
        &["init", "-q", "--bare", bare.to_str().unwrap()],
    );
    git(
        &project,
        &["remote", "set-url", "origin", bare.to_str().unwrap()],
    );
    git(&project, &["push", "-q", "origin", "main"]);
    std::fs::write(project.join("later.txt"), "not pushed\n").unwrap();
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-q", "-m", "later"]);
    let out = queue_run(&project, &[]);
    refused(&out, "QUEUE_COMMIT_NOT_PUSHED", "git push origin HEAD");
    // Pushed, it gets as far as the database (none listens at URL).
    git(&project, &["push", "-q", "origin", "main"]);
    let out = queue_run(&project, &[]);
    assert!(
        !out.stderr.contains("QUEUE_COMMIT_NOT_PUSHED"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("error[QUEUE_"), "{}", out.stderr);
    // Nothing was run: no run in the store.
    assert!(!tmp.path().join("baton-home/runs").exists());
}

#[test]
fn a_run_is_submitted_with_its_package_pinned_and_its_project_as_remote_and_commit() {
    let Some(pg) = postgres_or_skip("a_run_is_submitted_with_its_package_pinned") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let url = pg.socket_url("postgres");
    let out = baton(&["queue", "init", "--db", &url], tmp.path());
    assert_eq!(out.code, 0, "{}", out.all());

    let project = committed_project(tmp.path());
    let bare = tmp.path().join("remote.git");
    git(
        tmp.path(),
        &["init", "-q", "--bare", bare.to_str().unwrap()],
    );
    // A relative path remote is recorded absolute.
    git(&project, &["remote", "add", "origin", "../remote.git"]);
    git(&project, &["push", "-q", "origin", "main"]);
    let head = git(&project, &["rev-parse", "HEAD"]);

    let pkg = example("create-story-micro");
    let submit = |json: bool| {
        let mut args = vec![
            "run",
            pkg.to_str().unwrap(),
            "--project",
            project.to_str().unwrap(),
            "--queue",
            &url,
            "--model",
            "scripted-model",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--input",
            "first answer",
            "--var",
            "storyKey=1-2-login",
        ];
        if json {
            args.push("--json");
        }
        baton(&args, tmp.path())
    };
    let out = submit(true);
    assert_eq!(out.code, 0, "{}", out.all());
    assert!(!out.all().contains("sk-never-travels"), "{}", out.all());
    let j = out.json();
    let unit = j["unit"].as_i64().unwrap();
    assert_eq!(j["project"]["baseCommit"], head.as_str());
    let canonical_bare = std::fs::canonicalize(&bare).unwrap();
    assert_eq!(
        j["project"]["remote"],
        canonical_bare.to_str().unwrap(),
        "{j}"
    );
    let sha = j["package"]["sha256"].as_str().unwrap().to_string();
    assert_eq!(sha.len(), 64);

    // The database holds the unit, queued, with the package's bytes by content and the options.
    let row = pg
        .psql(
            "postgres",
            &format!(
                "SELECT state || '|' || project_remote || '|' || base_commit || '|' || package_sha256 \
                 || '|' || payload::text FROM baton.work_units WHERE id = {unit}"
            ),
        )
        .unwrap();
    let parts: Vec<&str> = row.trim().splitn(5, '|').collect();
    assert_eq!(parts[0], "queued", "{row}");
    assert_eq!(parts[1], canonical_bare.to_str().unwrap());
    assert_eq!(parts[2], head);
    assert_eq!(parts[3], sha);
    let payload: Value = serde_json::from_str(parts[4]).unwrap();
    assert_eq!(payload["model"]["name"], "scripted-model");
    assert_eq!(payload["model"]["baseUrl"], "http://127.0.0.1:9/v1");
    assert_eq!(payload["inputs"], serde_json::json!(["first answer"]));
    assert_eq!(payload["vars"]["storyKey"], "1-2-login");
    assert!(!parts[4].contains("sk-never-travels"), "{row}");
    assert!(
        !parts[4].contains(tmp.path().to_str().unwrap()),
        "no host path of the project in the payload: {row}"
    );
    // Pinned by the package's content digest (the one `baton package list` and `runs show`
    // show), which the stored archive's bytes give back.
    let stored = pg
        .psql(
            "postgres",
            &format!("SELECT encode(bytes, 'hex') FROM baton.packages WHERE sha256 = '{sha}'"),
        )
        .unwrap();
    let hex = stored.trim();
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect();
    assert_eq!(
        baton_queue::package_digest(&bytes).as_deref(),
        Some(sha.as_str())
    );

    // Submitting again pins the same package once and queues a second unit; text output.
    let out = submit(false);
    assert_eq!(out.code, 0, "{}", out.all());
    assert!(
        out.stdout.contains(&format!("queued unit {}", unit + 1)),
        "{}",
        out.stdout
    );
    let counts = pg
        .psql(
            "postgres",
            "SELECT (SELECT count(*) FROM baton.packages) || '/' || (SELECT count(*) FROM baton.work_units WHERE state = 'queued')",
        )
        .unwrap();
    assert_eq!(counts.trim(), "1/2");
    // Nothing ran here.
    assert!(!tmp.path().join("baton-home/runs").exists());
}
