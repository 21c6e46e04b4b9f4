//! `baton session …`: lifecycle sessions run by baton itself (seed 003). Parsing, prompts,
//! progress and presentation only; the build phase and the loop live in
//! `baton_lifecycle::session`, the session files in `baton_lifecycle::ralph`.
//!
//! Exit codes: 0 completed, 10 waiting for a person (a question, a step's question, a chain
//! to confirm, a failed step or an escalation to decide), 1 failed or paused on an error, 2
//! usage or bad input, 130 interrupted.

pub(crate) mod adopt;
mod args;
mod context;
mod drive;
mod errors;
mod progress;
mod prompt;
mod report;
mod resume;
mod setup;
mod start;
mod status;
mod text;

pub use args::SessionArgs;
pub(crate) use setup::{SIGNAL_HINTS, owner};

use args::SessionCommand;

pub fn run(args: SessionArgs) -> anyhow::Result<u8> {
    use crate::args::project::root;
    // Without --project, the project found from the current folder upward.
    match args.command {
        SessionCommand::Start(mut a) => {
            a.target_project = root(&a.target_project);
            start::run(&a)
        }
        SessionCommand::Continue(mut a) => {
            a.target.project = root(&a.target.project);
            resume::continue_(&a)
        }
        SessionCommand::Status(mut a) => {
            a.target.project = root(&a.target.project);
            status::run(&a)
        }
        SessionCommand::Answer(mut a) => {
            a.target.project = root(&a.target.project);
            resume::answer(&a)
        }
        SessionCommand::Adopt(mut a) => {
            a.target.project = root(&a.target.project);
            adopt::run(&a)
        }
    }
}
