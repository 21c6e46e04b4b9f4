//! A leased unit handed back to the queue after a failure that may pass (the model endpoint
//! or the git remote unreachable, the database connection lost): it becomes ready again after
//! a delay, and what happened is kept as a `retry` write. Also the two questions a worker asks
//! of a unit's writes when it claims one: is an answer waiting to be applied, and how many
//! retries in a row has it had.

use crate::error::{QueueError, db_error};
use crate::queue::{Lease, Queue, WriteRecord, check_json_size};
use serde_json::Value;
use std::time::Duration;

/// The longest delay [`Queue::retry_later`] accepts.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(24 * 3600);

/// Queues a leased unit again, ready after `delay` ($4 seconds), when the lease ($1 id, $2
/// epoch, $3 owner) is still valid, and appends the `retry` write ($5), all in one statement.
/// The lease is checked on the row found by primary key, as every fenced write does.
const RETRY_SQL: &str = "
WITH cur AS MATERIALIZED (
    SELECT id, epoch = $2 AND owner = $3 AND state = 'leased' AND lease_expires_at > now() AS valid
    FROM baton.work_units
    WHERE id = $1
    FOR NO KEY UPDATE
), u AS (
    UPDATE baton.work_units w
    SET state = 'queued', ready_at = now() + make_interval(secs => $4),
        lease_expires_at = NULL, updated_at = now()
    FROM cur
    WHERE w.id = cur.id AND cur.valid
    RETURNING w.id, w.epoch
)
INSERT INTO baton.unit_writes (unit_id, epoch, kind, body)
SELECT id, epoch, 'retry', $5 FROM u
RETURNING seq";

impl Queue {
    /// Ends a valid lease with the unit queued again, claimable after `delay` (its owner kept
    /// as the last holder, its attempts as they are), and `reason` stored as a `retry` write.
    /// `LEASE_LOST` (nothing written) when the lease is no longer valid.
    pub async fn retry_later(
        &self,
        lease: &Lease,
        delay: Duration,
        reason: &Value,
    ) -> Result<(), QueueError> {
        if delay > MAX_RETRY_DELAY {
            return Err(QueueError::InvalidInput(format!(
                "a retry delay of {delay:?}: at most {MAX_RETRY_DELAY:?}"
            )));
        }
        check_json_size("retry reason", reason)?;
        let row = self
            .client()
            .query_opt(
                RETRY_SQL,
                &[
                    &lease.id,
                    &lease.epoch,
                    &lease.owner,
                    &delay.as_secs_f64(),
                    reason,
                ],
            )
            .await
            .map_err(|e| db_error(e, self.database()))?;
        if row.is_some() {
            return Ok(());
        }
        let reason = match self.unit(lease.id).await {
            Ok(u) if u.epoch > lease.epoch => format!("claimed again (epoch {})", u.epoch),
            Ok(u) if u.state.as_str() == "leased" => {
                "the lease expired before it was renewed".to_string()
            }
            Ok(u) => format!("the unit is {}", u.state.as_str()),
            Err(e) => format!("and its state could not be read: {e}"),
        };
        Err(QueueError::LeaseLost {
            id: lease.id,
            epoch: lease.epoch,
            owner: lease.owner.clone(),
            reason,
        })
    }

    /// The unit's latest write whose kind is one of `kinds`, if any.
    pub async fn last_write_of(
        &self,
        id: i64,
        kinds: &[&str],
    ) -> Result<Option<WriteRecord>, QueueError> {
        let kinds: Vec<String> = kinds.iter().map(|k| (*k).to_string()).collect();
        let row = self
            .client()
            .query_opt(
                "SELECT seq, epoch, kind, body, \
                 to_char(written_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') \
                 FROM baton.unit_writes WHERE unit_id = $1 AND kind = ANY($2) \
                 ORDER BY seq DESC LIMIT 1",
                &[&id, &kinds],
            )
            .await
            .map_err(|e| db_error(e, self.database()))?;
        Ok(row.map(|r| WriteRecord {
            seq: r.get(0),
            epoch: r.get(1),
            kind: r.get(2),
            body: r.get(3),
            written_at: r.get(4),
        }))
    }

    /// How many `retry` writes the unit has had since it last moved on: since its last
    /// `answer`, or its last `checkpoint` taken after a model turn (`"point": "turn"`).
    pub async fn retries_in_a_row(&self, id: i64) -> Result<i64, QueueError> {
        let row = self
            .client()
            .query_one(
                "SELECT count(*) FROM baton.unit_writes
                 WHERE unit_id = $1 AND kind = 'retry' AND seq > coalesce((
                     SELECT seq FROM baton.unit_writes
                     WHERE unit_id = $1 AND (kind = 'answer'
                         OR (kind = 'checkpoint' AND body->>'point' = 'turn'))
                     ORDER BY seq DESC LIMIT 1), 0)",
                &[&id],
            )
            .await
            .map_err(|e| db_error(e, self.database()))?;
        Ok(row.get(0))
    }
}
