//! `baton notify test`: one sample event, tried once on every webhook, each outcome returned
//! (and logged).

use crate::config::NotifyConfig;
use crate::deliver;
use crate::event::{Event, EventKind, QuestionInfo};
use crate::log::Entry;
use std::path::{Path, PathBuf};

/// A `question` event that says it is a test.
pub fn event(project: &str, path: Option<PathBuf>) -> Event {
    let mut e = Event::new(EventKind::Question, project);
    e.project_path = path;
    e.epic = Some("epic-0".into());
    e.story = Some("0-0-sample".into());
    e.question = Some(QuestionInfo {
        id: "q1".into(),
        text: "This is a test from `baton notify test`: does it reach you?".into(),
        choices: vec!["yes".into(), "no".into()],
    });
    e.summary = Some("a test event; nothing waits for an answer".into());
    // Each test is its own delivery.
    e.nonce = Some(e.at.clone() + &std::process::id().to_string());
    e
}

/// Sends `event` once to every webhook of `config` (whatever events it asks for), in order.
pub fn send(config: &NotifyConfig, home: &Path, event: &Event) -> Vec<Entry> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    let client = deliver::client();
    let (Ok(runtime), Ok(client)) = (runtime, client) else {
        return Vec::new();
    };
    config
        .webhooks
        .iter()
        .map(|w| {
            runtime.block_on(deliver::deliver(
                &client,
                home,
                w,
                config.public_url.as_deref(),
                event,
                1,
            ))
        })
        .collect()
}
