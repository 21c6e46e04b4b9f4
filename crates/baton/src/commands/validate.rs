use crate::cli::ValidateArgs;
use crate::exit;
use crate::report;
use baton_package::{ValidateOptions, validate_path};

pub fn run(args: ValidateArgs) -> anyhow::Result<u8> {
    let options = ValidateOptions {
        workflow: args.workflow,
        ..ValidateOptions::default()
    };
    let result = validate_path(&args.package, &options);
    if args.json {
        super::print_json(&report::to_json(&result))?;
    } else {
        let text = report::to_text(&result, &args.package.display().to_string());
        if result.ok() {
            print!("{text}");
        } else {
            eprint!("{text}");
        }
    }
    Ok(if result.ok() { exit::OK } else { exit::INVALID })
}
