//! `format = "slack"`: Slack's incoming-webhook shape, `text` (the notification line) plus
//! `blocks` (what the message shows: the event, the question, how to answer).

use crate::config::Webhook;
use crate::event::{Event, EventKind};
use serde_json::{Value, json};

/// Slack's mrkdwn reads `&`, `<` and `>` as markup: a story title or question cannot make a
/// link or a mention.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One line: `taskboard · epic-2 · 2-1-create-board: question: Kanban or list?`.
pub fn headline(e: &Event) -> String {
    let mut where_ = vec![e.project.clone()];
    where_.extend(e.epic.clone());
    where_.extend(e.story.clone());
    let what = match (&e.kind, &e.question, &e.summary) {
        (EventKind::Question, Some(q), _) => format!("question: {}", q.text),
        (_, _, Some(s)) => format!("{}: {s}", e.kind),
        _ => e.kind.to_string(),
    };
    format!("{}: {what}", where_.join(" · "))
}

pub fn body(e: &Event, webhook: &Webhook, public_url: Option<&str>) -> Value {
    let text = esc(&headline(e));
    let mut blocks = vec![json!({
        "type": "section",
        "text": { "type": "mrkdwn", "text": format!("*baton* · {text}") },
    })];
    if let Some(q) = &e.question
        && !q.choices.is_empty()
    {
        let choices: Vec<String> = q.choices.iter().map(|c| format!("• {}", esc(c))).collect();
        blocks.push(json!({
            "type": "section",
            "text": { "type": "mrkdwn", "text": choices.join("\n") },
        }));
    }
    if let Some(a) = e.answer(webhook, public_url) {
        // Backticks cannot be escaped inside Slack code: the command is shown as it is run.
        let mut how = format!("Answer with `{}`", a.command.replace('`', "'"));
        if let Some(url) = &a.url {
            how.push_str(&format!(" or on <{}|the board>", esc(url)));
        }
        blocks.push(json!({
            "type": "section",
            "text": { "type": "mrkdwn", "text": how },
        }));
    }
    blocks.push(json!({
        "type": "context",
        "elements": [{ "type": "mrkdwn", "text": format!("{} · {}", e.kind, e.at) }],
    }));
    json!({ "text": text, "blocks": blocks })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::config::NotifyConfig;
    use crate::event::QuestionInfo;

    #[test]
    fn a_question_in_slacks_shape() {
        let hook = NotifyConfig::parse(
            "[[notify.webhooks]]\nurl = \"https://hooks.slack.com/services/T/B/X\"\nformat = \"slack\"\n",
            &|_| None,
        )
        .unwrap()
        .webhooks
        .remove(0);
        let mut e = Event::new(EventKind::Question, "taskboard");
        e.epic = Some("epic-2".into());
        e.story = Some("2-1-create-board".into());
        e.question = Some(QuestionInfo {
            id: "q1".into(),
            text: "Kanban <or> list & <!channel>?".into(),
            choices: vec!["Kanban".into(), "List".into()],
        });
        let b = body(&e, &hook, Some("https://baton.example.com"));
        assert_eq!(
            b["text"],
            "taskboard · epic-2 · 2-1-create-board: question: Kanban &lt;or&gt; list &amp; &lt;!channel&gt;?"
        );
        let blocks = b["blocks"].as_array().unwrap();
        assert_eq!(blocks.len(), 4);
        assert!(
            blocks
                .iter()
                .all(|b| b["type"] == "section" || b["type"] == "context")
        );
        assert_eq!(blocks[1]["text"]["text"], "• Kanban\n• List");
        let how = blocks[2]["text"]["text"].as_str().unwrap();
        assert!(
            how.contains("`baton epic answer 2-1-create-board '<your answer>' --question q1`"),
            "{how}"
        );
        assert!(
            how.contains("<https://baton.example.com/epic|the board>"),
            "{how}"
        );
        // No mention or link is made from the question's text.
        assert!(!b.to_string().contains("<!channel>"));
    }
}
