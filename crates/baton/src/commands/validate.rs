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
        let shown = args.package.display().to_string();
        if result.ok() {
            let colour = crate::ui::color::enabled(crate::ui::color::Stream::Out);
            print!("{}", report::to_text_coloured(&result, &shown, colour));
        } else {
            report::eprint(&result, &shown);
        }
    }
    Ok(if result.ok() { exit::OK } else { exit::INVALID })
}
