//! `ledger --session <id> --action query|add --authority A --dimension D [--subject P]…`:
//! maestro v0.5.50's verification ledger, kept in status.json (`verification_ledger`), so a
//! check already made on unchanged files and an unchanged boundary contract can be reused.
//!
//! An entry records who checked (`authority`), what (`dimension`), the subjects with the
//! SHA-256 of each file's content (`missing` when there is no such file, `error` when it
//! cannot be read), the SHA-256 of the boundary contract (`scope_hash`), the verdict, the
//! confidence, concerns and a risk ceiling. `query` is a hit only when an entry for the same
//! authority, dimension and subjects (in any order) still holds: risk ceiling at least the one
//! asked, confidence not low, verdict pass/success/DONE, no concerns, the same scope hash and
//! the same file hashes. Outputs and exit codes are maestro's (a miss prints why on stdout and
//! exits 1). Unlike maestro, a subject that is not a regular file or is over 64 MiB hashes as
//! `error` instead of being read whatever it is, and `add` holds the session lock.

use crate::Context;
use crate::error::{RalphError, Result};
use crate::session::Session;
use crate::store::{self, Change};
use crate::time;
use crate::verbs::Output;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;

/// A subject file larger than this is not hashed (`error`).
const MAX_SUBJECT_BYTES: u64 = 64 * 1024 * 1024;

#[derive(Debug, Clone, Default)]
pub struct LedgerArgs {
    pub action: Option<String>,
    pub authority: Option<String>,
    pub dimension: Option<String>,
    pub subjects: Vec<String>,
    pub verdict: Option<String>,
    /// high | medium | low (default medium).
    pub confidence: Option<String>,
    pub concerns: Option<String>,
    /// low | medium | high (default low).
    pub risk_ceiling: Option<String>,
}

fn usage(message: &str) -> RalphError {
    RalphError::usage("LEDGER_USAGE", message.to_string())
}

pub fn run(ctx: &Context, session: Option<&str>, args: &LedgerArgs) -> Result<Output> {
    let Some(session) = session else {
        return Err(usage("--session <id> is required"));
    };
    let action = match args.action.as_deref() {
        Some("query") => "query",
        Some("add") => "add",
        _ => return Err(usage("--action must be \"query\" or \"add\"")),
    };
    let (Some(authority), Some(dimension)) = (&args.authority, &args.dimension) else {
        return Err(usage("--authority and --dimension are required"));
    };
    if action == "query" {
        let s = crate::discovery::find(ctx, Some(session), crate::discovery::Pick::Any)?
            .into_session()?;
        return Ok(query(ctx, &s, authority, dimension, args));
    }
    let Some(verdict) = &args.verdict else {
        return Err(RalphError::failed(
            "LEDGER_USAGE",
            "--verdict is required for add action",
        ));
    };
    let (entry, _) = store::transact(ctx, Some(session), None, |s| {
        let entry = json!({
            "authority": authority,
            "dimension": dimension,
            "subject_ids": args.subjects,
            "evidence_hashes": hashes(ctx, &args.subjects),
            "scope_hash": scope_hash(s),
            "verdict": verdict,
            "confidence": args.confidence.as_deref().unwrap_or("medium"),
            "concerns": args.concerns,
            "risk_ceiling": args.risk_ceiling.as_deref().unwrap_or("low"),
            "created_at": time::now_iso(),
        });
        let mut ledger: Vec<Value> = match s.doc.get("verification_ledger") {
            Some(Value::Array(a)) => a.clone(),
            _ => Vec::new(),
        };
        ledger.retain(|e| !same_key(e, authority, dimension, &args.subjects));
        ledger.push(entry.clone());
        s.set("verification_ledger", Value::Array(ledger));
        Ok(Change::write(entry))
    })?;
    Ok(
        Output::new(json!({"ok": true, "action": "add", "entry": entry})).out(format!(
            "[ralph ledger] entry added successfully for subjects: {}\n",
            args.subjects.join(", ")
        )),
    )
}

/// Same authority, dimension and subjects (compared sorted).
fn same_key(e: &Value, authority: &str, dimension: &str, subjects: &[String]) -> bool {
    let recorded: Option<Vec<String>> = e.get("subject_ids").and_then(Value::as_array).map(|a| {
        a.iter()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .collect()
    });
    let Some(mut recorded) = recorded else {
        return false;
    };
    let mut asked = subjects.to_vec();
    recorded.sort();
    asked.sort();
    e.get("authority").and_then(Value::as_str) == Some(authority)
        && e.get("dimension").and_then(Value::as_str) == Some(dimension)
        && recorded == asked
}

fn risk_level(r: &str) -> Option<u8> {
    match r {
        "low" => Some(1),
        "medium" => Some(2),
        "high" => Some(3),
        _ => None,
    }
}

fn query(
    ctx: &Context,
    s: &Session,
    authority: &str,
    dimension: &str,
    args: &LedgerArgs,
) -> Output {
    let miss = |text: String| {
        Output::new(json!({"ok": false, "action": "query", "hit": false, "reason": text}))
            .out(format!("[ralph ledger] {text}\n"))
            .exit(1)
    };
    let entry = s
        .doc
        .get("verification_ledger")
        .and_then(Value::as_array)
        .and_then(|l| {
            l.iter()
                .find(|e| same_key(e, authority, dimension, &args.subjects))
        });
    let Some(entry) = entry.and_then(Value::as_object) else {
        return miss("no matching ledger entry found".into());
    };
    let text = |k: &str| entry.get(k).and_then(Value::as_str).unwrap_or("");
    // maestro: an unknown ceiling asked for compares as nothing (never rejected).
    let asked = args.risk_ceiling.as_deref().unwrap_or("low");
    let recorded = risk_level(text("risk_ceiling")).unwrap_or(1);
    if risk_level(asked).is_some_and(|a| a > recorded) {
        return miss(format!(
            "rejected: risk ceiling {} is below requested risk {asked}",
            text("risk_ceiling")
        ));
    }
    if text("confidence") == "low" {
        return miss("rejected: recorded confidence is low".into());
    }
    let verdict = text("verdict");
    if !matches!(verdict, "pass" | "success" | "DONE") {
        return miss(format!(
            "rejected: recorded verdict is \"{verdict}\" (not pass/success)"
        ));
    }
    if let Some(concerns) = entry
        .get("concerns")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
    {
        return miss(format!("rejected: entry contains concerns: \"{concerns}\""));
    }
    if scope_hash(s) != text("scope_hash") {
        return miss("rejected: scope_hash changed (boundary contract modified)".into());
    }
    let recorded_hashes = entry.get("evidence_hashes").and_then(Value::as_object);
    for subject in &args.subjects {
        let recorded = recorded_hashes
            .and_then(|h| h.get(subject))
            .and_then(Value::as_str)
            .unwrap_or("undefined");
        let now = file_hash(ctx, subject);
        if now != recorded {
            return miss(format!(
                "rejected: hash changed for subject \"{subject}\" (got \"{now}\", recorded \"{recorded}\")"
            ));
        }
    }
    let confidence = text("confidence");
    Output::new(json!({
        "ok": true, "action": "query", "hit": true,
        "verdict": verdict, "confidence": confidence,
    }))
    .out(format!(
        "[ralph ledger] HIT: verdict=\"{verdict}\" confidence=\"{confidence}\"\n"
    ))
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn hashes(ctx: &Context, subjects: &[String]) -> Map<String, Value> {
    subjects
        .iter()
        .map(|s| (s.clone(), json!(file_hash(ctx, s))))
        .collect()
}

/// maestro's `computeFileHash`: SHA-256 of the content read as UTF-8 (invalid bytes replaced
/// as Node replaces them), `missing` or `error`. Relative paths are the project's.
fn file_hash(ctx: &Context, subject: &str) -> String {
    let path = ctx.project.join(Path::new(subject));
    if !path.exists() {
        return "missing".into();
    }
    let Ok(file) = baton_autopilot::untrusted::open_nonblocking(&path) else {
        return "error".into();
    };
    let ok = file
        .metadata()
        .is_ok_and(|m| m.is_file() && m.len() <= MAX_SUBJECT_BYTES);
    if !ok {
        return "error".into();
    }
    let mut bytes = Vec::new();
    if file
        .take(MAX_SUBJECT_BYTES + 1)
        .read_to_end(&mut bytes)
        .is_err()
    {
        return "error".into();
    }
    sha256_hex(String::from_utf8_lossy(&bytes).as_bytes())
}

/// maestro's `computeScopeHash`: SHA-256 of `JSON.stringify` of the boundary contract's four
/// fields (absent ones as `[]` / `""`).
fn scope_hash(s: &Session) -> String {
    let bc = s.doc.get("boundary_contract").and_then(Value::as_object);
    let get = |k: &str, default: Value| {
        bc.and_then(|b| b.get(k))
            .filter(|v| !v.is_null())
            .cloned()
            .unwrap_or(default)
    };
    let v = json!({
        "in_scope": get("in_scope", json!([])),
        "out_of_scope": get("out_of_scope", json!([])),
        "constraints": get("constraints", json!([])),
        "definition_of_done": get("definition_of_done", json!("")),
    });
    sha256_hex(v.to_string().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scope_hash_is_the_sha256_of_json_stringify() {
        let mut doc: Map<String, Value> = serde_json::from_value(json!({
            "session_id": "s", "status": "running", "steps": [],
            "boundary_contract": {"in_scope": ["a \"b\""], "definition_of_done": "ü"}
        }))
        .unwrap();
        let s = Session {
            id: "s".into(),
            dir: "/nonexistent".into(),
            doc: doc.clone(),
        };
        // JSON.stringify({in_scope:['a "b"'],out_of_scope:[],constraints:[],definition_of_done:'ü'})
        let text = r#"{"in_scope":["a \"b\""],"out_of_scope":[],"constraints":[],"definition_of_done":"ü"}"#;
        assert_eq!(scope_hash(&s), sha256_hex(text.as_bytes()));
        doc.remove("boundary_contract");
        let empty = Session { doc, ..s };
        assert_eq!(
            scope_hash(&empty),
            sha256_hex(
                br#"{"in_scope":[],"out_of_scope":[],"constraints":[],"definition_of_done":""}"#
            )
        );
    }
}
