//! A stories-mode epic as data: its spec folder ([`StoriesRun`]), which one a command works on,
//! where its walk stands and what it plans; the loop that walks it is `run`.

use crate::error::{EpicError, Result};
use crate::events::EpicEvent;
use crate::outcome::{Command, PlannedStory};
use crate::progress::{Progress, Target};
use baton_bmad::stories_mode::{SpecFolder, Standing, StoryState, frontmatter, matches};
use baton_epic_state::run_state::RunEpicState;
use baton_store::Store;
use std::path::Path;

/// Most bytes of other stories' files kept by the guard around one phase run.
const GUARD_BYTES: usize = 32 << 20;

/// A stories-mode epic: its spec folder.
#[derive(Debug, Clone)]
pub(crate) struct StoriesRun {
    pub(crate) folder: SpecFolder,
}

/// The stories-mode epic a command works on, if any: `--stories <folder>`, or, for `resume` and
/// `answer`, the spec folder the state file names (which must be the one recorded in baton's
/// store when the epic started).
pub(crate) fn select(
    store: Option<&Store>,
    project: &Path,
    command: &Command,
    state: Option<&RunEpicState>,
) -> Result<Option<StoriesRun>> {
    match command {
        Command::Stories { folder, .. } => Ok(Some(StoriesRun {
            folder: SpecFolder::open(project, folder)?,
        })),
        Command::Resume | Command::Answer { .. } => {
            let Some(rel) = state.and_then(|s| s.stories_folder.clone()) else {
                return Ok(None);
            };
            if let Some(store) = store {
                let recorded = baton_epic_state::layout_record::recorded_stories(store, project)?;
                if recorded.as_deref() != Some(rel.as_str()) {
                    return Err(EpicError::usage(
                        "EPIC_LAYOUT_CHANGED",
                        format!(
                            "the state file names the spec folder {rel:?}, but this project's stories-mode epic was started on {}; baton does not follow the change",
                            recorded.map_or("no folder".to_string(), |r| format!("{r:?}"))
                        ),
                    )
                    .hint("start the walk again with `baton epic run --stories <folder>`"));
                }
            }
            Ok(Some(StoriesRun {
                folder: SpecFolder::open_rel(project, &rel)?,
            }))
        }
        Command::Run { .. } | Command::Story { .. } => Ok(None),
    }
}

/// Creates the implementation artifacts folder (where the loop keeps its own files) when a
/// stories-mode epic starts in a project that has none yet.
pub(crate) fn create_artifacts(project: &Path, rel: &str) -> Result<()> {
    let root = baton_autopilot::untrusted::open_root(project)
        .map_err(|e| EpicError::io("open", project)(e))?;
    root.create_dir_all(rel)
        .map_err(|e| EpicError::io("create", &project.join(rel))(e))
}

pub(crate) fn not_runnable(folder: &SpecFolder, row: &StoryState, status: &str) -> EpicError {
    let file = row
        .file
        .as_deref()
        .map(|f| folder.story_path(f))
        .unwrap_or_default();
    let why = if status == "(none)" {
        format!("its file {file} has no frontmatter status")
    } else {
        format!("it is {status:?} in {file}")
    };
    EpicError::usage(
        "EPIC_STORY_NOT_RUNNABLE",
        format!(
            "{} (line {}): story {:?} cannot be run: {why}; stories run in list order, so the walk stops here",
            folder.shown(baton_bmad::stories_mode::schema::FILE_NAME),
            row.entry.line,
            row.entry.id
        ),
    )
    .hint("a story is `blocked` when its build halted (its file says why): resolve it, set its frontmatter status to draft, ready-for-dev, in-progress or in-review, then run the command again")
}

impl StoriesRun {
    pub(crate) fn epic_id(&self) -> String {
        baton_bmad::stories_mode::epic_id(&self.folder.rel)
    }

    /// The progress the command continues or starts (one epic in flight per project).
    pub(crate) fn plan_target(
        &self,
        command: &Command,
        progress: Option<Progress>,
    ) -> Result<Progress> {
        let epic_id = self.epic_id();
        if let Command::Stories { max_stories, .. } = command {
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
            let target = Target::Epic {
                max_stories: *max_stories,
            };
            return Ok(match progress {
                Some(mut p) if p.epic_id == epic_id => {
                    p.completed.clear();
                    p.target = target;
                    p
                }
                _ => Progress::new(&epic_id, target),
            });
        }
        Ok(match progress {
            Some(p) if p.epic_id == epic_id => p,
            _ => Progress::new(&epic_id, Target::Epic { max_stories: None }),
        })
    }

    /// Everything checked before the first write: `stories.yaml` strictly, `SPEC.md`, one file
    /// at most per story with a readable status, the story in flight still listed, and the
    /// story the walk takes next one it runs.
    pub(crate) fn check(&self, progress: &Progress) -> Result<Vec<StoryState>> {
        let rows = self.folder.scan()?;
        if !self.folder.has_spec() {
            return Err(EpicError::usage(
                "STORIES_SPEC_MISSING",
                format!(
                    "{} does not exist: the stories of a spec folder are planned from it",
                    self.folder.shown(baton_bmad::stories_mode::SPEC_FILE)
                ),
            )
            .hint("run bmad-spec on the folder first (it writes SPEC.md, then stories.yaml)"));
        }
        if let Some(problem) = rows.iter().find_map(|r| r.problem.clone()) {
            return Err(problem);
        }
        match &progress.story {
            Some(sp) if !rows.iter().any(|r| r.entry.id == sp.key) => {
                return Err(EpicError::usage(
                    "STORY_NOT_FOUND",
                    format!(
                        "story {:?} is in progress but {} no longer lists it",
                        sp.key,
                        self.folder.shown(baton_bmad::stories_mode::schema::FILE_NAME)
                    ),
                )
                .hint("put the story back in stories.yaml to finish it, or remove .baton-epic-progress.json from the implementation artifacts to start over"));
            }
            Some(_) => {}
            None => {
                for row in &rows {
                    match row.standing() {
                        Standing::Done => continue,
                        Standing::Start(_) => break,
                        Standing::NotRunnable(s) => {
                            return Err(not_runnable(&self.folder, row, &s));
                        }
                    }
                }
            }
        }
        Ok(rows)
    }

    /// `--dry-run`: the stories the walk would run, in order, each with where it starts; the
    /// plan ends before a story the walk would stop at.
    pub(crate) fn dry_plan(&self, progress: &Progress) -> Result<Vec<PlannedStory>> {
        let mut plan = Vec::new();
        for row in self.folder.scan()? {
            let status = row.shown_status();
            let phase = match (&progress.story, row.standing()) {
                (Some(sp), _) if sp.key == row.entry.id => sp.phase,
                (_, Standing::Done) => continue,
                (_, Standing::Start(p)) => p,
                (_, Standing::NotRunnable(_)) => break,
            };
            plan.push(PlannedStory {
                key: row.entry.id.clone(),
                status,
                phase,
                file: row.file.as_deref().map(|f| self.folder.story_path(f)),
                note: None,
            });
        }
        Ok(plan)
    }

    /// Takes what a phase run may change and must not: `stories.yaml`, the other stories' files
    /// and the current story's status.
    pub(crate) fn guard(&self, current: &str) -> Guard {
        let ids: Vec<String> = self
            .folder
            .entries()
            .map(|e| e.into_iter().map(|s| s.id).collect())
            .unwrap_or_default();
        let names = self.folder.story_names().unwrap_or_default();
        let mut others = Vec::new();
        let mut budget = GUARD_BYTES;
        let mut current_status = None;
        let mut current_file = false;
        for name in &names {
            let Some(owner) = ids.iter().find(|id| matches(id, name)) else {
                continue;
            };
            if owner == current {
                current_file = true;
                current_status = self.folder.read_status(name).ok().flatten();
                continue;
            }
            // Past the budget (or unreadable) a file is known but not guarded.
            let bytes = self
                .folder
                .story_text(name)
                .ok()
                .flatten()
                .filter(|b| b.len() <= budget);
            budget -= bytes.as_ref().map_or(0, String::len);
            others.push((name.clone(), bytes));
        }
        Guard {
            folder: self.folder.clone(),
            current: current.to_string(),
            ids,
            stories_yaml: self.folder.stories_bytes(),
            others,
            current_status: match (current_file, current_status) {
                (true, Some(s)) => s,
                // Planning created the file: it is a draft until the orchestrator says more.
                _ => "draft".to_string(),
            },
        }
    }
}

impl StoriesRun {
    /// What a report says besides its outcome: no sprint-status findings in this mode, and how
    /// many stories another walk would run (those before the first it stops at).
    pub(crate) fn afterwards(&self) -> (baton_epic_state::findings::Findings, usize) {
        let mut left = 0;
        for row in self.folder.scan().unwrap_or_default() {
            match row.standing() {
                Standing::Done => {}
                Standing::Start(_) => left += 1,
                Standing::NotRunnable(_) => break,
            }
        }
        (baton_epic_state::findings::Findings::default(), left)
    }
}

/// What a phase run found, to be put back after it.
pub(crate) struct Guard {
    folder: SpecFolder,
    current: String,
    ids: Vec<String>,
    stories_yaml: Option<Vec<u8>>,
    /// Other stories' files: name and text (`None`: unreadable, not guarded).
    others: Vec<(String, Option<String>)>,
    current_status: String,
}

impl Guard {
    pub(crate) fn restore(
        &self,
        on_event: Option<&(dyn Fn(EpicEvent) + Send + Sync)>,
    ) -> Result<()> {
        let note = |what: String| {
            if let Some(f) = on_event {
                f(EpicEvent::Note(format!(
                    "the phase run changed {what}, which only the orchestrator changes; the change was undone"
                )));
            }
        };
        if let Some(before) = &self.stories_yaml
            && self.folder.stories_bytes().as_ref() != Some(before)
        {
            self.folder.write_stories_bytes(before)?;
            note(
                self.folder
                    .shown(baton_bmad::stories_mode::schema::FILE_NAME),
            );
        }
        let names = self.folder.story_names()?;
        for name in &names {
            let Some(owner) = self.ids.iter().find(|id| matches(id, name)) else {
                continue;
            };
            if *owner == self.current {
                // The phase writes this file; its status is the orchestrator's.
                if let Ok(Some(text)) = self.folder.story_text(name)
                    && let Ok(found) = frontmatter::status(&text)
                    && found != frontmatter::Found::Status(self.current_status.clone())
                {
                    let fixed = frontmatter::with_status(&text, &self.current_status);
                    self.folder.write_story(name, &fixed)?;
                    if found != frontmatter::Found::None {
                        note(format!("the status of {}", self.folder.story_path(name)));
                    }
                }
                continue;
            }
            match self.others.iter().find(|(n, _)| n == name) {
                None => {
                    // A file for another story, made by this run: it would pin that story.
                    self.folder.remove_story(name)?;
                    note(self.folder.story_path(name));
                }
                Some((_, Some(before))) => {
                    if self.folder.story_text(name).ok().flatten().as_ref() != Some(before) {
                        self.folder.write_story(name, before)?;
                        note(self.folder.story_path(name));
                    }
                }
                Some((_, None)) => {}
            }
        }
        for (name, before) in &self.others {
            if let Some(text) = before
                && !names.contains(name)
            {
                self.folder.write_story(name, text)?;
                note(self.folder.story_path(name));
            }
        }
        Ok(())
    }
}
