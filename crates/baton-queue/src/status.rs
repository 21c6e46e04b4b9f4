//! What the queue holds: units per state (overall and per queue), the leased units with their
//! holder, epoch and lease ages, the units waiting for a person, the units waiting to be tried
//! again after a failure that may pass, the failed units with why, the running workers with
//! their last heartbeat and those that stopped lately. Ages are measured by the database's
//! clock.

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
    /// When it began waiting (RFC 3339, UTC).
    pub since: String,
    pub question: Option<Value>,
}

/// A unit queued again after a failure that may pass (the model or the git remote
/// unreachable, the database connection lost), until its retry time.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryingUnit {
    pub id: i64,
    pub kind: UnitKind,
    pub queue: String,
    /// Claims so far.
    pub attempts: i32,
    pub max_attempts: Option<i32>,
    /// Seconds until it may be claimed again (0 or less: ready now).
    pub ready_in_s: f64,
    /// The last failure, as the worker recorded it (`code`, `message`, …).
    pub reason: Value,
}

impl WaitingUnit {
    /// The question as text: a worker records `{"question": "…", "runId": …}`; another shape
    /// is shown as its `message`, or as JSON.
    pub fn question_text(&self) -> Option<String> {
        let q = self.question.as_ref()?;
        Some(
            match ["question", "message"]
                .iter()
                .find_map(|k| q.get(k).and_then(Value::as_str))
            {
                Some(text) => text.to_string(),
                None => match q {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                },
            },
        )
    }
}

/// A unit that failed, with why (the code and message its worker or the sweep recorded).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailedUnit {
    pub id: i64,
    pub kind: UnitKind,
    pub queue: String,
    pub attempts: i32,
    /// The last worker that held it.
    pub owner: Option<String>,
    /// When it failed (RFC 3339, UTC), and how long ago in seconds.
    pub finished_at: String,
    pub failed_s: f64,
    /// The failure's code (`LLM_UNREACHABLE`, `WORKER_GIT_FAILED`, …), when recorded.
    pub code: Option<String>,
    pub message: Option<String>,
    /// The run it failed, when a run had started.
    pub run_id: Option<String>,
}

/// A worker that stopped cleanly (a killed one is never marked: it stays among the workers,
/// its heartbeat growing old).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoppedWorker {
    pub id: String,
    pub host: String,
    pub started_at: String,
    /// When it stopped (RFC 3339, UTC), and how long ago in seconds.
    pub stopped_at: String,
    pub stopped_s: f64,
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
    /// Units waiting for their retry after a failure that may pass, soonest first.
    pub retrying: Vec<RetryingUnit>,
    /// Failed units, the most recent first.
    pub failed: Vec<FailedUnit>,
    /// Running workers (registered, not stopped), the latest heartbeat first.
    pub workers: Vec<WorkerInfo>,
    /// Workers that stopped in the last 24 hours, the most recent first.
    pub stopped_workers: Vec<StoppedWorker>,
    /// Leases past their expiry that the sweep has not taken back yet.
    pub expired_unswept: i64,
}

impl Status {
    /// What the queue holds (units per state and queue, leases, units waiting for a person or
    /// a retry, workers and their last heartbeat), its lists cut at `limit` rows each: the one
    /// call behind `baton queue status` and `baton serve`'s queue page.
    pub async fn read(config: &crate::DbConfig, limit: i64) -> Result<Status, QueueError> {
        Queue::open(config).await?.status(limit).await
    }
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
        let waiting = self.waiting_units(limit).await?;
        let retrying = self.retrying_units(limit).await?;
        let workers = client
            .query(
                "SELECT w.id, w.host,
                        to_char(w.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),
                        extract(epoch FROM now() - w.last_heartbeat_at)::float8,
                        coalesce(l.n, 0)
                 FROM baton.workers w
                 LEFT JOIN (SELECT owner, count(*) AS n FROM baton.work_units
                            WHERE state = 'leased' GROUP BY owner) l ON l.owner = w.id
                 WHERE w.stopped_at IS NULL
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
        let failed = self.failed_units(limit).await?;
        let stopped_workers = self.stopped_workers(limit).await?;
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
            retrying,
            failed,
            workers,
            stopped_workers,
            expired_unswept,
        })
    }
}

impl Queue {
    /// The units waiting for a person, longest waiting first, at most `limit`.
    pub async fn waiting_units(&self, limit: i64) -> Result<Vec<WaitingUnit>, QueueError> {
        let rows = self
            .client()
            .query(
                "SELECT id, kind, queue, extract(epoch FROM now() - updated_at)::float8, question,
                        to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')
                 FROM baton.work_units WHERE state = 'waiting'
                 ORDER BY updated_at, id LIMIT $1",
                &[&limit.max(0)],
            )
            .await
            .map_err(|e| crate::error::db_error(e, self.database()))?;
        Ok(rows
            .iter()
            .map(|r| WaitingUnit {
                id: r.get(0),
                kind: kind(r.get(1)),
                queue: r.get(2),
                waiting_s: round(r.get::<_, Option<f64>>(3)),
                question: r.get(4),
                since: r.get(5),
            })
            .collect())
    }

    /// The queued units whose last write is a `retry` (see [`Queue::retry_later`]), soonest
    /// ready first, at most `limit`. Only units claimed before are looked at.
    pub async fn retrying_units(&self, limit: i64) -> Result<Vec<RetryingUnit>, QueueError> {
        let rows = self
            .client()
            .query(
                "SELECT w.id, w.kind, w.queue, w.attempts, w.max_attempts,
                        extract(epoch FROM w.ready_at - now())::float8, r.body
                 FROM baton.work_units w
                 JOIN LATERAL (SELECT kind, body FROM baton.unit_writes u
                               WHERE u.unit_id = w.id ORDER BY seq DESC LIMIT 1) r
                   ON r.kind = 'retry'
                 WHERE w.state = 'queued' AND w.attempts > 0
                 ORDER BY w.ready_at, w.id LIMIT $1",
                &[&limit.max(0)],
            )
            .await
            .map_err(|e| crate::error::db_error(e, self.database()))?;
        Ok(rows
            .iter()
            .map(|r| RetryingUnit {
                id: r.get(0),
                kind: kind(r.get(1)),
                queue: r.get(2),
                attempts: r.get(3),
                max_attempts: r.get(4),
                ready_in_s: round(r.get::<_, Option<f64>>(5)),
                reason: r.get(6),
            })
            .collect())
    }
}

impl Queue {
    /// The failed units, the most recent first, at most `limit`, with the code and message of
    /// their outcome.
    pub async fn failed_units(&self, limit: i64) -> Result<Vec<FailedUnit>, QueueError> {
        let rows = self
            .client()
            .query(
                "SELECT id, kind, queue, attempts, owner,
                        to_char(coalesce(finished_at, updated_at) AT TIME ZONE 'UTC',
                                'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
                        extract(epoch FROM now() - coalesce(finished_at, updated_at))::float8,
                        outcome
                 FROM baton.work_units WHERE state = 'failed'
                 ORDER BY coalesce(finished_at, updated_at) DESC, id DESC LIMIT $1",
                &[&limit.max(0)],
            )
            .await
            .map_err(|e| crate::error::db_error(e, self.database()))?;
        Ok(rows
            .iter()
            .map(|r| {
                let outcome: Option<Value> = r.get(7);
                let text = |k: &str| {
                    outcome
                        .as_ref()
                        .and_then(|o| o.get(k))
                        .and_then(Value::as_str)
                        .map(str::to_string)
                };
                FailedUnit {
                    id: r.get(0),
                    kind: kind(r.get(1)),
                    queue: r.get(2),
                    attempts: r.get(3),
                    owner: r.get(4),
                    finished_at: r.get(5),
                    failed_s: round(r.get::<_, Option<f64>>(6)),
                    // The sweep records `error`, a worker `code`.
                    code: text("code").or_else(|| text("error")),
                    message: text("message"),
                    run_id: text("runId"),
                }
            })
            .collect())
    }

    /// The workers that stopped in the last 24 hours, the most recent first, at most `limit`.
    pub async fn stopped_workers(&self, limit: i64) -> Result<Vec<StoppedWorker>, QueueError> {
        let rows = self
            .client()
            .query(
                "SELECT id, host,
                        to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),
                        to_char(stopped_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),
                        extract(epoch FROM now() - stopped_at)::float8
                 FROM baton.workers
                 WHERE stopped_at IS NOT NULL AND stopped_at > now() - interval '24 hours'
                 ORDER BY stopped_at DESC, id LIMIT $1",
                &[&limit.max(0)],
            )
            .await
            .map_err(|e| crate::error::db_error(e, self.database()))?;
        Ok(rows
            .iter()
            .map(|r| StoppedWorker {
                id: r.get(0),
                host: r.get(1),
                started_at: r.get(2),
                stopped_at: r.get(3),
                stopped_s: round(r.get::<_, Option<f64>>(4)),
            })
            .collect())
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
