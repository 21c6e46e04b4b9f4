//! What is sent: the kinds of event a webhook can ask for, and one event's content with its
//! JSON body (see [`crate::slack`] for Slack's shape).

use crate::config::Webhook;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    Question,
    Answered,
    StoryApproved,
    StoryDone,
    StoryFailed,
    EpicDone,
    EpicPaused,
    BudgetExceeded,
    RunFailed,
    SessionWaiting,
    SessionDone,
}

impl EventKind {
    pub const ALL: [EventKind; 11] = [
        EventKind::Question,
        EventKind::Answered,
        EventKind::StoryApproved,
        EventKind::StoryDone,
        EventKind::StoryFailed,
        EventKind::EpicDone,
        EventKind::EpicPaused,
        EventKind::BudgetExceeded,
        EventKind::RunFailed,
        EventKind::SessionWaiting,
        EventKind::SessionDone,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Question => "question",
            EventKind::Answered => "answered",
            EventKind::StoryApproved => "story.approved",
            EventKind::StoryDone => "story.done",
            EventKind::StoryFailed => "story.failed",
            EventKind::EpicDone => "epic.done",
            EventKind::EpicPaused => "epic.paused",
            EventKind::BudgetExceeded => "budget.exceeded",
            EventKind::RunFailed => "run.failed",
            EventKind::SessionWaiting => "session.waiting",
            EventKind::SessionDone => "session.done",
        }
    }

    pub fn parse(name: &str) -> Option<EventKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    pub fn names() -> Vec<&'static str> {
        Self::ALL.iter().map(|k| k.as_str()).collect()
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuestionInfo {
    pub id: String,
    pub text: String,
    pub choices: Vec<String>,
}

/// How a person answers a question: the command, and the web page when `baton serve` has a
/// public URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub command: String,
    pub url: Option<String>,
}

/// One event. `project_path` is sent only to a webhook with `include_path = true`.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub kind: EventKind,
    /// RFC 3339, UTC.
    pub at: String,
    pub project: String,
    pub project_path: Option<PathBuf>,
    pub epic: Option<String>,
    pub story: Option<String>,
    pub run: Option<String>,
    pub unit: Option<String>,
    /// A lifecycle session's id (`session.waiting`, `session.done`).
    pub session: Option<String>,
    pub question: Option<QuestionInfo>,
    pub usage: Option<Value>,
    /// One line for a person: what happened (a failure's message, a note).
    pub summary: Option<String>,
    /// What makes this event itself besides the fields above (e.g. the sample's time), part
    /// of its delivery id.
    pub nonce: Option<String>,
}

impl Event {
    pub fn new(kind: EventKind, project: impl Into<String>) -> Event {
        Event {
            kind,
            at: now_rfc3339(),
            project: project.into(),
            project_path: None,
            epic: None,
            story: None,
            run: None,
            unit: None,
            session: None,
            question: None,
            usage: None,
            summary: None,
            nonce: None,
        }
    }

    /// The same id for the same event however often it is produced (a resumed epic, a unit
    /// taken over by another worker): what it is and what it is about, never when.
    pub fn delivery_id(&self) -> String {
        let mut h = Sha256::new();
        for part in [
            Some(self.kind.as_str()),
            Some(self.project.as_str()),
            self.epic.as_deref(),
            self.story.as_deref(),
            self.run.as_deref(),
            self.unit.as_deref(),
            self.session.as_deref(),
            self.question.as_ref().map(|q| q.id.as_str()),
            self.nonce.as_deref(),
        ] {
            h.update(part.unwrap_or("").as_bytes());
            h.update([0u8]);
        }
        let digest = h.finalize();
        digest[..16].iter().map(|b| format!("{b:02x}")).collect()
    }

    /// How to answer this event's question, as `webhook` may be told.
    pub fn answer(&self, webhook: &Webhook, public_url: Option<&str>) -> Option<Answer> {
        let path = self.project_path.as_ref().filter(|_| webhook.include_path);
        let (mut command, page) = match self.kind {
            EventKind::Question => {
                let (story, q) = (self.story.as_deref()?, self.question.as_ref()?);
                let command = format!(
                    "baton epic answer {} '<your answer>' --question {}",
                    shell_word(story),
                    shell_word(&q.id)
                );
                (command, "/epic".to_string())
            }
            EventKind::SessionWaiting => {
                let id = self.session.as_deref()?;
                let command = format!(
                    "baton session answer '<your answer>' --session {}",
                    shell_word(id)
                );
                (command, format!("/sessions/{}", url_encode(id)))
            }
            _ => return None,
        };
        if let Some(p) = path {
            command.push_str(" -p ");
            command.push_str(&shell_word(&p.display().to_string()));
        }
        let url = public_url.map(|base| match (path, self.kind) {
            // The page of that project; without its path the list asks which project.
            (Some(p), _) => format!(
                "{base}{page}?project={}",
                url_encode(&p.display().to_string())
            ),
            (None, EventKind::SessionWaiting) => format!("{base}/sessions"),
            (None, _) => format!("{base}/epic"),
        });
        Some(Answer { command, url })
    }

    /// The JSON body (`format = "json"`).
    pub fn json(&self, webhook: &Webhook, public_url: Option<&str>) -> Value {
        let mut project = json!({ "name": self.project });
        if webhook.include_path
            && let Some(p) = &self.project_path
        {
            project["path"] = json!(p.display().to_string());
        }
        json!({
            "event": self.kind.as_str(),
            "delivery": self.delivery_id(),
            "at": self.at,
            "project": project,
            "epic": self.epic,
            "story": self.story,
            "run": self.run,
            "unit": self.unit,
            "session": self.session,
            "question": self.question.as_ref().map(|q| json!({
                "id": q.id, "text": q.text, "choices": q.choices,
            })),
            "usage": self.usage,
            "summary": self.summary,
            "answer": self.answer(webhook, public_url).map(|a| json!({
                "command": a.command, "url": a.url,
            })),
        })
    }
}

/// A word as a POSIX shell reads it back: bare when safe, else single-quoted.
pub fn shell_word(s: &str) -> String {
    let safe = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@+,".contains(c));
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Now, as `2026-11-29T13:01:56Z`.
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    rfc3339(secs)
}

fn rfc3339(secs: u64) -> String {
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::config::NotifyConfig;

    fn hook(include_path: bool) -> Webhook {
        let text = format!(
            "[[notify.webhooks]]\nurl = \"http://127.0.0.1:1/\"\ninclude_path = {include_path}\n"
        );
        NotifyConfig::parse(&text, &|_| None)
            .unwrap()
            .webhooks
            .remove(0)
    }

    fn question() -> Event {
        let mut e = Event::new(EventKind::Question, "taskboard");
        e.project_path = Some(PathBuf::from("/home/ann/my projects/taskboard"));
        e.epic = Some("epic-2".into());
        e.story = Some("2-1-create-board".into());
        e.question = Some(QuestionInfo {
            id: "q1".into(),
            text: "Kanban or list?".into(),
            choices: vec![],
        });
        e
    }

    #[test]
    fn times_are_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_795_957_316), "2026-11-29T13:01:56Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn the_host_path_is_sent_only_when_the_operator_opts_in() {
        let e = question();
        let plain = e.json(&hook(false), Some("https://b.example"));
        assert!(!plain.to_string().contains("/home/ann"), "{plain}");
        assert_eq!(plain["project"], json!({"name": "taskboard"}));
        assert_eq!(
            plain["answer"]["command"],
            "baton epic answer 2-1-create-board '<your answer>' --question q1"
        );
        assert_eq!(plain["answer"]["url"], "https://b.example/epic");
        let with = e.json(&hook(true), None);
        assert_eq!(with["project"]["path"], "/home/ann/my projects/taskboard");
        assert_eq!(
            with["answer"]["command"],
            "baton epic answer 2-1-create-board '<your answer>' --question q1 -p '/home/ann/my projects/taskboard'"
        );
        assert_eq!(with["answer"]["url"], Value::Null);
        assert_eq!(with["question"]["text"], "Kanban or list?");
        assert_eq!(
            e.json(&hook(true), Some("http://h"))["answer"]["url"],
            "http://h/epic?project=/home/ann/my%20projects/taskboard"
        );
    }

    #[test]
    fn a_waiting_session_is_answered_with_baton_session_answer() {
        let mut e = Event::new(EventKind::SessionWaiting, "csvsum");
        e.project_path = Some(PathBuf::from("/w/csvsum"));
        e.session = Some("ralph-2026 x".into());
        let plain = e.json(&hook(false), Some("https://b.example"));
        assert_eq!(
            plain["answer"]["command"],
            "baton session answer '<your answer>' --session 'ralph-2026 x'"
        );
        assert_eq!(plain["answer"]["url"], "https://b.example/sessions");
        let with = e.json(&hook(true), Some("https://b.example"));
        assert_eq!(
            with["answer"]["url"],
            "https://b.example/sessions/ralph-2026%20x?project=/w/csvsum"
        );
        assert_eq!(with["session"], "ralph-2026 x");
        // Done: nothing to answer.
        e.kind = EventKind::SessionDone;
        assert_eq!(e.json(&hook(true), None)["answer"], Value::Null);
    }

    #[test]
    fn the_delivery_id_names_the_event_not_the_moment() {
        let a = question();
        let mut b = question();
        b.at = "2030-01-01T00:00:00Z".into();
        assert_eq!(a.delivery_id(), b.delivery_id());
        b.kind = EventKind::Answered;
        assert_ne!(a.delivery_id(), b.delivery_id());
        assert_eq!(a.delivery_id().len(), 32);
    }

    #[test]
    fn hostile_words_stay_one_shell_word() {
        assert_eq!(shell_word("2-1-x"), "2-1-x");
        assert_eq!(shell_word("a'; rm -rf ~"), r"'a'\''; rm -rf ~'");
    }
}
