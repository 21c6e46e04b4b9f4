//! The arguments of `baton session …` and its verbs.

use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct SessionArgs {
    #[command(subcommand)]
    pub command: SessionCommand,
}

#[derive(Debug, Subcommand)]
pub enum SessionCommand {
    /// Build a session from an intent (phase, position, sub-goals, chain), then run it.
    Start(StartArgs),
    /// Go on with a session: after a pause, a question, a kill or a failure.
    Continue(ContinueArgs),
    /// The board: every step with its state, the sub-goals and the latest decisions.
    Status(StatusArgs),
    /// Answer what the session waits on (a step's question; retry|skip|abort for a failed
    /// step; proceed|abort for an escalation; accept|proceed|fix|escalate|abort for a gate's
    /// verdict), then go on.
    Answer(AnswerArgs),
    /// Take over a session maestro started (`maestro ralph`, v0.4.18 to v0.5.50): its folder
    /// and files are kept; `baton session continue` then drives it to the end.
    Adopt(AdoptArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Quality {
    Full,
    Standard,
    Quick,
}

/// The project and the session in it.
#[derive(Debug, Args)]
pub struct Target {
    /// The project holding `.workflow/.maestro/` (default: the current directory).
    #[arg(long, short = 'p', default_value = ".", value_name = "DIR")]
    pub project: PathBuf,
    /// Session folder name under .workflow/.maestro/ (default: the newest running or paused).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
}

/// Which model runs the steps and gates, and how the loop talks.
#[derive(Debug, Args)]
pub struct LoopArgs {
    /// Model name (overrides BATON_MODEL and baton.toml).
    #[arg(long)]
    pub model: Option<String>,
    /// The OpenAI-compatible endpoint (overrides OPENAI_BASE_URL and baton.toml).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The endpoint's wire protocol (default openai; anthropic is chosen by itself for
    /// api.anthropic.com). Overrides [llm] api.
    #[arg(long, value_enum)]
    pub api: Option<crate::args::ApiArg>,
    /// Who runs the execution steps: baton (its own tool loop), claude-code, codex or
    /// opencode (a coding-agent CLI through baton's gateway; over [session] executor). The
    /// gates stay with baton's model.
    #[arg(long, value_name = "NAME")]
    pub executor: Option<String>,
    /// Answer from the traces recorded in DIR (one per step run and gate call), offline.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["model", "base_url", "api"])]
    pub replay: Option<PathBuf>,
    /// Record every step run's and gate call's conversation in DIR (created when missing).
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// Model calls a step's run may make in one invocation before it counts as ended without
    /// `session.complete` (NEEDS_RETRY, then BLOCKED).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub max_turns: Option<u16>,
    /// Never prompt; stop with exit code 10 when a person must answer or decide.
    #[arg(long)]
    pub non_interactive: bool,
    /// Print the outcome as JSON (no progress, no prompts).
    #[arg(long)]
    pub json: bool,
    /// Hard budgets on the whole session, its step runs and gate calls (over `[budget]
    /// tokens`/`usd`): the loop stops with exit code 12 before a call that could cross one.
    #[command(flatten)]
    pub budget: crate::args::BudgetArgs,
}

#[derive(Debug, Args)]
pub struct StartArgs {
    /// What the session should achieve, e.g. "add CSV export to the task list".
    pub intent: String,
    /// Create and run the chain without asking (auto mode: verdicts are applied as judged).
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// How long the quality pipeline after verify is (default: chosen from the project).
    #[arg(long, value_enum)]
    pub quality: Option<Quality>,
    /// The project (default: the current directory).
    #[arg(long = "project", short = 'p', default_value = ".", value_name = "DIR")]
    pub target_project: PathBuf,
    /// The answer to a build-phase question, by its id (repeatable), e.g.
    /// `--answer phase=2`.
    #[arg(long = "answer", value_name = "ID=TEXT", value_parser = parse_answer)]
    pub answers: Vec<(String, String)>,
    #[command(flatten)]
    pub run: LoopArgs,
}

/// `ID=TEXT`, split at the first `=`; neither side may be empty.
fn parse_answer(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((id, answer)) if !id.trim().is_empty() && !answer.trim().is_empty() => {
            Ok((id.trim().to_string(), answer.trim().to_string()))
        }
        _ => Err(format!("expected ID=TEXT, got {text:?}")),
    }
}

#[derive(Debug, Args)]
pub struct ContinueArgs {
    #[command(flatten)]
    pub target: Target,
    #[command(flatten)]
    pub run: LoopArgs,
}

#[derive(Debug, Args)]
pub struct AnswerArgs {
    /// The answer: text for a step's question; `retry`, `skip` or `abort` for a failed step;
    /// `proceed` or `abort` for an escalation; `accept`, `proceed`, `fix`, `escalate` or
    /// `abort` for a gate's verdict (a note may follow the word).
    pub text: String,
    #[command(flatten)]
    pub target: Target,
    #[command(flatten)]
    pub run: LoopArgs,
}

#[derive(Debug, Args)]
pub struct AdoptArgs {
    #[command(flatten)]
    pub target: Target,
    /// Take it over even when another agent holds its lease (execution_owner, lease_id).
    #[arg(long)]
    pub force: bool,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub target: Target,
    /// How many of the latest decisions to show.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub decisions: usize,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
}
