//! `baton worker`: queued runs (submitted with `baton run --queue`) claimed and run by worker
//! processes, against a real throwaway PostgreSQL, scripted models on 127.0.0.1 and a bare git
//! repository as the project's remote. Skips without PostgreSQL unless BATON_REQUIRE_POSTGRES
//! is set (CI sets it).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::worker_support;

use baton_llm::Trace;
use baton_llm::testing::{Reply, ScriptedServer};
use baton_testkit::demo_trace;
use baton_testkit::git::{git, project_with_remote};
use baton_testkit::pg::postgres_or_skip;
use std::path::Path;
use std::process::Stdio;
use worker_support::{
    assert_resumed, baton, hanging_at, psql, queue, signal, submit, unit_state, until_received,
    wait_lease_expired, worker_killed_at,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_complete_five_queued_runs_each_exactly_once_and_push_their_results() {
    let Some(pg) = postgres_or_skip("two_workers_complete_five_queued_runs") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let submitter = tmp.path().join("submitter-home");
    let url = queue(&pg, &submitter);
    let (project, bare) = project_with_remote(tmp.path());
    let base = git(&project, &["rev-parse", "HEAD"]);

    // One scripted model per run: each plays the demo conversation once.
    let replies = Reply::from_trace(&Trace::load(&demo_trace()).unwrap());
    let mut servers = Vec::new();
    for _ in 0..5 {
        servers.push(ScriptedServer::start(replies.clone()).await.unwrap());
    }
    for server in &servers {
        submit(
            &submitter,
            &project,
            &url,
            &server.base_url(),
            &["--input", "1-2-user-authentication", "--context", "node"],
        );
    }
    assert_eq!(
        psql(
            &pg,
            "SELECT count(*) FROM baton.work_units WHERE state = 'queued'"
        ),
        "5"
    );

    // One worker runs two units at once, the other one.
    let workers: Vec<_> = ["2", "1"]
        .iter()
        .enumerate()
        .map(|(i, concurrency)| {
            baton(&tmp.path().join(format!("worker-{i}")))
                .args([
                    "worker",
                    "--db",
                    &url,
                    "--exit-when-idle",
                    "--lease-s",
                    "30",
                    "--concurrency",
                    concurrency,
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<_> = tokio::task::spawn_blocking(move || {
        workers
            .into_iter()
            .map(|w| w.wait_with_output().unwrap())
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    for out in &outs {
        assert!(
            out.status.success(),
            "worker failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // Every unit done, claimed once (epoch 1), with checkpoints written under that epoch.
    assert_eq!(
        psql(
            &pg,
            "SELECT string_agg(state || ':' || epoch, ',' ORDER BY id) FROM baton.work_units"
        ),
        "done:1,done:1,done:1,done:1,done:1"
    );
    let checkpoints: Vec<i64> = psql(
        &pg,
        "SELECT string_agg(n::text, ',' ORDER BY unit_id) FROM (SELECT unit_id, count(*) AS n \
         FROM baton.unit_writes WHERE kind = 'checkpoint' AND epoch = 1 GROUP BY unit_id) c",
    )
    .split(',')
    .map(|n| n.parse().unwrap())
    .collect();
    assert_eq!(checkpoints.len(), 5, "{checkpoints:?}");
    assert!(checkpoints.iter().all(|&n| n >= 5), "{checkpoints:?}");
    // Each model was asked its ten turns, once.
    for server in &servers {
        assert_eq!(server.received().len(), 10);
        assert_eq!(server.remaining(), 0);
    }
    // Each result is on a branch that carries its epoch, on top of the base commit, with the
    // story the run wrote.
    let ids = psql(
        &pg,
        "SELECT string_agg(id::text, ',' ORDER BY id) FROM baton.work_units",
    );
    for id in ids.split(',') {
        let branch = format!("refs/heads/baton/unit-{id}/epoch-1");
        let commit = git(&bare, &["rev-parse", &branch]);
        assert_ne!(commit, base);
        git(&bare, &["merge-base", "--is-ancestor", &base, &commit]);
        let files = git(&bare, &["ls-tree", "-r", "--name-only", &commit]);
        assert!(
            files.lines().any(|f| f.starts_with("artifacts/")),
            "unit {id}: {files}"
        );
        let outcome = psql(
            &pg,
            &format!("SELECT outcome->>'branch' FROM baton.work_units WHERE id = {id}"),
        );
        assert_eq!(outcome, format!("baton/unit-{id}/epoch-1"));
        // The last checkpoint's ref carries the epoch too.
        git(&bare, &["rev-parse", &format!("refs/baton/runs/{id}/1")]);
    }
}

/// The folder of unit `id-epoch` in `home`: named `<id>-<epoch>-<tag>`, the tag a secret of
/// its worker.
fn unit_folder(home: &Path, id_epoch: &str) -> std::path::PathBuf {
    let prefix = format!("{id_epoch}-");
    let found: Vec<_> = std::fs::read_dir(home.join("worker/units"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
        })
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    let tag = found[0].file_name().unwrap().to_string_lossy()[prefix.len()..].to_string();
    assert_eq!(tag.len(), 24, "an unguessable tag: {tag}");
    found[0].clone()
}

/// The one mirror in `home`'s worker folder: the git repository its units' worktrees hang on.
fn mirror_in(home: &Path) -> std::path::PathBuf {
    std::fs::read_dir(home.join("worker/repos"))
        .unwrap()
        .flatten()
        .find(|e| e.path().is_dir())
        .unwrap()
        .path()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_worker_past_its_lease_writes_nothing_more_and_exits_with_lease_lost() {
    let Some(pg) = postgres_or_skip("a_stopped_worker_past_its_lease") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let submitter = tmp.path().join("submitter-home");
    let url = queue(&pg, &submitter);
    let (project, _bare) = project_with_remote(tmp.path());

    // The fourth request is never answered: the worker is stopped waiting for it (not inside
    // a transaction); the next worker's fourth request gets the fourth answer.
    let server = hanging_at(3).await;
    submit(
        &submitter,
        &project,
        &url,
        &server.base_url(),
        &["--input", "1-2-user-authentication"],
    );

    let zombie = baton(&tmp.path().join("worker-a"))
        .args(["worker", "--db", &url, "--lease-s", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = zombie.id();
    // Stopped once its fourth request reached the model.
    until_received(4, "no fourth request", || server.received().len()).await;
    signal(pid, "-STOP");
    let written = psql(
        &pg,
        "SELECT count(*) FROM baton.unit_writes WHERE epoch = 1",
    );
    assert_ne!(written, "0", "the zombie checkpointed before it stopped");
    // Its lease runs out (the database's clock says so).
    wait_lease_expired(&pg, 1);
    // Another worker sweeps it back, claims it at epoch 2 and completes it.
    let out = baton(&tmp.path().join("worker-b"))
        .args(["worker", "--db", &url, "--lease-s", "2", "--exit-when-idle"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(unit_state(&pg, 1), "done:2");

    signal(pid, "-CONT");
    let out = tokio::task::spawn_blocking(move || zombie.wait_with_output().unwrap())
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("LEASE_LOST"), "{stderr}");
    // Nothing more under epoch 1, and the unit is as the second worker left it.
    assert_eq!(
        psql(
            &pg,
            "SELECT count(*) FROM baton.unit_writes WHERE epoch = 1"
        ),
        written
    );
    assert_eq!(unit_state(&pg, 1), "done:2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_workers_run_is_resumed_from_its_checkpoint_by_another_and_completes() {
    let Some(pg) = postgres_or_skip("a_killed_workers_run_is_resumed") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let submitter = tmp.path().join("submitter-home");
    let url = queue(&pg, &submitter);
    let (project, bare) = project_with_remote(tmp.path());
    let base = git(&project, &["rev-parse", "HEAD"]);
    let server = hanging_at(3).await;
    submit(
        &submitter,
        &project,
        &url,
        &server.base_url(),
        &["--input", "1-2-user-authentication"],
    );

    let worker_a = tmp.path().join("worker-a");
    worker_killed_at(&worker_a, &url, 4, "no fourth request", || {
        server.received().len()
    })
    .await;
    // The last checkpoint: the commit the remote held then (its base) and the files the
    // worktree held beyond it (carried by the record; pushes are paced, so the commit itself
    // may never have reached the remote).
    let last = |field: &str| {
        psql(
            &pg,
            &format!(
                "SELECT {field} FROM baton.unit_writes WHERE unit_id = 1 AND kind = 'checkpoint' \
                 ORDER BY seq DESC LIMIT 1"
            ),
        )
    };
    let checkpoint_base = last("body->'tree'->>'base'");
    assert_eq!(checkpoint_base.len(), 40, "a checkpoint before the kill");
    let carried: serde_json::Value =
        serde_json::from_str(&last("body->'tree'->'changes'")).unwrap();
    wait_lease_expired(&pg, 1);
    let out = baton(&tmp.path().join("worker-b"))
        .args(["worker", "--db", &url, "--lease-s", "2", "--exit-when-idle"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("resuming run"), "{stderr}");
    assert_eq!(unit_state(&pg, 1), "done:2");
    // Ten turns answered, and only the one in flight asked twice: the resumed request is the
    // hung one with the resume directive after it, as `baton resume` sends it.
    let received = server.received();
    assert_eq!(received.len(), 11);
    assert_eq!(server.remaining(), 0);
    let messages = |i: usize| received[i].body["messages"].as_array().unwrap().clone();
    assert_resumed(&messages(3), &messages(4));
    for i in 0..received.len() {
        for j in i + 1..received.len() {
            if (i, j) != (3, 4) {
                assert_ne!(
                    messages(i),
                    messages(j),
                    "requests {i} and {j} are the same turn"
                );
            }
        }
    }
    // The result, on the epoch-2 branch, grew from the first worker's checkpoint: its base,
    // and every file it carried.
    let commit = git(&bare, &["rev-parse", "refs/heads/baton/unit-1/epoch-2"]);
    git(
        &bare,
        &["merge-base", "--is-ancestor", &checkpoint_base, &commit],
    );
    git(&bare, &["merge-base", "--is-ancestor", &base, &commit]);
    let files = git(&bare, &["ls-tree", "-r", "--name-only", &commit]);
    for (path, change) in carried.as_object().unwrap() {
        assert_eq!(
            files.lines().any(|f| f == path),
            !change.is_null(),
            "{path} as the checkpoint left it: {files}"
        );
    }
    assert!(
        files.lines().any(|f| f.starts_with("artifacts/")),
        "{files}"
    );

    // As if that worker had died after the run's last checkpoint, before completing the unit:
    // the next worker completes it from the checkpoint, asking the model nothing.
    psql(
        &pg,
        "UPDATE baton.work_units SET state = 'queued', outcome = NULL, finished_at = NULL \
         WHERE id = 1",
    );
    let out = baton(&tmp.path().join("worker-c"))
        .args([
            "worker",
            "--db",
            &url,
            "--lease-s",
            "2",
            "--exit-when-idle",
            "--keep-units",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(unit_state(&pg, 1), "done:3");
    assert_eq!(server.received().len(), 11);
    assert_eq!(
        git(&bare, &["rev-parse", "refs/heads/baton/unit-1/epoch-3"]),
        commit
    );
    // Kept, as asked: the unit's worktree at its result.
    let kept = unit_folder(&tmp.path().join("worker-c"), "1-3").join("project");
    assert_eq!(git(&kept, &["rev-parse", "HEAD"]), commit);

    // The killed worker could not clean up after itself: a worker started on its home removes
    // the folder it left (its unit is no longer leased at that epoch), and its mirror's entry.
    let left = unit_folder(&tmp.path().join("worker-a"), "1-1");
    assert!(left.join("project").exists());
    let out = baton(&tmp.path().join("worker-a"))
        .args(["worker", "--db", &url, "--exit-when-idle"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("removed 1 unit folder left by workers that stopped on this home"),
        "{stderr}"
    );
    assert!(!left.exists());
    let mirror = mirror_in(&tmp.path().join("worker-a"));
    let listed = git(&mirror, &["worktree", "list", "--porcelain"]);
    assert_eq!(listed.matches("worktree ").count(), 1, "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unit_whose_remote_is_gone_fails_with_the_reason_and_the_worker_goes_on() {
    let Some(pg) = postgres_or_skip("a_unit_whose_remote_is_gone_fails") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let submitter = tmp.path().join("submitter-home");
    let url = queue(&pg, &submitter);
    let (project, bare) = project_with_remote(tmp.path());
    for _ in 0..2 {
        submit(&submitter, &project, &url, "http://127.0.0.1:9/v1", &[]);
    }
    let gone = bare.with_file_name("gone.git");
    psql(
        &pg,
        &format!(
            "UPDATE baton.work_units SET project_remote = '{}'",
            gone.display()
        ),
    );
    let out = baton(&tmp.path().join("worker"))
        .args(["worker", "--db", &url, "--exit-when-idle"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Both units failed with the reason, each claimed once; the worker went on to the second.
    assert_eq!(
        psql(
            &pg,
            "SELECT string_agg(state || ':' || epoch || ':' || (outcome->>'code'), ',' ORDER BY id) \
             FROM baton.work_units"
        ),
        "failed:1:WORKER_GIT_FAILED,failed:1:WORKER_GIT_FAILED"
    );
}

/// SIGTERM: the worker claims nothing more, lets the model turn in flight finish, hands the
/// unit back at that turn's checkpoint and exits 0; the next worker goes on at once (no lease
/// to wait for) and no turn is asked twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_hands_the_unit_back_at_its_next_checkpoint_and_no_turn_is_lost() {
    let Some(pg) = postgres_or_skip("sigterm_hands_the_unit_back") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let submitter = tmp.path().join("submitter-home");
    let url = queue(&pg, &submitter);
    let (project, bare) = project_with_remote(tmp.path());
    // The fourth answer takes a while: the signal lands while it is in flight.
    let mut replies = Reply::from_trace(&Trace::load(&demo_trace()).unwrap());
    let turns = replies.len();
    replies[3] = replies[3]
        .clone()
        .delayed(std::time::Duration::from_secs(3));
    let server = ScriptedServer::start(replies).await.unwrap();
    submit(
        &submitter,
        &project,
        &url,
        &server.base_url(),
        &["--input", "1-2-user-authentication"],
    );

    // A long lease: the unit can only come back by being handed back.
    let first = baton(&tmp.path().join("worker-a"))
        .args(["worker", "--db", &url, "--lease-s", "600"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    until_received(4, "no fourth request", || server.received().len()).await;
    signal(first.id(), "-TERM");
    let out = first.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("stopping: no new units"), "{stderr}");
    assert!(stderr.contains("unit 1 handed back"), "{stderr}");
    let asked_before_stop = server.received().len();
    assert!(asked_before_stop >= 4, "the turn in flight was answered");
    // Handed back where it was: queued, the claim not counted.
    assert_eq!(
        psql(
            &pg,
            "SELECT state || ':' || epoch || ':' || attempts FROM baton.work_units"
        ),
        "queued:1:0"
    );
    assert_eq!(
        psql(
            &pg,
            "SELECT kind FROM baton.unit_writes WHERE unit_id = 1 ORDER BY seq DESC LIMIT 1"
        ),
        "released"
    );

    let out = baton(&tmp.path().join("worker-b"))
        .args([
            "worker",
            "--db",
            &url,
            "--lease-s",
            "600",
            "--exit-when-idle",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("resuming run"), "{stderr}");
    assert_eq!(unit_state(&pg, 1), "done:2");
    // Every turn asked once: the stop lost none, and none was asked again.
    let unit_one = server.received();
    assert_eq!(unit_one.len(), turns, "{asked_before_stop} before the stop");
    assert_eq!(server.remaining(), 0);
    for i in 0..unit_one.len() {
        for j in i + 1..unit_one.len() {
            assert_ne!(
                unit_one[i].body["messages"], unit_one[j].body["messages"],
                "requests {i} and {j} are the same turn"
            );
        }
    }
    git(&bare, &["rev-parse", "refs/heads/baton/unit-1/epoch-2"]);
    // Each worker removed the unit's folder (worktree, package, scratch store) as it left it,
    // and its mirror no longer lists the worktree.
    for home in ["worker-a", "worker-b"] {
        let units = tmp.path().join(home).join("worker/units");
        let left: Vec<_> = std::fs::read_dir(&units).unwrap().collect();
        assert!(left.is_empty(), "{home}: {left:?}");
        let mirror = mirror_in(&tmp.path().join(home));
        let listed = git(&mirror, &["worktree", "list", "--porcelain"]);
        assert_eq!(listed.matches("worktree ").count(), 1, "{home}: {listed}");
    }
}

/// A second signal does not wait for the turn in flight: the worker quits at once (130), and
/// the unit it held stays leased until its lease expires, as after a crash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_quits_at_once_while_a_turn_hangs() {
    let Some(pg) = postgres_or_skip("a_second_signal_quits_at_once") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let submitter = tmp.path().join("submitter-home");
    let url = queue(&pg, &submitter);
    let (project, _bare) = project_with_remote(tmp.path());
    let server = hanging_at(3).await;
    submit(
        &submitter,
        &project,
        &url,
        &server.base_url(),
        &["--input", "1-2-user-authentication"],
    );
    let mut worker = baton(&tmp.path().join("worker-a"))
        .args(["worker", "--db", &url, "--lease-s", "600"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = worker.id();
    until_received(4, "no fourth request", || server.received().len()).await;
    signal(pid, "-TERM");
    // The first signal is taken (the worker says it is stopping) before the second is sent.
    let mut stderr = worker.stderr.take().unwrap();
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    while !seen.contains("stopping: no new units") {
        let n = std::io::Read::read(&mut stderr, &mut buf).unwrap();
        assert!(n > 0, "the worker ended before saying it stops: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    signal(pid, "-INT");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert_eq!(worker.wait().unwrap().code(), Some(130), "{seen}{rest}");
    assert!(!rest.contains("handed back"), "{seen}{rest}");
    assert_eq!(
        psql(&pg, "SELECT state || ':' || epoch FROM baton.work_units"),
        "leased:1"
    );
    assert_eq!(server.received().len(), 4);
}
