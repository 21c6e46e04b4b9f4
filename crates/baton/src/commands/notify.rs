//! `baton notify log | test`: the webhooks of `[[notify.webhooks]]` (see `baton-notify`).

use crate::exit;
use crate::failure::Failure;
use crate::ui::visible;
use baton_notify::log::{Entry, Outcome};
use baton_notify::{NotifyConfig, NotifyError};
use baton_store::Store;
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum NotifyCommand {
    /// Each webhook delivery try and its outcome, oldest first.
    Log(LogArgs),
    /// Send one sample event to every webhook of the project and show each outcome.
    Test(TestArgs),
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// Only the last N entries.
    #[arg(long, value_name = "N")]
    pub last: Option<usize>,
    /// Print the entries as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct TestArgs {
    /// The project whose baton.toml names the webhooks.
    #[arg(long, short = 'p', default_value = ".", value_name = "DIR")]
    pub project: PathBuf,
    /// Print the outcomes as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: NotifyCommand) -> anyhow::Result<u8> {
    match cmd {
        NotifyCommand::Log(args) => log(args),
        NotifyCommand::Test(args) => test(args),
    }
}

fn failure(e: &NotifyError) -> Failure {
    Failure::new(e.code(), e.to_string(), exit::INVALID).hint(Some(e.hint()))
}

fn log(args: LogArgs) -> anyhow::Result<u8> {
    let store = Store::open_default()?;
    let mut entries = match baton_notify::log::read(store.home()) {
        Ok(e) => e,
        Err(e) => return Ok(failure(&e).report(args.json)),
    };
    if let Some(n) = args.last {
        entries.drain(..entries.len().saturating_sub(n));
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&entries)?);
    } else if entries.is_empty() {
        eprintln!("no webhook delivery yet (configure [[notify.webhooks]] in baton.toml)");
    } else {
        for e in &entries {
            outln!("{}", visible(&line(e)));
        }
    }
    Ok(exit::OK)
}

fn line(e: &Entry) -> String {
    let outcome = match e.outcome {
        Outcome::Delivered => "delivered",
        Outcome::Retry => "retry",
        Outcome::Failed => "failed",
        Outcome::Dropped => "dropped (queue full)",
        Outcome::Abandoned => "abandoned (process ended)",
    };
    let detail = match (&e.status, &e.error) {
        (_, Some(err)) => format!(" · {err}"),
        (Some(s), None) => format!(" · HTTP {s}"),
        _ => String::new(),
    };
    format!(
        "{}  {:<16} {}  {}  try {}  {outcome}{detail}  ({} ms, {})",
        e.at, e.event, e.project, e.webhook, e.attempt, e.millis, e.delivery
    )
}

fn test(args: TestArgs) -> anyhow::Result<u8> {
    let root = match std::fs::canonicalize(&args.project) {
        Ok(r) => r,
        Err(e) => {
            return Ok(Failure::new(
                "PROJECT_NOT_FOUND",
                format!("project {} cannot be opened: {e}", args.project.display()),
                exit::INVALID,
            )
            .report(args.json));
        }
    };
    let config = match NotifyConfig::load(&root) {
        Ok(c) => c,
        Err(e) => return Ok(failure(&e).report(args.json)),
    };
    if config.webhooks.is_empty() {
        return Ok(Failure::new(
            "NOTIFY_NO_WEBHOOK",
            format!("{}/baton.toml has no [[notify.webhooks]]", root.display()),
            exit::INVALID,
        )
        .hint(Some(
            "add one: [[notify.webhooks]] url = \"https://…\" (see docs/team.md)".into(),
        ))
        .report(args.json));
    }
    let store = Store::open_default()?;
    let name = baton_epic::notify::project_name(&root);
    let event = baton_notify::sample::event(&name, Some(root.clone()));
    let results = baton_notify::sample::send(&config, store.home(), &event);
    let all = results.iter().all(|e| e.outcome == Outcome::Delivered)
        && results.len() == config.webhooks.len();
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "delivered": all,
                "results": results,
            }))?
        );
    } else {
        for e in &results {
            outln!("{}", visible(&line(e)));
        }
    }
    Ok(if all { exit::OK } else { exit::FAILURE })
}
