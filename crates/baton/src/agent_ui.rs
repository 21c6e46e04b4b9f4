//! The terminal side of an agent session: the greeting, the numbered menu, a clarifying
//! question, the prompts, and the global commands a person can type while a run asks.

use crate::signals;
use crate::ui::visible;
use baton_engine::router::{Candidate, Menu};
use baton_package::model::Agent;
use std::fmt::Write as _;
use std::io::{BufRead, Write};

/// The agent introduces itself once: icon, name, title and what it does.
pub fn greeting(agent: &Agent) -> String {
    let m = &agent.metadata;
    let mut s = format!("{} {} — {}\n", m.icon, m.name, m.title);
    if let Some(d) = m.description.as_deref().filter(|d| !d.trim().is_empty()) {
        let _ = writeln!(s, "{}", d.trim());
    }
    // The package's own words: shown with their escapes visible, never sent.
    visible(&s).into_owned()
}

/// The visible items, numbered from 1, with their triggers.
pub fn menu_text(menu: &Menu) -> String {
    let mut s = String::new();
    if menu.is_empty() {
        s.push_str("(this agent has no menu: anything you type goes to the agent)\n");
    }
    for item in menu.visible() {
        let _ = write!(s, "  {}. {}", item.index.unwrap_or(0), item.description);
        if let Some(t) = item.trigger.as_ref().or(item.cmd.as_ref()) {
            let _ = write!(s, "  [{t}]");
        }
        s.push('\n');
    }
    visible(&s).into_owned()
}

pub const SESSION_HELP: &str = "Type a number or a trigger to run a menu item, or talk to the agent. /menu shows the menu, /resume continues the latest run, /dismiss ends the session.";

pub const RUN_HELP: &str = "While the run asks: /menu shows the menu, /pause leaves the run waiting (/resume continues it), /stop detaches from it, /dismiss ends the session.";

pub fn candidates_text(reason: Option<&str>, candidates: &[Candidate]) -> String {
    let mut s = String::new();
    if let Some(r) = reason {
        let _ = writeln!(s, "{r}.");
    }
    for c in candidates {
        let _ = writeln!(s, "  {}", c.label);
    }
    if !candidates.is_empty() {
        s.push_str("Type the number you mean.\n");
    }
    visible(&s).into_owned()
}

/// Reads one line at `prompt`; `None` at the end of the input.
pub fn read_line(prompt: &str) -> Option<String> {
    out!("{prompt}");
    let _ = std::io::stdout().flush();
    let _at_prompt = signals::AtPrompt::enter();
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim_end_matches(['\n', '\r']).to_string()),
    }
}

/// A global command typed while a run asks (`/word` or `*word`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunCommand {
    Menu,
    Pause,
    Stop,
    Resume,
    Dismiss,
}

pub fn run_command(line: &str) -> Option<RunCommand> {
    let t = line.trim();
    let word = t.strip_prefix('/').or_else(|| t.strip_prefix('*'))?;
    match word.to_ascii_lowercase().as_str() {
        "menu" | "help" => Some(RunCommand::Menu),
        "pause" => Some(RunCommand::Pause),
        "stop" => Some(RunCommand::Stop),
        "resume" => Some(RunCommand::Resume),
        "dismiss" | "exit" => Some(RunCommand::Dismiss),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_commands_in_a_run() {
        assert_eq!(run_command("/menu"), Some(RunCommand::Menu));
        assert_eq!(run_command(" *PAUSE "), Some(RunCommand::Pause));
        assert_eq!(run_command("/stop"), Some(RunCommand::Stop));
        assert_eq!(run_command("*resume"), Some(RunCommand::Resume));
        assert_eq!(run_command("/dismiss"), Some(RunCommand::Dismiss));
        assert_eq!(run_command("1-2-user-authentication"), None);
        assert_eq!(run_command("/etc/passwd"), None);
        assert_eq!(
            run_command("menu"),
            None,
            "only with / or *: anything else is USER_INPUT"
        );
    }
}
