//! The story file as the loop sees it (found by `baton_bmad::story_files`), read again each time:
//! a phase's model may have written it anywhere the finder looks.

use crate::ctx::Ctx;
use crate::error::{EpicError, Result};
use baton_autopilot::untrusted::limit;
use baton_bmad::phase::Phase;
use baton_bmad::story_files::{Lookup, StoryFiles, ambiguous_error};

impl Ctx<'_> {
    /// The story's file now.
    pub(crate) fn story_lookup(&self, key: &str) -> Result<Lookup> {
        if self.tickets_mode() {
            return self.tickets_lookup(key);
        }
        let sprint = self.sprint()?;
        Ok(StoryFiles::find(&self.layout, &sprint, key))
    }

    /// The project-relative path the phases are given as `storyFile`: the file, else where a
    /// new one goes. A story found twice is refused, located.
    pub(crate) fn story_file_var(&self, key: &str) -> Result<String> {
        match self.story_lookup(key)? {
            Lookup::Ambiguous(files) => Err(ambiguous_error(key, &files)),
            other => Ok(other.path().unwrap_or_default().to_string()),
        }
    }

    /// What a phase must have left: a non-empty story file (create-story, validate, dev),
    /// wherever the finder finds it.
    pub(crate) fn check_story_file(&self, phase: Phase, key: &str) -> Result<()> {
        if !self
            .pipeline
            .stage(phase)
            .is_some_and(|s| s.leaves.story_file())
        {
            return Ok(());
        }
        match self.story_lookup(key)? {
            Lookup::Found(f) if self.layout.dir.project_file_len(&f.path).unwrap_or(0) > 0 => {
                Ok(())
            }
            Lookup::Found(f) => Err(EpicError::failure(
                "EPIC_PHASE_OUTPUT_MISSING",
                format!(
                    "the {phase} phase completed and the story file {} is empty or not a regular file",
                    f.path
                ),
            )),
            Lookup::Missing { expected } => Err(EpicError::failure(
                "EPIC_PHASE_OUTPUT_MISSING",
                format!("the {phase} phase completed without the story file {expected}"),
            )),
            Lookup::Ambiguous(files) => Err(ambiguous_error(key, &files)),
        }
    }

    /// The story file's text (bounded), for the commit message; `None` when not found once.
    pub(crate) fn story_text(&self, key: &str) -> Option<String> {
        let path = self.story_lookup(key).ok()?.found()?.path.clone();
        let bytes = self
            .layout
            .dir
            .read_project_file(&path, limit::PROMPT_FILE)
            .ok()??;
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }
}
