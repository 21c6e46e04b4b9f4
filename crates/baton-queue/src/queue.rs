//! The queue's operations on one connection.
//!
//! The guarantees, all decided by the database (its clock, its row locks), never by a worker:
//! - a claim takes the oldest ready unit of a queue with `FOR UPDATE SKIP LOCKED`, so
//!   concurrent claimers never get the same unit, and bumps the unit's `epoch` (the fencing
//!   token);
//! - a lease is valid while the unit is `leased` with the holder's epoch and owner and
//!   `lease_expires_at` is in the future; a heartbeat extends only a valid lease;
//! - every write of a leased unit runs in a transaction that first locks the unit's row under
//!   that same condition: when the lease is no longer valid nothing is written and the caller
//!   gets `LEASE_LOST`; while the transaction runs, neither the sweep nor a cancel can change
//!   the unit;
//! - expired leases go back to the queue (or fail, past `max_attempts`) only by the separate
//!   sweep, which keeps the claim query cheap.

use crate::connect::DbConfig;
use crate::error::{QueueError, db_error};
use crate::schema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;
use tokio_postgres::Statement;

/// The queue a unit goes to unless told otherwise.
pub const DEFAULT_QUEUE: &str = "default";
/// The largest payload, question or outcome accepted (serialized JSON).
pub const MAX_JSON_BYTES: usize = 1 << 20;

/// What a unit of work is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnitKind {
    /// A workflow run.
    Run,
    /// One story's phases.
    Story,
}

impl UnitKind {
    pub fn as_str(self) -> &'static str {
        match self {
            UnitKind::Run => "run",
            UnitKind::Story => "story",
        }
    }

    fn parse(text: &str) -> UnitKind {
        if text == "story" {
            UnitKind::Story
        } else {
            UnitKind::Run
        }
    }
}

/// Where a unit stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnitState {
    Queued,
    Leased,
    /// Waiting for a person's answer; no worker holds it.
    Waiting,
    Done,
    Failed,
    Cancelled,
}

impl UnitState {
    pub const ALL: [UnitState; 6] = [
        UnitState::Queued,
        UnitState::Leased,
        UnitState::Waiting,
        UnitState::Done,
        UnitState::Failed,
        UnitState::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            UnitState::Queued => "queued",
            UnitState::Leased => "leased",
            UnitState::Waiting => "waiting",
            UnitState::Done => "done",
            UnitState::Failed => "failed",
            UnitState::Cancelled => "cancelled",
        }
    }

    pub fn parse(text: &str) -> Option<UnitState> {
        UnitState::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Done, failed or cancelled: nothing changes it any more.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            UnitState::Done | UnitState::Failed | UnitState::Cancelled
        )
    }
}

/// A unit to submit.
#[derive(Debug, Clone)]
pub struct NewUnit {
    pub kind: UnitKind,
    pub queue: String,
    /// What the worker needs to start it (workflow, inputs, story key, …).
    pub payload: Value,
    /// The package, pinned by content ([`Queue::put_package`]).
    pub package_sha256: Option<String>,
    /// The project: a git remote URL and the commit to start from.
    pub project_remote: String,
    pub base_commit: String,
    /// After this many claims whose lease expired, the sweep fails the unit (None: never).
    pub max_attempts: Option<i32>,
}

/// A unit as the database holds it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Unit {
    pub id: i64,
    pub kind: UnitKind,
    pub queue: String,
    pub state: UnitState,
    pub payload: Value,
    pub package_sha256: Option<String>,
    pub project_remote: String,
    pub base_commit: String,
    /// The lease holder while leased; afterwards the last holder.
    pub owner: Option<String>,
    pub epoch: i64,
    pub attempts: i32,
    pub max_attempts: Option<i32>,
    pub question: Option<Value>,
    pub outcome: Option<Value>,
    pub created_at: String,
    pub updated_at: String,
    pub lease_expires_at: Option<String>,
    pub finished_at: Option<String>,
}

/// A held lease: the unit and the fencing token every write must carry.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    pub id: i64,
    pub epoch: i64,
    pub owner: String,
    pub kind: UnitKind,
    pub queue: String,
    pub payload: Value,
    pub package_sha256: Option<String>,
    pub project_remote: String,
    pub base_commit: String,
    /// Claims so far, this one included.
    pub attempts: i32,
    /// How long the lease lasts from the claim (or the last heartbeat).
    #[serde(skip)]
    pub duration: Duration,
}

/// A write of a leased unit.
#[derive(Debug, Clone)]
pub struct NewWrite {
    /// What it is: `state`, `conversation`, `audit`, `outcome`, … (free text for the caller).
    pub kind: String,
    pub body: Value,
}

/// A stored write.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WriteRecord {
    pub seq: i64,
    pub epoch: i64,
    pub kind: String,
    pub body: Value,
    pub written_at: String,
}

/// A unit the sweep took back from an expired lease.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Expired {
    pub id: i64,
    /// The epoch of the lease that expired.
    pub epoch: i64,
    pub owner: Option<String>,
    /// `queued` again, or `failed` past its `max_attempts`.
    pub state: UnitState,
}

/// SQL text of a timestamp column as RFC 3339 UTC with milliseconds.
macro_rules! ts {
    ($col:literal) => {
        concat!(
            "to_char(",
            $col,
            " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
        )
    };
}

const UNIT_COLUMNS: &str = concat!(
    "id, kind, queue, state, payload, package_sha256, project_remote, base_commit, owner, epoch, \
     attempts, max_attempts, question, outcome, ",
    ts!("created_at"),
    ", ",
    ts!("updated_at"),
    ", ",
    ts!("lease_expires_at"),
    ", ",
    ts!("finished_at")
);

/// The claim statement ($1 worker, $2 queue, $3 lease seconds); public for plan tests.
#[doc(hidden)]
pub const CLAIM_SQL: &str = CLAIM;

const CLAIM: &str = "
WITH next AS (
    SELECT id FROM baton.work_units
    WHERE state = 'queued' AND queue = $2 AND ready_at <= now()
    ORDER BY ready_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE baton.work_units w
SET state = 'leased', owner = $1, epoch = w.epoch + 1, attempts = w.attempts + 1,
    leased_at = now(), heartbeat_at = now(),
    lease_expires_at = now() + make_interval(secs => $3), updated_at = now()
FROM next
WHERE w.id = next.id
RETURNING w.id, w.epoch, w.kind, w.queue, w.payload, w.package_sha256, w.project_remote,
          w.base_commit, w.attempts";

/// Reads and locks a unit's lease by its primary key ($1 id). Whether the lease is still the
/// caller's is decided from these columns, not in the WHERE clause: a condition on `state` and
/// `lease_expires_at` there lets the planner walk the index of every leased unit instead of the
/// primary key (measured: 2,750 buffers per write with 4,000 leases and stale statistics).
#[doc(hidden)]
pub const FENCE_SQL: &str = "SELECT state, epoch, owner, lease_expires_at <= now() \
                             FROM baton.work_units WHERE id = $1 FOR NO KEY UPDATE";

/// Appends one write of a leased unit ($1 id, $2 epoch, $3 kind, $4 body, $5 owner) when its
/// lease is still valid, in one statement: the lease read and locked by primary key (see
/// [`FENCE_SQL`]) and the row inserted in the same implicit transaction, so a write costs one
/// round trip to the server instead of four (begin, fence, insert, commit). No row returned:
/// the lease is lost.
#[doc(hidden)]
pub const FENCED_APPEND_SQL: &str = "
WITH cur AS MATERIALIZED (
    SELECT id, epoch = $2 AND owner = $5 AND state = 'leased' AND lease_expires_at > now() AS valid
    FROM baton.work_units
    WHERE id = $1
    FOR NO KEY UPDATE
)
INSERT INTO baton.unit_writes (unit_id, epoch, kind, body)
SELECT cur.id, $2, $3, $4 FROM cur WHERE cur.valid
RETURNING seq";

/// Extends a lease ($1 id, $2 epoch, $3 owner, $4 seconds) when it is still valid; the check
/// runs on the row found by primary key (see [`FENCE_SQL`]).
#[doc(hidden)]
pub const HEARTBEAT_SQL: &str = "
WITH cur AS MATERIALIZED (
    SELECT id, epoch = $2 AND owner = $3 AND state = 'leased' AND lease_expires_at > now() AS valid
    FROM baton.work_units
    WHERE id = $1
    FOR NO KEY UPDATE
)
UPDATE baton.work_units w
SET lease_expires_at = now() + make_interval(secs => $4), heartbeat_at = now()
FROM cur
WHERE w.id = cur.id AND cur.valid";

/// One connection to the queue.
pub struct Queue {
    client: tokio_postgres::Client,
    database: String,
    claim: Statement,
    heartbeat: Statement,
    fence: Statement,
    append: Statement,
    fenced_append: Statement,
}

impl Queue {
    /// Connects and checks that the queue's schema is there at this baton's version.
    pub async fn open(config: &DbConfig) -> Result<Queue, QueueError> {
        let client = config.connect().await?;
        let database = config.redacted();
        schema::check(&client, &database).await?;
        Queue::prepare(client, database).await
    }

    async fn prepare(
        client: tokio_postgres::Client,
        database: String,
    ) -> Result<Queue, QueueError> {
        let err = |e| db_error(e, &database);
        let claim = client.prepare(CLAIM).await.map_err(err)?;
        let heartbeat = client.prepare(HEARTBEAT_SQL).await.map_err(err)?;
        let fence = client.prepare(FENCE_SQL).await.map_err(err)?;
        let append = client
            .prepare(
                "INSERT INTO baton.unit_writes (unit_id, epoch, kind, body) \
                 VALUES ($1, $2, $3, $4) RETURNING seq",
            )
            .await
            .map_err(err)?;
        let fenced_append = client.prepare(FENCED_APPEND_SQL).await.map_err(err)?;
        Ok(Queue {
            client,
            database,
            claim,
            heartbeat,
            fence,
            append,
            fenced_append,
        })
    }

    /// The database, without its password.
    pub fn database(&self) -> &str {
        &self.database
    }

    pub(crate) fn err(&self) -> impl Fn(tokio_postgres::Error) -> QueueError + '_ {
        |e| db_error(e, &self.database)
    }

    /// Puts a unit in the queue and returns its id.
    pub async fn submit(&self, unit: &NewUnit) -> Result<i64, QueueError> {
        check_unit(unit)?;
        let row = self
            .client
            .query_one(
                "INSERT INTO baton.work_units \
                 (kind, queue, payload, package_sha256, project_remote, base_commit, max_attempts) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
                &[
                    &unit.kind.as_str(),
                    &unit.queue,
                    &unit.payload,
                    &unit.package_sha256,
                    &unit.project_remote,
                    &unit.base_commit.to_ascii_lowercase(),
                    &unit.max_attempts,
                ],
            )
            .await
            .map_err(|e| submit_error(e, unit, &self.database))?;
        Ok(row.get(0))
    }

    /// Claims the oldest ready unit of `queue` for `worker`, leased for `lease`; `None` when
    /// the queue has nothing to give.
    pub async fn claim(
        &self,
        worker: &str,
        queue: &str,
        lease: Duration,
    ) -> Result<Option<Lease>, QueueError> {
        check_lease(lease)?;
        if worker.trim().is_empty() {
            return Err(QueueError::InvalidInput(
                "a worker id cannot be empty".into(),
            ));
        }
        let row = self
            .client
            .query_opt(&self.claim, &[&worker, &queue, &lease.as_secs_f64()])
            .await
            .map_err(self.err())?;
        Ok(row.map(|row| Lease {
            id: row.get(0),
            epoch: row.get(1),
            owner: worker.to_string(),
            kind: UnitKind::parse(row.get(2)),
            queue: row.get(3),
            payload: row.get(4),
            package_sha256: row.get(5),
            project_remote: row.get(6),
            base_commit: row.get(7),
            attempts: row.get(8),
            duration: lease,
        }))
    }

    /// Claims from the first of `queues` that has work.
    pub async fn claim_any(
        &self,
        worker: &str,
        queues: &[&str],
        lease: Duration,
    ) -> Result<Option<Lease>, QueueError> {
        for queue in queues {
            if let Some(l) = self.claim(worker, queue, lease).await? {
                return Ok(Some(l));
            }
        }
        Ok(None)
    }

    /// Extends a valid lease to `extend` from now; `LEASE_LOST` when it is no longer valid
    /// (taken over, expired, cancelled, finished).
    pub async fn heartbeat(&self, lease: &mut Lease, extend: Duration) -> Result<(), QueueError> {
        check_lease(extend)?;
        let n = self
            .client
            .execute(
                &self.heartbeat,
                &[&lease.id, &lease.epoch, &lease.owner, &extend.as_secs_f64()],
            )
            .await
            .map_err(self.err())?;
        if n == 1 {
            lease.duration = extend;
            Ok(())
        } else {
            Err(lease_lost(&self.client, lease, &self.database).await)
        }
    }

    /// Sends expired leases back to the queue (or fails units past `max_attempts`), at most
    /// `limit` at a time. Rows a fenced write holds right now are left for the next sweep.
    pub async fn sweep_expired(&self, limit: i64) -> Result<Vec<Expired>, QueueError> {
        let rows = self
            .client
            .query(
                "WITH expired AS (
                     SELECT id FROM baton.work_units
                     WHERE state = 'leased' AND lease_expires_at <= now()
                     ORDER BY lease_expires_at
                     LIMIT $1
                     FOR UPDATE SKIP LOCKED
                 ), judged AS (
                     SELECT w.id, w.max_attempts IS NOT NULL AND w.attempts >= w.max_attempts AS spent
                     FROM baton.work_units w JOIN expired USING (id)
                 )
                 UPDATE baton.work_units w
                 SET state = CASE WHEN judged.spent THEN 'failed' ELSE 'queued' END,
                     outcome = CASE WHEN judged.spent
                         THEN jsonb_build_object('error', 'LEASE_EXPIRED', 'message',
                              'the lease expired on attempt ' || w.attempts || ' of ' || w.max_attempts)
                         ELSE w.outcome END,
                     finished_at = CASE WHEN judged.spent THEN now() ELSE NULL END,
                     lease_expires_at = NULL, updated_at = now()
                 FROM judged
                 WHERE w.id = judged.id
                 RETURNING w.id, w.epoch, w.owner, w.state",
                &[&limit.max(1)],
            )
            .await
            .map_err(self.err())?;
        Ok(rows
            .iter()
            .map(|r| Expired {
                id: r.get(0),
                epoch: r.get(1),
                owner: r.get(2),
                state: UnitState::parse(r.get(3)).unwrap_or(UnitState::Queued),
            })
            .collect())
    }

    /// Opens a fenced transaction: the lease is checked and the unit's row locked until the
    /// transaction ends. `LEASE_LOST` (nothing written) when the lease is no longer valid.
    pub async fn fenced<'a>(&'a mut self, lease: &Lease) -> Result<Fenced<'a>, QueueError> {
        let Queue {
            client,
            database,
            fence,
            append,
            ..
        } = self;
        let tx = client
            .transaction()
            .await
            .map_err(|e| db_error(e, database))?;
        let row = tx
            .query_opt(&*fence, &[&lease.id])
            .await
            .map_err(|e| db_error(e, database))?
            .map(|r| LeaseRow {
                state: r.get(0),
                epoch: r.get(1),
                owner: r.get(2),
                expired: r.get(3),
            });
        if !row.as_ref().is_some_and(|r| r.holds(lease)) {
            // Rolled back before returning, not on drop: a dropped transaction's ROLLBACK is
            // only queued, and until the server runs it the unit's row stays locked, so a
            // claim (`SKIP LOCKED`) made right after would pass the unit over.
            let _ = tx.rollback().await;
            return Err(lost(lease, row));
        }
        Ok(Fenced {
            tx,
            database,
            append,
            id: lease.id,
            epoch: lease.epoch,
        })
    }

    /// Appends one write of a leased unit under its lease, in one round trip (a worker's
    /// checkpoint, once per model turn); returns its sequence number. `LEASE_LOST` when the
    /// lease is no longer the caller's, and nothing is written.
    pub async fn append_fenced(
        &mut self,
        lease: &Lease,
        kind: &str,
        body: &Value,
    ) -> Result<i64, QueueError> {
        check_json_size("write", body)?;
        let row = self
            .client
            .query_opt(
                &self.fenced_append,
                &[&lease.id, &lease.epoch, &kind, body, &lease.owner],
            )
            .await
            .map_err(|e| db_error(e, &self.database))?;
        match row {
            Some(r) => Ok(r.get(0)),
            None => Err(lease_lost(&self.client, lease, &self.database).await),
        }
    }

    /// Appends writes of a leased unit, all or none, under its lease.
    pub async fn write(&mut self, lease: &Lease, writes: &[NewWrite]) -> Result<(), QueueError> {
        let tx = self.fenced(lease).await?;
        for w in writes {
            tx.append(&w.kind, &w.body).await?;
        }
        tx.commit().await
    }

    /// Marks a leased unit done with its outcome.
    pub async fn complete(&mut self, lease: &Lease, outcome: &Value) -> Result<(), QueueError> {
        self.fenced(lease).await?.complete(outcome).await
    }

    /// Marks a leased unit failed with its outcome.
    pub async fn fail(&mut self, lease: &Lease, outcome: &Value) -> Result<(), QueueError> {
        self.fenced(lease).await?.fail(outcome).await
    }

    /// Hands a leased unit back to the queue at once (a worker shutting down): it keeps its
    /// place, the next claim goes on from its writes, and the claim does not count as an
    /// attempt.
    pub async fn release(&mut self, lease: &Lease, reason: &Value) -> Result<(), QueueError> {
        self.fenced(lease).await?.release(reason).await
    }

    /// Parks a leased unit until a person answers `question`; the lease ends.
    pub async fn wait_for_person(
        &mut self,
        lease: &Lease,
        question: &Value,
    ) -> Result<(), QueueError> {
        self.fenced(lease).await?.wait_for_person(question).await
    }

    /// Answers a waiting unit: the answer is stored as a write (`answer`) and the unit goes back
    /// to the queue.
    pub async fn answer(&self, id: i64, answer: &Value) -> Result<(), QueueError> {
        check_json_size("answer", answer)?;
        let row = self
            .client
            .query_opt(
                "WITH u AS (
                     UPDATE baton.work_units SET state = 'queued', question = NULL, updated_at = now()
                     WHERE id = $1 AND state = 'waiting'
                     RETURNING id, epoch
                 )
                 INSERT INTO baton.unit_writes (unit_id, epoch, kind, body)
                 SELECT id, epoch, 'answer', $2 FROM u RETURNING seq",
                &[&id, answer],
            )
            .await
            .map_err(self.err())?;
        if row.is_some() {
            return Ok(());
        }
        let state = self.state_of(id).await?;
        Err(QueueError::UnitState {
            id,
            state: state.as_str().into(),
            expected: "waiting".into(),
        })
    }

    /// Cancels a unit that is not finished and returns the state it was in. A worker holding
    /// it gets `LEASE_LOST` on its next write.
    pub async fn cancel(&self, id: i64) -> Result<UnitState, QueueError> {
        let row = self
            .client
            .query_opt(
                "WITH old AS (
                     SELECT id, state FROM baton.work_units WHERE id = $1 FOR UPDATE
                 )
                 UPDATE baton.work_units w
                 SET state = 'cancelled', lease_expires_at = NULL, finished_at = now(),
                     updated_at = now()
                 FROM old
                 WHERE w.id = old.id AND old.state IN ('queued', 'leased', 'waiting')
                 RETURNING old.state",
                &[&id],
            )
            .await
            .map_err(self.err())?;
        if let Some(row) = row {
            return Ok(UnitState::parse(row.get(0)).unwrap_or(UnitState::Queued));
        }
        let state = self.state_of(id).await?;
        Err(QueueError::UnitFinished {
            id,
            state: state.as_str().into(),
        })
    }

    async fn state_of(&self, id: i64) -> Result<UnitState, QueueError> {
        let row = self
            .client
            .query_opt("SELECT state FROM baton.work_units WHERE id = $1", &[&id])
            .await
            .map_err(self.err())?
            .ok_or(QueueError::UnitNotFound { id })?;
        Ok(UnitState::parse(row.get(0)).unwrap_or(UnitState::Queued))
    }

    /// One unit.
    pub async fn unit(&self, id: i64) -> Result<Unit, QueueError> {
        let row = self
            .client
            .query_opt(
                &format!("SELECT {UNIT_COLUMNS} FROM baton.work_units WHERE id = $1"),
                &[&id],
            )
            .await
            .map_err(self.err())?
            .ok_or(QueueError::UnitNotFound { id })?;
        Ok(Unit {
            id: row.get(0),
            kind: UnitKind::parse(row.get(1)),
            queue: row.get(2),
            state: UnitState::parse(row.get(3)).unwrap_or(UnitState::Queued),
            payload: row.get(4),
            package_sha256: row.get(5),
            project_remote: row.get(6),
            base_commit: row.get(7),
            owner: row.get(8),
            epoch: row.get(9),
            attempts: row.get(10),
            max_attempts: row.get(11),
            question: row.get(12),
            outcome: row.get(13),
            created_at: row.get(14),
            updated_at: row.get(15),
            lease_expires_at: row.get(16),
            finished_at: row.get(17),
        })
    }

    /// A unit's writes after sequence number `after` (0: from the first), oldest first, at most
    /// `limit` of them; page on with the last one's `seq`.
    pub async fn writes(
        &self,
        id: i64,
        after: i64,
        limit: i64,
    ) -> Result<Vec<WriteRecord>, QueueError> {
        let rows = self
            .client
            .query(
                concat!(
                    "SELECT seq, epoch, kind, body, ",
                    ts!("written_at"),
                    " FROM baton.unit_writes WHERE unit_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"
                ),
                &[&id, &after, &limit.max(0)],
            )
            .await
            .map_err(self.err())?;
        Ok(rows
            .iter()
            .map(|r| WriteRecord {
                seq: r.get(0),
                epoch: r.get(1),
                kind: r.get(2),
                body: r.get(3),
                written_at: r.get(4),
            })
            .collect())
    }

    /// Records a worker (or says it started again), and forgets workers that stopped more
    /// than a week ago.
    pub async fn register_worker(&self, id: &str, host: &str) -> Result<(), QueueError> {
        self.client
            .execute(
                "INSERT INTO baton.workers (id, host) VALUES ($1, $2) \
                 ON CONFLICT (id) DO UPDATE SET host = $2, started_at = now(), \
                 last_heartbeat_at = now(), stopped_at = NULL",
                &[&id, &host],
            )
            .await
            .map_err(self.err())?;
        self.client
            .execute(
                "DELETE FROM baton.workers WHERE stopped_at < now() - interval '7 days'",
                &[],
            )
            .await
            .map_err(self.err())?;
        Ok(())
    }

    /// A worker's own heartbeat (independent of its leases).
    pub async fn worker_heartbeat(&self, id: &str) -> Result<(), QueueError> {
        self.client
            .execute(
                "UPDATE baton.workers SET last_heartbeat_at = now() WHERE id = $1",
                &[&id],
            )
            .await
            .map_err(self.err())?;
        Ok(())
    }

    /// Marks a worker stopped (it left cleanly): the status lists it as stopped, with when.
    pub async fn worker_stopped(&self, id: &str) -> Result<(), QueueError> {
        self.client
            .execute(
                "UPDATE baton.workers SET stopped_at = now(), last_heartbeat_at = now() \
                 WHERE id = $1",
                &[&id],
            )
            .await
            .map_err(self.err())?;
        Ok(())
    }

    /// Removes a worker's record.
    pub async fn remove_worker(&self, id: &str) -> Result<(), QueueError> {
        self.client
            .execute("DELETE FROM baton.workers WHERE id = $1", &[&id])
            .await
            .map_err(self.err())?;
        Ok(())
    }

    pub(crate) fn client(&self) -> &tokio_postgres::Client {
        &self.client
    }
}

/// A transaction of a leased unit: its row is locked, its lease was valid when it began. Drop
/// it without [`Fenced::commit`] to write nothing.
pub struct Fenced<'a> {
    tx: tokio_postgres::Transaction<'a>,
    database: &'a str,
    append: &'a Statement,
    id: i64,
    epoch: i64,
}

impl Fenced<'_> {
    /// Appends one write; returns its sequence number.
    pub async fn append(&self, kind: &str, body: &Value) -> Result<i64, QueueError> {
        check_json_size("write", body)?;
        let row = self
            .tx
            .query_one(self.append, &[&self.id, &self.epoch, &kind, body])
            .await
            .map_err(|e| db_error(e, self.database))?;
        Ok(row.get(0))
    }

    /// Commits the writes.
    pub async fn commit(self) -> Result<(), QueueError> {
        self.tx
            .commit()
            .await
            .map_err(|e| db_error(e, self.database))
    }

    /// Ends the lease with the unit done, and commits.
    pub async fn complete(self, outcome: &Value) -> Result<(), QueueError> {
        self.finish(UnitState::Done, outcome).await
    }

    /// Ends the lease with the unit failed, and commits.
    pub async fn fail(self, outcome: &Value) -> Result<(), QueueError> {
        self.finish(UnitState::Failed, outcome).await
    }

    async fn finish(self, state: UnitState, outcome: &Value) -> Result<(), QueueError> {
        check_json_size("outcome", outcome)?;
        self.tx
            .execute(
                "UPDATE baton.work_units SET state = $2, outcome = $3, lease_expires_at = NULL, \
                 finished_at = now(), updated_at = now() WHERE id = $1",
                &[&self.id, &state.as_str(), outcome],
            )
            .await
            .map_err(|e| db_error(e, self.database))?;
        self.commit().await
    }

    /// Ends the lease with the unit queued again where it was (`reason` stored as a
    /// `released` write), and commits.
    pub async fn release(self, reason: &Value) -> Result<(), QueueError> {
        self.append("released", reason).await?;
        self.tx
            .execute(
                "UPDATE baton.work_units SET state = 'queued', lease_expires_at = NULL, \
                 attempts = greatest(attempts - 1, 0), updated_at = now() WHERE id = $1",
                &[&self.id],
            )
            .await
            .map_err(|e| db_error(e, self.database))?;
        self.commit().await
    }

    /// Ends the lease with the unit waiting for a person's answer to `question` (also stored
    /// as a `question` write), and commits.
    pub async fn wait_for_person(self, question: &Value) -> Result<(), QueueError> {
        check_json_size("question", question)?;
        self.append("question", question).await?;
        self.tx
            .execute(
                "UPDATE baton.work_units SET state = 'waiting', question = $2, \
                 lease_expires_at = NULL, updated_at = now() WHERE id = $1",
                &[&self.id, question],
            )
            .await
            .map_err(|e| db_error(e, self.database))?;
        self.commit().await
    }
}

/// A unit's lease as the database holds it.
struct LeaseRow {
    state: String,
    epoch: i64,
    owner: Option<String>,
    /// `lease_expires_at <= now()`; None when there is no lease.
    expired: Option<bool>,
}

impl LeaseRow {
    /// Whether `lease` is still valid: leased, same epoch and owner, not expired.
    fn holds(&self, lease: &Lease) -> bool {
        self.state == "leased"
            && self.epoch == lease.epoch
            && self.owner.as_deref() == Some(lease.owner.as_str())
            && self.expired == Some(false)
    }
}

/// Reads why a lease is no longer valid, as a `LEASE_LOST` error.
async fn lease_lost(
    client: &impl tokio_postgres::GenericClient,
    lease: &Lease,
    database: &str,
) -> QueueError {
    match client
        .query_opt(
            "SELECT state, epoch, owner, lease_expires_at <= now() FROM baton.work_units \
             WHERE id = $1",
            &[&lease.id],
        )
        .await
    {
        Ok(row) => lost(
            lease,
            row.map(|r| LeaseRow {
                state: r.get(0),
                epoch: r.get(1),
                owner: r.get(2),
                expired: r.get(3),
            }),
        ),
        Err(e) => QueueError::LeaseLost {
            id: lease.id,
            epoch: lease.epoch,
            owner: lease.owner.clone(),
            reason: format!("and its state could not be read: {}", db_error(e, database)),
        },
    }
}

/// `LEASE_LOST`, saying why from the unit's row.
fn lost(lease: &Lease, row: Option<LeaseRow>) -> QueueError {
    let reason = match row {
        None => "the unit no longer exists".to_string(),
        Some(row) if row.epoch > lease.epoch => format!(
            "claimed again (epoch {}, {} {})",
            row.epoch,
            if row.state == "leased" {
                "held by"
            } else {
                "last held by"
            },
            row.owner.as_deref().unwrap_or("?")
        ),
        Some(row) if row.epoch < lease.epoch => {
            format!("this lease (epoch {}) was never granted", lease.epoch)
        }
        Some(row) if row.owner.as_deref() != Some(lease.owner.as_str()) => format!(
            "epoch {} belongs to {}",
            row.epoch,
            row.owner.as_deref().unwrap_or("nobody")
        ),
        Some(row) => match row.state.as_str() {
            "leased" => "the lease expired before it was renewed".to_string(),
            "queued" => "the lease expired and the unit went back to the queue".into(),
            "cancelled" => "the unit was cancelled".into(),
            "waiting" => "the unit is waiting for a person".into(),
            other => format!("the unit is {other}"),
        },
    };
    QueueError::LeaseLost {
        id: lease.id,
        epoch: lease.epoch,
        owner: lease.owner.clone(),
        reason,
    }
}

/// What a unit must be to be put in the queue: a valid queue name, a project remote, a full
/// commit id, a payload within [`MAX_JSON_BYTES`].
pub(crate) fn check_unit(unit: &NewUnit) -> Result<(), QueueError> {
    check_queue_name(&unit.queue)?;
    if unit.project_remote.trim().is_empty() {
        return Err(QueueError::InvalidInput(
            "a unit needs its project's git remote".into(),
        ));
    }
    if !(unit.base_commit.len() == 40 || unit.base_commit.len() == 64)
        || !unit.base_commit.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return Err(QueueError::InvalidInput(format!(
            "base commit {:?} is not a full git commit id (40 or 64 hex digits)",
            unit.base_commit
        )));
    }
    check_json_size("payload", &unit.payload)
}

/// The error of a unit's insert: a package the queue does not hold is the caller's mistake.
pub(crate) fn submit_error(e: tokio_postgres::Error, unit: &NewUnit, db: &str) -> QueueError {
    match e.as_db_error().map(|d| d.code().code()) {
        Some("23503") => QueueError::InvalidInput(format!(
            "package {} is not in the queue's packages (put it first)",
            unit.package_sha256.as_deref().unwrap_or("")
        )),
        _ => db_error(e, db),
    }
}

fn check_queue_name(queue: &str) -> Result<(), QueueError> {
    if queue.is_empty()
        || queue.len() > 100
        || !queue
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        return Err(QueueError::InvalidInput(format!(
            "queue name {queue:?}: use 1 to 100 letters, digits, '.', '_' or '-'"
        )));
    }
    Ok(())
}

pub(crate) fn check_lease(lease: Duration) -> Result<(), QueueError> {
    if lease < Duration::from_millis(100) || lease > Duration::from_secs(24 * 3600) {
        return Err(QueueError::InvalidInput(format!(
            "a lease of {lease:?}: use 0.1 s to 24 h"
        )));
    }
    Ok(())
}

pub(crate) fn check_json_size(what: &str, value: &Value) -> Result<(), QueueError> {
    let size = serde_json::to_vec(value).map(|v| v.len()).unwrap_or(0);
    if size > MAX_JSON_BYTES {
        return Err(QueueError::InvalidInput(format!(
            "the {what} is {size} bytes of JSON; at most {MAX_JSON_BYTES} are accepted"
        )));
    }
    Ok(())
}
