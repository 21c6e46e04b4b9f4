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
    /// For a BMAD skill or workflow folder: write baton's rendering of it (the files a phase
    /// run gets in its @pkg folder) into DIR, to read or compare with BMAD's own renderer.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
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
                let written = match &args.out {
                    Some(dir) => match d.write_output(dir) {
                        Ok(files) => Some(files),
                        Err(e) => {
                            return Ok(crate::failure::Failure::new(
                                e.code,
                                e.message,
                                exit::FAILURE,
                            )
                            .hint(e.hint)
                            .report(args.json));
                        }
                    },
                    None => None,
                };
                if args.json {
                    let mut v = serde_json::to_value(&d)?;
                    v["ok"] = serde_json::json!(true);
                    if let Some(files) = &written {
                        v["written"] = serde_json::json!(files);
                    }
                    crate::ui::print_json(&v)?;
                } else {
                    out!("{}", crate::ui::visible(&d.text()));
                    if let (Some(dir), Some(files)) = (&args.out, &written) {
                        outln!("  written   {} files into {}", files.len(), dir.display());
                    }
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
    if args.out.is_some() {
        return Ok(crate::failure::Failure::new(
            "VALIDATE_OUT_NOT_A_SKILL",
            format!(
                "--out writes the rendering of a BMAD skill or workflow folder; {} is a package",
                args.package.display()
            ),
            exit::INVALID,
        )
        .hint(Some(
            "name a skill folder (e.g. .claude/skills/bmad-build-auto), or leave --out out".into(),
        ))
        .report(args.json));
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
