use crate::exit;
use crate::report;
use baton_package::{ValidateOptions, validate_path};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Package directory or .bmad file, or the name of an installed package (a BMAD skill
    /// folder or workflow too).
    pub package: PathBuf,
    /// Check only this workflow, and that a run could select it.
    #[arg(long, short = 'w')]
    pub workflow: Option<String>,
    /// Print a JSON report instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(mut args: ValidateArgs) -> anyhow::Result<u8> {
    args.package = match crate::args::package::locate(&args.package) {
        Ok(path) => path,
        Err(f) => return Ok(f.report(args.json)),
    };
    // A BMAD skill folder or classic workflow: what baton would run, and how.
    if let Some(described) = baton_epic::method::describe::describe(&args.package, None) {
        return match described {
            Ok(d) => {
                if args.json {
                    let mut v = serde_json::to_value(&d)?;
                    v["ok"] = serde_json::json!(true);
                    crate::ui::print_json(&v)?;
                } else {
                    out!("{}", crate::ui::visible(&d.text()));
                    if d.interactive.is_some() {
                        outln!(
                            "ok: it reads, but it is interactive: never picked as an epic phase"
                        );
                    } else {
                        outln!("ok: baton runs it as an epic phase");
                    }
                }
                Ok(exit::OK)
            }
            Err(e) => Ok(
                crate::failure::Failure::new(e.code, e.message, exit::INVALID)
                    .hint(e.hint)
                    .report(args.json),
            ),
        };
    }
    let options = ValidateOptions {
        workflow: args.workflow,
        ..ValidateOptions::default()
    };
    let result = validate_path(&args.package, &options);
    if args.json {
        crate::ui::print_json(&report::to_json(&result))?;
    } else {
        let shown = args.package.display().to_string();
        if result.ok() {
            let colour = crate::ui::color::enabled(crate::ui::color::Stream::Out);
            out!("{}", report::to_text_coloured(&result, &shown, colour));
        } else {
            report::eprint(&result, &shown);
        }
    }
    Ok(if result.ok() { exit::OK } else { exit::INVALID })
}
