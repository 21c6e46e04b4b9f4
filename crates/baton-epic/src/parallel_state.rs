//! A parallel epic's own file (`.baton-epic-parallel.json`: its slots, branch, stories started
//! and waiting to merge) and where its worktrees live: the data the parallel loop (`parallel`)
//! and its board (`parallel_board`) both read.

use crate::error::{EpicError, Result};
use baton_autopilot::untrusted::limit;
use baton_bmad::layout::Artifacts;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const FILE_NAME: &str = ".baton-epic-parallel.json";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParallelState {
    pub epic_id: String,
    pub slots: u32,
    /// The epic's branch (where approved stories are merged).
    pub branch: String,
    /// Stories with a worktree of this epic, in the order they started.
    pub started: Vec<String>,
    /// Approved stories waiting to be merged, in approval order.
    pub queue: Vec<String>,
    /// Times a merge sent a story back to dev (conflict or failing check).
    #[serde(default)]
    pub returned: BTreeMap<String, u32>,
}

impl ParallelState {
    pub fn load(dir: &Artifacts) -> Result<Option<ParallelState>> {
        let Some(bytes) = dir.file(FILE_NAME).read(limit::STATUS)? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            EpicError::failure("EPIC_PARALLEL_STATE_INVALID", format!("{FILE_NAME}: {e}"))
                .hint("this file is baton's own; `baton epic status` shows the stories in flight")
        })
    }

    pub(crate) fn save(&self, dir: &Artifacts) -> Result<()> {
        let mut bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| EpicError::failure("EPIC_IO_FAILED", e.to_string()))?;
        bytes.push(b'\n');
        dir.file(FILE_NAME).write(&bytes)
    }
}

/// Records that `epic_id` runs with `slots` stories in flight (before the loop writes anything).
pub fn mark(dir: &Artifacts, epic_id: &str, slots: u32) -> Result<()> {
    let mut st = match ParallelState::load(dir)? {
        Some(s) if s.epic_id == epic_id => s,
        _ => ParallelState {
            epic_id: epic_id.to_string(),
            ..ParallelState::default()
        },
    };
    if st.slots != slots {
        st.slots = slots;
        st.save(dir)?;
    }
    Ok(())
}

/// Whether `resume` should go on in parallel mode: the slots of a parallel epic with stories
/// still started, for `epic_id`.
pub fn resumed_slots(dir: &Artifacts, epic_id: &str) -> Option<u32> {
    let st = ParallelState::load(dir).ok()??;
    (st.epic_id == epic_id && st.slots > 1).then_some(st.slots)
}

/// Where the worktrees of a project live (`parallel::worktree_root`), from the store's folder, the project's root (its real path, as the store
/// registers it) and `[autopilot] worktrees`; registers nothing.
pub(crate) fn worktree_root_for(
    store_home: &Path,
    project_root: &Path,
    configured: Option<&str>,
) -> PathBuf {
    match configured {
        Some(c) => project_root.join(c),
        None => {
            let name = store_home
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "baton".into());
            store_home
                .with_file_name(format!("{name}-worktrees"))
                .join(baton_store::projects::project_id(project_root))
        }
    }
}
