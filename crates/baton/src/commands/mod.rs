//! The commands, one module each, and the dispatch from the parsed command line to them.
//! A command reads its arguments and the helpers below it (`args`, `ui`, `failure`, `model`,
//! …), never this dispatch.

pub mod agent;
pub mod answer_queued;
pub mod demo;
pub mod demo_queue;
pub mod doctor;
pub mod epic;
pub mod epic_demo;
pub mod executors;
pub mod graph;
pub mod mcp;
pub mod models;
pub mod new;
pub mod notify;
pub mod package;
pub mod queue;
pub mod ralph;
pub mod run;
pub mod runs;
pub mod serve;
pub mod session;
pub mod session_demo;
pub mod submit;
pub mod validate;
pub mod worker;

use crate::cli::{Cli, Command};

/// Runs one command and returns the process exit code.
pub fn dispatch(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::New(args) => new::run(args),
        Command::Validate(args) => validate::run(args),
        Command::Graph(args) => graph::run(args),
        Command::Package(cmd) => package::run(cmd),
        Command::Runs(cmd) => runs::run(cmd),
        Command::Run(args) => run::run(args),
        Command::Resume(args) => run::resume(args),
        Command::Answer(args) => run::answer(args),
        Command::Chat(args) => run::chat(args),
        Command::Demo(mut args) => match args.other.take() {
            Some(other) => epic_demo::run(other),
            None => demo::run(args),
        },
        Command::Epic(args) => epic::run(args),
        Command::Agent(args) => agent::run(args),
        Command::Ralph(args) => ralph::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Mcp(cmd) => mcp::run(cmd),
        Command::Models(cmd) => models::run(cmd),
        Command::Serve(args) => serve::run(args),
        Command::Session(args) => session::run(args),
        Command::Queue(cmd) => queue::run(cmd),
        Command::Worker(args) => worker::run(args),
        Command::Executors(cmd) => executors::run(cmd),
        Command::Notify(cmd) => notify::run(cmd),
    }
}
