//! Colour on a terminal. Decided once, at start: `--color always|never` wins; `auto` colours a
//! stream that is a terminal unless `NO_COLOR` is set (https://no-color.org) or `TERM=dumb`.
//! Text piped to a file or a script never gets escape sequences by accident.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorChoice {
    /// Colour a stream that is a terminal, unless NO_COLOR is set.
    #[default]
    Auto,
    Always,
    Never,
}

#[derive(Debug, Clone, Copy)]
pub enum Stream {
    Out,
    Err,
}

static OUT: AtomicBool = AtomicBool::new(false);
static ERR: AtomicBool = AtomicBool::new(false);

/// Decides, for this process, whether stdout and stderr are coloured.
pub fn init(choice: ColorChoice) {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    let (out, err) = decide(
        choice,
        env("NO_COLOR").is_some(),
        env("TERM").is_some_and(|t| t == "dumb"),
        std::io::stdout().is_terminal(),
        std::io::stderr().is_terminal(),
    );
    OUT.store(out, Ordering::Relaxed);
    ERR.store(err, Ordering::Relaxed);
}

/// Whether (stdout, stderr) are coloured.
fn decide(
    choice: ColorChoice,
    no_color: bool,
    dumb: bool,
    out_tty: bool,
    err_tty: bool,
) -> (bool, bool) {
    match choice {
        ColorChoice::Always => (true, true),
        ColorChoice::Never => (false, false),
        ColorChoice::Auto if no_color || dumb => (false, false),
        ColorChoice::Auto => (out_tty, err_tty),
    }
}

pub fn enabled(stream: Stream) -> bool {
    match stream {
        Stream::Out => OUT.load(Ordering::Relaxed),
        Stream::Err => ERR.load(Ordering::Relaxed),
    }
}

/// The styles baton uses, by meaning rather than by colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paint {
    /// Failures: `error[…]`, `✗`, a failed run.
    Bad,
    /// Success: `✓`, a completed run.
    Good,
    /// Something waits or stopped: a warning, `stopped;`, a waiting run.
    Warn,
    /// What to type next, and help lines.
    Hint,
    /// A heading or the node a run is at.
    Strong,
    /// Secondary text (ids, ages).
    Dim,
}

impl Paint {
    fn sgr(self) -> &'static str {
        match self {
            Paint::Bad => "1;31",
            Paint::Good => "32",
            Paint::Warn => "33",
            Paint::Hint => "36",
            Paint::Strong => "1",
            Paint::Dim => "2",
        }
    }

    /// `text` in this style when `stream` is coloured, else `text` as it is.
    pub fn on(self, stream: Stream, text: &str) -> String {
        self.when(enabled(stream), text)
    }

    pub fn when(self, colour: bool, text: &str) -> String {
        if colour && !text.is_empty() {
            format!("\x1b[{}m{text}\x1b[0m", self.sgr())
        } else {
            text.to_string()
        }
    }
}

/// Shorthand for stderr, where progress and errors go.
pub fn err(paint: Paint, text: &str) -> String {
    paint.on(Stream::Err, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_follows_the_terminal_and_no_color_and_the_flag_wins() {
        assert_eq!(
            decide(ColorChoice::Auto, false, false, true, false),
            (true, false)
        );
        assert_eq!(
            decide(ColorChoice::Auto, true, false, true, true),
            (false, false)
        );
        assert_eq!(
            decide(ColorChoice::Auto, false, true, true, true),
            (false, false)
        );
        assert_eq!(
            decide(ColorChoice::Always, true, false, false, false),
            (true, true)
        );
        assert_eq!(
            decide(ColorChoice::Never, false, false, true, true),
            (false, false)
        );
    }

    #[test]
    fn plain_when_off() {
        assert_eq!(Paint::Bad.when(false, "x"), "x");
        assert_eq!(Paint::Bad.when(true, "x"), "\x1b[1;31mx\x1b[0m");
        assert_eq!(Paint::Good.when(true, ""), "");
    }
}
