//! The `baton` command line. Parsing and presentation only; the work happens in the library
//! crates.

/// `print!` for the command's output on stdout. A reader that went away (`baton … | head`)
/// ends the process quietly with exit 0, as a pipe's writer would, instead of the panic of
/// `print!`; any other write error is said once on stderr.
macro_rules! out {
    ($($arg:tt)*) => { $crate::ui::stdout::write(format_args!($($arg)*), false) };
}

/// `println!` for the command's output on stdout (see [`out!`]).
macro_rules! outln {
    () => { $crate::ui::stdout::write(format_args!(""), true) };
    ($($arg:tt)*) => { $crate::ui::stdout::write(format_args!($($arg)*), true) };
}

mod agent_ui;
mod args;
mod budget;
mod cli;
mod commands;
mod exit;
mod failure;
mod model;
mod progress;
mod queue_db;
mod report;
mod runtime;
mod signals;
mod ui;

use clap::Parser;
use std::process::ExitCode;

/// The exit code of a command line that does not parse: 2, or 1 under one of maestro's
/// `ralph` verbs.
fn usage_exit() -> u8 {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if commands::ralph::is_maestro_verb_call(&args) {
        exit::FAILURE
    } else {
        exit::INVALID
    }
}

fn main() -> ExitCode {
    // The API key is in this process's environment from the start (and in its memory once
    // loaded): a process of the same user, such as an MCP server (which runs outside the
    // sandbox), must not read it from /proc/<pid>/environ or /proc/<pid>/mem. Children are
    // dumpable again after their exec.
    baton_sandbox::protect_process();
    // A script that asked for JSON gets JSON, even for an error found while parsing.
    let as_json = std::env::args_os().skip(1).any(|a| a == "--json");
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if as_json && e.use_stderr() => {
            let message = e.kind().to_string();
            let detail = e.to_string();
            let f = failure::Failure::new("USAGE", message, usage_exit()).hint(
                detail
                    .lines()
                    .find(|l| l.contains("Usage:"))
                    .map(str::to_owned),
            );
            return ExitCode::from(f.report(true));
        }
        // maestro's `ralph` verbs exit 1 on a usage error (its parser's code), not 2.
        Err(e) if e.use_stderr() && usage_exit() != exit::INVALID => {
            let _ = e.print();
            return ExitCode::from(usage_exit());
        }
        Err(e) => e.exit(),
    };
    ui::color::init(cli.color);
    match commands::dispatch(cli) {
        Ok(code) => ExitCode::from(code),
        // The reader went away (`baton runs list --json | head`): nothing left to say.
        Err(e) if failure::is_broken_pipe(&e) => ExitCode::from(exit::OK),
        Err(e) => ExitCode::from(failure::Failure::from_anyhow(&e).report(as_json)),
    }
}
