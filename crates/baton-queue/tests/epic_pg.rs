//! Epics on the queue against a real throwaway PostgreSQL: the upgrade of a version 1 queue,
//! the epic lease (one holder; the same site takes it over at once, another only once it
//! expired), story units submitted only under the current lease and found again by session.
//! Skips without PostgreSQL unless BATON_REQUIRE_POSTGRES is set.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use baton_queue::{
    DbConfig, MIGRATIONS, NewUnit, Queue, SCHEMA_VERSION, UnitKind, UnitState, UrlSource,
    epic_lease_key, init,
};
use baton_testkit::pg::postgres_or_skip;
use serde_json::json;
use std::time::{Duration, Instant};

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
const REMOTE: &str = "https://git.example/project.git";

fn story(key: &str, session: &str) -> NewUnit {
    NewUnit {
        kind: UnitKind::Story,
        queue: "default".into(),
        payload: json!({"epicId": "epic-1", "story": key, "session": session}),
        package_sha256: None,
        project_remote: REMOTE.into(),
        base_commit: COMMIT.into(),
        max_attempts: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_1_queue_is_upgraded_and_init_stays_idempotent() {
    let Some(pg) = postgres_or_skip("a_version_1_queue_is_upgraded") else {
        return;
    };
    let cfg = DbConfig::from_url(&pg.socket_url("postgres"), UrlSource::Given).unwrap();
    // A queue made by a baton that knew version 1 only, with a unit in it.
    let v1 = MIGRATIONS.iter().find(|m| m.version == 1).unwrap();
    pg.psql(
        "postgres",
        &format!(
            "CREATE SCHEMA baton; CREATE TABLE baton.schema_version (version integer PRIMARY KEY, \
             name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now(), \
             applied_by text NOT NULL); {} INSERT INTO baton.schema_version (version, name, \
             applied_by) VALUES (1, 'v1', 'baton old'); INSERT INTO baton.work_units \
             (kind, queue, project_remote, base_commit) VALUES ('run', 'default', '{REMOTE}', \
             '{COMMIT}');",
            v1.sql
        ),
    )
    .unwrap();
    let e = Queue::open(&cfg).await.err().unwrap();
    assert_eq!(e.code(), "QUEUE_SCHEMA_OUTDATED", "{e}");
    let report = init(&cfg).await.unwrap();
    assert_eq!((report.from_version, report.version), (1, SCHEMA_VERSION));
    let applied: Vec<i32> = report.applied.iter().map(|m| m.version).collect();
    assert_eq!(applied, vec![2, 3], "{report:?}");
    assert!(init(&cfg).await.unwrap().applied.is_empty());
    let q = Queue::open(&cfg).await.unwrap();
    // The unit made before the upgrade is still there.
    assert_eq!(q.unit(1).await.unwrap().state, UnitState::Queued);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_orchestrator_holds_an_epic_and_only_it_submits_stories() {
    let Some(pg) = postgres_or_skip("one_orchestrator_holds_an_epic") else {
        return;
    };
    let cfg = DbConfig::from_url(&pg.socket_url("postgres"), UrlSource::Given).unwrap();
    init(&cfg).await.unwrap();
    let q = Queue::open(&cfg).await.unwrap();
    let key = epic_lease_key(REMOTE, "epic-1");
    let lease = Duration::from_millis(1500);
    let first = q
        .acquire_epic(&key, "a:1", "host-a:/p", lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.epoch, 1);
    // Another site is refused while the lease lives, and told who holds it.
    let holder = q
        .acquire_epic(&key, "b:2", "host-b:/p", lease)
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(
        (holder.owner.as_str(), holder.site.as_str()),
        ("a:1", "host-a:/p")
    );
    assert!(holder.expires_in_s > 0.0);
    // Another epic of the same remote is independent.
    let other = epic_lease_key(REMOTE, "epic-2");
    assert!(
        q.acquire_epic(&other, "b:2", "host-b:/p", lease)
            .await
            .unwrap()
            .is_ok()
    );
    // The holder submits; its units are found by session.
    let id = q
        .submit_story(&first, &story("1-1-a", "s1"))
        .await
        .unwrap()
        .unwrap();
    assert!(q.heartbeat_epic(&first).await.unwrap());
    // Restarted at the same site (its own project lock says the old one is dead): taken
    // over at once, and the old holder can neither renew nor submit.
    let again = q
        .acquire_epic(&key, "a:3", "host-a:/p", lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.epoch, 2);
    assert!(!q.heartbeat_epic(&first).await.unwrap());
    assert!(
        q.submit_story(&first, &story("1-2-b", "s1"))
            .await
            .unwrap()
            .is_none()
    );
    let found = q.story_units(REMOTE, "epic-1", "s1").await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].id, found[0].story.as_str()), (id, "1-1-a"));
    assert!(
        q.story_units(REMOTE, "epic-1", "s2")
            .await
            .unwrap()
            .is_empty()
    );
    // From another site only once it expired.
    let deadline = Instant::now() + Duration::from_secs(20);
    let taken = loop {
        match q
            .acquire_epic(&key, "b:4", "host-b:/p", lease)
            .await
            .unwrap()
        {
            Ok(l) => break l,
            Err(_) => {
                assert!(Instant::now() < deadline, "the lease never expired");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert_eq!(taken.epoch, 3);
    assert!(
        q.submit_story(&again, &story("1-2-b", "s1"))
            .await
            .unwrap()
            .is_none()
    );
    // Released: another site acquires it at once.
    q.release_epic(&taken).await.unwrap();
    assert!(
        q.acquire_epic(&key, "c:5", "host-c:/p", lease)
            .await
            .unwrap()
            .is_ok()
    );
}
