use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

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
        value_name = "WHEN"
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
    /// Show which sandbox layers this kernel enforces for terminal.run, and the tool settings.
    Doctor(crate::commands::doctor::DoctorArgs),
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
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ContextArg {
    Node,
    Full,
}

impl ContextArg {
    /// The policy a flag asks for; `None` (no flag): the one the run remembers.
    pub fn policy(arg: Option<ContextArg>) -> Option<baton_engine::ContextPolicy> {
        arg.map(|a| match a {
            ContextArg::Node => baton_engine::ContextPolicy::Node,
            ContextArg::Full => baton_engine::ContextPolicy::Full,
        })
    }
}

/// Which model answers, shared by run, resume, answer and chat.
#[derive(Debug, Args)]
pub struct ModelArgs {
    /// Model name (overrides BATON_MODEL and baton.toml; `answer`, `resume` and `chat` go on
    /// with the model the run was started with unless given).
    #[arg(long)]
    pub model: Option<String>,
    /// The OpenAI-compatible endpoint (overrides OPENAI_BASE_URL, baton.toml and the endpoint
    /// a continued run was started with).
    #[arg(long, value_name = "URL", conflicts_with = "replay")]
    pub base_url: Option<String>,
    /// Answer from a recorded trace instead of a model (offline; recorded user inputs answer
    /// the questions).
    #[arg(long, value_name = "TRACE")]
    pub replay: Option<PathBuf>,
    /// Record this invocation's conversation as a trace.
    #[arg(long, value_name = "TRACE")]
    pub record: Option<PathBuf>,
    /// History sent to the model: restart at every node (default for a new run, cheaper), or
    /// carry it across nodes, each request extending the previous one (past half the context
    /// window, at most 32,768 tokens, the earlier nodes are left out once). The run remembers
    /// it: `answer`, `resume` and `chat` go on with it unless given.
    #[arg(long, value_enum)]
    pub context: Option<ContextArg>,
    /// The model's context window in tokens (overrides baton.toml and the table of known
    /// models); requests are compressed past 80 % of it.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1024..=100_000_000))]
    pub context_tokens: Option<u64>,
    /// Never prompt; stop with exit code 10 when the run needs an answer.
    #[arg(long)]
    pub non_interactive: bool,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Hard budgets of a command (over `[budget]` in baton.toml). A model call that could cross one
/// is not made: the command stops with exit code 12 and the run stays resumable.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct BudgetArgs {
    /// The most tokens (prompt + completion) the run may use, in all its invocations.
    #[arg(long, value_name = "N")]
    pub budget_tokens: Option<u64>,
    /// The most dollars the run may cost, in all its invocations (needs a known price for the
    /// model: built in, or `[models."<name>"] price` in baton.toml).
    #[arg(long, value_name = "USD", value_parser = parse_usd)]
    pub budget_usd: Option<f64>,
}

/// A dollar amount, 0 or more.
pub fn parse_usd(text: &str) -> Result<f64, String> {
    match text.trim().trim_start_matches('$').parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!(
            "expected an amount of dollars, 0 or more, got {text:?}"
        )),
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Package directory or .bmad file.
    pub package: PathBuf,
    /// The project the workflow works on.
    #[arg(long, short = 'p', default_value = ".")]
    pub project: PathBuf,
    /// The workflow to run (required when the package has several; `baton validate` lists
    /// them).
    #[arg(long, short = 'w')]
    pub workflow: Option<String>,
    /// The active agent (default: the entry node's agent).
    #[arg(long)]
    pub agent: Option<String>,
    /// Answers given in advance, used in order when the run asks.
    #[arg(long = "input", value_name = "TEXT")]
    pub inputs: Vec<String>,
    /// Ask the model to confirm with the user between nodes.
    #[arg(long)]
    pub no_autopilot: bool,
    /// Set a state variable when the run is created (repeatable), e.g. `--var storyKey=1-2-login`.
    #[arg(long = "var", value_name = "KEY=VALUE", value_parser = parse_var)]
    pub vars: Vec<(String, String)>,
    #[command(flatten)]
    pub budget: BudgetArgs,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Put the run in this PostgreSQL work queue instead of running it (`baton worker` runs
    /// it). The project must be a git repository with a remote; its commit travels, not its
    /// files. Leave the password out: PGPASSWORD or ~/.pgpass.
    #[arg(long, value_name = "URL", conflicts_with_all = ["replay", "record"])]
    pub queue: Option<String>,
    /// Like --queue, with the URL in this environment variable.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["queue", "replay", "record"])]
    pub db_env: Option<String>,
}

/// `KEY=VALUE`, split at the first `=`; the value may be empty, the key may not.
fn parse_var(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_string(), value.to_string()))
        }
        _ => Err(format!("expected KEY=VALUE, got {text:?}")),
    }
}

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// Run id or unique prefix.
    pub run: String,
    #[command(flatten)]
    pub budget: BudgetArgs,
    #[command(flatten)]
    pub model: ModelArgs,
}

#[derive(Debug, Args)]
pub struct AnswerArgs {
    /// Run id or unique prefix (with --db: the unit's number, as `baton queue status` lists it).
    pub run: String,
    /// The answer.
    #[arg(required_unless_present_any = ["confirm", "deny"])]
    pub text: Option<String>,
    /// Answer a confirmation widget with yes.
    #[arg(long, conflicts_with = "deny")]
    pub confirm: bool,
    /// Answer a confirmation widget with no.
    #[arg(long)]
    pub deny: bool,
    /// Answer a unit of this PostgreSQL work queue instead of a run of this machine: the
    /// answer is stored with the unit and the next `baton worker` goes on with it (the model
    /// and budgets are the ones the run was submitted with). Leave the password out:
    /// PGPASSWORD or ~/.pgpass.
    #[arg(long, value_name = "URL", conflicts_with_all = QUEUED_ANSWER_CONFLICTS)]
    pub db: Option<String>,
    /// Like --db, with the URL in this environment variable.
    #[arg(long, value_name = "NAME", conflicts_with = "db", conflicts_with_all = QUEUED_ANSWER_CONFLICTS)]
    pub db_env: Option<String>,
    #[command(flatten)]
    pub budget: BudgetArgs,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// What a queued answer cannot take: the worker drives the run with what was submitted.
const QUEUED_ANSWER_CONFLICTS: [&str; 9] = [
    "model",
    "base_url",
    "replay",
    "record",
    "context",
    "context_tokens",
    "non_interactive",
    "budget_tokens",
    "budget_usd",
];

#[derive(Debug, Args)]
pub struct ChatArgs {
    /// Run id or unique prefix.
    pub run: String,
    /// What you say to the run.
    pub text: String,
    #[command(flatten)]
    pub budget: BudgetArgs,
    #[command(flatten)]
    pub model: ModelArgs,
}

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
    pub other: Option<crate::commands::epic_demo::DemoCommand>,
}

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// Runs, newest first (all projects, or one with --project).
    List {
        /// Only the runs of this project directory.
        #[arg(long, short = 'p')]
        project: Option<PathBuf>,
        /// Print a JSON array of run metadata (every run, unless --limit is given).
        #[arg(long)]
        json: bool,
        /// Show at most N runs (the table shows 50 by default).
        #[arg(long, short = 'n', value_name = "N", conflicts_with = "all")]
        limit: Option<usize>,
        /// Show every run.
        #[arg(long)]
        all: bool,
    },
    /// Rebuild the runs index from the run directories (all projects, or one with --project).
    Reindex {
        /// Only this project directory.
        #[arg(long, short = 'p')]
        project: Option<PathBuf>,
        /// Print a JSON report per project.
        #[arg(long)]
        json: bool,
    },
    /// One run: metadata, state frontmatter and progress per node. With --db: a queued unit
    /// and its run as its last checkpoint left it.
    Show {
        /// Run id, or a unique prefix of it; with --db or --db-env, the unit's id.
        run: String,
        /// Print the run as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        db: RunsDbArgs,
    },
    /// The run's audit log (one line per tool call and engine event). With --db: a queued
    /// unit's, as far as its last checkpoint.
    Log {
        /// Run id, or a unique prefix of it; with --db or --db-env, the unit's id.
        run: String,
        /// Print the raw JSONL records.
        #[arg(long)]
        json: bool,
        /// Keep printing new records until the run completes or fails.
        #[arg(long, short = 'f', conflicts_with_all = ["db", "db_env"])]
        follow: bool,
        #[command(flatten)]
        db: RunsDbArgs,
    },
}

/// A queued run: read it from the queue's database instead of this machine's store.
#[derive(Debug, Args)]
pub struct RunsDbArgs {
    /// The queue's database, e.g. postgresql://USER@HOST:5432/DBNAME; the run is then a unit
    /// id (`baton queue status` lists them). Leave the password out: it comes from PGPASSWORD
    /// or ~/.pgpass.
    #[arg(long, value_name = "URL")]
    pub db: Option<String>,
    /// The name of an environment variable holding the database URL.
    #[arg(long, value_name = "NAME", conflicts_with = "db")]
    pub db_env: Option<String>,
}

impl RunsDbArgs {
    pub fn given(&self) -> bool {
        self.db.is_some() || self.db_env.is_some()
    }
}

#[derive(Debug, Args)]
pub struct NewArgs {
    /// The directory to create (it may exist if it is empty).
    pub dir: PathBuf,
    /// Package name, also the workflow id (default: the directory's name).
    #[arg(long)]
    pub name: Option<String>,
    /// Print what was written as JSON.
    #[arg(long)]
    pub json: bool,
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
    /// Output format: Mermaid, Graphviz DOT, or JSON (each node's successors).
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
        /// Print what was packed as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Validate a package and copy it, immutably, into $BATON_HOME/packages/.
    Install {
        /// Package directory or .bmad file.
        package: PathBuf,
        /// Print the installed package as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List installed packages.
    List {
        /// Print the packages as JSON.
        #[arg(long)]
        json: bool,
    },
}
