//! The `baton` command line. Parsing and presentation only; the work happens in the library
//! crates.

mod cli;
mod commands;
mod progress;
mod report;

use clap::Parser;
use std::process::ExitCode;

/// Exit codes shared by every command.
pub mod exit {
    pub const OK: u8 = 0;
    pub const FAILURE: u8 = 1;
    /// Usage error, or the package is invalid.
    pub const INVALID: u8 = 2;
}

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match commands::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(exit::FAILURE)
        }
    }
}
