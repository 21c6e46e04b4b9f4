//! The scope gate (`post-analyze-scope`), settled by code: seed 003's A_SCOPE_EVALUATE and
//! A_APPLY_SCOPE_VERDICT, no model call.
//!
//! The macro analysis that just completed is found through the evidence the steps before the
//! gate cited (`conclusions.json` by file name, inside the project only, bounded, as a model
//! gate reads its result files). Its `scope_verdict` (large|medium|small; anything else or a
//! missing file is unknown) and its id are written to status.json; then:
//! - large, and unknown in an auto-mode (`-y`) session (which defaults to large, the path the
//!   chain was built for): the chain is kept and the next pending roadmap step gets
//!   `--from analyze:{id}`. Unknown without `-y` asks a person (large or medium/small): the
//!   session pauses with the question, and the answer is applied as that verdict;
//! - medium/small with a known id: the pending roadmap and phase analyze steps before the
//!   goal audit are skipped and the next pending plan step plans from the analysis
//!   (`--from analyze:{id}`, standalone, `source_artifact_ref`). Without an id a standalone
//!   plan has nothing to start from, so the chain is kept and the reason says why.
//!
//! The gate is then consumed through ralph's `decide` (a `scope-gate` line in
//! `decisions.ndjson` whose summary carries the verdict). Both writes are idempotent: a kill
//! between them leaves the gate pending and the next tick applies the same verdict again.

use super::gate::{cited, inside, read_bounded};
use super::infer::ScopeVerdict;
use super::milestone::Planner;
use baton_ralph::Context;
use baton_ralph::error::{RalphError, Result};
use baton_ralph::session::Session;
use baton_ralph::store::{self, Change};
use baton_ralph::verbs::Output;
use baton_ralph::verbs::control::mark_skipped;
use baton_ralph::verbs::decide::{self, DecideArgs};
use baton_ralph::{Handle, Target};
use serde_json::{Value, json};
use std::path::Path;

/// The gate this module settles.
pub const GATE: &str = "post-analyze-scope";

/// Longest analysis id accepted: it goes into a step's args.
const MAX_ID_CHARS: usize = 64;

/// What the macro analysis said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluated {
    pub verdict: ScopeVerdict,
    pub analyze_macro_id: Option<String>,
    /// Why the verdict is unknown, when it is.
    pub unknown_because: Option<String>,
}

/// An id fit for args: short, one token of letters, digits, `-`, `_`, `.`.
fn valid_id(v: Option<&Value>) -> Option<String> {
    let id = v?.as_str()?.trim();
    let ok = !id.is_empty()
        && id.chars().count() <= MAX_ID_CHARS
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    ok.then(|| id.to_string())
}

/// A_SCOPE_EVALUATE: the newest `conclusions.json` cited before the gate at `index`.
pub fn evaluate(ctx: &Context, s: &Session, index: usize) -> Evaluated {
    // Kept from an earlier analysis (`session start` may have inferred it).
    let known_id = valid_id(s.doc.get("analyze_macro_id"));
    let unknown = |why: String, id: Option<String>| Evaluated {
        verdict: ScopeVerdict::Unknown,
        analyze_macro_id: id,
        unknown_because: Some(why),
    };
    let paths = cited(s, index);
    let Some(path) = paths.iter().find(|p| {
        Path::new(p.as_str())
            .file_name()
            .is_some_and(|n| n.to_string_lossy() == "conclusions.json")
    }) else {
        return unknown("no earlier step cited conclusions.json".into(), known_id);
    };
    let Some(text) = inside(&ctx.project, path).and_then(|f| read_bounded(&f)) else {
        return unknown(
            format!("{path} is not readable inside the project"),
            known_id,
        );
    };
    let doc: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => return unknown(format!("{path} is not JSON: {e}"), known_id),
    };
    let id = valid_id(doc.get("analyze_macro_id"))
        .or_else(|| valid_id(doc.get("id")))
        .or(known_id);
    let verdict = match doc.get("scope_verdict").and_then(Value::as_str) {
        Some("large") => ScopeVerdict::Large,
        Some("medium") => ScopeVerdict::Medium,
        Some("small") => ScopeVerdict::Small,
        Some(other) => {
            let shown: String = other.chars().take(40).collect();
            return unknown(
                format!("{path}: scope_verdict \"{shown}\" is not one of large|medium|small"),
                id,
            );
        }
        None => return unknown(format!("{path} has no scope_verdict"), id),
    };
    Evaluated {
        verdict,
        analyze_macro_id: id,
        unknown_because: None,
    }
}

/// Steps not to touch: anything from the goal audit on belongs to the audit's loop.
fn before_goal_audit(s: &Session, after: usize) -> Vec<usize> {
    s.all_steps()
        .skip(after + 1)
        .take_while(|st| st.stage() != "goal-audit" && st.decision() != Some("post-goal-audit"))
        .filter(|st| st.status() == "pending")
        .map(|st| st.index())
        .collect()
}

/// The gate at `index` may be settled now: pending, the session running, nothing else
/// active, every earlier step finished. Checked before anything is written (decide checks
/// again under its own lock).
fn check_gate(s: &Session, index: usize) -> Result<()> {
    if s.status() != "running" {
        return Err(RalphError::NotRunning {
            status: s.status().to_string(),
        });
    }
    let step = s.step(index).ok_or(RalphError::NoClaim)?;
    if step.decision() != Some(GATE) || step.status() != "pending" {
        return Err(RalphError::StepState {
            index,
            status: format!("\"{}\" ({})", step.status(), step.label()),
            action: "settle it as the scope gate",
        });
    }
    let blocked = s.active_index().is_some()
        || s.all_steps()
            .take(index)
            .any(|st| !matches!(st.status(), "completed" | "skipped"));
    if blocked {
        return Err(RalphError::usage(
            "SCOPE_GATE_NOT_READY",
            format!("the steps before scope gate {index} are not all finished"),
        ));
    }
    Ok(())
}

/// `--from analyze:{id}` in a roadmap's args: the placeholder filled, else appended.
fn with_from(args: &str, id: &str) -> String {
    let from = format!("analyze:{id}");
    if args.contains("{analyze_macro_id}") {
        args.replace("{analyze_macro_id}", id)
    } else if args.contains("--from ") {
        args.to_string()
    } else if args.trim().is_empty() {
        format!("--from {from}")
    } else {
        format!("{} --from {from}", args.trim_end())
    }
}

/// A_APPLY_SCOPE_VERDICT on `s` (the gate itself is left to `decide`); the decision's reason.
fn apply(s: &mut Session, index: usize, e: &Evaluated) -> String {
    s.set("scope_verdict", json!(e.verdict.as_str()));
    if let Some(id) = &e.analyze_macro_id {
        s.set("analyze_macro_id", json!(id));
    }
    let pending = before_goal_audit(s, index);
    let collapse = matches!(e.verdict, ScopeVerdict::Medium | ScopeVerdict::Small);
    let verdict = e.verdict.as_str();
    match (&e.analyze_macro_id, collapse) {
        (Some(id), true) => {
            let skipped: Vec<usize> = pending
                .iter()
                .copied()
                .filter(|&i| {
                    s.step(i).is_some_and(|st| {
                        st.decision().is_none() && matches!(st.stage(), "roadmap" | "analyze")
                    })
                })
                .collect();
            let why = format!("scope {verdict}: planned from analyze:{id}");
            for &i in &skipped {
                mark_skipped(s, i, Some(&why));
            }
            let plan = pending.iter().copied().find(|&i| {
                s.step(i)
                    .is_some_and(|st| st.decision().is_none() && st.stage() == "plan")
            });
            if let Some(i) = plan {
                s.set_step(i, "args", json!(format!("--from analyze:{id}")));
                s.set_step(i, "scope", json!("standalone"));
                s.set_step(i, "milestone_id", Value::Null);
                s.set_step(i, "source_artifact_ref", json!(format!("analyze:{id}")));
            }
            format!(
                "scope {verdict}: collapsed to standalone via analyze:{id} ({} roadmap/analyze \
                 steps skipped{})",
                skipped.len(),
                plan.map_or(String::new(), |i| format!(
                    ", plan step {i} --from analyze:{id}"
                ))
            )
        }
        (id, _) => {
            let roadmap = pending.iter().copied().find(|&i| {
                s.step(i)
                    .is_some_and(|st| st.decision().is_none() && st.stage() == "roadmap")
            });
            let mut reason = match (&e.unknown_because, collapse) {
                (Some(why), _) => format!("scope unknown ({why}): defaults to large, chain kept"),
                (None, true) => {
                    format!("scope {verdict} but no analysis id to plan from: chain kept as large")
                }
                (None, false) => format!("scope {verdict}: chain kept"),
            };
            if let (Some(id), Some(i)) = (id, roadmap) {
                let args = s
                    .step(i)
                    .map(|st| st.args().to_string())
                    .unwrap_or_default();
                let args = with_from(&args, id);
                // A roadmap that already names another source keeps it, and its reference.
                if args.contains(&format!("--from analyze:{id}")) {
                    s.set_step(i, "args", json!(args));
                    s.set_step(i, "source_artifact_ref", json!(format!("analyze:{id}")));
                    reason.push_str(&format!(", roadmap step {i} --from analyze:{id}"));
                }
            }
            reason
        }
    }
}

/// What settling the scope gate did.
#[derive(Debug)]
pub enum Settled {
    /// The verdict applied and the gate consumed: `decide`'s report.
    Decided(Output),
    /// The verdict is unknown in a session without `-y`: the session paused and asks a
    /// person, large or medium/small ([`QUESTION`]).
    Asked,
}

/// The id of the question a person answers for an unknown scope.
pub const QUESTION: &str = "scope";

/// Settles the scope gate at `index`: evaluates, applies, then consumes the gate through
/// `decide`. An unknown verdict in a session without `-y` is asked instead (seed 003: ask the
/// user, large or medium/small; auto mode takes large).
pub fn settle<'a>(ctx: &Context, session: impl Into<Target<'a>>, index: usize) -> Result<Settled> {
    settle_with(ctx, session, index, None)
}

/// A person's answer to the scope question: `Large` or `Small` (medium and small collapse
/// the same way), and the note they gave with it (kept in the decision).
#[derive(Debug, Clone, Copy)]
pub struct Answer<'n> {
    pub verdict: ScopeVerdict,
    pub note: Option<&'n str>,
}

/// [`settle`] with a person's answer in place of an unknown verdict.
pub fn settle_with<'a>(
    ctx: &Context,
    session: impl Into<Target<'a>>,
    index: usize,
    answer: Option<Answer<'_>>,
) -> Result<Settled> {
    enum Step {
        Apply(String),
        Ask,
    }
    let (step, s) = store::transact(ctx, session, None, |s| {
        check_gate(s, index)?;
        let mut e = evaluate(ctx, s, index);
        let auto = s.doc.get("auto_mode").and_then(Value::as_bool) == Some(true);
        if e.verdict == ScopeVerdict::Unknown {
            match answer {
                Some(a) => {
                    let why = e.unknown_because.take().unwrap_or_default();
                    e.verdict = a.verdict;
                    e.unknown_because = None;
                    let reason = apply(s, index, &e);
                    return Ok(Change::write(Step::Apply(format!(
                        "{reason} (the analysis gave no verdict: {why}; a person chose {}{})",
                        a.verdict.as_str(),
                        a.note.map(|n| format!(": {n}")).unwrap_or_default()
                    ))));
                }
                None if !auto => {
                    baton_ralph::gate::mark_asked(s, index, QUESTION);
                    return Ok(Change::write(Step::Ask));
                }
                None => {}
            }
        }
        let reason = apply(s, index, &e);
        Ok(Change::write(Step::Apply(reason)))
    })?;
    let reason = match step {
        Step::Ask => return Ok(Settled::Asked),
        Step::Apply(reason) => reason,
    };
    let args = DecideArgs {
        index: index.to_string(),
        verdict: "proceed".into(),
        confidence: "100".into(),
        reason: Some(reason),
        // Nobody changed the session in between, or we decide nothing.
        expect_revision: Some(s.revision()),
        ..DecideArgs::default()
    };
    // The session the transaction found, re-read by decide under its own lock.
    decide::run(ctx, &Handle::of(&s), &args, &Planner).map(Settled::Decided)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_roadmap_gets_the_analysis_once() {
        let from = |a: &str| with_from(a, "ANL-1");
        assert_eq!(
            from("--from analyze:{analyze_macro_id}"),
            "--from analyze:ANL-1"
        );
        assert_eq!(from(""), "--from analyze:ANL-1");
        assert_eq!(from("--quick"), "--quick --from analyze:ANL-1");
        assert_eq!(from("--from blueprint:B-2"), "--from blueprint:B-2");
    }

    #[test]
    fn only_short_plain_ids_are_taken() {
        assert_eq!(valid_id(Some(&json!(" ANL-001 "))), Some("ANL-001".into()));
        for bad in [
            json!(""),
            json!("a b"),
            json!("x;rm"),
            json!("A".repeat(65)),
            json!(7),
        ] {
            assert_eq!(valid_id(Some(&bad)), None, "{bad}");
        }
        assert_eq!(valid_id(None), None);
    }
}
