//! `skills [--json] [--quiet] [--platform claude|codex|agent|agy]`.

use crate::Context;
use crate::error::{RalphError, Result};
use crate::skills::{self, PLATFORMS};
use crate::verbs::Output;
use serde_json::Value;

pub fn run(ctx: &Context, platform: Option<&str>, quiet: bool) -> Result<Output> {
    if let Some(p) = platform
        && !PLATFORMS.contains(&p)
    {
        return Err(RalphError::usage(
            "PLATFORM_INVALID",
            format!(
                "--platform must be one of: {} (got \"{p}\")",
                PLATFORMS.join(", ")
            ),
        ));
    }
    let entries = skills::scan(ctx, platform);
    let json = Value::Array(
        entries
            .iter()
            .filter_map(|e| serde_json::to_value(e).ok())
            .collect(),
    );
    Ok(Output::new(json)
        .lines()
        .out(skills::table(&entries, quiet, platform)))
}
