//! `baton executors list | check NAME`: the coding-agent CLIs baton can run phases and steps
//! with (see `baton-executor`), and a one-file task through the gateway to prove one works.

use crate::exit;
use crate::failure::Failure;
use crate::ui::visible;
use baton_executor::ExecutorKind;
use baton_executor::check::{self, CheckReport, Surveyed};
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Subcommand)]
pub enum ExecutorsCommand {
    /// The CLIs found (program, version), with the project's [executors.<name>] settings.
    List(ListArgs),
    /// Run a one-file task with the CLI through baton's gateway against the configured
    /// upstream (it spends a few cents of the operator's key).
    Check(CheckArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// The project whose baton.toml holds [executors.<name>].
    #[arg(long, short = 'p', default_value = ".", value_name = "DIR")]
    pub project: PathBuf,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// claude-code, codex or opencode.
    pub name: String,
    /// The project whose baton.toml holds [executors.<name>].
    #[arg(long, short = 'p', default_value = ".", value_name = "DIR")]
    pub project: PathBuf,
    /// Run the CLI even where this system cannot confine it (no private network namespace).
    #[arg(long)]
    pub allow_unconfined: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: ExecutorsCommand) -> anyhow::Result<u8> {
    match cmd {
        ExecutorsCommand::List(args) => list(args),
        ExecutorsCommand::Check(args) => check_one(args),
    }
}

fn configs(
    project: &std::path::Path,
) -> Result<std::collections::BTreeMap<ExecutorKind, baton_executor::config::ExecutorConfig>, Failure>
{
    let root = crate::args::project::root(project);
    check::load_configs(&root)
        .map_err(|e| Failure::new(e.code(), e.to_string(), exit::INVALID).hint(Some(e.hint())))
}

/// The lines `baton doctor` and `baton executors list` print for the CLIs.
pub fn print_survey(found: &[Surveyed]) {
    for s in found {
        match (&s.program, &s.version) {
            (Some(p), Some(v)) => outln!(
                "  {:<12} {} ({})",
                s.name,
                visible(v),
                visible(&p.display().to_string())
            ),
            _ => outln!(
                "  {:<12} not usable: {}",
                s.name,
                visible(s.problem.as_deref().unwrap_or("not found"))
            ),
        }
        if s.program.is_some() {
            outln!(
                "  {:<12} model {}, upstream {}, key in ${} ({})",
                "",
                visible(&s.model),
                visible(s.upstream.as_deref().unwrap_or("-")),
                s.api_key_env.as_deref().unwrap_or("-"),
                if s.key_set { "set" } else { "not set" }
            );
        }
    }
}

fn list(args: ListArgs) -> anyhow::Result<u8> {
    let configs = match configs(&args.project) {
        Ok(c) => c,
        Err(f) => return Ok(f.report(args.json)),
    };
    let found = check::survey(&configs);
    if args.json {
        crate::ui::print_json(&serde_json::json!({ "executors": found }))?;
    } else {
        outln!("coding-agent CLIs (executor = \"<name>\" runs a phase or step with one):");
        print_survey(&found);
    }
    Ok(exit::OK)
}

fn check_one(args: CheckArgs) -> anyhow::Result<u8> {
    let kind = match ExecutorKind::parse(args.name.trim()).filter(|k| *k != ExecutorKind::Baton) {
        Some(k) => k,
        None => {
            return Ok(Failure::new(
                "EXECUTOR_UNKNOWN",
                format!("{:?} is not a coding-agent CLI", args.name),
                exit::INVALID,
            )
            .hint(Some("the CLIs are claude-code, codex and opencode".into()))
            .report(args.json));
        }
    };
    let configs = match configs(&args.project) {
        Ok(c) => c,
        Err(f) => return Ok(f.report(args.json)),
    };
    let config = configs.get(&kind).cloned().unwrap_or_default();
    let store = baton_store::Store::open_default()?;
    let scratch = tempfile::tempdir()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let quiet = args.json;
    let mut show = |e: &baton_executor::Event| {
        if let (false, baton_executor::Event::ToolCall { name, .. }) = (quiet, e) {
            eprintln!("  {kind} ran {}", visible(name));
        }
    };
    if !quiet {
        eprintln!("checking {kind}: a one-file task through baton's gateway…");
    }
    let report = runtime.block_on(check::check(
        kind,
        &config,
        scratch.path(),
        store.home(),
        args.allow_unconfined,
        &mut show,
    ));
    let report: CheckReport = match report {
        Ok(r) => r,
        Err(e) => {
            return Ok(Failure::new(e.code(), e.to_string(), exit::FAILURE)
                .hint(Some(e.hint()))
                .report(args.json));
        }
    };
    if args.json {
        crate::ui::print_json(&serde_json::to_value(&report)?)?;
    } else {
        outln!(
            "{}: {} ({} model request{} through the gateway, {} tool call{}, {} ms)",
            report.name,
            if report.passed { "works" } else { "FAILED" },
            report.exchanges,
            if report.exchanges == 1 { "" } else { "s" },
            report.tool_calls,
            if report.tool_calls == 1 { "" } else { "s" },
            report.millis
        );
        outln!(
            "  {} {}, model {}, upstream {}",
            visible(&report.program.display().to_string()),
            visible(report.version.as_deref().unwrap_or("(no version)")),
            visible(&report.model),
            visible(&report.upstream)
        );
        if report.confinement.is_empty() {
            outln!("  ran unconfined (no private network namespace here)");
        } else {
            let layers: Vec<String> = report
                .confinement
                .iter()
                .map(|(l, how)| format!("{l}: {how}"))
                .collect();
            outln!("  confined: {}", layers.join(", "));
        }
        if let Some(p) = &report.problem {
            outln!("  problem: {}", visible(p));
        }
    }
    Ok(if report.passed {
        exit::OK
    } else {
        exit::FAILURE
    })
}
