//! Epics on the queue: the lease an epic's orchestrator holds (one per project remote and epic)
//! and the story units it submits under it.
//!
//! The lease works like a unit's: acquired with an epoch the database bumps, renewed by
//! heartbeat, lost once expired. It is taken over at once by an orchestrator started again at
//! the same *site* (host and project folder: the caller holds the project's own lock there, so
//! no other orchestrator of that site lives), and from another site only once it expired. A
//! story unit is inserted in the same statement that checks the lease, so an orchestrator whose
//! lease was taken over submits nothing more.

use crate::error::{QueueError, db_error};
use crate::queue::{NewUnit, Queue, UnitState, check_lease, check_unit, submit_error};
use serde::Serialize;
use serde_json::Value;
use std::time::Duration;

/// A held epic lease.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EpicLease {
    /// `<project remote>#<epic id>`
    pub epic: String,
    pub owner: String,
    pub site: String,
    pub epoch: i64,
    #[serde(skip)]
    pub duration: Duration,
}

/// Who holds an epic's lease (when it could not be acquired).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EpicHolder {
    pub owner: String,
    pub site: String,
    pub epoch: i64,
    /// Seconds until the lease expires without a heartbeat.
    pub expires_in_s: f64,
}

/// A story unit as an orchestrator follows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoryUnit {
    pub id: i64,
    pub state: UnitState,
    /// The story key its payload names.
    pub story: String,
    pub epoch: i64,
    pub question: Option<Value>,
    pub outcome: Option<Value>,
}

/// The key of an epic's lease.
pub fn epic_lease_key(remote: &str, epic_id: &str) -> String {
    format!("{remote}#{epic_id}")
}

const ACQUIRE: &str = "
INSERT INTO baton.epic_leases AS l (epic, owner, site, epoch, expires_at)
VALUES ($1, $2, $3, 1, now() + make_interval(secs => $4))
ON CONFLICT (epic) DO UPDATE
SET owner = $2, site = $3, epoch = l.epoch + 1, acquired_at = now(), heartbeat_at = now(),
    expires_at = now() + make_interval(secs => $4)
WHERE l.expires_at <= now() OR l.site = $3
RETURNING epoch";

const SUBMIT: &str = "
WITH held AS (
    SELECT 1 FROM baton.epic_leases
    WHERE epic = $1 AND epoch = $2 AND owner = $3 AND expires_at > now()
    FOR SHARE
)
INSERT INTO baton.work_units (kind, queue, payload, package_sha256, project_remote, base_commit,
                              max_attempts)
SELECT 'story', $4, $5, $6, $7, $8, $9 FROM held
RETURNING id";

impl Queue {
    /// Acquires the lease of epic `key` for `owner` at `site`; `Err(holder)` when another
    /// orchestrator holds it.
    pub async fn acquire_epic(
        &self,
        key: &str,
        owner: &str,
        site: &str,
        lease: Duration,
    ) -> Result<Result<EpicLease, EpicHolder>, QueueError> {
        check_lease(lease)?;
        let db = self.database().to_string();
        loop {
            let row = self
                .client()
                .query_opt(ACQUIRE, &[&key, &owner, &site, &lease.as_secs_f64()])
                .await
                .map_err(|e| db_error(e, &db))?;
            if let Some(row) = row {
                return Ok(Ok(EpicLease {
                    epic: key.to_string(),
                    owner: owner.to_string(),
                    site: site.to_string(),
                    epoch: row.get(0),
                    duration: lease,
                }));
            }
            let row = self
                .client()
                .query_opt(
                    "SELECT owner, site, epoch, \
                     greatest(extract(epoch FROM expires_at - now()), 0)::float8 \
                     FROM baton.epic_leases WHERE epic = $1",
                    &[&key],
                )
                .await
                .map_err(|e| db_error(e, &db))?;
            // None: released between the two statements; try again.
            if let Some(r) = row {
                return Ok(Err(EpicHolder {
                    owner: r.get(0),
                    site: r.get(1),
                    epoch: r.get(2),
                    expires_in_s: r.get(3),
                }));
            }
        }
    }

    /// Renews a held epic lease; `false` when it is no longer held (expired and taken over).
    pub async fn heartbeat_epic(&self, lease: &EpicLease) -> Result<bool, QueueError> {
        let n = self
            .client()
            .execute(
                "UPDATE baton.epic_leases SET heartbeat_at = now(), \
                 expires_at = now() + make_interval(secs => $4) \
                 WHERE epic = $1 AND epoch = $2 AND owner = $3 AND expires_at > now()",
                &[
                    &lease.epic,
                    &lease.epoch,
                    &lease.owner,
                    &lease.duration.as_secs_f64(),
                ],
            )
            .await
            .map_err(|e| db_error(e, self.database()))?;
        Ok(n == 1)
    }

    /// Lets the lease go (an orchestrator that ends): another may acquire it at once.
    pub async fn release_epic(&self, lease: &EpicLease) -> Result<(), QueueError> {
        self.client()
            .execute(
                "UPDATE baton.epic_leases SET expires_at = now() \
                 WHERE epic = $1 AND epoch = $2 AND owner = $3",
                &[&lease.epic, &lease.epoch, &lease.owner],
            )
            .await
            .map_err(|e| db_error(e, self.database()))?;
        Ok(())
    }

    /// Submits a story unit under the epic's lease, in one statement that checks it; `None`
    /// (nothing inserted) when the lease is no longer held.
    pub async fn submit_story(
        &self,
        lease: &EpicLease,
        unit: &NewUnit,
    ) -> Result<Option<i64>, QueueError> {
        check_unit(unit)?;
        let db = self.database().to_string();
        let row = self
            .client()
            .query_opt(
                SUBMIT,
                &[
                    &lease.epic,
                    &lease.epoch,
                    &lease.owner,
                    &unit.queue,
                    &unit.payload,
                    &unit.package_sha256,
                    &unit.project_remote,
                    &unit.base_commit.to_ascii_lowercase(),
                    &unit.max_attempts,
                ],
            )
            .await
            .map_err(|e| submit_error(e, unit, &db))?;
        Ok(row.map(|r| r.get(0)))
    }

    /// The story units of an epic's session (submitted by its orchestrator), oldest first.
    pub async fn story_units(
        &self,
        remote: &str,
        epic_id: &str,
        session: &str,
    ) -> Result<Vec<StoryUnit>, QueueError> {
        let rows = self
            .client()
            .query(
                "SELECT id, state, coalesce(payload->>'story', ''), epoch, question, outcome \
                 FROM baton.work_units \
                 WHERE kind = 'story' AND project_remote = $1 AND payload->>'epicId' = $2 \
                 AND payload->>'session' = $3 ORDER BY id",
                &[&remote, &epic_id, &session],
            )
            .await
            .map_err(|e| db_error(e, self.database()))?;
        Ok(rows
            .iter()
            .map(|r| StoryUnit {
                id: r.get(0),
                state: UnitState::parse(r.get(1)).unwrap_or(UnitState::Queued),
                story: r.get(2),
                epoch: r.get(3),
                question: r.get(4),
                outcome: r.get(5),
            })
            .collect())
    }
}
