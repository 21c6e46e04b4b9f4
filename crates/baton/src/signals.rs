//! Ctrl-C and SIGTERM while a run is driven.
//!
//! The first signal asks the engine to stop between two steps: it records `ENGINE_ABORTED`, the
//! run goes back to `idle` and `baton resume` continues it. A second signal ends the process at
//! once (every store write is atomic, so nothing is torn; at worst the step in flight is redone
//! on resume). At a prompt the question is already recorded, so the process ends at once and
//! `baton answer` continues the run.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Exit status of a process stopped by a signal (128 + SIGINT).
const SIGNALLED: i32 = 130;

static AT_PROMPT: AtomicBool = AtomicBool::new(false);

/// Marks the time spent waiting for a person's answer at the terminal.
pub struct AtPrompt(());

impl AtPrompt {
    pub fn enter() -> AtPrompt {
        AT_PROMPT.store(true, Ordering::SeqCst);
        AtPrompt(())
    }
}

impl Drop for AtPrompt {
    fn drop(&mut self) {
        AT_PROMPT.store(false, Ordering::SeqCst);
    }
}

/// The exact commands that go on from here, once the command knows them (a run's id is known
/// only once the run is made or found): said instead of the generic hints.
#[derive(Debug, Clone, Default)]
pub struct Next {
    /// What continues after a quit: `baton resume 01a2…`.
    pub resume: String,
    /// What answers the question a prompt was asking, when it differs.
    pub answer: Option<String>,
}

static NEXT: Mutex<Option<Next>> = Mutex::new(None);

/// Tells the watcher how to go on (the latest call wins).
pub fn set_next(next: Next) {
    if let Ok(mut n) = NEXT.lock() {
        *n = Some(next);
    }
}

/// Ctrl-C names this run in what it says (a second Ctrl-C, or one at a prompt).
pub fn name_run(run_id: &str) {
    let short = &run_id[..run_id.len().min(13)];
    set_next(Next {
        resume: format!("baton resume {short}"),
        answer: Some(format!("baton answer {short} \"<your answer>\"")),
    });
}

fn next() -> Option<Next> {
    NEXT.lock().ok().and_then(|n| n.clone())
}

/// A path as one shell word: quoted when it holds anything a shell would split or expand.
pub fn shell_word(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:@,=~".contains(c))
        && !text.starts_with('~');
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// What the watcher tells a person when it ends the process: at a prompt, and at the second
/// signal.
#[derive(Debug, Clone, Copy)]
pub struct Hints {
    pub at_prompt: &'static str,
    pub quit: &'static str,
}

/// The hints of a run (`baton run`, `resume`, `answer`) before its id is known.
pub const RUN_HINTS: Hints = Hints {
    at_prompt: "stopped; the question is saved: `baton runs list` shows the run waiting, and `baton answer` with its id continues it",
    quit: "quit; `baton runs list` shows the run if it was made, and `baton resume` with its id continues it",
};

/// Watches for SIGINT and SIGTERM on the runtime's worker until the returned task is dropped
/// with the runtime.
pub fn watch(runtime: &Runtime, cancel: CancellationToken) -> Option<JoinHandle<()>> {
    watch_with(runtime, cancel, RUN_HINTS)
}

/// [`watch`], saying `hints` instead of a run's.
pub fn watch_with(
    runtime: &Runtime,
    cancel: CancellationToken,
    hints: Hints,
) -> Option<JoinHandle<()>> {
    watch_saying(
        runtime,
        cancel,
        hints,
        "stopping after the current step (press Ctrl-C again to quit at once)…",
    )
}

/// What `baton serve` says: it has no prompt, and its runs stop in the background.
const SERVE_HINTS: Hints = Hints {
    at_prompt: SERVE_QUIT,
    quit: SERVE_QUIT,
};
const SERVE_QUIT: &str = "quit; `baton runs list` shows the runs left interrupted, and `baton resume` with an id continues one";

/// [`watch`] for `baton serve`: the first signal stops the server (background runs stop
/// between steps), a second one ends the process at once.
pub fn watch_server(runtime: &Runtime, stop: CancellationToken) -> Option<JoinHandle<()>> {
    watch_saying(runtime, stop, SERVE_HINTS, "stopping…")
}

/// The watcher: `stopping` is said at the first signal, when `cancel` is cancelled.
fn watch_saying(
    runtime: &Runtime,
    cancel: CancellationToken,
    hints: Hints,
    stopping: &'static str,
) -> Option<JoinHandle<()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let _guard = runtime.enter();
    // Registering fails only without signal support; the run then goes on unwatched.
    let mut interrupt = signal(SignalKind::interrupt()).ok()?;
    let mut terminate = signal(SignalKind::terminate()).ok()?;
    Some(runtime.spawn(async move {
        let mut seen = 0;
        loop {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
            seen += 1;
            let next = next();
            if AT_PROMPT.load(Ordering::SeqCst) {
                match next.as_ref().and_then(|n| n.answer.as_deref()) {
                    Some(answer) => eprintln!(
                        "\n{} the question is saved; continue with `{answer}`",
                        stopped("stopped;")
                    ),
                    None => eprintln!("\n{}", hints.at_prompt),
                }
                std::process::exit(SIGNALLED);
            }
            if seen == 1 {
                eprintln!("\n{}", stopped(stopping));
                cancel.cancel();
            } else {
                match next {
                    Some(n) => eprintln!("\n{} continue with `{}`", stopped("quit;"), n.resume),
                    None => eprintln!("\n{}", hints.quit),
                }
                std::process::exit(SIGNALLED);
            }
        }
    }))
}

fn stopped(text: &str) -> String {
    crate::ui::color::err(crate::ui::Paint::Warn, text)
}

#[cfg(test)]
mod tests {
    use super::shell_word;

    #[test]
    fn paths_are_quoted_only_when_a_shell_would_change_them() {
        assert_eq!(
            shell_word("/home/a/.baton/bundled/x-1f"),
            "/home/a/.baton/bundled/x-1f"
        );
        assert_eq!(shell_word("my demo"), "'my demo'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word("~x"), "'~x'");
        assert_eq!(shell_word(""), "''");
    }
}
