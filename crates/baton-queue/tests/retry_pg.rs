//! `Queue::retry_later` and the questions a worker asks of a unit's writes, against a real
//! throwaway PostgreSQL: a unit queued again under its lease is hidden until its time, keeps its
//! attempts, records why, and a stale lease writes nothing. Skips without PostgreSQL unless
//! BATON_REQUIRE_POSTGRES is set.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use baton_queue::{DbConfig, NewUnit, NewWrite, Queue, UnitKind, UnitState, UrlSource, init};
use baton_testkit::pg::{PgServer, postgres_or_skip};
use serde_json::json;
use std::time::Duration;

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
const LEASE: Duration = Duration::from_secs(30);

fn config(pg: &PgServer) -> DbConfig {
    DbConfig::from_url(&pg.socket_url("postgres"), UrlSource::Given).unwrap()
}

fn unit() -> NewUnit {
    NewUnit {
        kind: UnitKind::Run,
        queue: "default".into(),
        payload: json!({}),
        package_sha256: None,
        project_remote: "https://git.example/project.git".into(),
        base_commit: COMMIT.into(),
        max_attempts: Some(4),
    }
}

fn writes_of(pg: &PgServer, id: i64) -> String {
    pg.psql(
        "postgres",
        &format!(
            "SELECT string_agg(kind || '@' || epoch, ',' ORDER BY seq) FROM baton.unit_writes \
             WHERE unit_id = {id}"
        ),
    )
    .unwrap()
    .trim()
    .to_string()
}

/// The unit's retry time, moved to now (as if its wait had passed).
fn make_ready(pg: &PgServer, id: i64) {
    pg.psql(
        "postgres",
        &format!("UPDATE baton.work_units SET ready_at = now() WHERE id = {id}"),
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unit_tried_again_later_waits_for_its_time_and_a_stale_lease_writes_nothing() {
    let Some(pg) = postgres_or_skip("a_unit_tried_again_later_waits_for_its_time") else {
        return;
    };
    init(&config(&pg)).await.unwrap();
    let queue = Queue::open(&config(&pg)).await.unwrap();
    let id = queue.submit(&unit()).await.unwrap();
    let first = queue.claim("w1", "default", LEASE).await.unwrap().unwrap();
    assert_eq!(queue.retries_in_a_row(id).await.unwrap(), 0);

    let reason = json!({"code": "LLM_CONNECT_ERROR", "message": "refused", "attempt": 1});
    queue
        .retry_later(&first, Duration::from_secs(3600), &reason)
        .await
        .unwrap();
    let u = queue.unit(id).await.unwrap();
    assert_eq!(u.state, UnitState::Queued);
    assert_eq!((u.epoch, u.attempts), (1, 1));
    assert_eq!(u.owner.as_deref(), Some("w1"));
    assert!(u.lease_expires_at.is_none());
    // Not claimable before its time.
    assert!(queue.claim("w2", "default", LEASE).await.unwrap().is_none());
    // The status lists it, with its last failure.
    let status = queue.status(10).await.unwrap();
    assert_eq!(status.retrying.len(), 1);
    let r = &status.retrying[0];
    assert_eq!((r.id, r.attempts, r.max_attempts), (id, 1, Some(4)));
    assert!(r.ready_in_s > 3000.0, "{}", r.ready_in_s);
    assert_eq!(r.reason, reason);
    assert_eq!(queue.retries_in_a_row(id).await.unwrap(), 1);

    // Its time comes: claimed again at the next epoch, its attempts counted.
    make_ready(&pg, id);
    let second = queue.claim("w2", "default", LEASE).await.unwrap().unwrap();
    assert_eq!((second.id, second.epoch, second.attempts), (id, 2, 2));
    assert!(queue.status(10).await.unwrap().retrying.is_empty());
    // The first lease is stale: refused, nothing written, the unit untouched.
    let before = writes_of(&pg, id);
    let e = queue
        .retry_later(&first, Duration::from_secs(1), &reason)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "LEASE_LOST", "{e}");
    assert!(e.to_string().contains("epoch 2"), "{e}");
    assert_eq!(writes_of(&pg, id), before);
    assert_eq!(queue.unit(id).await.unwrap().state, UnitState::Leased);

    // A checkpoint after a phase does not reset the count; one after a model turn, or an
    // answer, does.
    let mut queue = queue;
    let phase = NewWrite {
        kind: "checkpoint".into(),
        body: json!({"point": "phase:failed"}),
    };
    queue.write(&second, &[phase]).await.unwrap();
    queue
        .retry_later(&second, Duration::ZERO, &json!({"code": "LLM_TIMEOUT"}))
        .await
        .unwrap();
    assert_eq!(queue.retries_in_a_row(id).await.unwrap(), 2);
    let third = queue.claim("w3", "default", LEASE).await.unwrap().unwrap();
    assert_eq!(third.epoch, 3);
    let turn = NewWrite {
        kind: "checkpoint".into(),
        body: json!({"point": "turn"}),
    };
    queue.write(&third, &[turn]).await.unwrap();
    assert_eq!(queue.retries_in_a_row(id).await.unwrap(), 0);
    let last = queue
        .last_write_of(id, &["answer", "checkpoint"])
        .await
        .unwrap()
        .unwrap();
    assert_eq!((last.kind.as_str(), last.epoch), ("checkpoint", 3));
    assert!(
        queue
            .last_write_of(id, &["answer"])
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        writes_of(&pg, id),
        "retry@1,checkpoint@2,retry@2,checkpoint@3"
    );

    // A wait past a day is refused before anything is written.
    let e = queue
        .retry_later(&third, Duration::from_secs(2 * 24 * 3600), &reason)
        .await
        .unwrap_err();
    assert_eq!(e.code(), "QUEUE_INVALID_INPUT");
    assert_eq!(queue.unit(id).await.unwrap().state, UnitState::Leased);
}
