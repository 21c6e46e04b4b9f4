//! Failures that may pass are tried again; the others fail the unit at once.
//!
//! May pass: the model endpoint unreachable, timing out, rate limiting or answering HTTP 5xx
//! (after the model client's own retries), its stream cut mid-answer; a git fetch, clone or
//! push that could not reach the remote; the database connection lost mid-unit. Such a unit
//! goes back to the queue ([`baton_queue::Queue::retry_later`]) and becomes claimable after
//! `base · 2^(n-1)` (at most [`MAX_DELAY`]), n counting its failures in a row; the next claim
//! goes on from its last checkpoint, as `baton resume` does. A run that moved on since (a
//! model turn checkpointed, an answer) starts counting again. Its n-th failure in a row, n
//! being the unit's `max_attempts` or [`DEFAULT_LIMIT`], fails it with that failure's reason.
//!
//! Everything else fails at once: a payload or package that cannot be used, the run's own
//! failure (a workflow error, a budget crossed), a model configuration error, a missing key.

use crate::WorkerError;
use crate::ctx::Ctx;
use crate::event::WorkerEvent;
use baton_queue::{Lease, Queue, QueueError};
use serde_json::json;
use std::time::Duration;

/// Failures in a row before a unit without `max_attempts` fails for good.
pub const DEFAULT_LIMIT: i64 = 5;
/// The longest wait before a unit is tried again.
pub const MAX_DELAY: Duration = Duration::from_secs(300);
/// The first wait, unless the worker is told otherwise (`--retry-base-s`).
pub const DEFAULT_BASE: Duration = Duration::from_secs(5);

/// How a unit stopped short of its outcome.
#[derive(Debug, Clone)]
pub(crate) struct Failure {
    pub code: String,
    pub message: String,
    pub run_id: Option<String>,
    /// It may pass: try again later.
    pub transient: bool,
}

impl Failure {
    /// A failure the engine reported, or a code and message from anywhere else.
    pub fn new(code: &str, message: &str, run_id: Option<&str>) -> Failure {
        Failure {
            code: code.to_string(),
            message: message.to_string(),
            run_id: run_id.map(str::to_owned),
            transient: is_transient(code, message),
        }
    }

    pub fn of(e: &WorkerError) -> Failure {
        let mut f = Failure::new(e.code(), &e.to_string(), None);
        if let WorkerError::Queue(q) = e {
            f.transient = is_transient_queue(q);
        }
        f
    }

    /// A database error: the connection that saw it may be gone.
    fn is_database(&self) -> bool {
        self.code.starts_with("QUEUE_DB_")
    }
}

/// Whether a failure with this code and message may pass if tried again later.
pub fn is_transient(code: &str, message: &str) -> bool {
    match code {
        "LLM_CONNECT_ERROR" | "LLM_TIMEOUT" | "LLM_RATE_LIMITED" => true,
        // HTTP 408, 409, 429 and 5xx, as the model client itself retries them.
        "LLM_HTTP_ERROR" => http_status(message).is_some_and(transient_status),
        // The stream broke after the model had started answering (not an answer that
        // cannot be understood).
        "LLM_BAD_RESPONSE" => message.contains("stream broke"),
        "WORKER_GIT_FAILED" => git_transient(message),
        // Through the run's checkpoint hook only the code and message travel: a database
        // error mid-unit is taken as the connection's, and bounded by the limit.
        "QUEUE_DB_FAILED" | "QUEUE_DB_UNREACHABLE" => true,
        _ => false,
    }
}

/// Whether a queue error may pass: the server unreachable or the connection lost, a
/// shutdown, too many connections, a serialization failure or deadlock.
pub fn is_transient_queue(e: &QueueError) -> bool {
    match e {
        QueueError::Unreachable { .. } => true,
        QueueError::Db { sqlstate, .. } => match sqlstate.as_deref() {
            None => true,
            Some(s) => {
                s.starts_with("08")
                    || s.starts_with("57P")
                    || s.starts_with("53")
                    || s == "40001"
                    || s == "40P01"
            }
        },
        _ => false,
    }
}

/// The status in "… HTTP 503: …".
fn http_status(message: &str) -> Option<u16> {
    let at = message.find("HTTP ")? + 5;
    message.get(at..at + 3)?.parse().ok()
}

fn transient_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429 | 500..=599)
}

/// A git command that talks to the remote and could not reach it (as opposed to a remote
/// that does not exist, refuses the credentials or rejects the push).
fn git_transient(message: &str) -> bool {
    let talks_to_remote = ["git fetch:", "git clone:", "git push:", "git ls-remote:"]
        .iter()
        .any(|p| message.starts_with(p));
    if !talks_to_remote {
        return false;
    }
    let m = message.to_ascii_lowercase();
    if let Some(at) = m.find("returned error: ") {
        return m
            .get(at + 16..at + 19)
            .and_then(|s| s.parse().ok())
            .is_some_and(transient_status);
    }
    [
        "could not resolve host",
        "temporary failure in name resolution",
        "connection refused",
        "connection timed out",
        "operation timed out",
        "connection reset",
        "network is unreachable",
        "no route to host",
        "failed to connect",
        "the remote end hung up unexpectedly",
        "early eof",
        "rpc failed",
        "could not read from remote repository",
    ]
    .iter()
    .any(|p| m.contains(p))
}

/// The wait before the n-th try again (n ≥ 1): `base · 2^(n-1)`, at most [`MAX_DELAY`].
pub fn backoff(base: Duration, n: i64) -> Duration {
    let exp = u32::try_from(n.clamp(1, 32) - 1).unwrap_or(31);
    base.saturating_mul(2u32.saturating_pow(exp)).min(MAX_DELAY)
}

/// Ends a unit that stopped short of its outcome: failed with the reason, or, when the
/// failure may pass and the unit has tries left, queued again after a backoff. A database
/// failure is written on a fresh connection (the one that saw it may be gone).
pub(crate) async fn settle(
    ctx: &Ctx,
    queue: &mut Queue,
    lease: &Lease,
    failure: Failure,
) -> Result<(), WorkerError> {
    let mut fresh = None;
    if failure.is_database() {
        fresh = Some(Queue::open(&ctx.options.config).await?);
    }
    let queue = fresh.as_mut().unwrap_or(queue);
    let mut outcome = json!({"code": failure.code, "message": failure.message});
    if let Some(r) = &failure.run_id {
        outcome["runId"] = json!(r);
    }
    if failure.transient {
        let n = queue.retries_in_a_row(lease.id).await? + 1;
        let limit = queue
            .unit(lease.id)
            .await?
            .max_attempts
            .map_or(DEFAULT_LIMIT, i64::from);
        if n < limit {
            let delay = backoff(ctx.options.retry_base, n);
            let mut reason = outcome.clone();
            reason["attempt"] = json!(n);
            reason["of"] = json!(limit);
            reason["delayS"] = json!(delay.as_secs_f64());
            reason["worker"] = json!(ctx.options.worker);
            queue.retry_later(lease, delay, &reason).await?;
            ctx.emit(WorkerEvent::Retrying {
                unit: lease.id,
                code: failure.code,
                message: failure.message,
                attempt: n,
                of: limit,
                delay,
            });
            return Ok(());
        }
        outcome["attempts"] = json!(n);
    }
    queue.fail(lease, &outcome).await?;
    ctx.emit(WorkerEvent::Failed {
        unit: lease.id,
        code: failure.code,
        message: failure.message,
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_llm::LlmError;

    fn llm(e: &LlmError) -> bool {
        is_transient(e.code(), &e.to_string())
    }

    #[test]
    fn model_failures_that_may_pass_are_told_from_the_others() {
        let http = |status| LlmError::Http {
            status,
            message: "busy".into(),
        };
        assert!(llm(&LlmError::Connect("http://127.0.0.1:9/v1".into())));
        assert!(llm(&LlmError::Timeout(Duration::from_secs(1))));
        assert!(llm(&LlmError::CallTimeout(Duration::from_secs(1))));
        assert!(llm(&LlmError::RateLimited {
            message: "slow down".into(),
            retry_after: None
        }));
        assert!(llm(&http(503)));
        assert!(llm(&http(500)));
        assert!(llm(&http(408)));
        assert!(llm(&LlmError::StreamInterrupted("reset".into())));
        assert!(!llm(&http(400)));
        assert!(!llm(&http(401)));
        assert!(!llm(&http(404)));
        assert!(!llm(&LlmError::BadResponse("not JSON".into())));
        assert!(!llm(&LlmError::Config("bad url".into())));
        assert!(!llm(&LlmError::KeyMissing {
            variable: "K".into(),
            endpoint: "e".into(),
            setting: "s".into()
        }));
        // The run's own failures, and the worker's that cannot pass.
        for code in [
            "BUDGET_EXCEEDED",
            "QUEUE_PAYLOAD_INVALID",
            "WORKER_NO_PACKAGE",
            "QUEUE_CHECKPOINT_INVALID",
            "RUN_NOT_WAITING",
            "WORKFLOW_ERROR",
        ] {
            assert!(!is_transient(code, "HTTP 503"), "{code}");
        }
    }

    #[test]
    fn git_is_retried_only_when_the_remote_could_not_be_reached() {
        let t = |m: &str| is_transient("WORKER_GIT_FAILED", m);
        assert!(t(
            "git fetch: fatal: unable to access 'https://h/r.git/': Could not resolve host: h"
        ));
        assert!(t(
            "git push: ssh: connect to host h port 22: Connection refused\nfatal: Could not read from remote repository."
        ));
        assert!(t(
            "git clone: fatal: unable to access 'https://h/r/': The requested URL returned error: 503"
        ));
        assert!(t("git fetch: fatal: the remote end hung up unexpectedly"));
        assert!(!t(
            "git clone: fatal: unable to access 'https://h/r/': The requested URL returned error: 403"
        ));
        assert!(!t(
            "git clone: fatal: repository '/tmp/gone.git' does not exist"
        ));
        assert!(!t(
            "git push: ! [remote rejected] HEAD -> x (pre-receive hook declined)"
        ));
        // A commit missing from the mirror is no network failure.
        assert!(!t("git worktree: fatal: invalid reference: abc"));
        assert!(!t("git commit: nothing to commit"));
    }

    #[test]
    fn database_failures_that_may_pass() {
        let db = |s: Option<&str>| QueueError::Db {
            message: "m".into(),
            sqlstate: s.map(str::to_owned),
        };
        assert!(is_transient_queue(&db(None)));
        assert!(is_transient_queue(&db(Some("57P01"))));
        assert!(is_transient_queue(&db(Some("08006"))));
        assert!(is_transient_queue(&db(Some("40001"))));
        assert!(!is_transient_queue(&db(Some("22P05"))));
        assert!(!is_transient_queue(&db(Some("42501"))));
        assert!(!is_transient_queue(&QueueError::UnitNotFound { id: 1 }));
        assert!(is_transient(
            "QUEUE_DB_FAILED",
            "PostgreSQL: connection closed"
        ));
    }

    #[test]
    fn the_backoff_doubles_from_its_base_up_to_five_minutes() {
        let base = Duration::from_secs(5);
        let waits: Vec<u64> = (1..=9).map(|n| backoff(base, n).as_secs()).collect();
        assert_eq!(waits, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(backoff(base, 0), base);
        assert_eq!(backoff(base, i64::MAX), MAX_DELAY);
        assert_eq!(
            backoff(Duration::from_millis(200), 3),
            Duration::from_millis(800)
        );
    }
}
