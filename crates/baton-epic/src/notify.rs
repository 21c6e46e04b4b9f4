//! The epic's webhooks (`[[notify.webhooks]]`, see [`baton_notify`]): what the loop does,
//! turned into the events a team is told of. The loop's own events give `story.approved`,
//! `story.done` and `run.failed`; its outcome gives `question`, `epic.done`, `epic.paused`,
//! `story.failed` and `budget.exceeded`; `baton epic answer` gives `answered`. Delivery runs
//! beside the loop and never stops it.

use super::error::{EpicError, Result};
use super::events::EpicEvent;
use super::outcome::EpicOutcome;
use baton_epic_state::agent_state::Question;
use baton_notify::{Event, EventKind, Notifier, NotifyConfig, QuestionInfo};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The project's webhooks, refused with the configuration's code and hint.
pub fn config(project_root: &Path) -> Result<NotifyConfig> {
    NotifyConfig::load(project_root)
        .map_err(|e| EpicError::usage(e.code(), e.to_string()).hint(e.hint()))
}

pub struct EpicNotify {
    notifier: Notifier,
    project: String,
    path: PathBuf,
    epic: String,
    /// Stories whose approval was sent by this invocation (it precedes `story.done`).
    approved: Mutex<HashSet<String>>,
    /// `--queue`: the workers send each unit's own events (`question`, `story.approved`,
    /// `story.failed`) when its end is committed; this side sends the epic's.
    by_workers: bool,
}

impl EpicNotify {
    pub fn new(config: NotifyConfig, store_home: &Path, project_root: &Path, epic: &str) -> Self {
        EpicNotify {
            notifier: Notifier::new(config, store_home),
            project: project_name(project_root),
            path: project_root.to_path_buf(),
            epic: epic.to_string(),
            approved: Mutex::new(HashSet::new()),
            by_workers: false,
        }
    }

    /// The stories run on queue workers, which announce their units' ends themselves.
    pub fn queued(mut self, queued: bool) -> Self {
        self.by_workers = queued;
        self
    }

    pub fn is_enabled(&self) -> bool {
        self.notifier.is_enabled()
    }

    fn event(&self, kind: EventKind, story: Option<&str>) -> Event {
        let mut e = Event::new(kind, &self.project);
        e.project_path = Some(self.path.clone());
        e.epic = Some(self.epic.clone());
        e.story = story.map(str::to_string);
        e
    }

    /// One of the loop's events.
    pub fn observe(&self, e: &EpicEvent) {
        match e {
            EpicEvent::Status { key, status } if status == "done" && !key.starts_with("epic-") => {
                self.approved(key);
                self.notifier
                    .send(self.event(EventKind::StoryDone, Some(key)));
            }
            EpicEvent::PhaseEnded {
                story,
                phase,
                run_id,
                result,
            } if result == "failed" => {
                let mut ev = self.event(EventKind::RunFailed, Some(story));
                ev.run = Some(run_id.clone());
                ev.summary = Some(format!("the {} run failed", phase.as_str()));
                self.notifier.send(ev);
            }
            _ => {}
        }
    }

    /// `story.approved`, once per story and invocation.
    fn approved(&self, story: &str) {
        if self.by_workers {
            return;
        }
        let first = self
            .approved
            .lock()
            .map(|mut s| s.insert(story.to_string()))
            .unwrap_or(true);
        if first {
            self.notifier
                .send(self.event(EventKind::StoryApproved, Some(story)));
        }
    }

    /// `baton epic answer` recorded `text` for `question` of `story`.
    pub fn answered(&self, story: &str, question: &Question) {
        let mut e = self.event(EventKind::Answered, Some(story));
        e.question = Some(info(question));
        e.summary = question.answer.clone();
        self.notifier.send(e);
    }

    /// How the invocation ended.
    pub fn outcome(&self, o: &EpicOutcome) {
        match o {
            EpicOutcome::Done { epic_done: true } => {
                self.notifier.send(self.event(EventKind::EpicDone, None));
            }
            EpicOutcome::Waiting { story, question } if !self.by_workers => {
                let mut e = self.event(EventKind::Question, Some(story));
                e.question = Some(info(question));
                self.notifier.send(e);
            }
            EpicOutcome::Paused { failure } => {
                let mut e = self.event(EventKind::StoryFailed, Some(&failure.story_key));
                e.run = failure.run_id.clone();
                e.summary = Some(format!("{}: {}", failure.code, failure.message));
                if !self.by_workers {
                    self.notifier.send(e.clone());
                }
                e.kind = EventKind::EpicPaused;
                self.notifier.send(e);
            }
            EpicOutcome::Stopped | EpicOutcome::Interrupted => {
                let mut e = self.event(EventKind::EpicPaused, None);
                e.summary = Some(match o {
                    EpicOutcome::Stopped => "stopped by `baton epic stop`".into(),
                    _ => "interrupted".into(),
                });
                self.notifier.send(e);
            }
            EpicOutcome::Budget {
                story,
                run_id,
                message,
                budget,
                ..
            } => {
                let mut e = self.event(EventKind::BudgetExceeded, Some(story));
                e.run = run_id.clone();
                e.usage = Some(budget.clone());
                e.summary = Some(message.clone());
                self.notifier.send(e);
            }
            EpicOutcome::Done { epic_done: false }
            | EpicOutcome::Waiting { .. }
            | EpicOutcome::Planned { .. } => {}
        }
    }

    /// Gives the queued deliveries their grace period (off the async runtime's threads).
    pub async fn finish(&self) {
        if !self.is_enabled() {
            return;
        }
        let closing = self.notifier.close();
        let _ = tokio::task::spawn_blocking(move || closing.wait()).await;
    }
}

fn info(q: &Question) -> QuestionInfo {
    QuestionInfo {
        id: q.id.clone(),
        text: q.question.clone(),
        choices: Vec::new(),
    }
}

/// The project's folder name: what a team calls it, without where it is on this machine.
pub fn project_name(root: &Path) -> String {
    root.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "project".to_string())
}
