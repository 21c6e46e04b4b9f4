//! The arguments of `run`, `resume`, `answer` and `chat`, also read by their work-queue
//! variants (`run --queue`, `answer --db`).

use super::{BudgetArgs, ModelArgs};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Package directory or .bmad file, or the name of an installed package (`baton package
    /// list`); a path that exists wins.
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
    /// files; a --replay trace travels with the unit. Leave the password out: PGPASSWORD or
    /// ~/.pgpass.
    #[arg(long, value_name = "URL", conflicts_with = "record")]
    pub queue: Option<String>,
    /// Like --queue, with the URL in this environment variable.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["queue", "record"])]
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

impl AnswerArgs {
    /// The answer `baton answer` gives: the text, or a confirmation widget's yes or no.
    pub fn answer_text(&self) -> String {
        if self.confirm || self.deny {
            let confirmed = self.confirm;
            format!(
                "WIDGET_SUBMIT\n{{\"type\": \"confirmation\", \"value\": {{\"confirmed\": {confirmed}}}}}"
            )
        } else {
            self.text.clone().unwrap_or_default()
        }
    }
}

/// What a queued answer cannot take: the worker drives the run with what was submitted.
const QUEUED_ANSWER_CONFLICTS: [&str; 10] = [
    "model",
    "base_url",
    "api",
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
