//! The command line: `baton` and its commands, each with the arguments its module (or `args/`,
//! for those several commands read) defines. Data only; `commands::dispatch` runs them.

use crate::args::demo::DemoArgs;
use crate::args::run::{AnswerArgs, ChatArgs, ResumeArgs, RunArgs};
use crate::commands::graph::GraphArgs;
use crate::commands::new::NewArgs;
use crate::commands::package::PackageCommand;
use crate::commands::runs::RunsCommand;
use crate::commands::validate::ValidateArgs;
use clap::{Parser, Subcommand};

/// Run BMAD v1.1 workflow packages with any OpenAI-compatible model.
#[derive(Debug, Parser)]
#[command(name = "baton", version, about, propagate_version = true)]
pub struct Cli {
    /// Colour: auto (when the output is a terminal and NO_COLOR is not set), always or never.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "auto",
        value_name = "WHEN",
        // Last in every command's help: it belongs to no command's own group of options.
        display_order = 900
    )]
    pub color: crate::ui::color::ColorChoice,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a minimal valid package (one agent, a two-step workflow) and a scripted model
    /// that runs it offline.
    New(NewArgs),
    /// Check a package (directory or .bmad) and report every problem with its location.
    Validate(ValidateArgs),
    /// Draw a workflow graph as Mermaid, Graphviz DOT or JSON.
    Graph(GraphArgs),
    /// Pack, install and list packages.
    #[command(subcommand)]
    Package(PackageCommand),
    /// List runs and look inside one: state, progress, audit log.
    #[command(subcommand)]
    Runs(RunsCommand),
    /// Run a workflow of a package on a project.
    Run(RunArgs),
    /// Resume a run where it stood (after a crash, a kill or a failure).
    Resume(ResumeArgs),
    /// Answer the question a run is waiting on, and continue it.
    Answer(AnswerArgs),
    /// Talk to a completed run (post-completion profile).
    Chat(ChatArgs),
    /// Run the bundled create-story example on a copy of the sample project, offline.
    Demo(DemoArgs),
    /// The epic autopilot: BMAD's implementation phase, story after story, to done.
    Epic(crate::commands::epic::EpicArgs),
    /// Talk to one agent of a package: its menu starts workflows, anything else is a chat.
    Agent(crate::commands::agent::AgentArgs),
    /// Lifecycle sessions: maestro's `ralph` CLI (.workflow/.maestro/*/status.json) with locks.
    Ralph(crate::commands::ralph::RalphArgs),
    /// Lifecycle sessions run by baton: build the chain from an intent, then run its steps and
    /// gates with a model.
    Session(crate::commands::session::SessionArgs),
    /// Show which sandbox layers this kernel enforces for terminal.run, the tool settings, and
    /// the configured model's checks (as `baton models check`).
    Doctor(crate::commands::doctor::DoctorArgs),
    /// The configured model: `baton models check` probes it (key, tool calls, streaming,
    /// prompt cache, context window).
    #[command(subcommand)]
    Models(crate::commands::models::ModelsCommand),
    /// MCP servers of baton.toml: start them and list their tools.
    #[command(subcommand)]
    Mcp(crate::commands::mcp::McpCommand),
    /// A local web page and JSON API to watch, start and answer runs, epics and sessions.
    Serve(crate::commands::serve::ServeArgs),
    /// The PostgreSQL work queue for runs and stories on many machines: init, status, cancel.
    #[command(subcommand)]
    Queue(crate::commands::queue::QueueCommand),
    /// Claim queued runs from the PostgreSQL work queue and run them: each in a worktree of
    /// its project's remote, checkpointed into the database under a fenced lease.
    Worker(crate::commands::worker::WorkerArgs),
    /// Coding-agent CLIs as executors (Claude Code, Codex, OpenCode): which are installed, and
    /// a one-file task through baton's gateway to check one.
    #[command(subcommand)]
    Executors(crate::commands::executors::ExecutorsCommand),
    /// Webhooks of baton.toml ([[notify.webhooks]]): the delivery log, a test event.
    #[command(subcommand)]
    Notify(crate::commands::notify::NotifyCommand),
}
