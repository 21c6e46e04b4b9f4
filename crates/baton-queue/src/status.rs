//! What the queue holds: units per state (overall and per queue), the leased units with their
//! holder, epoch and lease ages, the units waiting for a person, and the workers with their
//! last heartbeat. Ages are measured by the database's clock.

use crate::error::QueueError;
use crate::queue::{Queue, UnitKind, UnitState};
use serde::Serialize;
use serde_json::Value;

/// Units per state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub queued: i64,
    pub leased: i64,
    pub waiting: i64,
    pub done: i64,
    pub failed: i64,
    pub cancelled: i64,
}

impl Counts {
    pub fn get(&self, state: UnitState) -> i64 {
        match state {
            UnitState::Queued => self.queued,
            UnitState::Leased => self.leased,
            UnitState::Waiting => self.waiting,
            UnitState::Done => self.done,
            UnitState::Failed => self.failed,
            UnitState::Cancelled => self.cancelled,
        }
    }

    fn add(&mut self, state: UnitState, n: i64) {
        let slot = match state {
            UnitState::Queued => &mut self.queued,
            UnitState::Leased => &mut self.leased,
            UnitState::Waiting => &mut self.waiting,
            UnitState::Done => &mut self.done,
            UnitState::Failed => &mut self.failed,
            UnitState::Cancelled => &mut self.cancelled,
        };
        *slot += n;
    }

    pub fn total(&self) -> i64 {
        UnitState::ALL.iter().map(|s| self.get(*s)).sum()
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct QueueCounts {
    pub queue: String,
    pub counts: Counts,
}

/// A leased unit and its lease.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeasedUnit {
    pub id: i64,
    pub kind: UnitKind,
    pub queue: String,
    pub owner: String,
    pub epoch: i64,
    pub attempts: i32,
    /// Seconds since the claim.
    pub lease_age_s: f64,
    /// Seconds since the last heartbeat (or the claim).
    pub heartbeat_age_s: f64,
    /// Seconds until the lease expires; negative: expired, not yet swept.
    pub expires_in_s: f64,
}

/// A unit waiting for a person.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitingUnit {
    pub id: i64,
    pub kind: UnitKind,
    pub queue: String,
    pub waiting_s: f64,
    pub question: Option<Value>,
}

/// A worker and its last heartbeat.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerInfo {
    pub id: String,
    pub host: String,
    pub started_at: String,
    pub last_heartbeat_age_s: f64,
    /// Units it holds a lease on now.
    pub leases: i64,
}

/// The queue at a glance.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// The database, without its password.
    pub database: String,
    pub schema_version: i32,
    pub counts: Counts,
    pub queues: Vec<QueueCounts>,
    /// The longest-held leases first, at most the limit asked.
    pub leased: Vec<LeasedUnit>,
    pub waiting: Vec<WaitingUnit>,
    pub workers: Vec<WorkerInfo>,
    /// Leases past their expiry that the sweep has not taken back yet.
    pub expired_unswept: i64,
}

impl Queue {
    /// The queue's status; lists are cut at `limit` rows each (the counts are complete).
    pub async fn status(&self, limit: i64) -> Result<Status, QueueError> {
        let err = |e| crate::error::db_error(e, self.database());
        let client = self.client();
        let limit = limit.max(0);
        let version: i32 = client
            .query_one(
                "SELECT coalesce(max(version), 0) FROM baton.schema_version",
                &[],
            )
            .await
            .map_err(err)?
            .get(0);
        let mut counts = Counts::default();
        let mut queues: Vec<QueueCounts> = Vec::new();
        for row in client
            .query(
                "SELECT queue, state, count(*) FROM baton.work_units GROUP BY queue, state \
                 ORDER BY queue",
                &[],
            )
            .await
            .map_err(err)?
        {
            let queue: String = row.get(0);
            let Some(state) = UnitState::parse(row.get(1)) else {
                continue;
            };
            let n: i64 = row.get(2);
            counts.add(state, n);
            match queues.last_mut() {
                Some(q) if q.queue == queue => q.counts.add(state, n),
                _ => {
                    let mut c = Counts::default();
                    c.add(state, n);
                    queues.push(QueueCounts { queue, counts: c });
                }
            }
        }
        let leased = client
            .query(
                "SELECT id, kind, queue, owner, epoch, attempts,
                        extract(epoch FROM now() - leased_at)::float8,
                        extract(epoch FROM now() - heartbeat_at)::float8,
                        extract(epoch FROM lease_expires_at - now())::float8
                 FROM baton.work_units WHERE state = 'leased'
                 ORDER BY leased_at, id LIMIT $1",
                &[&limit],
            )
            .await
            .map_err(err)?
            .iter()
            .map(|r| LeasedUnit {
                id: r.get(0),
                kind: kind(r.get(1)),
                queue: r.get(2),
                owner: r.get::<_, Option<String>>(3).unwrap_or_default(),
                epoch: r.get(4),
                attempts: r.get(5),
                lease_age_s: round(r.get::<_, Option<f64>>(6)),
                heartbeat_age_s: round(r.get::<_, Option<f64>>(7)),
                expires_in_s: round(r.get::<_, Option<f64>>(8)),
            })
            .collect();
        let waiting = client
            .query(
                "SELECT id, kind, queue, extract(epoch FROM now() - updated_at)::float8, question
                 FROM baton.work_units WHERE state = 'waiting'
                 ORDER BY updated_at, id LIMIT $1",
                &[&limit],
            )
            .await
            .map_err(err)?
            .iter()
            .map(|r| WaitingUnit {
                id: r.get(0),
                kind: kind(r.get(1)),
                queue: r.get(2),
                waiting_s: round(r.get::<_, Option<f64>>(3)),
                question: r.get(4),
            })
            .collect();
        let workers = client
            .query(
                "SELECT w.id, w.host,
                        to_char(w.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),
                        extract(epoch FROM now() - w.last_heartbeat_at)::float8,
                        coalesce(l.n, 0)
                 FROM baton.workers w
                 LEFT JOIN (SELECT owner, count(*) AS n FROM baton.work_units
                            WHERE state = 'leased' GROUP BY owner) l ON l.owner = w.id
                 ORDER BY w.last_heartbeat_at DESC, w.id LIMIT $1",
                &[&limit],
            )
            .await
            .map_err(err)?
            .iter()
            .map(|r| WorkerInfo {
                id: r.get(0),
                host: r.get(1),
                started_at: r.get(2),
                last_heartbeat_age_s: round(r.get::<_, Option<f64>>(3)),
                leases: r.get(4),
            })
            .collect();
        let expired_unswept: i64 = client
            .query_one(
                "SELECT count(*) FROM baton.work_units \
                 WHERE state = 'leased' AND lease_expires_at <= now()",
                &[],
            )
            .await
            .map_err(err)?
            .get(0);
        Ok(Status {
            database: self.database().to_string(),
            schema_version: version,
            counts,
            queues,
            leased,
            waiting,
            workers,
            expired_unswept,
        })
    }
}

fn kind(text: &str) -> UnitKind {
    if text == "story" {
        UnitKind::Story
    } else {
        UnitKind::Run
    }
}

/// Seconds to the millisecond.
fn round(v: Option<f64>) -> f64 {
    (v.unwrap_or(0.0) * 1000.0).round() / 1000.0
}
