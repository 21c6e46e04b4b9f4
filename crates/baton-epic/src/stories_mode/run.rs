//! The loop in stories mode: which story comes next (list order), where its status is written
//! (its file's frontmatter), what a phase must leave (its one story file), the two checkpoints
//! of `stories.yaml` (pauses for a person, as questions in the story's agent-state file), the
//! dev phase's `invoke_dev_with`, and a guard that undoes what a phase run's model changed in
//! statuses only the orchestrator writes.

use super::walk::{StoriesRun, not_runnable};
use crate::ctx::Ctx;
use crate::error::{EpicError, Result};
use crate::events::EpicEvent;
use crate::outcome::EpicOutcome;
use crate::progress::{StoryProgress, Target};
use baton_bmad::phase::Phase;
use baton_bmad::stories_mode::{Standing, StoryEntry, derived_name, frontmatter};
use baton_epic_state::agent_state::{AgentState, Question};
use serde_json::{Map, Value, json};
#[cfg(test)]
use std::sync::Mutex;

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
                        run.folder
                            .shown(baton_bmad::stories_mode::schema::FILE_NAME)
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
            let phase = self.pipeline.nearest(phase);
            if phase.is_implementation() && self.pipeline.first() == phase {
                // No phase plans before the code (BMAD 6.11+'s build): the spec written by
                // the breakdown is what a person reviews, before the build starts.
                self.stories_spec_checkpoint(&row.entry.id)?;
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

    /// After planning (the phase before the code), a story with `spec_checkpoint` waits for a
    /// person before the code is written.
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
        if sp.phase.is_implementation() && !entry.invoke_dev_with.is_empty() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use baton_bmad::stories_mode::SpecFolder;

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
