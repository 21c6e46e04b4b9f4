//! A gate's verdict waiting for a person (seed 003's `ask_user` after A_DELEGATE_EVALUATE in
//! interactive mode, i.e. a session started without `-y`): the model's answer is kept in
//! `gate-review/<index>.<retry>.json` in the session folder before the session pauses, so a
//! kill between the two neither loses the answer nor asks the model again.
//!
//! [`propose`] is what the answer becomes after ralph's guards (what the person confirms or
//! overrides); [`accept`] settles the gate with it, exactly as an auto-mode session would have.

use super::apply::form_of;
use super::milestone::Planner;
use super::verdict::{self, Form};
use baton_ralph::Context;
use baton_ralph::Target;
use baton_ralph::error::{RalphError, Result};
use baton_ralph::session::Session;
use baton_ralph::verbs::{Output, decide};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The folder of review files inside the session folder.
pub const DIR: &str = "gate-review";

/// Most bytes of the model's answer kept (a verdict block is a few hundred bytes).
const MAX_ANSWER: usize = 16 * 1024;

/// Most bytes of a review file read back (the answer, JSON-escaped, and a few fields).
const MAX_FILE: u64 = 8 * MAX_ANSWER as u64;

/// The model's word on one evaluation of a gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Review {
    pub index: usize,
    pub gate: String,
    pub retry: u64,
    /// The model's raw answer (bounded); `None` when the call failed.
    #[serde(default)]
    pub answer: Option<String>,
    /// Why the call failed (E005), when it did.
    #[serde(default)]
    pub error: Option<String>,
}

impl Review {
    /// A review of `answer`, cut at [`MAX_ANSWER`] bytes on a character boundary.
    pub fn answered(index: usize, gate: &str, retry: u64, answer: &str) -> Review {
        let mut cut = answer.len().min(MAX_ANSWER);
        while !answer.is_char_boundary(cut) {
            cut -= 1;
        }
        Review {
            index,
            gate: gate.to_string(),
            retry,
            answer: Some(answer[..cut].to_string()),
            error: None,
        }
    }
}

/// What the model proposes once the guards ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    /// proceed | fix | escalate, after the confidence and retry guards.
    pub verdict: &'static str,
    pub reason: String,
    pub confidence: u8,
}

pub fn path(session_dir: &Path, index: usize, retry: u64) -> PathBuf {
    session_dir.join(DIR).join(format!("{index}.{retry}.json"))
}

/// Writes `review` durably (temp file, fsync, rename, fsync of the folder).
pub fn write(session_dir: &Path, review: &Review) -> Result<()> {
    let dir = session_dir.join(DIR);
    if !dir.is_dir() {
        std::fs::create_dir_all(&dir).map_err(RalphError::io("create", &dir))?;
        baton_store::durable::sync_dir(session_dir)?;
    }
    let bytes = serde_json::to_vec_pretty(review)
        .map_err(|e| RalphError::failed("GATE_REVIEW_WRITE", e.to_string()))?;
    baton_store::durable::atomic_write(&path(session_dir, review.index, review.retry), &bytes)?;
    Ok(())
}

/// The review kept for pending gate `index` at its current retry, if any. A file for another
/// gate (left by an earlier chain) is ignored; a damaged one is an error naming the file.
pub fn read(s: &Session, index: usize) -> Result<Option<Review>> {
    let Some(step) = s.step(index) else {
        return Ok(None);
    };
    let Some(gate) = step.decision() else {
        return Ok(None);
    };
    let retry = step.retry_count();
    let file = path(&s.dir, index, retry);
    let meta = match std::fs::metadata(&file) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(RalphError::io("read", &file)(e)),
    };
    let invalid = |why: String| {
        RalphError::usage(
            "GATE_REVIEW_INVALID",
            format!(
                "{}: {why}; delete the file to ask the model again",
                file.display()
            ),
        )
    };
    if meta.len() > MAX_FILE {
        return Err(invalid(format!(
            "{} bytes, more than {MAX_FILE}",
            meta.len()
        )));
    }
    let bytes = baton_autopilot::untrusted::read_path(&file, MAX_FILE)
        .map_err(|e| invalid(e.to_string()))?
        .ok_or_else(|| invalid("it disappeared while read".into()))?;
    let review: Review = serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
    if review.answer.is_none() && review.error.is_none() {
        return Err(invalid("neither an answer nor an error".into()));
    }
    let same = review.index == index && review.retry == retry && review.gate == gate;
    Ok(same.then_some(review))
}

/// Removes the review of a settled gate (best effort: a leftover file belongs to a step that
/// is no longer pending, so it is never read again).
pub fn remove(session_dir: &Path, index: usize, retry: u64) {
    let _ = std::fs::remove_file(path(session_dir, index, retry));
}

/// `decide`'s arguments for a gate's call that failed: `fix` with nothing to lean on (E005).
pub fn failed_call_args(index: usize, reason: String) -> decide::DecideArgs {
    decide::DecideArgs {
        index: index.to_string(),
        verdict: "fix".into(),
        confidence: "0".into(),
        reason: Some(reason),
        ..decide::DecideArgs::default()
    }
}

fn form(review: &Review) -> Result<Form> {
    form_of(&review.gate).ok_or_else(|| {
        RalphError::usage(
            "GATE_NOT_MODEL_EVALUATED",
            format!(
                "gate {} is settled by code or by a person, not by a model verdict",
                review.gate
            ),
        )
    })
}

/// The arguments the model's answer gives `decide` (unparsable: `fix`, E004).
fn args(review: &Review) -> Result<decide::DecideArgs> {
    let form = form(review)?;
    Ok(match (&review.answer, &review.error) {
        (Some(answer), _) => verdict::decide_args(review.index, &verdict::parse(answer, form)),
        (None, error) => failed_call_args(review.index, error.clone().unwrap_or_default()),
    })
}

/// What settling the review would decide, after the guards, for the session as it is.
pub fn propose(s: &Session, review: &Review) -> Result<Proposal> {
    let a = args(review)?;
    let requested = decide::parse_verdict(&a.verdict)?;
    let confidence = decide::parse_confidence(&a.confidence)?;
    let (retry, max) = s
        .step(review.index)
        .map_or((review.retry, 0), |st| (st.retry_count(), st.max_retries()));
    let adjusted = decide::apply_guards(requested, confidence, retry, max, true);
    Ok(Proposal {
        verdict: adjusted.verdict,
        reason: a.reason.unwrap_or_default(),
        confidence,
    })
}

/// Settles the gate with the model's answer (guards, templates, `decisions.ndjson`), as an
/// auto-mode session does at once; the review file goes.
pub fn accept<'a>(
    ctx: &Context,
    session: impl Into<Target<'a>>,
    s: &Session,
    review: &Review,
) -> Result<Output> {
    let out = decide::run(ctx, session, &args(review)?, &Planner)?;
    remove(&s.dir, review.index, review.retry);
    Ok(out)
}
