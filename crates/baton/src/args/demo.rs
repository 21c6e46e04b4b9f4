//! The arguments of `baton demo` and its other demos (`demo epic`, `demo session`).

use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where to put the sample project (default ./baton-demo).
    #[arg(long, default_value = "baton-demo")]
    pub dir: PathBuf,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
    /// Another demo (`baton demo epic`); none runs the create-story example.
    #[command(subcommand)]
    pub other: Option<DemoCommand>,
}

#[derive(Debug, Subcommand)]
pub enum DemoCommand {
    /// Run a two-story epic with the epic autopilot on a copy of the sample project, offline.
    Epic(DemoEpicArgs),
    /// Run a lifecycle session (with one fix loop) on a copy of a small sample repo, offline.
    Session(DemoSessionArgs),
    /// Try the PostgreSQL work queue on this machine, offline: a throwaway database, three
    /// replayed runs on two workers, one killed and its unit taken over, then everything
    /// removed. Needs PostgreSQL's server programs (Debian: the `postgresql` package).
    Queue(DemoQueueArgs),
}

#[derive(Debug, Args)]
pub struct DemoQueueArgs {
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DemoEpicArgs {
    /// Where to put the sample project.
    #[arg(long, default_value = "baton-demo-epic")]
    pub dir: PathBuf,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DemoSessionArgs {
    /// Where to put the sample project.
    #[arg(long, default_value = "baton-demo-session")]
    pub dir: PathBuf,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
}
