//! The session files' context: where the session verbs work, and what its reader passed over.

use super::errors;
use baton_lifecycle::ralph::Context;
use std::path::Path;

/// What the session files' reader passed over (a damaged session folder beside the one used),
/// on stderr.
pub fn print_warnings(ctx: &Context) {
    for w in ctx.warnings.take() {
        eprintln!("warning: {}", crate::ui::visible(&w.to_string()));
    }
}

/// Where the session verbs work (`HOME` for global command files, as `baton ralph`).
pub fn context(project: &Path) -> Context {
    Context::from_env(project, errors::RALPH_CLI)
}
