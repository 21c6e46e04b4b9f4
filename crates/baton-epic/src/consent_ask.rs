//! The loop asking a person about a value BMAD does not define (the rules and the answers'
//! meaning are in `consent`): the question written in the story's agent-state file, answered at
//! once at a terminal or paused for `baton epic answer`.

use super::error::Result;
use super::events::EpicEvent;
use super::outcome::EpicOutcome;
use super::progress::now;
use crate::consent::*;
use crate::ctx::Ctx;
use baton_bmad::keys::{self};
use baton_bmad::phase::Phase;
use baton_bmad::sprint::{self, Entry};
use baton_epic_state::agent_state::AgentState;

impl Ctx<'_> {
    fn agent_for(&self, story: &str, phase: Phase) -> Result<AgentState> {
        Ok(AgentState::load(&self.layout.dir, &self.layout.rel, story)?
            .unwrap_or_else(|| AgentState::new(story, phase.as_str())))
    }

    /// A story whose value BMAD does not define: its question, asked or answered.
    pub(crate) fn story_consent(&mut self, entry: &Entry) -> Result<StoryConsent> {
        let shown = self.layout.rel_file(sprint::FILE_NAME);
        let text = story_question(&shown, &entry.key, &entry.status);
        let phase = Phase::CreateStory;
        let mut agent = self.agent_for(&entry.key, phase)?;
        let context = format!(
            "{shown} line {}: {}",
            entry.line,
            keys::not_runnable_reason(&entry.kind, &entry.status)
        );
        let Some(q) = agent.questions.iter().find(|q| q.question == text).cloned() else {
            return Ok(StoryConsent::Ask(self.ask_saved(
                &mut agent, phase, text, context, BLOCKED_AT, REASON,
            )?));
        };
        let Some(answer) = q.answer.clone() else {
            return Ok(StoryConsent::Ask(q));
        };
        match story_answer(&answer) {
            StoryAnswer::Skip => Ok(StoryConsent::Skip),
            StoryAnswer::Set(status) => {
                let mut s = self.sprint()?;
                if s.set_consented(&entry.key, status, &now())? {
                    s.save()?;
                    self.emit(EpicEvent::Status {
                        key: entry.key.clone(),
                        status: status.to_string(),
                    });
                }
                agent.remove(&q.id);
                agent.save(&self.layout.dir)?;
                Ok(StoryConsent::Set(status))
            }
            StoryAnswer::Unclear => {
                agent.remove(&q.id);
                let context = format!(
                    "{context}. The answer `{}` was none of: skip, backlog, ready-for-dev, \
                     in-progress, review, done.",
                    answer.trim()
                );
                Ok(StoryConsent::Ask(self.ask_saved(
                    &mut agent, phase, text, context, BLOCKED_AT, REASON,
                )?))
            }
        }
    }

    /// The epic of the loop, before its story `story` (at `phase`) starts: when the epic's
    /// value is one BMAD does not define, its question, asked or answered.
    pub(crate) fn epic_consent(&mut self, story: &str, phase: Phase) -> Result<EpicConsent> {
        let sprint = self.sprint()?;
        let Some(epic) = sprint.epic_entry(self.epic).cloned() else {
            return Ok(EpicConsent::Go);
        };
        if keys::defined(&epic.kind, &epic.status) {
            return Ok(EpicConsent::Go);
        }
        let shown = self.layout.rel_file(sprint::FILE_NAME);
        let text = epic_question(&shown, &epic.key, &epic.status);
        let context = format!(
            "{shown} line {}: {}",
            epic.line,
            keys::not_runnable_reason(&epic.kind, &epic.status)
        );
        let mut agent = self.agent_for(story, phase)?;
        let Some(q) = agent.questions.iter().find(|q| q.question == text).cloned() else {
            return Ok(EpicConsent::Ask(self.ask_saved(
                &mut agent, phase, text, context, BLOCKED_AT, REASON,
            )?));
        };
        let Some(answer) = q.answer.clone() else {
            return Ok(EpicConsent::Ask(q));
        };
        match epic_answer(&answer) {
            EpicAnswer::Run => {
                let mut s = self.sprint()?;
                if s.set_consented(&epic.key, "in-progress", &now())? {
                    s.save()?;
                    self.emit(EpicEvent::Status {
                        key: epic.key.clone(),
                        status: "in-progress".into(),
                    });
                }
                agent.remove(&q.id);
                agent.save(&self.layout.dir)?;
                Ok(EpicConsent::Go)
            }
            EpicAnswer::Leave => {
                agent.remove(&q.id);
                agent.save(&self.layout.dir)?;
                Ok(EpicConsent::Leave)
            }
            EpicAnswer::Unclear => {
                agent.remove(&q.id);
                let context = format!(
                    "{context}. The answer `{}` was neither `run` nor `leave`.",
                    answer.trim()
                );
                Ok(EpicConsent::Ask(self.ask_saved(
                    &mut agent, phase, text, context, BLOCKED_AT, REASON,
                )?))
            }
        }
    }

    /// The person left the epic as it is: nothing changes, the loop stops. A story taken up
    /// only now is let go (one with phase runs stays where it stands).
    pub(crate) fn leave_epic(&mut self) -> Result<EpicOutcome> {
        if let Some(sp) = &self.progress.story
            && !self.progress.runs.iter().any(|r| r.story_key == sp.key)
        {
            self.progress.story = None;
        }
        self.emit(EpicEvent::Note(format!(
            "{} left as it is, as you answered; none of its stories ran",
            keys::epic_key(self.epic)
        )));
        self.finish()
    }
}
