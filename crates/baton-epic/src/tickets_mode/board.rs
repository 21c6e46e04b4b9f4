//! `baton epic status` on a ticket tree: every initiative with its epics and their tickets in
//! build order, each with its status, where it stands (done, blocked and why, waiting on which
//! prerequisites, …) and which ticket is built next; the ticket in flight with its phase.
//! Read-only and lock-free.

use crate::config::AutopilotConfig;
use crate::error::{EpicError, Result};
use crate::progress::{FailureDetail, Progress};
use baton_bmad::layout;
use baton_bmad::tickets::{self, State, Tree, order::Scope};
use baton_epic_state::lock;
use serde::Serialize;
use std::path::Path;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TicketView {
    /// The loop's key: `<epic folder>.<id>`.
    pub key: String,
    pub id: u64,
    pub title: Option<String>,
    /// The ticket file, project-relative (none: not pulled yet).
    pub file: Option<String>,
    /// The entry's line in the epic's `tickets.toml`.
    pub line: usize,
    /// The frontmatter status; `not-started` for a file without one, `not-pulled` without a file.
    pub status: String,
    /// done, dropped, blocked, built, waiting, not-pulled or runnable.
    pub state: &'static str,
    pub blocked_at: Option<String>,
    pub blocked_reason: Option<String>,
    /// The prerequisites not done yet.
    pub waiting_on: Vec<String>,
    /// Whether it is the ticket `tickets.py next` gives for its initiative.
    pub next: bool,
    /// The phase in flight, for the ticket the loop works on.
    pub phase: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EpicView {
    pub name: String,
    pub folder: String,
    pub id: Option<u64>,
    pub title: Option<String>,
    pub after: Vec<String>,
    pub tickets: Vec<TicketView>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitiativeView {
    pub name: String,
    pub folder: String,
    /// The key of the ticket built next (none: nothing can start now).
    pub next: Option<String>,
    pub epics: Vec<EpicView>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TicketsBoard {
    /// Always `tickets`.
    pub mode: &'static str,
    /// BMAD 7's ticket tree is a draft upstream: baton's support is experimental.
    pub experimental: bool,
    /// BMAD's `output_folder` (project-relative) and the rule that named it.
    pub output_folder: String,
    pub output_rule: String,
    /// Where the loop keeps its own files.
    pub implementation_artifacts: String,
    /// The walk in progress (`tickets:<folder>`), if any.
    pub epic_id: Option<String>,
    /// Whether an orchestrator process holds the project right now.
    pub live: bool,
    pub current_ticket: Option<String>,
    pub last_failure: Option<FailureDetail>,
    pub initiatives: Vec<InitiativeView>,
}

/// The board of the project's ticket tree; `None` when the project has none, or keeps its epics
/// in `sprint-status.yaml` and no ticket-tree walk is in progress.
pub fn status(project: &Path) -> Result<Option<TicketsBoard>> {
    let root = std::fs::canonicalize(project).map_err(|e| {
        EpicError::usage(
            "PROJECT_NOT_FOUND",
            format!("project {} cannot be opened: {e}", project.display()),
        )
    })?;
    let config = AutopilotConfig::load(&root)?;
    let layout = layout::resolve(&root, config.implementation_artifacts.as_deref())?;
    // The progress file is baton's own; a damaged one does not hide the board.
    let progress = Progress::load(&layout.dir, &layout.rel)
        .ok()
        .flatten()
        .filter(|p| tickets::scope_of(&p.epic_id).is_some());
    if progress.is_none() && layout.dir.has(baton_bmad::sprint::FILE_NAME) {
        return Ok(None);
    }
    let Some(tree) = Tree::load(&root)? else {
        return Ok(None);
    };
    let in_flight = progress.as_ref().and_then(|p| p.story.clone());
    let mut initiatives = Vec::new();
    for (i, init) in tree.initiatives.iter().enumerate() {
        let scope = Scope {
            initiative: i,
            epic: None,
        };
        let next = tree.next(&scope).map(|t| t.key.clone());
        let mut epics: Vec<EpicView> = init
            .epics
            .iter()
            .map(|e| EpicView {
                name: e.name.clone(),
                folder: e.folder.clone(),
                id: e.id,
                title: e.title.clone(),
                after: e.after.iter().map(ToString::to_string).collect(),
                tickets: Vec::new(),
            })
            .collect();
        for (epic, t, state) in tree.walk(&scope) {
            let Some(view) = epics.iter_mut().find(|v| v.folder == epic.folder) else {
                continue;
            };
            view.tickets.push(TicketView {
                key: t.key.clone(),
                id: t.id,
                title: t.title.clone(),
                file: t.file.as_deref().map(|f| epic.shown(f)),
                line: t.line,
                status: t.shown_status().to_string(),
                state: state.as_str(),
                blocked_at: t.blocked_at.clone(),
                blocked_reason: t.blocked_reason.clone(),
                waiting_on: match state {
                    State::Waiting(keys) => keys,
                    _ => Vec::new(),
                },
                next: next.as_deref() == Some(t.key.as_str()),
                phase: in_flight
                    .as_ref()
                    .filter(|sp| sp.key == t.key)
                    .map(|sp| sp.phase.as_str().to_string()),
            });
        }
        initiatives.push(InitiativeView {
            name: init.name.clone(),
            folder: init.folder.clone(),
            next,
            epics,
        });
    }
    Ok(Some(TicketsBoard {
        mode: "tickets",
        experimental: true,
        output_folder: tree.output_folder.clone(),
        output_rule: tree.output_rule.clone(),
        implementation_artifacts: layout.rel.clone(),
        epic_id: progress.as_ref().map(|p| p.epic_id.clone()),
        live: lock::is_held(&layout.dir),
        current_ticket: in_flight.map(|sp| sp.key),
        last_failure: progress.and_then(|p| p.failure),
        initiatives,
    }))
}
