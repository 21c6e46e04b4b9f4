//! Live progress of a run on stderr: a spinner line (turn, node, agent, tool calls, tokens) on a
//! terminal, plain lines otherwise.

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
            let tokens = if c.tokens >= 1000 {
                format!("{:.1}k", c.tokens as f64 / 1000.0)
            } else {
                c.tokens.to_string()
            };
            bar.set_message(format!(
                "turn {} · {} ({}) · {} tool calls, {} failed · {tokens} tokens",
                c.turn, c.node, c.agent, c.tools, c.failed
            ));
        }
    }

    pub fn event(&self, e: EngineEvent) {
        let Ok(mut c) = self.counters.lock() else {
            return;
        };
        match e {
            EngineEvent::ModelCall { turn, node, agent } => {
                if node != c.node {
                    self.line(format!("→ {node} ({agent})"));
                }
                c.turn = turn;
                c.node = node;
                c.agent = agent;
            }
            EngineEvent::ToolCall { name, ok } => {
                c.tools += 1;
                if !ok {
                    c.failed += 1;
                }
                if self.bar.is_none() {
                    self.line(format!("    {} {name}", if ok { "✓" } else { "✗" }));
                }
            }
            EngineEvent::Usage(u) => c.tokens += u.total_tokens,
            EngineEvent::Answered { question, answer } => {
                self.line(format!("\n{question}\n> {answer}\n"))
            }
            EngineEvent::Context(ContextEvent::Compressed(r)) => self.line(format!(
                "    context compressed: {} → {} tokens (budget {})",
                r.tokens_before, r.tokens_after, r.budget
            )),
            EngineEvent::Context(ContextEvent::ProtocolFallback { violation }) => self.line(
                format!("    compressed context dropped ({violation}); sending it whole"),
            ),
            EngineEvent::NodeChanged { .. } | EngineEvent::Text(_) => {}
        }
        self.refresh(&c);
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
