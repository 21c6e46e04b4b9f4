//! The loop on a ticket tree: which ticket comes next (`tickets.py next`'s rules), where the
//! story file is (the ticket file), where statuses are written (its frontmatter, as BMAD's
//! build writes them: `in-progress` when the implementation starts, `in-review` after it, and
//! `done` by the loop alone once a review approved). A `blocked` written by a phase pauses that
//! ticket with its reason and the walk goes on with the next runnable one; a `done` the loop did
//! not write is put back.

use super::walk::{self, TicketsRun};
use crate::ctx::{Ctx, Pick};
use crate::error::{EpicError, Result};
use crate::events::EpicEvent;
use crate::outcome::EpicOutcome;
use crate::progress::{StoryProgress, Target};
use baton_bmad::phase::Phase;
use baton_bmad::story_files::{Lookup, StoryFile};
use baton_bmad::tickets::{self, State, Tree};

/// Statuses the loop raises through, in order (`blocked`, `dropped`: a person's, never
/// overwritten).
const RANK: [&str; 6] = [
    "draft",
    "ready-for-dev",
    "in-progress",
    "in-review",
    "built",
    "done",
];

fn rank(status: Option<&str>) -> Option<usize> {
    match status {
        None => Some(0),
        Some(s) => RANK.iter().position(|r| *r == s),
    }
}

/// The status a ticket in flight has at `phase`, as the loop wrote it.
fn expected(phase: Phase) -> &'static str {
    match phase {
        Phase::CreateStory => "draft",
        Phase::Validate => "ready-for-dev",
        Phase::Revision | Phase::CodeReview => "in-review",
        _ => "in-progress",
    }
}

impl Ctx<'_> {
    /// Whether the loop walks a ticket tree.
    pub(crate) fn tickets_mode(&self) -> bool {
        tickets::scope_of(&self.progress.epic_id).is_some()
    }

    fn tickets_run(&self) -> TicketsRun {
        TicketsRun {
            folder: tickets::scope_of(&self.progress.epic_id)
                .unwrap_or_default()
                .to_string(),
        }
    }

    fn tickets_tree(&self) -> Result<Tree> {
        walk::load(&self.layout.project)
    }

    /// The ticket in flight, else the next runnable one in build order.
    pub(crate) fn tickets_next(&mut self) -> Result<Pick> {
        let tree = self.tickets_tree()?;
        let scope = self.tickets_run().scope(&tree)?;
        let rows = tree.walk(&scope);
        let total = rows.len();
        let index_of = |key: &str| {
            rows.iter()
                .position(|(_, t, _)| t.key == key)
                .map_or(0, |i| i + 1)
        };
        if let Some(sp) = self.progress.story.clone() {
            let (_, epic, t) = tree.find(&sp.key).ok_or_else(|| {
                EpicError::usage(
                    "STORY_NOT_FOUND",
                    format!(
                        "ticket {} is in progress but the tree no longer lists it",
                        sp.key
                    ),
                )
            })?;
            if t.is_blocked() {
                let why = t.blocked_reason.as_deref().unwrap_or("no reason given");
                self.emit(EpicEvent::Note(format!(
                    "{}: blocked ({why}); paused, the walk goes on with the next runnable ticket",
                    sp.key
                )));
                self.progress.story = None;
                self.state.current_story_key = None;
                self.save()?;
                return Ok(Pick::Again);
            }
            if t.status.as_deref() == Some("done") {
                // Only the loop sets done, after an approved review.
                let back = expected(sp.phase);
                tree.set_status(&sp.key, back)?;
                self.emit(EpicEvent::Note(format!(
                    "the phase run set {} done, which only the orchestrator does after an approved review; it is {back} again",
                    t.file.as_deref().map(|f| epic.shown(f)).unwrap_or_default()
                )));
            }
            return Ok(Pick::Story(index_of(&sp.key), total));
        }
        if let Target::Epic {
            max_stories: Some(max),
        } = self.progress.target
            && self.progress.completed.len() >= max as usize
        {
            return Ok(Pick::Nothing);
        }
        let Some(t) = tree.next(&scope) else {
            return Ok(Pick::Nothing);
        };
        // A start the pipeline has no stage for (a method without validate) is its first.
        let phase = walk::start_phase(t.status.as_deref())
            .filter(|p| self.pipeline.stage(*p).is_some())
            .unwrap_or(self.pipeline.first());
        self.progress.story = Some(StoryProgress::new(&t.key, phase));
        Ok(Pick::Story(index_of(&t.key), total))
    }

    /// Raises a ticket's status in its file (sprint vocabulary in: `review` is `in-review`);
    /// never lowered, and a blocked or dropped ticket is left as it is. Keys that are no ticket
    /// (the sprint epic's) are ignored.
    pub(crate) fn tickets_raise(&self, key: &str, status: &str) -> Result<()> {
        let wanted = match status {
            "review" => "in-review",
            s @ ("ready-for-dev" | "in-progress" | "done") => s,
            _ => return Ok(()),
        };
        let tree = self.tickets_tree()?;
        let Some((_, epic, t)) = tree.find(key) else {
            return Ok(());
        };
        if t.is_blocked() || t.file.is_none() {
            return Ok(());
        }
        match (rank(t.status.as_deref()), rank(Some(wanted))) {
            (Some(now), Some(w)) if now < w => {}
            _ => return Ok(()),
        }
        tree.set_status(key, wanted)?;
        self.emit(EpicEvent::Note(format!(
            "{key}: status {wanted} ({})",
            t.file.as_deref().map(|f| epic.shown(f)).unwrap_or_default()
        )));
        Ok(())
    }

    /// The ticket file as the loop's story file.
    pub(crate) fn tickets_lookup(&self, key: &str) -> Result<Lookup> {
        let tree = self.tickets_tree()?;
        let Some((_, epic, t)) = tree.find(key) else {
            return Ok(Lookup::Missing {
                expected: format!("{}/{key}.md", tree.output_folder),
            });
        };
        Ok(match &t.file {
            Some(f) => Lookup::Found(StoryFile {
                path: epic.shown(f),
                status: t.status.clone(),
                status_from: Some("frontmatter"),
                problem: None,
                specs: Vec::new(),
            }),
            None => Lookup::Missing {
                expected: epic.manifest_path(),
            },
        })
    }

    /// No ticket left to start: done when every ticket of the walk is done or dropped.
    pub(crate) fn tickets_finish(&mut self) -> Result<EpicOutcome> {
        let tree = self.tickets_tree()?;
        let scope = self.tickets_run().scope(&tree)?;
        let rows = tree.walk(&scope);
        let epic_done = !rows.is_empty()
            && rows
                .iter()
                .all(|(_, _, s)| matches!(s, State::Done | State::Dropped));
        if matches!(self.progress.target, Target::Epic { .. }) {
            self.state.current_story_key = None;
        }
        self.pause(EpicOutcome::Done { epic_done })
    }
}
