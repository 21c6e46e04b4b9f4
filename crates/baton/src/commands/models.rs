//! `baton models check`: short probes of the configured model (`baton_llm::probe`), one line
//! per check. `baton doctor` prints the same checks in its model section.

use crate::args::ApiArg;
use crate::exit;
use crate::failure::Failure;
use crate::ui::{Paint, color::Stream, visible};
use baton_llm::probe::{self, ProbeOptions, Report, Verdict};
use baton_llm::{LlmConfig, LlmOverrides};
use baton_store::Store;
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// Probe the configured model: reachable with the key, one tool-call round trip,
    /// streaming with usage, prompt-cache figures, the context window the provider lists.
    ///
    /// Cheap: six small requests, each capped at 256 completion tokens (about 3,000 prompt
    /// tokens in all), and one GET of the model listing. Exit 0 when every check passes or
    /// warns, 1 when one fails.
    Check(CheckArgs),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Model name (overrides BATON_MODEL and baton.toml).
    #[arg(long)]
    pub model: Option<String>,
    /// The endpoint (overrides OPENAI_BASE_URL and baton.toml).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The endpoint's wire protocol (default openai; anthropic is chosen by itself for
    /// api.anthropic.com). Overrides [llm] api.
    #[arg(long, value_enum)]
    pub api: Option<ApiArg>,
    /// The project whose baton.toml is read.
    #[arg(long, short = 'p', default_value = ".")]
    pub project: PathBuf,
    /// The most one check may take, retries included.
    #[arg(long, value_name = "SECONDS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(1..=600))]
    pub deadline_s: u64,
    /// Print the checks as JSON: {model, endpoint, api, checks: [{name, verdict, detail,
    /// hint, figures}]}.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: ModelsCommand) -> anyhow::Result<u8> {
    match cmd {
        ModelsCommand::Check(args) => check(args),
    }
}

fn check(mut args: CheckArgs) -> anyhow::Result<u8> {
    args.project = crate::args::project::root(&args.project);
    let store = Store::open_default()?;
    let overrides = LlmOverrides {
        model: args.model.clone(),
        base_url: args.base_url.clone(),
        api: ApiArg::api(args.api),
        ..LlmOverrides::default()
    };
    let config = match load_config(store.home(), &args.project, &overrides) {
        Ok(c) => c,
        Err(f) => return Ok(f.report(args.json)),
    };
    let options = ProbeOptions {
        deadline: Duration::from_secs(args.deadline_s),
        ..ProbeOptions::default()
    };
    let report = match probe_model(&config, options) {
        Ok(r) => r,
        Err(f) => return Ok(f.report(args.json)),
    };
    if args.json {
        crate::ui::print_json(&report)?;
    } else {
        print_header(&report);
        print_checks(&report);
        print_summary(&report);
    }
    Ok(if report.failed() {
        exit::FAILURE
    } else {
        exit::OK
    })
}

/// The model configuration a run would use (`$BATON_HOME/config.toml`, the project's
/// `baton.toml`, the environment, then `overrides`).
pub fn load_config(
    home: &Path,
    project: &Path,
    overrides: &LlmOverrides,
) -> Result<LlmConfig, Failure> {
    let env = |k: &str| std::env::var(k).ok();
    LlmConfig::load(Some(home), Some(project), &env, overrides)
        .map_err(|e| Failure::new(e.code(), e.to_string(), exit::INVALID).hint(e.hint()))
}

/// Runs the checks (see `baton_llm::probe`).
pub fn probe_model(config: &LlmConfig, options: ProbeOptions) -> Result<Report, Failure> {
    let runtime = crate::runtime::runtime()
        .map_err(|e| Failure::new("FAILED", e.to_string(), exit::FAILURE))?;
    runtime
        .block_on(probe::check_model(config, options))
        .map_err(|e| Failure::new(e.code(), e.to_string(), exit::INVALID).hint(e.hint()))
}

fn print_header(report: &Report) {
    outln!("model     {}", visible(&report.model));
    outln!("endpoint  {} (api {})", report.endpoint, report.api);
}

/// One line per check (`verdict  name  detail`), and its hint under it.
pub fn print_checks(report: &Report) {
    for c in &report.checks {
        let paint = match c.verdict {
            Verdict::Pass => Paint::Good,
            Verdict::Warn => Paint::Warn,
            Verdict::Fail => Paint::Bad,
            Verdict::Skipped => Paint::Dim,
        };
        // Padded before painting: escape sequences would count in the width.
        let verdict = paint.on(Stream::Out, &format!("{:<7}", c.verdict.as_str()));
        outln!("  {verdict}  {:<9}  {}", c.name, visible(&c.detail));
        if let Some(h) = &c.hint {
            outln!(
                "  {:<7}  {:<9}  {} {}",
                "",
                "",
                Paint::Hint.on(Stream::Out, "hint:"),
                visible(h)
            );
        }
    }
}

fn print_summary(report: &Report) {
    let count = |v: Verdict| report.checks.iter().filter(|c| c.verdict == v).count();
    let (failed, warned) = (count(Verdict::Fail), count(Verdict::Warn));
    if failed > 0 {
        outln!(
            "{}: baton cannot run workflows with this model as configured",
            Paint::Bad.on(Stream::Out, &format!("{failed} failed"))
        );
    } else if warned > 0 {
        outln!(
            "{}: baton can run workflows with this model (see the warnings)",
            Paint::Warn.on(Stream::Out, &format!("{warned} warned"))
        );
    } else {
        outln!("{}", Paint::Good.on(Stream::Out, "every check passed"));
    }
}
