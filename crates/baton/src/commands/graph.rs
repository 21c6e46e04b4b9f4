use crate::cli::{Format, GraphArgs};
use crate::exit;
use crate::report;
use baton_package::render::{GraphFormat, render};
use baton_package::{ValidateOptions, validate_path};

pub fn run(args: GraphArgs) -> anyhow::Result<u8> {
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
