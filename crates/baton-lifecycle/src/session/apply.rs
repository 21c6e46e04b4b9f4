//! What the end of a tick does to the session files, through ralph's own verbs (so the lock,
//! the revision, the guards, the release protocol and `decisions.ndjson` are part 1's):
//!
//! - an execution step ends with the model's `session.complete`, or, without one, with
//!   NEEDS_RETRY the first time and BLOCKED once the step was already retried;
//! - a gate is settled with the model's `---VERDICT---` answer read by [`super::verdict`]
//!   (unparsable: `fix`, E004), then ralph's `decide` applies the confidence and retry guards.

use super::completion::{self, Completion};
use super::milestone::Planner;
use super::verdict::{self, Form};
use baton_ralph::Context;
use baton_ralph::discovery::Pick;
use baton_ralph::error::{RalphError, Result};
use baton_ralph::verbs::{Output, complete, decide};
use baton_ralph::{Handle, Target};

/// The form of answer a gate asks the model for; `None` for gates settled without a model
/// (scope, milestone, escalation pauses).
pub fn form_of(gate: &str) -> Option<Form> {
    match gate {
        "post-verify" | "post-business-test" | "post-review" | "post-test" => Some(Form::Quality),
        "post-goal-audit" => Some(Form::GoalAudit),
        _ => None,
    }
}

/// Ends execution step `index` (claimed by `owner`) with the model's call, or with what a run
/// without a call becomes.
pub fn finish_step<'a>(
    ctx: &Context,
    session: impl Into<Target<'a>>,
    index: usize,
    owner: Option<&str>,
    called: Option<Completion>,
) -> Result<(Completion, Output)> {
    let session = session.into();
    let found: Handle;
    let (completion, session) = match called {
        Some(c) => (c, session),
        None => {
            // The step is ours (claimed), so nobody else flips `retried` meanwhile; the
            // complete verb re-checks the claim under the lock.
            let (h, s) = session.open(ctx, Pick::Active)?;
            let retried = s
                .step(index)
                .and_then(|st| st.get("retried"))
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false);
            found = h;
            (completion::without_call(retried), Target::Found(&found))
        }
    };
    let out = complete::run(ctx, session, &completion.to_complete_args(index, owner))?;
    Ok((completion, out))
}

/// Settles gate `index` with the model's answer.
pub fn settle_gate<'a>(
    ctx: &Context,
    session: impl Into<Target<'a>>,
    index: usize,
    answer: &str,
) -> Result<Output> {
    settle_gate_checked(ctx, session, index, answer, &[])
}

/// [`settle_gate`] for a gate whose result files `missing` no earlier step produced: a
/// `proceed` is settled as `fix` (`EVIDENCE_MISSING`), the files named as gaps.
pub fn settle_gate_checked<'a>(
    ctx: &Context,
    session: impl Into<Target<'a>>,
    index: usize,
    answer: &str,
    missing: &[&str],
) -> Result<Output> {
    let (h, s) = session.into().open(ctx, Pick::Active)?;
    let gate = s
        .step(index)
        .and_then(|st| st.decision())
        .ok_or_else(|| {
            RalphError::usage("NOT_A_GATE", format!("step {index} is not a decision step"))
        })?
        .to_string();
    let form = form_of(&gate).ok_or_else(|| {
        RalphError::usage(
            "GATE_NOT_MODEL_EVALUATED",
            format!("gate {gate} is settled by code or by a person, not by a model verdict"),
        )
    })?;
    let parsed = verdict::parse(answer, form);
    let mut args = verdict::decide_args(index, &parsed);
    if !missing.is_empty() && args.verdict == "proceed" {
        // The model cannot vouch for a result nobody produced.
        let files = missing.join(", ");
        args.verdict = "fix".into();
        args.reason = Some(format!(
            "EVIDENCE_MISSING: no earlier step produced {files}; a gate without its evidence is fix, not proceed (the model said proceed: {})",
            args.reason.as_deref().unwrap_or("no reason")
        ));
        args.gaps.push(format!("{files} missing"));
    }
    decide::run(ctx, &h, &args, &Planner)
}

/// Reaching the `post-debug-escalate` gate pauses the session for a person (seed 003: always,
/// "human intervention"); the gate stays pending and the pause is recorded as a decision.
pub fn pause_at_escalation<'a>(
    ctx: &Context,
    session: impl Into<Target<'a>>,
    index: usize,
) -> Result<Output> {
    let (h, s) = session.into().open(ctx, Pick::Active)?;
    if s.step(index).and_then(|st| st.decision()) != Some("post-debug-escalate") {
        return Err(RalphError::usage(
            "NOT_AN_ESCALATION",
            format!("step {index} is not a post-debug-escalate gate"),
        ));
    }
    let args = decide::DecideArgs {
        index: index.to_string(),
        verdict: "escalate".into(),
        confidence: "100".into(),
        reason: Some("human intervention: the fix loop did not converge".into()),
        ..decide::DecideArgs::default()
    };
    decide::run(ctx, &h, &args, &Planner)
}
