//! The webhooks of a story unit this worker ran (`[[notify.webhooks]]` of the project's
//! `baton.toml` at the unit's commit, secrets from the worker's environment): `question`,
//! `story.approved` or `story.failed`, sent once the unit's end is committed under its lease.
//!
//! Once: the end is written in one fenced transaction, which only the lease's holder can commit,
//! so a unit taken over by another worker ends — and is announced — once; its delivery id
//! names the unit, the event and the story (and question), so a receiver can tell a repeat.
//! A worker killed between that commit and the delivery sends nothing for it (at most once).

use baton_epic::queued::payload::StoryPayload;
use baton_epic::queued::worker::StoryEnd;
use baton_notify::{Event, EventKind, Notifier, NotifyConfig, QuestionInfo};
use std::path::Path;

/// What the team is told of `end`, if anything.
pub(crate) fn event(
    remote: &str,
    payload: &StoryPayload,
    unit: i64,
    end: &StoryEnd,
) -> Option<Event> {
    let kind = match end {
        StoryEnd::Approved => EventKind::StoryApproved,
        StoryEnd::Waiting(_) => EventKind::Question,
        StoryEnd::Failed(_) => EventKind::StoryFailed,
        StoryEnd::Stopped => return None,
    };
    let mut e = Event::new(kind, project_name(remote));
    e.epic = Some(payload.epic_id.clone());
    e.story = Some(payload.story.clone());
    e.unit = Some(unit.to_string());
    match end {
        StoryEnd::Waiting(q) => {
            e.question = Some(QuestionInfo {
                id: q.id.clone(),
                text: q.question.clone(),
                choices: Vec::new(),
            });
        }
        StoryEnd::Failed(f) => {
            e.run = f.run_id.clone();
            e.summary = Some(format!("{}: {}", f.code, f.message));
        }
        StoryEnd::Approved | StoryEnd::Stopped => {}
    }
    Some(e)
}

/// The repository's name (`app` for `git@host:o/app.git` or `/srv/git/app.git`): a worker
/// knows the project by its remote, never by a folder of the machine that submitted it.
fn project_name(remote: &str) -> String {
    let last = remote
        .trim_end_matches('/')
        .rsplit(['/', ':'])
        .next()
        .unwrap_or(remote);
    let name = last.strip_suffix(".git").unwrap_or(last);
    if name.is_empty() {
        "project".into()
    } else {
        name.to_string()
    }
}

/// Sends `event` to the webhooks of the project checked out at `project`; returns at once (the
/// delivery goes on in its own thread, bounded by its tries). A configuration the worker
/// cannot use is returned as a message: the unit's end stands.
pub(crate) fn send(home: &Path, project: &Path, event: Event) -> Result<(), String> {
    let config = NotifyConfig::load(project).map_err(|e| format!("{}: {e}", e.code()))?;
    if config.webhooks.is_empty() {
        return Ok(());
    }
    let notifier = Notifier::new(config, home);
    notifier.send(event);
    // Closed without waiting: the worker lives on, the delivery thread finishes its tries
    // while the worker claims the next unit.
    drop(notifier.close());
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_project_is_named_after_its_repository() {
        assert_eq!(super::project_name("git@host:o/app.git"), "app");
        assert_eq!(super::project_name("/srv/git/app.git/"), "app");
        assert_eq!(super::project_name("https://forge/o/app"), "app");
        assert_eq!(super::project_name("app.git"), "app");
    }
}
