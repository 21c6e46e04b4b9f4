//! What a person decides when a session stops for them (seed 003's `ask_user` points after the
//! build phase): a step that failed (BLOCKED, or NEEDS_RETRY twice) pauses the session and the
//! person retries, skips or abandons it; the `post-debug-escalate` gate pauses it ("human
//! intervention") and the person lets the chain go on or abandons it; in a session started
//! without `-y`, a model-judged gate's verdict waits for the person to accept or override it.
//!
//! [`why_paused`] reads why a session is paused; [`decide`] applies the choice through ralph's
//! verbs (lock, revision, `decisions.ndjson`), leaving a running session that the loop can tick.

use super::apply::form_of;
use super::infer::ScopeVerdict;
use super::milestone::Planner;
use super::{milestone, review, scope};
use baton_ralph::Context;
use baton_ralph::Handle;
use baton_ralph::discovery::Pick;
use baton_ralph::error::{RalphError, Result};
use baton_ralph::session::Session;
use baton_ralph::store::{self, Change};
use baton_ralph::verbs::{Output, control, decide};
use serde_json::{Value, json};

/// Why a paused session waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pause {
    /// Execution step `index` failed; `reason` is what the model (or the loop) said.
    FailedStep {
        index: usize,
        label: String,
        reason: Option<String>,
    },
    /// The `post-debug-escalate` gate at `index` waits for a person.
    Escalation { index: usize },
    /// Gate `index` was judged by the model in a session without `-y`: its verdict (after
    /// the guards) waits for a person to accept or override it.
    GateReview {
        index: usize,
        gate: String,
        verdict: &'static str,
        reason: String,
        confidence: u8,
    },
    /// A gate settled by code needs a person's word first: an unknown scope verdict (the
    /// question `scope`: large or small), or the planning mode of a next milestone of several
    /// phases (`planning-mode`: unified or independent).
    Question {
        index: usize,
        gate: String,
        question: &'static str,
    },
    /// Paused by a person (`baton ralph pause`), nothing to decide.
    ByHand,
}

/// What a person can answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Run the failed step again from scratch.
    Retry,
    /// Leave the failed step behind (skipped) and go on.
    Skip,
    /// Settle the escalation gate and go on with the chain; for a gate review, override the
    /// model's verdict with `proceed`.
    Proceed,
    /// Settle a reviewed gate with the model's verdict.
    Accept,
    /// Override a reviewed gate's verdict with `fix` (the fix loop is inserted).
    Fix,
    /// Override a reviewed gate's verdict with `escalate`.
    Escalate,
    /// Give the session up (status failed, `abandoned_at`).
    Abort,
    /// Scope question: keep the large path (roadmap, phase analysis).
    Large,
    /// Scope question: medium or small, plan straight from the analysis.
    Small,
    /// Planning question: plan the next milestone as a whole.
    Unified,
    /// Planning question: each phase of the next milestone on its own.
    Independent,
}

impl Choice {
    pub fn parse(text: &str) -> Option<Choice> {
        match text.trim().to_ascii_lowercase().as_str() {
            "retry" => Some(Choice::Retry),
            "skip" => Some(Choice::Skip),
            "proceed" => Some(Choice::Proceed),
            "accept" => Some(Choice::Accept),
            "fix" => Some(Choice::Fix),
            "escalate" => Some(Choice::Escalate),
            "abort" | "abandon" => Some(Choice::Abort),
            "large" => Some(Choice::Large),
            "small" | "medium" | "medium-small" => Some(Choice::Small),
            "unified" => Some(Choice::Unified),
            "independent" => Some(Choice::Independent),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Choice::Retry => "retry",
            Choice::Skip => "skip",
            Choice::Proceed => "proceed",
            Choice::Accept => "accept",
            Choice::Fix => "fix",
            Choice::Escalate => "escalate",
            Choice::Abort => "abort",
            Choice::Large => "large",
            Choice::Small => "small",
            Choice::Unified => "unified",
            Choice::Independent => "independent",
        }
    }
}

impl Pause {
    /// The choices that apply, with what each does.
    pub fn choices(&self) -> &'static [(Choice, &'static str)] {
        match self {
            Pause::FailedStep { .. } => &[
                (Choice::Retry, "run the step again"),
                (Choice::Skip, "skip it and go on with the chain"),
                (Choice::Abort, "give the session up"),
            ],
            Pause::Escalation { .. } => &[
                (
                    Choice::Proceed,
                    "the problem is handled: settle the escalation and go on",
                ),
                (Choice::Abort, "give the session up"),
            ],
            Pause::GateReview { .. } => &[
                (Choice::Accept, "settle the gate with the model's verdict"),
                (Choice::Proceed, "override: the gate passes, go on"),
                (Choice::Fix, "override: insert the fix loop"),
                (Choice::Escalate, "override: escalate"),
                (Choice::Abort, "give the session up"),
            ],
            Pause::Question { question, .. } if *question == scope::QUESTION => &[
                (
                    Choice::Large,
                    "large: keep the roadmap and the phase analysis",
                ),
                (
                    Choice::Small,
                    "medium or small: plan straight from the macro analysis",
                ),
                (Choice::Abort, "give the session up"),
            ],
            Pause::Question { .. } => &[
                (
                    Choice::Unified,
                    "analyze and plan the whole milestone at once (closely linked phases)",
                ),
                (
                    Choice::Independent,
                    "each phase runs the whole lifecycle on its own",
                ),
                (Choice::Abort, "give the session up"),
            ],
            Pause::ByHand => &[(Choice::Proceed, "resume the session")],
        }
    }

    /// The question of a [`Pause::Question`], as a person reads it.
    pub fn question_text(&self) -> Option<String> {
        let Pause::Question {
            index, question, ..
        } = self
        else {
            return None;
        };
        Some(if *question == scope::QUESTION {
            format!(
                "the macro analysis gave no scope verdict (step {index}): is the change large \
                 (roadmap and phase analysis) or medium/small (plan straight from the analysis)?"
            )
        } else {
            format!(
                "the milestone is done and the next one has several phases (step {index}): plan \
                 them together (unified) or one by one (independent)?"
            )
        })
    }
}

pub use baton_ralph::gate::ASKED;

/// Why `s` is paused, or `None` when it is not paused.
pub fn why_paused(s: &Session) -> Option<Pause> {
    if s.status() != "paused" {
        return None;
    }
    if let Some(step) = s.all_steps().find(|st| st.status() == "failed") {
        let reason = step
            .str("concerns")
            .or_else(|| step.str("completion_status"))
            .map(str::to_owned);
        return Some(Pause::FailedStep {
            index: step.index(),
            label: step.label(),
            reason,
        });
    }
    let first_open = s
        .all_steps()
        .find(|st| !matches!(st.status(), "completed" | "skipped"));
    if let Some(step) = first_open
        && step.decision() == Some("post-debug-escalate")
    {
        return Some(Pause::Escalation {
            index: step.index(),
        });
    }
    if let Some(step) = first_open
        && step.status() == "pending"
        && let Some(gate) = step.decision()
        && let Some(asked) = step.str(ASKED)
    {
        let question = match (gate, asked) {
            (scope::GATE, scope::QUESTION) => Some(scope::QUESTION),
            (milestone::GATE, milestone::QUESTION) => Some(milestone::QUESTION),
            _ => None,
        };
        if let Some(question) = question {
            return Some(Pause::Question {
                index: step.index(),
                gate: gate.to_string(),
                question,
            });
        }
    }
    if let Some(step) = first_open
        && step.status() == "pending"
        && step.decision().is_some_and(|g| form_of(g).is_some())
        // A damaged review file is reported when the loop reaches the gate again.
        && let Ok(Some(r)) = review::read(s, step.index())
        && let Ok(p) = review::propose(s, &r)
    {
        return Some(Pause::GateReview {
            index: r.index,
            gate: r.gate,
            verdict: p.verdict,
            reason: p.reason,
            confidence: p.confidence,
        });
    }
    Some(Pause::ByHand)
}

/// The failed step `index` goes back to pending with a fresh retry allowance (a person chose
/// to try again; `retried` would otherwise turn its next empty run straight into BLOCKED).
fn reopen(ctx: &Context, h: &Handle, index: usize) -> Result<()> {
    store::transact(ctx, h, None, |s| {
        match s.step(index).map(|st| st.status()) {
            Some("failed") => {}
            other => {
                return Err(RalphError::StepState {
                    index,
                    status: format!("\"{}\"", other.unwrap_or("missing")),
                    action: "retry it (only a failed step is retried)",
                });
            }
        }
        for (key, value) in [
            ("status", json!("pending")),
            ("retried", json!(false)),
            ("completion_confirmed", json!(false)),
            ("completion_status", Value::Null),
            ("completed_at", Value::Null),
        ] {
            s.set_step(index, key, value);
        }
        Ok(Change::write(()))
    })?;
    Ok(())
}

/// Applies a person's `choice` to the paused session; afterwards the session is running (or,
/// for [`Choice::Abort`], failed). A choice that does not fit the pause is refused with
/// `CHOICE_NOT_APPLICABLE` and nothing is written.
pub fn decide(ctx: &Context, session: Option<&str>, choice: Choice, note: &str) -> Result<Output> {
    let (h, s) = Handle::open(ctx, session, Pick::Active)?;
    let id = h.id();
    let Some(pause) = why_paused(&s) else {
        return Err(RalphError::usage(
            "SESSION_NOT_PAUSED",
            format!(
                "session {id} is \"{}\": nothing waits for a decision",
                s.status()
            ),
        ));
    };
    if !pause.choices().iter().any(|(c, _)| *c == choice) {
        let allowed: Vec<&str> = pause.choices().iter().map(|(c, _)| c.as_str()).collect();
        return Err(RalphError::usage(
            "CHOICE_NOT_APPLICABLE",
            format!(
                "\"{}\" does not apply here; answer one of: {}",
                choice.as_str(),
                allowed.join(", ")
            ),
        ));
    }
    let note = (!note.trim().is_empty()).then_some(note.trim());
    match (pause, choice) {
        (_, Choice::Abort) => control::abandon(ctx, &h, note.or(Some("aborted by a person")), None),
        (Pause::FailedStep { index, .. }, Choice::Retry) => {
            reopen(ctx, &h, index)?;
            control::resume(ctx, &h, None)
        }
        (Pause::FailedStep { index, .. }, _) => {
            control::skip(
                ctx,
                &h,
                &index.to_string(),
                note.or(Some("skipped by a person")),
                false,
                None,
            )?;
            control::resume(ctx, &h, None)
        }
        (Pause::Escalation { index }, _) => {
            control::resume(ctx, &h, None)?;
            let args = decide::DecideArgs {
                index: index.to_string(),
                verdict: "proceed".into(),
                confidence: "100".into(),
                reason: Some(format!(
                    "a person let the chain go on{}",
                    note.map(|n| format!(": {n}")).unwrap_or_default()
                )),
                ..decide::DecideArgs::default()
            };
            decide::run(ctx, &h, &args, &Planner)
        }
        (Pause::GateReview { index, .. }, Choice::Accept) => {
            let kept = review::read(&s, index)?.ok_or_else(|| {
                RalphError::usage(
                    "GATE_REVIEW_MISSING",
                    format!("the model's answer for gate {index} is no longer kept"),
                )
            })?;
            control::resume(ctx, &h, None)?;
            review::accept(ctx, &h, &s, &kept)
        }
        (
            Pause::GateReview {
                index,
                verdict,
                confidence,
                ..
            },
            _,
        ) => {
            control::resume(ctx, &h, None)?;
            let args = decide::DecideArgs {
                index: index.to_string(),
                verdict: choice.as_str().into(),
                confidence: "100".into(),
                reason: Some(format!(
                    "a person chose {} over the model's {verdict} (confidence {confidence}){}",
                    choice.as_str(),
                    note.map(|n| format!(": {n}")).unwrap_or_default()
                )),
                ..decide::DecideArgs::default()
            };
            let out = decide::run(ctx, &h, &args, &Planner)?;
            let retry = s.step(index).map_or(0, |st| st.retry_count());
            review::remove(&s.dir, index, retry);
            Ok(out)
        }
        (Pause::Question { index, .. }, Choice::Large | Choice::Small) => {
            control::resume(ctx, &h, None)?;
            let verdict = if choice == Choice::Large {
                ScopeVerdict::Large
            } else {
                ScopeVerdict::Small
            };
            let answer = scope::Answer { verdict, note };
            match scope::settle_with(ctx, &h, index, Some(answer))? {
                scope::Settled::Decided(out) => Ok(out),
                scope::Settled::Asked => Err(RalphError::usage(
                    "SESSION_NOT_WAITING",
                    "the scope gate asked again",
                )),
            }
        }
        (Pause::Question { index, .. }, _) => {
            control::resume(ctx, &h, None)?;
            let mode = if choice == Choice::Unified {
                "unified"
            } else {
                "independent"
            };
            let args = decide::DecideArgs {
                index: index.to_string(),
                verdict: "proceed".into(),
                confidence: "100".into(),
                reason: Some(format!(
                    "post-milestone: a person chose {mode} planning for the next milestone{}",
                    note.map(|n| format!(": {n}")).unwrap_or_default()
                )),
                planning_mode: Some(mode.into()),
                ..decide::DecideArgs::default()
            };
            decide::run(ctx, &h, &args, &Planner)
        }
        (Pause::ByHand, _) => control::resume(ctx, &h, None),
    }
}
