//! The loop in stories mode: which story comes next (list order), where its status is written
//! (its file's frontmatter), what a phase must leave (its one story file), the two checkpoints
//! of `stories.yaml` (pauses for a person, as questions in the story's agent-state file), the
//! dev phase's `invoke_dev_with`, and a guard that undoes what a phase run's model changed in
//! statuses only the orchestrator writes.

use baton_bmad::stories_mode::{SpecFolder, Standing, StoryEntry, StoryState, derived_name, frontmatter, matches};
use crate::agent_state::{AgentState, Question};
use crate::error::{EpicError, Result};
use crate::events::EpicEvent;
use crate::orchestrator::{Command, EpicOutcome, PlannedStory};
use crate::progress::{Progress, StoryProgress, Target};
use crate::run_state::RunEpicState;
use crate::story::Ctx;
use baton_bmad::phase::Phase;
use baton_store::Store;
use serde_json::{Map, Value, json};
use std::path::Path;
#[cfg(test)]
use std::sync::Mutex;

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
                let recorded = crate::layout_record::recorded_stories(store, project)?;
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

fn not_runnable(folder: &SpecFolder, row: &StoryState, status: &str) -> EpicError {
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
            note(self.folder.shown(baton_bmad::stories_mode::schema::FILE_NAME));
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

/// The status of a story file for a status of the loop's sprint vocabulary.
fn file_status(sprint_status: &str) -> Option<&'static str> {
    match sprint_status {
        "ready-for-dev" => Some("ready-for-dev"),
        "in-progress" => Some("in-progress"),
        "review" => Some("in-review"),
        "done" => Some("done"),
        _ => None,
    }
}

impl Ctx<'_> {
    fn stories_run(&self) -> Result<&StoriesRun> {
        self.stories
            .as_ref()
            .ok_or_else(|| EpicError::failure("EPIC_IO_FAILED", "the loop is not in stories mode"))
    }

    fn entry(&self, key: &str) -> Result<StoryEntry> {
        let run = self.stories_run()?;
        run.folder
            .entries()?
            .into_iter()
            .find(|e| e.id == key)
            .ok_or_else(|| {
                EpicError::usage(
                    "STORY_NOT_FOUND",
                    format!(
                        "{} no longer lists story {key:?}",
                        run.folder.shown(baton_bmad::stories_mode::schema::FILE_NAME)
                    ),
                )
            })
    }

    /// The story to work on: the one in flight, else the first of the list that is not done.
    /// A story the loop does not run stops the walk (list order is execution order). A story
    /// after one with `done_checkpoint` first asks a person.
    pub(crate) fn stories_next(&mut self) -> Result<Option<(usize, usize)>> {
        let run = self.stories_run()?.clone();
        let rows = run.folder.scan()?;
        let total = rows.len();
        let index_of = |key: &str| {
            rows.iter()
                .position(|r| r.entry.id == key)
                .map_or(0, |i| i + 1)
        };
        if let Some(sp) = &self.progress.story {
            return Ok(Some((index_of(&sp.key), total)));
        }
        if let Target::Epic {
            max_stories: Some(max),
        } = self.progress.target
            && self.progress.completed.len() >= max as usize
        {
            return Ok(None);
        }
        for (i, row) in rows.iter().enumerate() {
            if let Some(problem) = &row.problem {
                return Err(problem.clone());
            }
            let phase = match row.standing() {
                Standing::Done => continue,
                Standing::Start(p) => p,
                Standing::NotRunnable(s) => return Err(not_runnable(&run.folder, row, &s)),
            };
            if let Some(prev) = i.checked_sub(1).and_then(|p| rows.get(p))
                && prev.entry.done_checkpoint
            {
                let text = format!(
                    "Story {} ({}) is done and has done_checkpoint: check it before anything further runs. Answer to start story {} ({}).",
                    prev.entry.id, prev.entry.title, row.entry.id, row.entry.title
                );
                self.checkpoint(&row.entry.id, phase, "done_checkpoint", text)?;
            }
            self.progress.story = Some(StoryProgress::new(&row.entry.id, phase));
            return Ok(Some((i + 1, total)));
        }
        Ok(None)
    }

    /// Adds a checkpoint question to the story's agent-state file (once: the same question
    /// asked again, after a crash or a resume, is the one already there).
    fn checkpoint(&self, key: &str, phase: Phase, at: &str, text: String) -> Result<()> {
        let mut agent = AgentState::load(&self.layout.dir, &self.layout.rel, key)?
            .unwrap_or_else(|| AgentState::new(key, phase.as_str()));
        if agent.questions.iter().any(|q| q.question == text) {
            return Ok(());
        }
        let q = Question {
            id: agent.next_id(),
            question: text,
            context: Some(format!(
                "{} of stories.yaml asks a person to look before the walk goes on.",
                at
            )),
            answer: None,
        };
        agent.ask(phase.as_str(), q, at, "human_review_required");
        agent.save(&self.layout.dir)
    }

    /// After planning (validate), a story with `spec_checkpoint` waits for a person before dev.
    pub(crate) fn stories_spec_checkpoint(&self, key: &str) -> Result<()> {
        if self.stories.is_none() {
            return Ok(());
        }
        let entry = self.entry(key)?;
        if !entry.spec_checkpoint {
            return Ok(());
        }
        let file = match self.stories_run()?.folder.file_of(&entry)? {
            Some(name) => self.stories_run()?.folder.story_path(&name),
            None => format!("stories/{}-*.md", entry.id),
        };
        let text = format!(
            "Story {} ({}) has spec_checkpoint: review its spec {file} before it is implemented. Answer to go on to dev.",
            entry.id, entry.title
        );
        self.checkpoint(key, Phase::Dev, "spec_checkpoint", text)
    }

    /// Raises the status in the story's file (never lowered; a status the loop does not know
    /// is never overwritten). Keys that are no story of the list (the sprint epic) are ignored.
    pub(crate) fn stories_raise(&self, key: &str, status: &str) -> Result<()> {
        let Some(wanted) = file_status(status) else {
            return Ok(());
        };
        let run = self.stories_run()?;
        let Some(entry) = run.folder.entries()?.into_iter().find(|e| e.id == key) else {
            return Ok(());
        };
        let Some(name) = run.folder.file_of(&entry)? else {
            return Ok(());
        };
        let Some(text) = run.folder.story_text(&name)? else {
            return Ok(());
        };
        let current = frontmatter::status(&text).map_err(|problem| {
            EpicError::failure(
                "STORY_FILE_INVALID",
                format!("{}: {problem}", run.folder.story_path(&name)),
            )
        })?;
        if let frontmatter::Found::Status(s) = &current {
            match frontmatter::rank(s) {
                Some(r) if frontmatter::rank(wanted).is_some_and(|w| w <= r) => return Ok(()),
                None => return Ok(()),
                Some(_) => {}
            }
        }
        run.folder
            .write_story(&name, &frontmatter::with_status(&text, wanted))?;
        self.emit(EpicEvent::Note(format!(
            "{key}: status {wanted} ({})",
            run.folder.story_path(&name)
        )));
        Ok(())
    }

    /// What a phase must leave in stories mode: the story's one file, not empty, with a
    /// readable frontmatter.
    pub(crate) fn stories_contract(&self, phase: Phase, key: &str) -> Result<()> {
        if !self
            .pipeline
            .stage(phase)
            .is_some_and(|s| s.leaves.story_file())
        {
            return Ok(());
        }
        let run = self.stories_run()?;
        let entry = self.entry(key)?;
        let Some(name) = run.folder.file_of(&entry)? else {
            return Err(EpicError::failure(
                "EPIC_PHASE_OUTPUT_MISSING",
                format!(
                    "the {phase} phase completed without the story file {}",
                    run.folder.story_path(&format!("{key}-*.md"))
                ),
            ));
        };
        let text = run.folder.story_text(&name)?.unwrap_or_default();
        if text.trim().is_empty() {
            return Err(EpicError::failure(
                "EPIC_PHASE_OUTPUT_MISSING",
                format!(
                    "the {phase} phase left the story file {} empty",
                    run.folder.story_path(&name)
                ),
            ));
        }
        run.folder.read_status(&name)?;
        Ok(())
    }

    /// No story left under the target: done when every story of the list is.
    pub(crate) fn stories_finish(&mut self) -> Result<EpicOutcome> {
        let rows = self.stories_run()?.folder.scan()?;
        let all_done = !rows.is_empty() && rows.iter().all(|r| r.standing() == Standing::Done);
        if matches!(self.progress.target, Target::Epic { .. }) {
            self.state.current_story_key = None;
        }
        self.pause(EpicOutcome::Done {
            epic_done: all_done,
        })
    }

    /// The folder+id variables of a phase run: the spec folder, the story's id, title and
    /// description, its file (the one on disk, else the name BMAD derives), and for dev the
    /// story's `invoke_dev_with`.
    pub(crate) fn stories_variables(&self, v: &mut Map<String, Value>, sp: &StoryProgress) {
        let Some(run) = &self.stories else {
            return;
        };
        let Ok(entry) = self.entry(&sp.key) else {
            return;
        };
        let name = run
            .folder
            .file_of(&entry)
            .ok()
            .flatten()
            .unwrap_or_else(|| derived_name(&entry));
        v.insert("storyFile".into(), json!(run.folder.story_path(&name)));
        v.insert("specFolder".into(), json!(run.folder.rel));
        v.insert("storyId".into(), json!(entry.id));
        v.insert("storyTitle".into(), json!(entry.title));
        v.insert("storyDescription".into(), json!(entry.description));
        if sp.phase == Phase::Dev && !entry.invoke_dev_with.is_empty() {
            v.insert("invokeDevWith".into(), json!(entry.invoke_dev_with));
        }
    }

    /// The story's text (for the commit message).
    pub(crate) fn stories_story_text(&self, key: &str) -> Option<String> {
        let run = self.stories.as_ref()?;
        let entry = self.entry(key).ok()?;
        let name = run.folder.file_of(&entry).ok()??;
        run.folder.story_text(&name).ok()?
    }
}

impl StoriesRun {
    /// What a report says besides its outcome: no sprint-status findings in this mode, and how
    /// many stories another walk would run (those before the first it stops at).
    pub(crate) fn afterwards(&self) -> (crate::findings::Findings, usize) {
        let mut left = 0;
        for row in self.folder.scan().unwrap_or_default() {
            match row.standing() {
                Standing::Done => {}
                Standing::Start(_) => left += 1,
                Standing::NotRunnable(_) => break,
            }
        }
        (crate::findings::Findings::default(), left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &str = "- id: \"1\"\n  title: Spar\n  description: D\n- id: \"2\"\n  title: Sail\n  description: D\n- id: \"3-1\"\n  title: Tail\n  description: D\n";

    #[test]
    fn the_guard_undoes_what_a_phase_run_changed_beyond_its_story() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let dir = root.join("spec");
        std::fs::create_dir_all(dir.join("stories")).unwrap();
        std::fs::write(dir.join("stories.yaml"), LIST).unwrap();
        let one = "---\nstatus: done\n---\nspar\n";
        std::fs::write(dir.join("stories/1-spar.md"), one).unwrap();
        std::fs::write(
            dir.join("stories/2-sail.md"),
            "---\nstatus: in-progress\n---\nsail\n",
        )
        .unwrap();
        let run = StoriesRun {
            folder: SpecFolder::open(&root, "spec").unwrap(),
        };
        let guard = run.guard("2");
        // What a model could do during story 2's dev run.
        std::fs::write(dir.join("stories.yaml"), "- id: \"9\"\n").unwrap();
        std::fs::write(dir.join("stories/1-spar.md"), "---\nstatus: draft\n---\n").unwrap();
        std::fs::write(dir.join("stories/3-1-tail.md"), "---\nstatus: done\n---\n").unwrap();
        std::fs::write(
            dir.join("stories/2-sail.md"),
            "---\nstatus: done\n---\nsail, built\n",
        )
        .unwrap();
        std::fs::write(dir.join("stories/notes.md"), "kept\n").unwrap();
        let notes = Mutex::new(Vec::new());
        let on_event = |e: EpicEvent| {
            if let EpicEvent::Note(n) = e {
                notes.lock().unwrap().push(n);
            }
        };
        guard.restore(Some(&on_event)).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("stories.yaml")).unwrap(),
            LIST
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("stories/1-spar.md")).unwrap(),
            one
        );
        assert!(!dir.join("stories/3-1-tail.md").exists());
        // The story's own work stays; its status is the orchestrator's.
        assert_eq!(
            std::fs::read_to_string(dir.join("stories/2-sail.md")).unwrap(),
            "---\nstatus: in-progress\n---\nsail, built\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("stories/notes.md")).unwrap(),
            "kept\n"
        );
        assert_eq!(
            notes.lock().unwrap().len(),
            4,
            "{:?}",
            notes.lock().unwrap()
        );

        // A story file removed by the run comes back; a first file of the story is a draft.
        let guard = run.guard("3-1");
        std::fs::remove_file(dir.join("stories/1-spar.md")).unwrap();
        std::fs::write(dir.join("stories/3-1-tail.md"), "---\nstatus: done\n---\n").unwrap();
        guard.restore(None).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("stories/1-spar.md")).unwrap(),
            one
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("stories/3-1-tail.md")).unwrap(),
            "---\nstatus: draft\n---\n"
        );
    }
}
