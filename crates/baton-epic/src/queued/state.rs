//! `.baton-epic-queue.json`: what the orchestrator of a queued epic keeps in the artifacts
//! folder (baton's own file; never part of a story's commit).

use super::payload::StoryModel;
use crate::error::{EpicError, Result};
use baton_autopilot::untrusted::limit;
use baton_bmad::layout::Artifacts;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const FILE_NAME: &str = ".baton-epic-queue.json";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueuedState {
    pub epic_id: String,
    pub slots: u32,
    /// The epic's branch (where approved stories are merged).
    pub branch: String,
    /// Carried by every unit of this epic's run: a restarted orchestrator finds its units by it.
    pub session: String,
    /// The database: its URL without a password, or the environment variable holding it.
    #[serde(default)]
    pub db_url: Option<String>,
    #[serde(default)]
    pub db_env: Option<String>,
    #[serde(default)]
    pub model: StoryModel,
    /// Stories started, in order, with their current unit (0: not submitted yet).
    #[serde(default)]
    pub units: BTreeMap<String, i64>,
    pub started: Vec<String>,
    /// Approved stories waiting to be merged, in approval order.
    pub queue: Vec<String>,
    /// Times a merge sent a story back to dev.
    #[serde(default)]
    pub returned: BTreeMap<String, u32>,
}

/// What `baton epic resume` goes on with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remembered {
    pub epic_id: String,
    pub slots: u32,
    pub db_url: Option<String>,
    pub db_env: Option<String>,
    pub model: StoryModel,
}

impl QueuedState {
    pub fn load(dir: &Artifacts) -> Result<Option<QueuedState>> {
        let Some(bytes) = dir.file(FILE_NAME).read(limit::STATUS)? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            EpicError::failure("EPIC_QUEUE_STATE_INVALID", format!("{FILE_NAME}: {e}"))
                .hint("this file is baton's own; `baton epic status` shows the stories in flight")
        })
    }

    pub fn save(&self, dir: &Artifacts) -> Result<()> {
        let mut bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| EpicError::failure("EPIC_IO_FAILED", e.to_string()))?;
        bytes.push(b'\n');
        dir.file(FILE_NAME).write(&bytes)
    }

    pub fn remembered(&self) -> Remembered {
        Remembered {
            epic_id: self.epic_id.clone(),
            slots: self.slots,
            db_url: self.db_url.clone(),
            db_env: self.db_env.clone(),
            model: self.model.clone(),
        }
    }
}
