//! How the session library's refusals are reported: the ralph code and message, a hint that
//! names `baton session` commands where one fits, and the CLI's exit codes (2 for what the
//! caller asked wrong, 1 for what went wrong).

use crate::exit;
use crate::failure::Failure;
use baton_lifecycle::ralph::RalphError;

/// Codes of `RalphError::Usage` that mean the caller asked for something that does not apply.
const CALLER_MISTAKES: &[&str] = &[
    "SESSION_NOT_WAITING",
    "SESSION_NOT_PAUSED",
    "CHOICE_NOT_APPLICABLE",
    "SESSION_TRACE_MISSING",
    "INDEX_INVALID",
    // Who runs the steps (`[session] executor`, `--executor`, `[executors.<name>]`).
    "SESSION_CONFIG_INVALID",
    "EXECUTOR_CONFIG_INVALID",
    "EXECUTOR_KEY_MISSING",
    "EXECUTOR_NOT_FOUND",
];

/// How hints spell the part-1 verbs.
pub const RALPH_CLI: &str = "baton ralph";

pub fn failure(e: &RalphError) -> Failure {
    use RalphError as E;
    let code = match e {
        E::NoSession
        | E::NoActiveSession
        | E::SessionNotFound(_)
        | E::SessionIdInvalid(_)
        | E::SessionActive(_)
        | E::NotRunning { .. }
        | E::NotActive { .. }
        | E::IndexOutOfRange { .. }
        | E::SkillsMissing(_)
        | E::NoCommandPath { .. }
        | E::RequiredMissing { .. } => exit::INVALID,
        E::Usage { code, .. } if CALLER_MISTAKES.contains(code) => exit::INVALID,
        // The loop's own refusals (E010's empty ticks, a damaged link…) are failures.
        _ => exit::FAILURE,
    };
    let hint = match e {
        E::NoSession => Some("start one: baton session start \"<intent>\"".to_string()),
        // Also what a session that already finished gets: say where to see it.
        E::NoActiveSession => Some(
            "no session is running or paused; a finished one shows in `baton session status`. \
             Start a new one: baton session start \"<intent>\""
                .to_string(),
        ),
        E::SessionNotFound(_) => Some(
            "`baton session status` shows the newest session; pass the folder name under \
             .workflow/.maestro/ to --session"
                .to_string(),
        ),
        E::SessionActive(id) => Some(format!(
            "continue it: baton session continue --session {id} (or give it up: \
             baton ralph abandon --session {id})"
        )),
        _ => {
            let mut lines = e.details();
            lines.extend(e.hints(RALPH_CLI));
            (!lines.is_empty()).then(|| lines.join("; ").trim().to_string())
        }
    };
    Failure::new(e.code(), e.to_string(), code).hint(hint)
}
