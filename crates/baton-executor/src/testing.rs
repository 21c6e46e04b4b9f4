//! Helpers for tests that drive a real coding-agent CLI: where it is, and whether its absence
//! skips the test or fails it (CI sets `BATON_REQUIRE_EXECUTORS=1` so it never skips silently).

use crate::ExecutorKind;
use std::path::PathBuf;

/// The CLI of `kind`: first in `$BATON_EXECUTOR_PATH` (a directory), then on `PATH`.
pub fn cli_path(kind: ExecutorKind) -> Option<PathBuf> {
    let name = kind.default_command()?;
    let dirs = std::env::var_os("BATON_EXECUTOR_PATH")
        .into_iter()
        .flat_map(|d| std::env::split_paths(&d).collect::<Vec<_>>())
        .chain(
            std::env::var_os("PATH")
                .into_iter()
                .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>()),
        );
    dirs.map(|d| d.join(name))
        .find(|p| crate::find::is_executable(p))
}

/// Whether a missing CLI must fail the test (`BATON_REQUIRE_EXECUTORS` set, not `0`).
pub fn required() -> bool {
    std::env::var("BATON_REQUIRE_EXECUTORS").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The CLI of `kind`, or `None` after printing a skip line to stderr; panics when the CLI is
/// missing and `BATON_REQUIRE_EXECUTORS=1`.
pub fn require_or_skip(kind: ExecutorKind) -> Option<PathBuf> {
    match cli_path(kind) {
        Some(path) => Some(path),
        None if required() => panic!(
            "BATON_REQUIRE_EXECUTORS is set but the {kind} CLI ({}) is neither in $BATON_EXECUTOR_PATH nor on PATH",
            kind.default_command().unwrap_or("?")
        ),
        None => {
            eprintln!(
                "skipped: the {kind} CLI ({}) is neither in $BATON_EXECUTOR_PATH nor on PATH (set BATON_REQUIRE_EXECUTORS=1 to fail instead)",
                kind.default_command().unwrap_or("?")
            );
            None
        }
    }
}
