//! What a run of a CLI ended with, gathered from its events as they come.

use crate::Event;
use baton_gateway::Refusal;

/// The end of one launch of a CLI. Its words are claims: the verdict comes from the files.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Outcome {
    /// The CLI's exit code (`None` when a signal ended it, as baton's kill does).
    pub exit_code: Option<i32>,
    /// The CLI's own session, what `resume` continues.
    pub session: Option<String>,
    /// The CLI's final [`Event::Result`].
    pub result: Option<Event>,
    /// What the CLI asked the person when it stopped (answer it with a new run that resumes
    /// `session` with the answer as its prompt).
    pub question: Option<String>,
    /// The budget's refusal that stopped the CLI (its process group was killed).
    pub budget: Option<Refusal>,
    /// Model requests the gateway served.
    pub exchanges: u64,
    /// Events read from the CLI's stream.
    pub events: u64,
    /// Stdout lines skipped: longer than a line may be, or past the stream's cap.
    pub skipped_lines: u64,
    /// Processes of an earlier launch in the same run folder killed before this one started
    /// (baton had been killed before it could end them).
    pub leftovers_killed: usize,
    /// The sandbox layers the CLI ran under, with how (empty when it ran unconfined).
    pub confinement: Vec<(String, String)>,
}

/// Follows the events of a run for the [`Outcome`].
#[derive(Default)]
pub struct Tracker {
    pub session: Option<String>,
    pub result: Option<Event>,
    /// A question tool call not followed by any other call (the model stopped on it).
    asked: Option<String>,
    /// The model's text since its last tool call: the final answer of a CLI whose result
    /// line carries none (Codex's `turn.completed`, OpenCode's `step_finish`).
    said: Option<String>,
}

impl Tracker {
    pub fn see(&mut self, event: &Event) {
        match event {
            Event::Session { id } => self.session = Some(id.clone()),
            Event::Question { text } => self.asked = Some(text.clone()),
            Event::ToolCall { .. } => {
                self.asked = None;
                self.said = None;
            }
            Event::Result {
                text,
                is_error: false,
            } if text.trim().is_empty() => {
                self.result = Some(Event::Result {
                    text: self.said.clone().unwrap_or_default(),
                    is_error: false,
                });
            }
            Event::Result { .. } => self.result = Some(event.clone()),
            Event::Message { text } => {
                let said = self.said.get_or_insert_with(String::new);
                if !said.is_empty() {
                    said.push('\n');
                }
                said.push_str(text);
            }
            Event::ToolResult { .. } => {}
        }
    }

    /// The question the run ended on: a final answer that asks (its last line ends with a
    /// question mark), else a question tool call the model stopped on.
    pub fn question(&self) -> Option<String> {
        if let Some(Event::Result {
            text,
            is_error: false,
        }) = &self.result
            && text
                .trim_end()
                .lines()
                .last()
                .is_some_and(|l| l.trim_end().ends_with('?'))
        {
            return Some(text.trim().to_string());
        }
        self.asked.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn track(events: &[Event]) -> Tracker {
        let mut t = Tracker::default();
        events.iter().for_each(|e| t.see(e));
        t
    }

    fn result(text: &str) -> Event {
        Event::Result {
            text: text.into(),
            is_error: false,
        }
    }

    #[test]
    fn a_final_answer_that_asks_or_a_question_call_left_open_is_the_question() {
        assert_eq!(
            track(&[result("Done.\n\nWhich colour do you want?\n")]).question(),
            Some("Done.\n\nWhich colour do you want?".into())
        );
        assert_eq!(track(&[result("Created hello.txt.")]).question(), None);
        let ask = Event::Question {
            text: "Which colour? (red / blue)".into(),
        };
        assert_eq!(
            track(&[ask.clone(), result("I stopped.")]).question(),
            Some("Which colour? (red / blue)".into())
        );
        let call = Event::ToolCall {
            id: "t".into(),
            name: "Write".into(),
            input: json!({}),
        };
        assert_eq!(
            track(&[ask, call, result("Done, went with red.")]).question(),
            None
        );
        let failed = Event::Result {
            text: "why?".into(),
            is_error: true,
        };
        assert_eq!(track(&[failed]).question(), None);
    }

    #[test]
    fn a_result_without_text_takes_the_models_last_words() {
        let said = |t: &str| Event::Message { text: t.into() };
        let call = Event::ToolCall {
            id: "t".into(),
            name: "shell".into(),
            input: json!({}),
        };
        // Codex and OpenCode end with an empty result after the model's text.
        let t = track(&[
            said("Looking."),
            call,
            said("Which colour do you want?"),
            result(""),
        ]);
        assert_eq!(t.question(), Some("Which colour do you want?".into()));
        let t = track(&[said("Which file?"), call_again(), result("")]);
        assert_eq!(t.question(), None, "a tool call came after the text");
        assert_eq!(t.result, Some(result("")));
    }

    fn call_again() -> Event {
        Event::ToolCall {
            id: "u".into(),
            name: "apply_patch".into(),
            input: json!({}),
        }
    }
}
