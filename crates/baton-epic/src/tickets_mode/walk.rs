//! A ticket-tree walk as data: which one a command works on, and what it plans.

use crate::error::{EpicError, Result};
use crate::outcome::{Command, PlannedStory};
use crate::progress::{Progress, Target};
use baton_bmad::Phase;
use baton_bmad::layout::Layout;
use baton_bmad::tickets::{self, EPIC_PREFIX, State, Tree, order::Scope};
use baton_epic_state::findings::Findings;
use std::path::Path;

/// A walk of the tickets under `folder` (an initiative's, or one epic's; project-relative).
#[derive(Debug, Clone)]
pub(crate) struct TicketsRun {
    pub(crate) folder: String,
}

/// Whether the project keeps its work in a ticket tree (a tree that cannot be read counts: the
/// command then says why).
pub(crate) fn present(project: &Path) -> bool {
    Tree::load(project).map_or(true, |t| t.is_some())
}

/// The tree, which must still be there.
pub(crate) fn load(project: &Path) -> Result<Tree> {
    Tree::load(project)?.ok_or_else(|| {
        EpicError::usage(
            "TICKETS_TREE_MISSING",
            "the ticket tree (an initiative-* folder under BMAD's output folder) is gone",
        )
    })
}

/// Where a ticket starts, from its status (absent: no build started).
pub(crate) fn start_phase(status: Option<&str>) -> Option<Phase> {
    Phase::start_for(match status {
        None | Some("draft") => "backlog",
        Some("in-review") => "review",
        Some(other) => other,
    })
}

/// The ticket-tree walk a command works on: `run <EPIC>` on a project without
/// sprint-status.yaml whose output folder holds a ticket tree (EPIC: an initiative or epic
/// folder name, an epic's slug or id), or `resume`/`answer` of a walk in progress.
pub(crate) fn select(
    root: &Path,
    layout: &Layout,
    command: &Command,
) -> Result<Option<TicketsRun>> {
    match command {
        Command::Run { epic, .. } => {
            if layout.dir.has(baton_bmad::sprint::FILE_NAME) {
                return Ok(None);
            }
            let Some(tree) = Tree::load(root)? else {
                return Ok(None);
            };
            let scope = tree.scope(epic).ok_or_else(|| not_found(&tree, epic))?;
            Ok(tree
                .scope_folder(&scope)
                .map(|folder| TicketsRun { folder }))
        }
        Command::Resume | Command::Answer { .. } => {
            let progress = Progress::load(&layout.dir, &layout.rel).ok().flatten();
            let state = baton_epic_state::run_state::RunEpicState::load(
                &layout.dir,
                &layout.rel_file(baton_epic_state::run_state::FILE_NAME),
            )
            .ok()
            .flatten();
            let id = progress
                .map(|p| p.epic_id)
                .or_else(|| state.map(|s| s.epic_id));
            Ok(id
                .as_deref()
                .and_then(tickets::scope_of)
                .map(|f| TicketsRun {
                    folder: f.to_string(),
                }))
        }
        Command::Story { .. } | Command::Stories { .. } => Ok(None),
    }
}

fn not_found(tree: &Tree, given: &str) -> EpicError {
    let mut names = Vec::new();
    for i in &tree.initiatives {
        names.push(i.name.clone());
        names.extend(i.epics.iter().map(|e| e.name.clone()));
    }
    EpicError::usage(
        "EPIC_NOT_FOUND",
        format!(
            "the ticket tree under {} has no initiative or epic {given:?}",
            tree.output_folder
        ),
    )
    .hint(format!(
        "name an initiative (all its epics) or an epic: {}",
        names.join(", ")
    ))
}

impl TicketsRun {
    pub(crate) fn epic_id(&self) -> String {
        format!("{EPIC_PREFIX}{}", self.folder)
    }

    pub(crate) fn scope(&self, tree: &Tree) -> Result<Scope> {
        tree.scope(&self.folder).ok_or_else(|| {
            EpicError::usage(
                "EPIC_NOT_FOUND",
                format!("the ticket tree no longer has {}", self.folder),
            )
        })
    }

    /// The progress the command continues or starts (one epic in flight per project).
    pub(crate) fn plan_target(
        &self,
        command: &Command,
        progress: Option<Progress>,
    ) -> Result<Progress> {
        let epic_id = self.epic_id();
        let max = match command {
            Command::Run { max_stories, .. } => Some(*max_stories),
            _ => None,
        };
        if let Some(p) = &progress
            && let Some(s) = &p.story
            && p.epic_id != epic_id
        {
            return Err(EpicError::usage(
                "EPIC_OTHER_IN_PROGRESS",
                format!("story {} of {} is in progress", s.key, p.epic_id),
            )
            .hint("finish it with `baton epic resume` (or `baton epic status` to see where it stands)"));
        }
        Ok(match (progress, max) {
            (Some(mut p), Some(max_stories)) if p.epic_id == epic_id => {
                p.completed.clear();
                p.target = Target::Epic { max_stories };
                p
            }
            (Some(p), None) if p.epic_id == epic_id => p,
            (_, max) => Progress::new(
                &epic_id,
                Target::Epic {
                    max_stories: max.flatten(),
                },
            ),
        })
    }

    /// Checked before the first write: the tree reads, the scope is there, the ticket in flight
    /// is still listed.
    pub(crate) fn check(&self, root: &Path, progress: &Progress) -> Result<()> {
        let tree = load(root)?;
        self.scope(&tree)?;
        if let Some(sp) = &progress.story
            && tree.find(&sp.key).is_none()
        {
            return Err(EpicError::usage(
                "STORY_NOT_FOUND",
                format!(
                    "ticket {} is in progress but the tree no longer lists it",
                    sp.key
                ),
            ));
        }
        Ok(())
    }

    /// `--dry-run`: the tickets runnable now, in build order, each with where it starts.
    pub(crate) fn dry_plan(&self, root: &Path, progress: &Progress) -> Result<Vec<PlannedStory>> {
        let tree = load(root)?;
        let scope = self.scope(&tree)?;
        let mut plan = Vec::new();
        for (epic, t, state) in tree.walk(&scope) {
            let phase = match (&progress.story, state) {
                (Some(sp), _) if sp.key == t.key => Some(sp.phase),
                (_, State::Runnable) => start_phase(t.status.as_deref()),
                _ => None,
            };
            if let Some(phase) = phase {
                plan.push(PlannedStory {
                    key: t.key.clone(),
                    status: t.shown_status().to_string(),
                    phase,
                    file: t.file.as_deref().map(|f| epic.shown(f)),
                    note: None,
                });
            }
        }
        Ok(plan)
    }

    /// No sprint-status findings; how many tickets another walk would start now.
    pub(crate) fn afterwards(&self, root: &Path) -> (Findings, usize) {
        let left = load(root)
            .ok()
            .and_then(|tree| {
                let scope = self.scope(&tree).ok()?;
                Some(
                    tree.walk(&scope)
                        .iter()
                        .filter(|(_, _, s)| *s == State::Runnable)
                        .count(),
                )
            })
            .unwrap_or(0);
        (Findings::default(), left)
    }
}
