//! Live progress of a run on stderr: a spinner line (turn, node, agent, tool calls, tokens) on a
//! terminal, plain lines otherwise.

use crate::ui::color::err;
use crate::ui::{Paint, visible, visible_line};
use baton_engine::{ContextEvent, EngineEvent};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

#[derive(Default)]
struct Counters {
    turn: usize,
    node: String,
    agent: String,
    tools: usize,
    failed: usize,
    tokens: u64,
}

impl Counters {
    /// The spinner's text; none before the first model call of a run (or after a reset).
    fn message(&self) -> Option<String> {
        if self.node.is_empty() {
            return None;
        }
        let tokens = if self.tokens >= 1000 {
            format!("{:.1}k", self.tokens as f64 / 1000.0)
        } else {
            self.tokens.to_string()
        };
        Some(format!(
            "turn {} · {} ({}) · {} tool calls, {} failed · {tokens} tokens",
            self.turn, self.node, self.agent, self.tools, self.failed
        ))
    }
}

pub struct Progress {
    bar: Option<ProgressBar>,
    counters: Mutex<Counters>,
}

impl Progress {
    pub fn new() -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new_spinner();
            if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}") {
                bar.set_style(style);
            }
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Progress {
            bar,
            counters: Mutex::new(Counters::default()),
        }
    }

    fn line(&self, text: String) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None => eprintln!("{text}"),
        }
    }

    fn refresh(&self, c: &Counters) {
        if let Some(bar) = &self.bar {
            bar.set_message(c.message().unwrap_or_default());
        }
    }

    pub fn event(&self, e: EngineEvent) {
        let Ok(mut c) = self.counters.lock() else {
            return;
        };
        match e {
            EngineEvent::ModelCall { turn, node, agent } => {
                // Node and agent ids come from the package: shown, never sent as escapes.
                let (node, agent) = (visible_line(&node).into_owned(), visible_line(&agent));
                if node != c.node {
                    self.line(format!("→ {} ({agent})", err(Paint::Strong, &node)));
                }
                c.turn = turn;
                c.node = node;
                c.agent = agent.into_owned();
            }
            EngineEvent::ToolCall {
                name,
                ok,
                error,
                target,
            } => {
                c.tools += 1;
                if !ok {
                    c.failed += 1;
                }
                // On a terminal the spinner counts the calls; a failure still gets its line.
                if self.bar.is_none() || !ok {
                    self.line(tool_line(&name, error.as_deref(), target.as_deref()));
                }
            }
            EngineEvent::Usage(u) => c.tokens += u.total_tokens,
            EngineEvent::Answered { question, answer } => self.line(format!(
                "\n{}\n> {}\n",
                visible(&question),
                visible(&answer)
            )),
            EngineEvent::Context(ContextEvent::Compressed(r)) => self.line(format!(
                "    context compressed: {} → {} tokens (budget {})",
                r.tokens_before, r.tokens_after, r.budget
            )),
            EngineEvent::Context(ContextEvent::ProtocolFallback { violation }) => self.line(
                format!("    compressed context dropped ({violation}); sending it whole"),
            ),
            EngineEvent::Warning {
                code,
                message,
                hint,
            } => self.line(format!(
                "{} {message}\n  {hint}",
                err(Paint::Warn, &format!("warning[{code}]:"))
            )),
            EngineEvent::NodeChanged { .. } | EngineEvent::Text(_) => {}
        }
        self.refresh(&c);
    }

    /// Forgets the run the spinner showed: the next phase, step or run starts from nothing,
    /// so its line never shows the previous one's node or counts.
    pub fn reset(&self) {
        if let Ok(mut c) = self.counters.lock() {
            *c = Counters::default();
        }
        if let Some(bar) = &self.bar {
            bar.set_message("");
        }
    }

    /// Runs `f` (a prompt) with the spinner out of the way.
    pub fn suspend<T>(&self, f: impl FnOnce() -> T) -> T {
        match &self.bar {
            Some(bar) => bar.suspend(f),
            None => f(),
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// `    ✓ fs.read @project/a.md`, or `    ✗ fs.read ENOENT @project/a.md` for a failed call.
fn tool_line(name: &str, error: Option<&str>, target: Option<&str>) -> String {
    // The tool's name and target are the model's choice: their escapes are shown, not sent.
    let name = visible_line(name);
    let mut line = match error {
        None => format!("    {} {name}", err(Paint::Good, "✓")),
        Some(code) => format!(
            "    {} {name} {}",
            err(Paint::Bad, "✗"),
            err(Paint::Bad, &visible_line(code))
        ),
    };
    if let Some(t) = target {
        line.push(' ');
        line.push_str(&visible_line(t));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_call_names_its_code_and_target_on_one_line() {
        assert_eq!(
            tool_line("fs.read", Some("ENOENT"), Some("@project/nope.md")),
            "    ✗ fs.read ENOENT @project/nope.md"
        );
        assert_eq!(tool_line("fs.list", None, None), "    ✓ fs.list");
    }

    #[test]
    fn after_a_reset_the_spinner_shows_nothing_of_the_previous_run() {
        let p = Progress::new();
        p.event(EngineEvent::ModelCall {
            turn: 3,
            node: "step-02-dev".into(),
            agent: "dev".into(),
        });
        let message = || p.counters.lock().ok().and_then(|c| c.message());
        assert!(message().is_some_and(|m| m.contains("step-02-dev")));
        p.reset();
        assert_eq!(message(), None);
        p.event(EngineEvent::ModelCall {
            turn: 1,
            node: "cr-01".into(),
            agent: "reviewer".into(),
        });
        let m = message().unwrap_or_default();
        assert!(
            m.contains("turn 1 · cr-01 (reviewer)") && !m.contains("step-02"),
            "{m}"
        );
    }
}
