//! A session's webhooks (`[[notify.webhooks]]`, see [`baton_notify`]): `session.waiting` when
//! the loop ends waiting for a person, `session.done` when the session completes. Delivery runs
//! beside the command and never fails it.

use super::run::SessionEnd;
use baton_notify::{Event, EventKind, Notifier, NotifyConfig, QuestionInfo};
use baton_ralph::Context;
use baton_ralph::error::{RalphError, Result};
use std::path::Path;

/// The project's webhooks; a mistake is refused before the session runs.
pub fn config(ctx: &Context) -> Result<NotifyConfig> {
    NotifyConfig::load(&ctx.project)
        .map_err(|e| RalphError::usage(e.code(), format!("{e} (hint: {})", e.hint())))
}

/// What `end` tells the webhooks of session `id`, if anything.
pub fn event(ctx: &Context, id: &str, end: &SessionEnd) -> Option<Event> {
    let project = ctx
        .project
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "project".into());
    let mut e = match end {
        SessionEnd::Waiting {
            index, question, ..
        } => {
            let mut e = Event::new(EventKind::SessionWaiting, project);
            e.question = Some(QuestionInfo {
                id: format!("step-{index}"),
                text: question.clone(),
                choices: Vec::new(),
            });
            e
        }
        SessionEnd::Completed => Event::new(EventKind::SessionDone, project),
        SessionEnd::Paused | SessionEnd::Interrupted { .. } => return None,
    };
    e.project_path = Some(ctx.project.clone());
    e.session = Some(id.to_string());
    Some(e)
}

/// Sends what `end` tells, giving the delivery its grace period off the async runtime.
pub async fn send(
    config: NotifyConfig,
    store_home: &Path,
    ctx: &Context,
    id: &str,
    end: &SessionEnd,
) {
    if config.webhooks.is_empty() {
        return;
    }
    let Some(e) = event(ctx, id, end) else {
        return;
    };
    let notifier = Notifier::new(config, store_home);
    notifier.send(e);
    let closing = notifier.close();
    let _ = tokio::task::spawn_blocking(move || closing.wait()).await;
}
