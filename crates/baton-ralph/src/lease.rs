//! maestro v0.5.50's execution lease: three session fields, `execution_owner`, `lease_id` and
//! `owner_epoch`, set by `next --execution-owner O --lease-id L --owner-epoch N` and checked by
//! `next`, `complete` and `retry` with the same flags.
//!
//! The rules are maestro's, word for word: a session with an `execution_owner` refuses a
//! caller naming another owner (or none); one with a `lease_id` refuses another lease (or
//! none); a caller's epoch older than the recorded one is refused. What baton adds is that the
//! check and the write happen under the session lock, so two workers cannot both read "no
//! owner" and both claim (maestro v0.5.50 double-claims exactly there); and the owner of a
//! `next` that names one becomes the owner of baton's claim on the step.

use super::error::{RalphError, Result};
use super::session::Session;
use serde_json::{Value, json};

/// The lease flags of one call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lease {
    pub execution_owner: Option<String>,
    pub owner_epoch: Option<u64>,
    pub lease_id: Option<String>,
}

/// How a JavaScript template literal shows an optional string (`undefined` when absent).
fn js(v: Option<&str>) -> String {
    v.map_or_else(|| "undefined".to_string(), str::to_string)
}

impl Lease {
    /// maestro's three lease checks, in its order. `verb` only words the message the way
    /// maestro's `next` and `complete` word it.
    pub fn check(&self, s: &Session, verb: &str) -> Result<()> {
        let (owner_word, lease_word) = if verb == "next" {
            ("", "")
        } else {
            ("executionOwner ", "leaseId ")
        };
        if let Some(owner) = s.str("execution_owner").filter(|o| !o.is_empty())
            && Some(owner) != self.execution_owner.as_deref()
        {
            return Err(RalphError::LeaseConflict(format!(
                "session owned by \"{owner}\", got {owner_word}\"{}\"",
                js(self.execution_owner.as_deref())
            )));
        }
        if let Some(lease) = s.str("lease_id").filter(|l| !l.is_empty())
            && Some(lease) != self.lease_id.as_deref()
        {
            return Err(RalphError::LeaseConflict(format!(
                "session lease_id is \"{lease}\", got {lease_word}\"{}\"",
                js(self.lease_id.as_deref())
            )));
        }
        if let (Some(recorded), Some(given)) = (
            s.doc.get("owner_epoch").and_then(Value::as_u64),
            self.owner_epoch,
        ) && recorded > given
        {
            return Err(RalphError::LeaseConflict(format!(
                "session owner_epoch is {recorded}, got older epoch {given}"
            )));
        }
        Ok(())
    }

    /// What `next` records once it claimed a step (only the flags given, as maestro).
    pub fn record(&self, s: &mut Session) {
        if let Some(o) = &self.execution_owner {
            s.set("execution_owner", json!(o));
        }
        if let Some(l) = &self.lease_id {
            s.set("lease_id", json!(l));
        }
        if let Some(e) = self.owner_epoch {
            s.set("owner_epoch", json!(e));
        }
    }

    pub fn is_empty(&self) -> bool {
        self == &Lease::default()
    }
}

/// Whether the session holds a lease (an owner or a lease id).
pub fn held(s: &Session) -> bool {
    ["execution_owner", "lease_id"]
        .iter()
        .any(|k| s.str(k).is_some_and(|v| !v.is_empty()))
}

/// Frees the lease (`release --force`): owner and lease id cleared, the epoch kept, so a
/// holder that comes back with its old epoch stays fenced out once a newer one is recorded.
pub fn clear(s: &mut Session) {
    for k in ["execution_owner", "lease_id"] {
        if s.doc.contains_key(k) {
            s.set(k, Value::Null);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    fn session(fields: Value) -> Session {
        let mut doc: Map<String, Value> = serde_json::from_value(json!({
            "session_id": "s", "status": "running", "steps": []
        }))
        .unwrap();
        if let Value::Object(f) = fields {
            doc.extend(f);
        }
        Session {
            id: "s".into(),
            dir: std::path::PathBuf::from("/nonexistent"),
            doc,
        }
    }

    fn lease(owner: Option<&str>, epoch: Option<u64>, id: Option<&str>) -> Lease {
        Lease {
            execution_owner: owner.map(str::to_owned),
            owner_epoch: epoch,
            lease_id: id.map(str::to_owned),
        }
    }

    #[test]
    fn maestros_three_checks_with_its_messages() {
        let s = session(json!({"execution_owner": "a", "lease_id": "L1", "owner_epoch": 3}));
        lease(Some("a"), Some(3), Some("L1"))
            .check(&s, "next")
            .unwrap();
        lease(Some("a"), None, Some("L1"))
            .check(&s, "next")
            .unwrap();
        lease(Some("a"), Some(4), Some("L1"))
            .check(&s, "next")
            .unwrap();
        let e = lease(None, None, Some("L1")).check(&s, "next").unwrap_err();
        assert_eq!(
            e.to_string(),
            "lease conflict: session owned by \"a\", got \"undefined\""
        );
        let e = lease(Some("b"), None, None)
            .check(&s, "complete")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "lease conflict: session owned by \"a\", got executionOwner \"b\""
        );
        let e = lease(Some("a"), None, Some("L2"))
            .check(&s, "next")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "lease conflict: session lease_id is \"L1\", got \"L2\""
        );
        let e = lease(Some("a"), Some(2), Some("L1"))
            .check(&s, "retry")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "lease conflict: session owner_epoch is 3, got older epoch 2"
        );
        assert_eq!(e.code(), "LEASE_CONFLICT");
        // No lease recorded: anything goes.
        lease(Some("z"), Some(0), Some("x"))
            .check(&session(json!({})), "next")
            .unwrap();
    }
}
