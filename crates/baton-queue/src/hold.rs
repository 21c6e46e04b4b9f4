//! Holding a unit's row still: while held, the unit's fenced writes and heartbeats wait, so a
//! worker can be caught in the middle of a unit at a known point (`baton demo queue` kills a
//! worker there to show another taking the unit over).

use crate::error::QueueError;
use crate::queue::{FENCE_SQL, FENCED_APPEND_SQL, Queue};

impl Queue {
    /// Locks unit `id`'s row on this connection until [`Queue::release_hold`] (or until the
    /// connection closes). Use a connection of its own: nothing else runs in that transaction.
    pub async fn hold_unit(&self, id: i64) -> Result<(), QueueError> {
        self.client()
            .batch_execute(&format!(
                "BEGIN; SELECT 1 FROM baton.work_units WHERE id = {id} FOR UPDATE"
            ))
            .await
            .map_err(self.err())
    }

    /// Releases what [`Queue::hold_unit`] held.
    pub async fn release_hold(&self) -> Result<(), QueueError> {
        self.client()
            .batch_execute("ROLLBACK")
            .await
            .map_err(self.err())
    }

    /// How many fenced writes (a checkpoint, a completion, …) wait on a row lock now.
    pub async fn fenced_writes_waiting(&self) -> Result<i64, QueueError> {
        let row = self
            .client()
            .query_one(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE wait_event_type = 'Lock' AND (query = $1 OR query = $2)",
                &[&FENCE_SQL, &FENCED_APPEND_SQL],
            )
            .await
            .map_err(self.err())?;
        Ok(row.get(0))
    }
}
