//! Every way a ralph verb can refuse, with a stable code, maestro's exit code and a hint.

use super::finding::{Finding, Level};
use super::schema::SchemaIssue;
use std::path::PathBuf;

/// Exit codes. maestro's meanings are kept (`next`: 2 nothing to load, 3 a step is active;
/// every verb: 2 bad arguments); 4 is baton's own, for "someone else wrote first".
pub mod exit {
    pub const OK: u8 = 0;
    pub const ERROR: u8 = 1;
    /// Bad arguments, or `next` found nothing to load.
    pub const USAGE: u8 = 2;
    /// `next`: a step is already claimed; `release`: the holder is alive.
    pub const ACTIVE: u8 = 3;
    /// `--expect-revision` did not match, or the session lock stayed busy.
    pub const CONFLICT: u8 = 4;
}

#[derive(Debug, thiserror::Error)]
pub enum RalphError {
    #[error("no maestro-* / ralph-* session found in .workflow/.maestro/")]
    NoSession,
    #[error("no running or paused maestro-* / ralph-* session found in .workflow/.maestro/")]
    NoActiveSession,
    #[error("session not found: {0}")]
    SessionNotFound(String),
    #[error("--session must be a session folder name under .workflow/.maestro/ (got {0:?})")]
    SessionIdInvalid(String),
    #[error("{session}: status.json is damaged: {}", first_issue(.issues))]
    Corrupt {
        session: String,
        path: PathBuf,
        issues: Vec<SchemaIssue>,
    },
    #[error("session is \"{status}\", not running")]
    NotRunning { status: String },
    #[error("session is \"{status}\"; only a running or paused session can be {action}")]
    NotActive {
        status: String,
        action: &'static str,
    },
    #[error("status.json has errors:")]
    Findings(Vec<Finding>),
    /// `next` found error findings in a protocol-2 session and paused it (maestro v0.5.37+:
    /// a loop that calls `next` again must not retry the same error for ever).
    #[error("status.json has errors:")]
    FindingsPaused(Vec<Finding>),
    #[error("lease conflict: {0}")]
    LeaseConflict(String),
    #[error("conflicting completion result repeated for step {index}")]
    CompletionConflict { index: usize },
    #[error("expected skill \"{expected}\" does not match active step skill \"{actual}\"")]
    ExpectedSkill { expected: String, actual: String },
    #[error("expected index {expected} does not match target index {index}")]
    ExpectedIndex { expected: String, index: usize },
    #[error("step {index} is still active (status={status})")]
    StepActive {
        index: usize,
        status: String,
        owner: Option<String>,
        since: Option<String>,
    },
    #[error("no pending steps — all complete")]
    NothingPending,
    #[error("next pending step is a decision node: {gate}")]
    DecisionNext { index: usize, gate: String },
    #[error("step {index} has no command_path (skill=\"{skill}\")")]
    NoCommandPath { index: usize, skill: String },
    #[error("required_reading file(s) missing for {command}:")]
    RequiredMissing {
        command: PathBuf,
        missing: Vec<String>,
    },
    #[error("{message}")]
    Usage { code: &'static str, message: String },
    /// An argument maestro's parser reads as an option it does not know (`complete -1`):
    /// maestro exits 1 there, not 2.
    #[error("unknown option '{0}'")]
    OptionUnknown(String),
    /// Something below the session failed (the store, a run, a trace write): not the
    /// caller's mistake, so not a usage error.
    #[error("{message}")]
    Failed { code: &'static str, message: String },
    #[error("step index {index} out of range (0..{})", .len.saturating_sub(1))]
    IndexOutOfRange { index: String, len: usize },
    #[error("index {index} != active_step_index {}", show_active(*.active))]
    NotActiveStep { index: usize, active: Option<i64> },
    #[error("step {index}.status is \"{status}\", expected \"running\"")]
    StepNotRunning { index: usize, status: String },
    #[error("step {index} is a decision node ({gate}); gates are settled with `decide`")]
    IsDecision { index: usize, gate: String },
    #[error("step {index} is not a decision node")]
    NotDecision { index: usize },
    #[error("step {index} is claimed by {holder}, not {caller}")]
    OwnerMismatch {
        index: usize,
        holder: String,
        caller: String,
    },
    #[error("step {index} is claimed by {holder}, which is {liveness}")]
    ClaimHeld {
        index: usize,
        holder: String,
        liveness: &'static str,
    },
    #[error("no step is claimed (active_step_index is null)")]
    NoClaim,
    #[error("step {index} is {status}; cannot {action}")]
    StepState {
        index: usize,
        status: String,
        action: &'static str,
    },
    #[error("step {index} ({gate}) cannot be decided before step {blocking} ({blocking_status})")]
    GateOrder {
        index: usize,
        gate: String,
        blocking: usize,
        blocking_status: String,
    },
    #[error("verdict {verdict} does not apply to gate {gate}")]
    VerdictNotApplicable { gate: String, verdict: String },
    #[error("command file(s) not found for: {}", .0.join(", "))]
    SkillsMissing(Vec<String>),
    #[error("an active session already exists: {0}")]
    SessionActive(String),
    #[error("expected revision {expected}, found {found}")]
    RevisionMismatch { expected: u64, found: u64 },
    #[error("session {session} is locked by another process (waited {waited_ms} ms)")]
    Busy { session: String, waited_ms: u64 },
    #[error("{action} {}: {source}", .path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] baton_store::StoreError),
}

fn first_issue(issues: &[SchemaIssue]) -> String {
    match issues.first() {
        Some(i) => i.located(),
        None => "unknown problem".into(),
    }
}

fn show_active(active: Option<i64>) -> String {
    active.map_or_else(|| "(none)".into(), |a| a.to_string())
}

impl RalphError {
    pub fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| RalphError::Io {
            action,
            path,
            source,
        }
    }

    pub fn usage(code: &'static str, message: impl Into<String>) -> Self {
        RalphError::Usage {
            code,
            message: message.into(),
        }
    }

    pub fn failed(code: &'static str, message: impl Into<String>) -> Self {
        RalphError::Failed {
            code,
            message: message.into(),
        }
    }

    /// The stable code scripts match on. maestro's own codes (E006–E010) are kept.
    pub fn code(&self) -> &'static str {
        use RalphError::*;
        match self {
            NoSession | NoActiveSession | SessionNotFound(_) => "SESSION_NOT_FOUND",
            SessionIdInvalid(_) => "SESSION_ID_INVALID",
            Corrupt { .. } => "E010",
            NotRunning { .. } => "SESSION_NOT_RUNNING",
            NotActive { .. } => "SESSION_NOT_ACTIVE",
            Findings(f) | FindingsPaused(f) => f
                .iter()
                .find(|f| f.level == Level::E)
                .map_or("CHECK_FAILED", |f| f.code),
            LeaseConflict(_) => "LEASE_CONFLICT",
            // maestro's own word for it: `[ralph complete] BLOCK: conflicting completion …`.
            CompletionConflict { .. } => "BLOCK",
            ExpectedSkill { .. } => "EXPECTED_SKILL_MISMATCH",
            ExpectedIndex { .. } => "E008",
            StepActive { .. } => "STEP_ACTIVE",
            NothingPending => "NOTHING_PENDING",
            DecisionNext { .. } => "DECISION_NEXT",
            NoCommandPath { .. } | SkillsMissing(_) => "E006",
            RequiredMissing { .. } => "E007",
            Usage { code, .. } | Failed { code, .. } => code,
            OptionUnknown(_) => "OPTION_UNKNOWN",
            IndexOutOfRange { .. } => "INDEX_OUT_OF_RANGE",
            NotActiveStep { .. } => "E008",
            StepNotRunning { .. } => "E009",
            IsDecision { .. } => "STEP_IS_DECISION",
            NotDecision { .. } => "STEP_NOT_DECISION",
            OwnerMismatch { .. } => "CLAIM_OWNER_MISMATCH",
            ClaimHeld { .. } => "CLAIM_HELD",
            NoClaim => "NO_CLAIM",
            StepState { .. } => "STEP_STATE",
            GateOrder { .. } => "GATE_ORDER",
            VerdictNotApplicable { .. } => "VERDICT_NOT_APPLICABLE",
            SessionActive(_) => "SESSION_ACTIVE",
            RevisionMismatch { .. } => "REVISION_MISMATCH",
            Busy { .. } => "SESSION_BUSY",
            Io { .. } | Store(_) => "IO_FAILED",
        }
    }

    /// maestro's exit codes: 2 for bad arguments and "nothing to load", 3 for "a step is
    /// active", 1 for everything else; 4 when another writer got there first.
    pub fn exit_code(&self) -> u8 {
        use RalphError::*;
        match self {
            Usage { .. } | SessionIdInvalid(_) | NothingPending | DecisionNext { .. } => {
                exit::USAGE
            }
            VerdictNotApplicable { .. } => exit::USAGE,
            StepActive { .. } | ClaimHeld { .. } => exit::ACTIVE,
            RevisionMismatch { .. } | Busy { .. } => exit::CONFLICT,
            _ => exit::ERROR,
        }
    }

    /// Lines printed under the message: the findings, the missing files, the schema problems.
    pub fn details(&self) -> Vec<String> {
        match self {
            RalphError::Findings(findings) | RalphError::FindingsPaused(findings) => findings
                .iter()
                .filter(|f| f.level == Level::E)
                .map(|f| format!("  {}", f.line()))
                .collect(),
            RalphError::RequiredMissing { missing, .. } => {
                missing.iter().map(|p| format!("  - {p}")).collect()
            }
            RalphError::Corrupt { issues, path, .. } => {
                let mut lines = vec![format!("  file: {}", path.display())];
                lines.extend(
                    issues
                        .iter()
                        .take(20)
                        .map(|i| format!("  E010 {}", i.located())),
                );
                if issues.len() > 20 {
                    lines.push(format!("  … and {} more", issues.len() - 20));
                }
                lines
            }
            _ => Vec::new(),
        }
    }

    /// What to do about it (the `→` lines).
    pub fn hints(&self, cli: &str) -> Vec<String> {
        use RalphError::*;
        match self {
            NoSession | NoActiveSession | SessionNotFound(_) => {
                vec![format!(
                    "create one: {cli} new \"<intent>\" --chain <stage,…>"
                )]
            }
            SessionIdInvalid(_) => {
                vec!["pass the folder name only, e.g. --session ralph-20260524-101500".into()]
            }
            Corrupt { session, .. } => vec![
                format!(
                    "nothing was written; `{cli} check --session {session}` lists every problem"
                ),
                "repair or move that file, or pass --session <id> to work on another session"
                    .into(),
            ],
            NotRunning { status } if status == "paused" => {
                vec![format!("run: {cli} resume")]
            }
            Findings(_) => vec![format!(
                "run `{cli} check` for details; `{cli} resume` clears a stale active step"
            )],
            FindingsPaused(_) => vec![format!(
                "session paused; fix status.json (`{cli} check` lists the problems), then `{cli} resume`"
            )],
            LeaseConflict(_) => vec![format!(
                "pass the session's --execution-owner/--lease-id, or free the lease with `{cli} release --force`"
            )],
            CompletionConflict { index } => vec![format!(
                "step {index} was already completed with another result; `{cli} session` shows it"
            )],
            StepActive {
                index,
                status,
                owner,
                since,
            } => {
                let mut lines = Vec::new();
                if let Some(owner) = owner {
                    let since = since.as_deref().unwrap_or("?");
                    lines.push(format!("claimed by {owner} since {since}"));
                }
                if status == "pending" {
                    // The deadlock maestro leaves: nothing runs the step (check: W011).
                    lines.push(format!(
                        "the pointer is on a pending step: run {cli} resume to clear it"
                    ));
                    return lines;
                }
                lines.push(format!("run: {cli} complete {index} --status DONE|..."));
                lines.push(format!("or:  {cli} retry {index}"));
                lines.push(format!(
                    "or:  {cli} release (frees the claim of a process that died)"
                ));
                lines
            }
            DecisionNext { index, .. } => vec![
                "decision nodes are not loadable via next — the caller evaluates them".into(),
                format!(
                    "then settles them with: {cli} decide {index} --verdict proceed|fix|escalate --confidence N"
                ),
                "do NOT skip to later execution steps".into(),
            ],
            RequiredMissing { .. } | NoCommandPath { .. } | SkillsMissing(_) => {
                vec![format!(
                    "install the command file(s); `{cli} skills` lists what is found"
                )]
            }
            NotActiveStep { .. } | StepNotRunning { .. } => {
                vec![format!(
                    "`{cli} session` shows the active step; `{cli} resume` clears a stale one"
                )]
            }
            IsDecision { index, .. } => vec![format!(
                "run: {cli} decide {index} --verdict proceed|fix|escalate --confidence N"
            )],
            ClaimHeld { .. } => {
                vec!["wait for the holder, or pass --force if you know it is gone".into()]
            }
            RevisionMismatch { .. } => {
                vec![format!(
                    "someone else changed the session; re-read it (`{cli} session`) and retry"
                )]
            }
            Busy { .. } => vec!["another ralph command holds the session lock; retry".into()],
            SessionActive(id) => vec![format!(
                "continue it, or `{cli} abandon --session {id}` first (or pass --force)"
            )],
            NotActive { .. } => vec![format!("`{cli} status` shows the session")],
            _ => Vec::new(),
        }
    }
}

pub type Result<T, E = RalphError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_below_the_session_keeps_its_code_and_is_not_a_usage_error() {
        let busy = RalphError::failed("RUN_BUSY", "another process drives the run");
        assert_eq!(busy.code(), "RUN_BUSY");
        assert_eq!(busy.exit_code(), exit::ERROR);
        assert_eq!(RalphError::usage("X", "y").exit_code(), exit::USAGE);
    }
}
