//! The queue against a real throwaway PostgreSQL (baton-testkit's `pg`): claims, leases,
//! fencing, the sweep, cancel, waiting for a person, status, init. Each test starts its own
//! cluster; without PostgreSQL they skip, saying so, unless BATON_REQUIRE_POSTGRES is set.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use baton_queue::{
    DbConfig, Lease, NewUnit, NewWrite, Queue, QueueError, SCHEMA_VERSION, UnitKind, UnitState,
    UrlSource, init,
};
use baton_testkit::pg::{PgServer, postgres_or_skip};
use serde_json::json;
use std::collections::HashSet;
use std::time::{Duration, Instant};

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

fn config(pg: &PgServer) -> DbConfig {
    DbConfig::from_url(&pg.socket_url("postgres"), UrlSource::Given).unwrap()
}

async fn fresh(pg: &PgServer) -> Queue {
    init(&config(pg)).await.unwrap();
    Queue::open(&config(pg)).await.unwrap()
}

fn unit(queue: &str, n: usize) -> NewUnit {
    NewUnit {
        kind: UnitKind::Run,
        queue: queue.into(),
        payload: json!({"n": n}),
        package_sha256: None,
        project_remote: "https://git.example/project.git".into(),
        base_commit: COMMIT.into(),
        max_attempts: None,
    }
}

/// Runs the sweep until it takes `id` back (the lease must be short), bounded.
async fn sweep_until(queue: &Queue, id: i64) -> baton_queue::Expired {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(e) = queue
            .sweep_expired(100)
            .await
            .unwrap()
            .into_iter()
            .find(|e| e.id == id)
        {
            return e;
        }
        assert!(Instant::now() < deadline, "unit {id} never expired");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn lost(e: QueueError) -> String {
    assert_eq!(e.code(), "LEASE_LOST", "{e}");
    assert!(e.is_lease_lost());
    e.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_is_idempotent_and_records_its_version() {
    let Some(pg) = postgres_or_skip("init_is_idempotent_and_records_its_version") else {
        return;
    };
    let cfg = config(&pg);
    // Before init: the queue is missing, and the hint says what to run.
    let e = Queue::open(&cfg).await.err().unwrap();
    assert_eq!(e.code(), "QUEUE_SCHEMA_MISSING", "{e}");
    assert!(e.hint().unwrap().contains("baton queue init"));

    let first = init(&cfg).await.unwrap();
    assert_eq!(first.from_version, 0);
    assert_eq!(first.version, SCHEMA_VERSION);
    assert_eq!(first.applied.len(), baton_queue::MIGRATIONS.len());
    let second = init(&cfg).await.unwrap();
    assert_eq!(second.from_version, SCHEMA_VERSION);
    assert!(second.applied.is_empty(), "{second:?}");
    assert_eq!(
        pg.psql(
            "postgres",
            "SELECT string_agg(version || '|' || applied_by, ',' ORDER BY version) \
             FROM baton.schema_version"
        )
        .unwrap(),
        format!(
            "1|baton {v},2|baton {v},3|baton {v}",
            v = env!("CARGO_PKG_VERSION")
        )
    );

    // Two inits at once: one applies, the other finds it done (advisory lock), no error.
    let pg2 = PgServer::start().unwrap();
    let c2 = config(&pg2);
    let (a, b) = tokio::join!(init(&c2), init(&c2));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(
        a.applied.len() + b.applied.len(),
        baton_queue::MIGRATIONS.len()
    );

    // A schema newer than this baton is refused by open and by init.
    let q = Queue::open(&cfg).await.unwrap();
    q.status(10).await.unwrap();
    pg.psql(
        "postgres",
        "INSERT INTO baton.schema_version (version, name, applied_by) VALUES (99, 'future', 'x')",
    )
    .unwrap();
    let e = Queue::open(&cfg).await.err().unwrap();
    assert_eq!(e.code(), "QUEUE_SCHEMA_NEWER", "{e}");
    let e = init(&cfg).await.unwrap_err();
    assert_eq!(e.code(), "QUEUE_SCHEMA_NEWER", "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_unit_is_claimed_exactly_once_by_16_concurrent_claimers() {
    let Some(pg) = postgres_or_skip("each_unit_is_claimed_exactly_once_by_16_concurrent_claimers")
    else {
        return;
    };
    let queue = fresh(&pg).await;
    const UNITS: i64 = 3000;
    // One statement for the bulk; the API's submit for a few, to check they mix.
    pg.psql(
        "postgres",
        &format!(
            "INSERT INTO baton.work_units (kind, queue, payload, project_remote, base_commit) \
             SELECT 'run', 'default', jsonb_build_object('n', g), 'r', '{COMMIT}' \
             FROM generate_series(1, {}) g",
            UNITS - 10
        ),
    )
    .unwrap();
    for n in 0..10 {
        queue.submit(&unit("default", n)).await.unwrap();
    }
    let cfg = config(&pg);
    let mut tasks = Vec::new();
    for w in 0..16 {
        let cfg = cfg.clone();
        tasks.push(tokio::spawn(async move {
            let mut q = Queue::open(&cfg).await.unwrap();
            let owner = format!("worker-{w}");
            let mut got = Vec::new();
            while let Some(lease) = q
                .claim(&owner, "default", Duration::from_secs(60))
                .await
                .unwrap()
            {
                assert_eq!(lease.owner, owner);
                assert_eq!(lease.epoch, 1, "unit {} claimed before", lease.id);
                q.write(
                    &lease,
                    &[NewWrite {
                        kind: "audit".into(),
                        body: json!({"by": owner}),
                    }],
                )
                .await
                .unwrap();
                q.complete(&lease, &json!({"ok": true})).await.unwrap();
                got.push(lease.id);
            }
            got
        }));
    }
    let mut all = Vec::new();
    let mut busy = 0;
    for t in tasks {
        let got = t.await.unwrap();
        busy += usize::from(!got.is_empty());
        all.extend(got);
    }
    let distinct: HashSet<i64> = all.iter().copied().collect();
    assert_eq!(all.len() as i64, UNITS, "claims");
    assert_eq!(distinct.len() as i64, UNITS, "a unit was claimed twice");
    assert!(busy >= 2, "only {busy} claimer(s) got work");
    let s = queue.status(5).await.unwrap();
    assert_eq!(s.counts.done, UNITS);
    assert_eq!(s.counts.total(), UNITS);
    // Exactly one write per unit, each at epoch 1 by the unit's only owner.
    assert_eq!(
        pg.psql(
            "postgres",
            "SELECT count(*), count(DISTINCT unit_id), max(epoch) FROM baton.unit_writes"
        )
        .unwrap(),
        format!("{UNITS}|{UNITS}|1")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_and_lease_checks_use_their_index_whatever_the_statistics_say() {
    let Some(pg) =
        postgres_or_skip("claims_and_lease_checks_use_their_index_whatever_the_statistics_say")
    else {
        return;
    };
    let _queue = fresh(&pg).await;
    // Statistics taken when every unit was queued, then most of them leased. A claim that walks
    // the primary key in id order reads every unit claimed before it (measured: claims/s halved
    // after 4,000 claims of 10,000); a lease check that walks the index of leases reads every
    // lease (measured: a worker's cycle 3x slower with 4,000 leases held).
    pg.psql(
        "postgres",
        &format!(
            "INSERT INTO baton.work_units (kind, queue, project_remote, base_commit) \
             SELECT 'run', 'default', 'r', '{COMMIT}' FROM generate_series(1, 5000)"
        ),
    )
    .unwrap();
    pg.psql("postgres", "ANALYZE baton.work_units").unwrap();
    pg.psql(
        "postgres",
        "UPDATE baton.work_units SET state = 'leased', owner = 'w', epoch = 1, \
         lease_expires_at = now() + interval '1 hour' WHERE id <= 4000",
    )
    .unwrap();
    let plan = |sql: &str, types: &str, args: &str| {
        pg.psql(
            "postgres",
            &format!("PREPARE s({types}) AS {sql}; EXPLAIN (COSTS OFF) EXECUTE s({args})"),
        )
        .unwrap()
    };
    let claim = plan(
        baton_queue::CLAIM_SQL,
        "text, text, float8",
        "'w', 'default', 30",
    );
    // The claim's own scan reads the ready index, in its order (no sort of all queued units).
    assert!(
        claim.contains("LockRows\n                ->  Index Scan using work_units_ready"),
        "{claim}"
    );
    assert!(!claim.contains("Sort"), "{claim}");
    for (name, sql, types, args) in [
        ("fence", baton_queue::FENCE_SQL, "bigint", "4001"),
        (
            "fenced append",
            baton_queue::FENCED_APPEND_SQL,
            "bigint, bigint, text, jsonb, text",
            "4001, 1, 'checkpoint', '{}', 'w'",
        ),
        (
            "heartbeat",
            baton_queue::HEARTBEAT_SQL,
            "bigint, bigint, text, float8",
            "4001, 1, 'w', 30",
        ),
    ] {
        let p = plan(sql, types, args);
        assert!(
            p.contains("Index Scan using work_units_pkey"),
            "{name}: {p}"
        );
        assert!(!p.contains("work_units_leased"), "{name}: {p}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_is_claimed_again_and_the_old_owner_writes_nothing() {
    let Some(pg) =
        postgres_or_skip("an_expired_lease_is_claimed_again_and_the_old_owner_writes_nothing")
    else {
        return;
    };
    let mut a = fresh(&pg).await;
    let mut b = Queue::open(&config(&pg)).await.unwrap();
    let id = a.submit(&unit("default", 1)).await.unwrap();
    let old = a
        .claim("worker-a", "default", Duration::from_millis(300))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((old.id, old.epoch, old.attempts), (id, 1, 1));
    a.write(
        &old,
        &[NewWrite {
            kind: "state".into(),
            body: json!({"turn": 1}),
        }],
    )
    .await
    .unwrap();

    // Nobody claims a leased unit, expired or not, before the sweep returns it.
    assert!(
        b.claim("worker-b", "default", Duration::from_secs(30))
            .await
            .unwrap()
            .is_none()
    );
    let expired = sweep_until(&b, id).await;
    assert_eq!(expired.epoch, 1);
    assert_eq!(expired.owner.as_deref(), Some("worker-a"));
    assert_eq!(expired.state, UnitState::Queued);
    // Expired and swept, not yet claimed: the old owner is already fenced off.
    let msg = lost(
        a.write(
            &old,
            &[NewWrite {
                kind: "state".into(),
                body: json!({"turn": 2}),
            }],
        )
        .await
        .unwrap_err(),
    );
    assert!(msg.contains("went back to the queue"), "{msg}");
    // The same in one statement (a worker's checkpoint).
    let msg = lost(
        a.append_fenced(&old, "state", &json!({"turn": 2}))
            .await
            .unwrap_err(),
    );
    assert!(msg.contains("went back to the queue"), "{msg}");

    let new = b
        .claim("worker-b", "default", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((new.id, new.epoch, new.attempts), (id, 2, 2));

    // The old owner: every write, the heartbeat, complete and fail get LEASE_LOST.
    let msg = lost(
        a.write(
            &old,
            &[NewWrite {
                kind: "state".into(),
                body: json!({"turn": 2, "zombie": true}),
            }],
        )
        .await
        .unwrap_err(),
    );
    assert!(
        msg.contains("claimed again (epoch 2, held by worker-b)"),
        "{msg}"
    );
    let mut old_hb = old.clone();
    lost(
        a.heartbeat(&mut old_hb, Duration::from_secs(30))
            .await
            .unwrap_err(),
    );
    lost(
        a.complete(&old, &json!({"zombie": true}))
            .await
            .unwrap_err(),
    );
    lost(a.fail(&old, &json!({"zombie": true})).await.unwrap_err());
    lost(
        a.wait_for_person(&old, &json!({"q": "?"}))
            .await
            .unwrap_err(),
    );
    let msg = lost(
        a.append_fenced(&old, "state", &json!({"turn": 2, "zombie": true}))
            .await
            .unwrap_err(),
    );
    assert!(msg.contains("claimed again (epoch 2"), "{msg}");
    // A forged lease with the new epoch but the old owner is refused too.
    let forged = Lease {
        epoch: 2,
        ..old.clone()
    };
    lost(a.append_fenced(&forged, "x", &json!(1)).await.unwrap_err());
    lost(
        a.write(
            &forged,
            &[NewWrite {
                kind: "x".into(),
                body: json!(1),
            }],
        )
        .await
        .unwrap_err(),
    );

    // The new owner writes (in one statement) and completes; the old owner's writes are only
    // those of epoch 1.
    b.append_fenced(&new, "state", &json!({"turn": 2}))
        .await
        .unwrap();
    b.complete(&new, &json!({"by": "b"})).await.unwrap();
    let writes = b.writes(id, 0, 100).await.unwrap();
    // Paged: one at a time, on from the last seq.
    let first = b.writes(id, 0, 1).await.unwrap();
    let rest = b.writes(id, first[0].seq, 10).await.unwrap();
    assert_eq!((first.len(), rest.len()), (1, 1));
    assert_eq!(rest[0].seq, writes[1].seq);
    let seen: Vec<(i64, serde_json::Value)> =
        writes.iter().map(|w| (w.epoch, w.body.clone())).collect();
    assert_eq!(
        seen,
        vec![(1, json!({"turn": 1})), (2, json!({"turn": 2}))],
        "{writes:?}"
    );
    let u = b.unit(id).await.unwrap();
    assert_eq!(u.state, UnitState::Done);
    assert_eq!(u.owner.as_deref(), Some("worker-b"));
    assert_eq!(u.outcome, Some(json!({"by": "b"})));

    // The same worker id claiming again (a restarted worker on the same host): only the epoch
    // tells the two leases apart, and the stale one writes nothing.
    let id2 = a.submit(&unit("default", 2)).await.unwrap();
    let stale = a
        .claim("worker-a", "default", Duration::from_millis(200))
        .await
        .unwrap()
        .unwrap();
    sweep_until(&a, id2).await;
    let fresh_lease = a
        .claim("worker-a", "default", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (fresh_lease.id, stale.epoch, fresh_lease.epoch),
        (id2, 1, 2)
    );
    let msg = lost(
        a.write(
            &stale,
            &[NewWrite {
                kind: "state".into(),
                body: json!("stale"),
            }],
        )
        .await
        .unwrap_err(),
    );
    assert!(msg.contains("claimed again (epoch 2"), "{msg}");
    lost(a.complete(&stale, &json!("stale")).await.unwrap_err());
    let mut stale_hb = stale.clone();
    lost(
        a.heartbeat(&mut stale_hb, Duration::from_secs(30))
            .await
            .unwrap_err(),
    );
    assert!(a.writes(id2, 0, 100).await.unwrap().is_empty());
    a.complete(&fresh_lease, &json!("fresh")).await.unwrap();
    assert_eq!(a.unit(id2).await.unwrap().outcome, Some(json!("fresh")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_extend_only_a_valid_lease() {
    let Some(pg) = postgres_or_skip("heartbeats_extend_only_a_valid_lease") else {
        return;
    };
    let q = fresh(&pg).await;
    let id = q.submit(&unit("default", 1)).await.unwrap();
    let mut lease = q
        .claim("w", "default", Duration::from_millis(500))
        .await
        .unwrap()
        .unwrap();
    let expires = |pg: &PgServer| {
        pg.psql(
            "postgres",
            &format!(
                "SELECT round(extract(epoch FROM lease_expires_at - now())) \
                 FROM baton.work_units WHERE id = {id}"
            ),
        )
        .unwrap()
    };
    q.heartbeat(&mut lease, Duration::from_secs(3600))
        .await
        .unwrap();
    assert_eq!(expires(&pg), "3600");
    assert_eq!(lease.duration, Duration::from_secs(3600));

    // A stale epoch or another owner cannot renew it, and leaves it as it was.
    let mut stale = Lease {
        epoch: lease.epoch - 1,
        ..lease.clone()
    };
    lost(
        q.heartbeat(&mut stale, Duration::from_secs(7200))
            .await
            .unwrap_err(),
    );
    let mut other = Lease {
        owner: "intruder".into(),
        ..lease.clone()
    };
    lost(
        q.heartbeat(&mut other, Duration::from_secs(7200))
            .await
            .unwrap_err(),
    );
    assert_eq!(expires(&pg), "3600");

    // Once expired (even before any sweep), the holder cannot renew it any more.
    q.heartbeat(&mut lease, Duration::from_millis(200))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while pg
        .psql(
            "postgres",
            &format!("SELECT lease_expires_at <= now() FROM baton.work_units WHERE id = {id}"),
        )
        .unwrap()
        != "t"
    {
        assert!(Instant::now() < deadline, "the lease never expired");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let msg = lost(
        q.heartbeat(&mut lease, Duration::from_secs(30))
            .await
            .unwrap_err(),
    );
    assert!(msg.contains("expired before it was renewed"), "{msg}");
    // Invalid durations are refused before reaching the database.
    let e = q.heartbeat(&mut lease, Duration::ZERO).await.unwrap_err();
    assert_eq!(e.code(), "QUEUE_INVALID_INPUT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_transaction_holds_off_cancel_until_it_commits() {
    let Some(pg) = postgres_or_skip("a_fenced_transaction_holds_off_cancel_until_it_commits")
    else {
        return;
    };
    let mut a = fresh(&pg).await;
    let b = Queue::open(&config(&pg)).await.unwrap();
    let id = a.submit(&unit("default", 1)).await.unwrap();
    let lease = a
        .claim("w", "default", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    let tx = a.fenced(&lease).await.unwrap();
    tx.append("state", &json!({"turn": 1})).await.unwrap();
    let cancel = tokio::spawn(async move { b.cancel(id).await });
    // Wait until the cancel is blocked on the unit's row lock.
    let deadline = Instant::now() + Duration::from_secs(20);
    while pg
        .psql(
            "postgres",
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
             AND query LIKE '%state = ''cancelled''%'",
        )
        .unwrap()
        != "1"
    {
        assert!(
            !cancel.is_finished(),
            "cancel did not wait for the fenced write"
        );
        assert!(Instant::now() < deadline, "cancel never blocked");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tx.commit().await.unwrap();
    assert_eq!(cancel.await.unwrap().unwrap(), UnitState::Leased);
    // The write made under the lease is kept; the holder is fenced off from now on.
    assert_eq!(a.writes(id, 0, 100).await.unwrap().len(), 1);
    let msg = lost(
        a.write(
            &lease,
            &[NewWrite {
                kind: "state".into(),
                body: json!(2),
            }],
        )
        .await
        .unwrap_err(),
    );
    assert!(msg.contains("cancelled"), "{msg}");
    assert_eq!(a.writes(id, 0, 100).await.unwrap().len(), 1);

    // A transaction dropped without commit writes nothing.
    let id2 = a.submit(&unit("default", 2)).await.unwrap();
    let l2 = a
        .claim("w", "default", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(l2.id, id2);
    {
        let tx = a.fenced(&l2).await.unwrap();
        tx.append("state", &json!("lost")).await.unwrap();
    }
    assert!(a.writes(id2, 0, 100).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_takes_queued_leased_and_waiting_units_and_refuses_finished_ones() {
    let Some(pg) =
        postgres_or_skip("cancel_takes_queued_leased_and_waiting_units_and_refuses_finished_ones")
    else {
        return;
    };
    let mut q = fresh(&pg).await;
    let queued = q.submit(&unit("default", 1)).await.unwrap();
    let leased = q.submit(&unit("default", 2)).await.unwrap();
    let waiting = q.submit(&unit("default", 3)).await.unwrap();
    let done = q.submit(&unit("default", 4)).await.unwrap();
    assert_eq!(q.cancel(queued).await.unwrap(), UnitState::Queued);
    let l = q
        .claim("w", "default", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(l.id, leased);
    let w = q
        .claim("w", "default", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    q.wait_for_person(&w, &json!({"message": "which?"}))
        .await
        .unwrap();
    let d = q
        .claim("w", "default", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    q.complete(&d, &json!({})).await.unwrap();
    assert_eq!(q.cancel(leased).await.unwrap(), UnitState::Leased);
    assert_eq!(q.cancel(waiting).await.unwrap(), UnitState::Waiting);
    let e = q.cancel(done).await.unwrap_err();
    assert_eq!(e.code(), "QUEUE_UNIT_FINISHED");
    assert!(e.to_string().contains("already done"), "{e}");
    let e = q.cancel(leased).await.unwrap_err();
    assert_eq!(e.code(), "QUEUE_UNIT_FINISHED");
    let e = q.cancel(999_999).await.unwrap_err();
    assert_eq!(e.code(), "QUEUE_UNIT_NOT_FOUND");
    // The cancelled leased unit's holder is fenced off; cancelled units are never claimed.
    lost(q.complete(&l, &json!({})).await.unwrap_err());
    assert!(
        q.claim("w", "default", Duration::from_secs(60))
            .await
            .unwrap()
            .is_none()
    );
    let s = q.status(10).await.unwrap();
    assert_eq!(
        (s.counts.cancelled, s.counts.done, s.counts.total()),
        (3, 1, 4)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unit_waits_for_a_person_and_an_answer_queues_it_again() {
    let Some(pg) = postgres_or_skip("a_unit_waits_for_a_person_and_an_answer_queues_it_again")
    else {
        return;
    };
    let mut q = fresh(&pg).await;
    let id = q.submit(&unit("default", 1)).await.unwrap();
    let first = q
        .claim("w1", "default", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    let e = q.answer(id, &json!("too early")).await.unwrap_err();
    assert_eq!(e.code(), "QUEUE_UNIT_STATE", "{e}");
    q.wait_for_person(&first, &json!({"message": "Which database?"}))
        .await
        .unwrap();
    let u = q.unit(id).await.unwrap();
    assert_eq!(u.state, UnitState::Waiting);
    assert_eq!(u.question, Some(json!({"message": "Which database?"})));
    assert!(u.lease_expires_at.is_none());
    // The lease ended with the question: the old holder writes nothing more, nobody claims it.
    lost(
        q.write(
            &first,
            &[NewWrite {
                kind: "x".into(),
                body: json!(1),
            }],
        )
        .await
        .unwrap_err(),
    );
    assert!(
        q.claim("w2", "default", Duration::from_secs(60))
            .await
            .unwrap()
            .is_none()
    );
    q.answer(id, &json!("PostgreSQL")).await.unwrap();
    let second = q
        .claim("w2", "default", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((second.id, second.epoch), (id, 2));
    let kinds: Vec<(String, i64)> = q
        .writes(id, 0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|w| (w.kind, w.epoch))
        .collect();
    assert_eq!(
        kinds,
        vec![("question".to_string(), 1), ("answer".to_string(), 1)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_fails_a_unit_past_its_attempts_and_status_counts_everything() {
    let Some(pg) =
        postgres_or_skip("the_sweep_fails_a_unit_past_its_attempts_and_status_counts_everything")
    else {
        return;
    };
    let mut q = fresh(&pg).await;
    q.register_worker("w-1", "build-1").await.unwrap();
    q.register_worker("w-2", "build-2").await.unwrap();
    q.worker_heartbeat("w-1").await.unwrap();
    let poison = q
        .submit(&NewUnit {
            max_attempts: Some(1),
            kind: UnitKind::Story,
            ..unit("stories", 0)
        })
        .await
        .unwrap();
    let p = q
        .claim("w-2", "stories", Duration::from_millis(200))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(p.kind, UnitKind::Story);
    let e = sweep_until(&q, poison).await;
    assert_eq!(e.state, UnitState::Failed);
    let u = q.unit(poison).await.unwrap();
    assert_eq!(u.outcome.unwrap()["error"], "LEASE_EXPIRED");

    for n in 0..6 {
        q.submit(&unit("default", n)).await.unwrap();
    }
    q.submit(&unit("other", 9)).await.unwrap();
    let a = q
        .claim("w-1", "default", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    let b = q
        .claim("w-1", "default", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    let c = q
        .claim("w-1", "default", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    let d = q
        .claim("w-2", "default", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    q.complete(&a, &json!({})).await.unwrap();
    q.fail(
        &b,
        &json!({"code": "WORKER_GIT_FAILED", "message": "push refused", "runId": "r-1"}),
    )
    .await
    .unwrap();
    q.wait_for_person(&c, &json!({"message": "ok?"}))
        .await
        .unwrap();
    q.cancel(d.id).await.unwrap();
    let held = q
        .claim("w-2", "default", Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();

    let s = q.status(50).await.unwrap();
    assert_eq!(s.schema_version, SCHEMA_VERSION);
    assert_eq!(
        (
            s.counts.queued,
            s.counts.leased,
            s.counts.waiting,
            s.counts.done,
            s.counts.failed,
            s.counts.cancelled
        ),
        (2, 1, 1, 1, 2, 1)
    );
    let per: Vec<(String, i64)> = s
        .queues
        .iter()
        .map(|q| (q.queue.clone(), q.counts.total()))
        .collect();
    assert_eq!(
        per,
        vec![
            ("default".to_string(), 6),
            ("other".to_string(), 1),
            ("stories".to_string(), 1)
        ]
    );
    assert_eq!(s.leased.len(), 1);
    let l = &s.leased[0];
    assert_eq!((l.id, l.owner.as_str(), l.epoch), (held.id, "w-2", 1));
    assert!(l.lease_age_s >= 0.0 && l.expires_in_s > 50.0, "{l:?}");
    assert_eq!(s.waiting.len(), 1);
    assert_eq!(s.waiting[0].question, Some(json!({"message": "ok?"})));
    let workers: Vec<(&str, &str, i64)> = s
        .workers
        .iter()
        .map(|w| (w.id.as_str(), w.host.as_str(), w.leases))
        .collect();
    assert_eq!(workers.len(), 2);
    assert!(workers.contains(&("w-1", "build-1", 0)), "{workers:?}");
    assert!(workers.contains(&("w-2", "build-2", 1)), "{workers:?}");
    assert!(s.workers.iter().all(|w| w.last_heartbeat_age_s < 60.0));
    assert_eq!(s.expired_unswept, 0);
    let text = serde_json::to_string(&s).unwrap();
    assert!(text.contains("\"expiresInS\""), "{text}");
    // The failed units, the most recent first, each with why.
    type Why<'a> = (i64, Option<&'a str>, Option<&'a str>, Option<&'a str>);
    let failed: Vec<Why> = s
        .failed
        .iter()
        .map(|f| {
            (
                f.id,
                f.code.as_deref(),
                f.message.as_deref(),
                f.run_id.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        failed,
        vec![
            (
                b.id,
                Some("WORKER_GIT_FAILED"),
                Some("push refused"),
                Some("r-1")
            ),
            (
                poison,
                Some("LEASE_EXPIRED"),
                Some("the lease expired on attempt 1 of 1"),
                None
            ),
        ]
    );
    assert_eq!(s.failed[0].owner.as_deref(), Some("w-1"));
    assert!(s.failed[0].finished_at.ends_with('Z'), "{:?}", s.failed[0]);
    assert!(text.contains("\"failed\":[{"), "{text}");
    // A worker that stops is kept, as stopped, with when; removed, it is gone.
    assert!(s.stopped_workers.is_empty());
    q.worker_stopped("w-1").await.unwrap();
    let s = q.status(50).await.unwrap();
    assert_eq!(s.workers.len(), 1);
    let stopped: Vec<&str> = s.stopped_workers.iter().map(|w| w.id.as_str()).collect();
    assert_eq!(stopped, vec!["w-1"]);
    assert!(s.stopped_workers[0].stopped_s < 60.0);
    // Started again under the same name: running again.
    q.register_worker("w-1", "build-1").await.unwrap();
    let s = q.status(50).await.unwrap();
    assert_eq!((s.workers.len(), s.stopped_workers.len()), (2, 0));
    q.remove_worker("w-1").await.unwrap();
    assert_eq!(q.status(50).await.unwrap().workers.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packages_are_pinned_by_content_and_bad_units_are_refused() {
    let Some(pg) = postgres_or_skip("packages_are_pinned_by_content_and_bad_units_are_refused")
    else {
        return;
    };
    let q = fresh(&pg).await;
    let packed = |edit: bool| {
        let mut files = baton_package::files::PackageFiles::from_map(
            baton_package::Origin::Directory("demo".into()),
            Default::default(),
        );
        files.insert(
            "bmad.json".into(),
            br#"{"name":"demo","version":"1.0.0"}"#.to_vec(),
        );
        let step: &[u8] = if edit { b"edited" } else { b"step one" };
        files.insert("steps/one.md".into(), step.to_vec());
        baton_package::pack::pack(&files).unwrap()
    };
    let first = packed(false);
    let sha = q.put_package("demo", "1.0.0", &first.bytes).await.unwrap();
    // The package's content digest, the one `baton package list` and `runs show` show (and
    // the archive's integrity.sha256), not the sha256 of the archive's bytes.
    assert_eq!(sha, first.sha256);
    assert_eq!(
        q.put_package("demo", "1.0.0", &first.bytes).await.unwrap(),
        sha
    );
    let other = q
        .put_package("demo", "1.0.0", &packed(true).bytes)
        .await
        .unwrap();
    assert_ne!(other, sha);
    let p = q.package(&sha).await.unwrap().unwrap();
    assert_eq!(
        (p.name.as_str(), p.bytes.as_slice()),
        ("demo", first.bytes.as_slice())
    );
    // Bytes that are not a package are refused.
    let e = q
        .put_package("demo", "1.0.0", b"package bytes")
        .await
        .unwrap_err();
    assert_eq!(e.code(), "QUEUE_INVALID_INPUT", "{e}");
    // A package stored by an older baton, by the sha256 of its bytes, still reads; one whose
    // bytes match neither digest is refused.
    pg.psql(
        "postgres",
        &format!(
            "INSERT INTO baton.packages (sha256, name, version, bytes) VALUES \
             ('2e547448dcd0f2fcd9dbc386d33f1553369883451898177559bcf3e3b1083d16', 'old', '1', \
              'package bytes'::bytea), ('{}', 'bad', '1', 'package bytes'::bytea)",
            "1".repeat(64)
        ),
    )
    .unwrap();
    let old = "2e547448dcd0f2fcd9dbc386d33f1553369883451898177559bcf3e3b1083d16";
    assert_eq!(
        q.package(old).await.unwrap().unwrap().bytes,
        b"package bytes"
    );
    assert!(q.package(&"1".repeat(64)).await.is_err());
    // A trace is pinned by the sha256 of its bytes.
    let t = q.put_trace("run.trace.json", b"{}").await.unwrap();
    assert_eq!(
        t,
        "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    );
    let stored = q.trace(&t).await.unwrap().unwrap();
    assert_eq!(
        (stored.name.as_str(), stored.bytes.as_slice()),
        ("run.trace.json", &b"{}"[..])
    );
    assert!(q.trace(&"0".repeat(64)).await.unwrap().is_none());
    assert!(q.package(&"0".repeat(64)).await.unwrap().is_none());
    let id = q
        .submit(&NewUnit {
            package_sha256: Some(sha.clone()),
            ..unit("default", 1)
        })
        .await
        .unwrap();
    let lease = q
        .claim("w", "default", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (lease.id, lease.package_sha256.as_deref()),
        (id, Some(sha.as_str()))
    );

    let refused = |e: QueueError| {
        assert_eq!(e.code(), "QUEUE_INVALID_INPUT", "{e}");
        e.to_string()
    };
    let msg = refused(
        q.submit(&NewUnit {
            package_sha256: Some("f".repeat(64)),
            ..unit("default", 1)
        })
        .await
        .unwrap_err(),
    );
    assert!(msg.contains("put it first"), "{msg}");
    refused(q.submit(&unit("bad queue", 1)).await.unwrap_err());
    refused(
        q.submit(&NewUnit {
            base_commit: "main".into(),
            ..unit("default", 1)
        })
        .await
        .unwrap_err(),
    );
    refused(
        q.submit(&NewUnit {
            payload: json!("x".repeat(baton_queue::MAX_JSON_BYTES)),
            ..unit("default", 1)
        })
        .await
        .unwrap_err(),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_unit_keeps_its_place_and_its_holder_writes_nothing_more() {
    let Some(pg) = postgres_or_skip("a_released_unit_keeps_its_place") else {
        return;
    };
    let mut q = fresh(&pg).await;
    let first = q.submit(&unit("drain", 1)).await.unwrap();
    let second = q.submit(&unit("drain", 2)).await.unwrap();
    let lease = q
        .claim("w1", "drain", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(lease.id, first);
    q.release(&lease, &json!({"why": "worker stopping"}))
        .await
        .unwrap();
    let u = q.unit(first).await.unwrap();
    assert_eq!(u.state, UnitState::Queued);
    assert_eq!(u.attempts, 0, "a handed-back claim is not an attempt");
    assert!(u.lease_expires_at.is_none());
    let writes = q.writes(first, 0, 10).await.unwrap();
    assert_eq!(writes.last().unwrap().kind, "released");
    // Its place is kept: the next claim takes it again, before the unit queued after it.
    let again = q
        .claim("w2", "drain", Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.id, first);
    assert_eq!(again.epoch, lease.epoch + 1);
    assert_ne!(again.id, second);
    // The old holder can neither write nor release again.
    lost(
        q.write(
            &lease,
            &[NewWrite {
                kind: "state".into(),
                body: json!({}),
            }],
        )
        .await
        .unwrap_err(),
    );
    lost(q.release(&lease, &json!({})).await.unwrap_err());
}
