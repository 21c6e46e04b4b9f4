//! BMAD 7's ticket tree (a draft, unreleased upstream; baton follows the issue's description
//! and BMAD-METHOD pull requests #2884, #2932 and #2934): progress kept per ticket instead of
//! in `sprint-status.yaml`.
//!
//! ```text
//! {output_folder}/initiative-<slug>/
//!   tickets.toml            [[epic]] id, slug, after   (build order of the epics; optional)
//!   epic-<slug>/
//!     epic-<slug>.md        the epic itself (never a ticket)
//!     tickets.toml          [[entry]] id, after, …     (table order = build order)
//!     story-<slug>.md       frontmatter id, status, blocked_at, blocked_reason
//! ```
//!
//! [`Tree::load`] finds and reads it ([`locate`], [`manifest`], [`ticket_file`]), [`order`]
//! says where each ticket stands and which comes next by `tickets.py next`'s rules (build
//! order; an `after` is satisfied by a stored `done` only; done, dropped, blocked and built
//! tickets are not built again), and [`Tree::set_status`] writes a status in place, durably.

pub mod locate;
pub mod manifest;
pub mod order;
pub mod ticket_file;
mod tree;

#[cfg(test)]
mod tests;

pub use manifest::After;
pub use order::State;

use cap_std::fs::Dir;
use std::sync::Arc;

/// How a ticket-tree epic is named in `.run-epic-state.json` and the progress record
/// (`tickets:<project-relative folder>` of an initiative or one of its epics).
pub const EPIC_PREFIX: &str = "tickets:";

/// The scope folder of a ticket-tree epic id (`None`: another mode's).
pub fn scope_of(epic_id: &str) -> Option<&str> {
    epic_id.strip_prefix(EPIC_PREFIX)
}

/// The ticket tree of a project.
#[derive(Debug, Clone)]
pub struct Tree {
    /// `output_folder`, project-relative.
    pub output_folder: String,
    /// Where `output_folder` came from.
    pub output_rule: String,
    pub initiatives: Vec<Initiative>,
}

#[derive(Debug, Clone)]
pub struct Initiative {
    /// `initiative-<slug>`.
    pub name: String,
    /// Project-relative.
    pub folder: String,
    pub epics: Vec<Epic>,
}

#[derive(Clone)]
pub struct Epic {
    /// `epic-<slug>`.
    pub name: String,
    /// Project-relative.
    pub folder: String,
    /// From the initiative's `[[epic]]` table, else the epic file's frontmatter.
    pub id: Option<u64>,
    pub title: Option<String>,
    /// The epic's own prerequisites (they gate every ticket under it).
    pub after: Vec<After>,
    pub tickets: Vec<Ticket>,
    dir: Arc<Dir>,
}

impl std::fmt::Debug for Epic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Epic")
            .field("folder", &self.folder)
            .field("tickets", &self.tickets)
            .finish()
    }
}

/// One `[[entry]]` and what its file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    pub id: u64,
    /// The loop's key: `<epic folder>.<id>` (unique in the tree).
    pub key: String,
    pub title: Option<String>,
    pub after: Vec<After>,
    /// Line of the `[[entry]]` in the epic's `tickets.toml`.
    pub line: usize,
    /// The file's name in the epic folder (`None`: not pulled yet).
    pub file: Option<String>,
    pub status: Option<String>,
    pub blocked_at: Option<String>,
    pub blocked_reason: Option<String>,
}

impl Epic {
    /// A path in the epic folder, project-relative.
    pub fn shown(&self, name: &str) -> String {
        format!("{}/{name}", self.folder)
    }

    /// The project-relative path of `tickets.toml`.
    pub fn manifest_path(&self) -> String {
        self.shown(manifest::FILE_NAME)
    }
}

impl Ticket {
    /// The status as shown: the file's, `not-pulled` without a file, `not-started` for a file
    /// without one.
    pub fn shown_status(&self) -> &str {
        match (&self.file, &self.status) {
            (_, Some(s)) => s,
            (None, None) => "not-pulled",
            (Some(_), None) => "not-started",
        }
    }

    /// Waiting on a person: `status: blocked`, or a `blocked_at`/`blocked_reason` on a ticket
    /// that is neither done nor dropped.
    pub fn is_blocked(&self) -> bool {
        match self.status.as_deref() {
            Some("blocked") => true,
            Some("done" | "dropped") => false,
            _ => self.blocked_at.is_some() || self.blocked_reason.is_some(),
        }
    }
}
