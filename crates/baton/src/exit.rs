//! Exit codes shared by every command.

pub const OK: u8 = 0;
pub const FAILURE: u8 = 1;
/// Usage error, or the package is invalid.
pub const INVALID: u8 = 2;
/// A run, an epic or a session that waits for the user.
pub const WAITING: u8 = 10;
/// Stopped before a model call that could cross a budget.
pub const BUDGET_EXCEEDED: u8 = 12;
/// Stopped by Ctrl-C or SIGTERM (128 + SIGINT); the run is kept and resumable.
pub const STOPPED: u8 = 130;
