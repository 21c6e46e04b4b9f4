//! `baton epic status --stories <folder>`: the board of a spec folder. Each story of
//! `stories.yaml` in list order with its file, its frontmatter status, where the walk would take
//! it up, its checkpoints, and (for the epic that runs) the phase in flight, questions, review
//! verdict and phase runs. Read-only and lock-free; a story whose file is ambiguous or
//! unreadable is shown with its problem.

use crate::board::{PendingQuestion, PhaseRunLink, Standing as Where};
use crate::config::AutopilotConfig;
use crate::error::{EpicError, Result};
use crate::progress::{FailureDetail, Progress};
use baton_bmad::layout;
use baton_bmad::stories_mode::{SpecFolder, Standing};
use baton_epic_state::lock;
use baton_epic_state::run_state::{self, RunEpicState};
use serde::Serialize;
use std::path::Path;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoryDetail {
    pub id: String,
    pub title: String,
    /// The entry's line in `stories.yaml`.
    pub line: usize,
    /// The story file, project-relative (none yet: not started).
    pub file: Option<String>,
    /// The frontmatter status; `not-started` without a file, `(none)` for a file without one.
    pub status: String,
    /// Where the walk takes the story up (none: done, or not runnable).
    pub starts_at: Option<String>,
    /// Why the walk stops at this story (a status it does not run).
    pub not_runnable: Option<String>,
    pub spec_checkpoint: bool,
    pub done_checkpoint: bool,
    pub invoke_dev_with: Option<String>,
    /// The phase in flight, for the current story.
    pub phase: Option<String>,
    pub review_cycle: Option<u32>,
    pub run_id: Option<String>,
    pub questions: Vec<PendingQuestion>,
    /// `approved` or `changes-requested`, from the last review file.
    pub review: Option<String>,
    /// Why the story's files cannot be used.
    pub problem: Option<String>,
    pub runs: Vec<PhaseRunLink>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoriesBoard {
    /// Always `stories`.
    pub mode: &'static str,
    /// The spec folder, project-relative.
    pub stories_folder: String,
    /// Where the loop keeps its own files.
    pub implementation_artifacts: String,
    /// The epic id of a walk of this folder (`stories:{folder}`).
    pub epic_id: String,
    /// Where the walk of this folder stands.
    pub standing: Where,
    /// Whether an orchestrator process holds the project right now.
    pub live: bool,
    /// The epic the state file names, when it is another one.
    pub other_epic: Option<String>,
    pub current_story: Option<String>,
    pub last_story_completed: Option<String>,
    pub last_failure: Option<FailureDetail>,
    /// `done` when every story is, `in-progress` when one has started, else `backlog`.
    pub status: String,
    pub stories: Vec<StoryDetail>,
}

/// The spec folder of the stories-mode epic the project's state file names, if it names one.
pub fn recorded_folder(project: &Path) -> Option<String> {
    let config = AutopilotConfig::load(project).ok()?;
    let layout = layout::resolve(project, config.implementation_artifacts.as_deref()).ok()?;
    RunEpicState::load(&layout.dir, &layout.rel_file(run_state::FILE_NAME))
        .ok()
        .flatten()
        .and_then(|s| s.stories_folder)
}

/// The board of the spec folder `folder` (relative to the project, or absolute inside it).
pub fn status(project: &Path, folder: &str) -> Result<StoriesBoard> {
    let root = std::fs::canonicalize(project).map_err(|e| {
        EpicError::usage(
            "PROJECT_NOT_FOUND",
            format!("project {} cannot be opened: {e}", project.display()),
        )
    })?;
    let folder = SpecFolder::open(&root, folder)?;
    let rows = folder.scan()?;
    let config = AutopilotConfig::load(&root)?;
    let layout = layout::resolve(&root, config.implementation_artifacts.as_deref())?;
    let epic_id = baton_bmad::stories_mode::epic_id(&folder.rel);
    let state = RunEpicState::load(&layout.dir, &layout.rel_file(run_state::FILE_NAME))?;
    let ours = state
        .as_ref()
        .filter(|s| s.stories_folder.as_deref() == Some(folder.rel.as_str()));
    // The progress file is baton's own; a damaged one does not hide the board.
    let progress = Progress::load(&layout.dir, &layout.rel)
        .ok()
        .flatten()
        .filter(|p| p.epic_id == epic_id);
    let in_flight = progress.as_ref().and_then(|p| p.story.clone());
    let live = lock::is_held(&layout.dir);
    let mut stories = Vec::with_capacity(rows.len());
    for row in &rows {
        let id = &row.entry.id;
        let (starts_at, not_runnable) = match row.standing() {
            Standing::Start(p) => (Some(p.as_str().to_string()), None),
            Standing::Done => (None, None),
            Standing::NotRunnable(s) => (None, Some(s)),
        };
        let mut d = StoryDetail {
            id: id.clone(),
            title: row.entry.title.clone(),
            line: row.entry.line,
            file: row.file.as_deref().map(|f| folder.story_path(f)),
            status: row.shown_status(),
            starts_at,
            not_runnable,
            spec_checkpoint: row.entry.spec_checkpoint,
            done_checkpoint: row.entry.done_checkpoint,
            invoke_dev_with: Some(row.entry.invoke_dev_with.clone()).filter(|s| !s.is_empty()),
            phase: None,
            review_cycle: None,
            run_id: None,
            questions: Vec::new(),
            review: None,
            problem: row
                .problem
                .as_ref()
                .map(|e| format!("{}: {}", e.code, e.message)),
            runs: Vec::new(),
        };
        if let Some(sp) = in_flight.as_ref().filter(|s| s.key == *id) {
            d.phase = Some(sp.phase.as_str().to_string());
            d.review_cycle = Some(sp.review_cycle);
            d.run_id = sp.run.as_ref().and_then(|r| r.run_id.clone());
        }
        if let Some(p) = &progress {
            d.runs = p
                .runs
                .iter()
                .filter(|r| r.story_key == *id)
                .map(PhaseRunLink::of)
                .collect();
        }
        if ours.is_some() {
            d.questions = crate::board::pending_questions(&layout, id, &mut d.problem);
            d.review = crate::board::review_verdict(&layout, id, &mut d.problem);
        }
        stories.push(d);
    }
    let all_done = !rows.is_empty() && rows.iter().all(|r| r.standing() == Standing::Done);
    let started = rows.iter().any(|r| r.file.is_some());
    let current_story = ours.and_then(|s| s.current_story_key.clone());
    let standing = if live && ours.is_some() {
        Where::Running
    } else if all_done {
        Where::Done
    } else if let Some(s) = ours {
        let waiting = current_story.as_deref().is_some_and(|key| {
            stories
                .iter()
                .any(|d| d.id == key && !d.questions.is_empty())
        });
        if waiting {
            Where::Waiting
        } else if s.running {
            Where::Interrupted
        } else {
            Where::Paused
        }
    } else {
        Where::NotStarted
    };
    Ok(StoriesBoard {
        mode: "stories",
        stories_folder: folder.rel.clone(),
        implementation_artifacts: layout.rel.clone(),
        epic_id,
        standing,
        live,
        other_epic: state
            .as_ref()
            .filter(|_| ours.is_none())
            .map(|s| s.epic_id.clone()),
        current_story,
        last_story_completed: progress.as_ref().and_then(|p| p.completed.last().cloned()),
        last_failure: progress.and_then(|p| p.failure),
        status: if all_done {
            "done"
        } else if started {
            "in-progress"
        } else {
            "backlog"
        }
        .to_string(),
        stories,
    })
}
