use crate::exit;
use crate::report;
use baton_package::render::{GraphFormat, render};
use baton_package::{ValidateOptions, validate_path};
use clap::{Args, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Format {
    Mermaid,
    Dot,
    Json,
}

#[derive(Debug, Args)]
pub struct GraphArgs {
    /// Package directory or .bmad file, or the name of an installed package.
    pub package: PathBuf,
    /// Workflow to draw (required for multi-workflow packages).
    #[arg(long, short = 'w')]
    pub workflow: Option<String>,
    /// Output format: Mermaid, Graphviz DOT, or JSON (each node's successors).
    #[arg(long, short = 'f', value_enum, default_value = "mermaid")]
    pub format: Format,
}

pub fn run(mut args: GraphArgs) -> anyhow::Result<u8> {
    args.package = match crate::args::package::locate(&args.package) {
        Ok(path) => path,
        Err(f) => return Ok(f.report(false)),
    };
    let options = ValidateOptions {
        workflow: args.workflow.clone(),
        ..ValidateOptions::default()
    };
    let result = validate_path(&args.package, &options);
    let Some(package) = &result.package else {
        eprint!(
            "{}",
            report::to_text(&result, &args.package.display().to_string())
        );
        return Ok(exit::INVALID);
    };
    let workflow = match package.resolve_workflow(args.workflow.as_deref()) {
        Ok(w) => w,
        Err(d) => {
            eprintln!("error[{}]: {}", d.code, d.message);
            if let Some(h) = &d.hint {
                eprintln!("  help: {h}");
            }
            return Ok(exit::INVALID);
        }
    };
    let format = match args.format {
        Format::Mermaid => GraphFormat::Mermaid,
        Format::Dot => GraphFormat::Dot,
        Format::Json => GraphFormat::Json,
    };
    out!("{}", render(&workflow.graph, format));
    Ok(exit::OK)
}
