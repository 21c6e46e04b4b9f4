use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// Run BMAD v1.1 workflow packages with any OpenAI-compatible model.
#[derive(Debug, Parser)]
#[command(name = "baton", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
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
}

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// Runs, newest first (all projects, or one with --project).
    List {
        /// Only the runs of this project directory.
        #[arg(long, short = 'p')]
        project: Option<PathBuf>,
        /// Print a JSON array of run metadata.
        #[arg(long)]
        json: bool,
    },
    /// One run: metadata, state frontmatter and progress per node.
    Show {
        /// Run id, or a unique prefix of it.
        run: String,
        #[arg(long)]
        json: bool,
    },
    /// The run's audit log (one line per tool call and engine event).
    Log {
        /// Run id, or a unique prefix of it.
        run: String,
        /// Print the raw JSONL records.
        #[arg(long)]
        json: bool,
        /// Keep printing new records until the run completes or fails.
        #[arg(long, short = 'f')]
        follow: bool,
    },
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Package directory or .bmad file.
    pub package: PathBuf,
    /// Check only this workflow, and that a run could select it.
    #[arg(long, short = 'w')]
    pub workflow: Option<String>,
    /// Print a JSON report instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    Mermaid,
    Dot,
    Json,
}

#[derive(Debug, Args)]
pub struct GraphArgs {
    /// Package directory or .bmad file.
    pub package: PathBuf,
    /// Workflow to draw (required for multi-workflow packages).
    #[arg(long, short = 'w')]
    pub workflow: Option<String>,
    #[arg(long, short = 'f', value_enum, default_value = "mermaid")]
    pub format: Format,
}

#[derive(Debug, Subcommand)]
pub enum PackageCommand {
    /// Pack a package directory into a .bmad archive with integrity.sha256 set.
    Pack {
        /// Package directory.
        dir: PathBuf,
        /// Output file (default: <name>-<version>.bmad in the current directory).
        #[arg(long, short = 'o')]
        output: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Validate a package and copy it, immutably, into $BATON_HOME/packages/.
    Install {
        /// Package directory or .bmad file.
        package: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// List installed packages.
    List {
        #[arg(long)]
        json: bool,
    },
}
