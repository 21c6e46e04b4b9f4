//! `decide <i> --verdict proceed|fix|escalate --confidence N [--reason T] [--gap T]...`:
//! settle a decision gate the way seed 003's S_TICK_APPLY does, as code: the gate's rules
//! ([`crate::gate`]) applied under the session lock, recorded and reported.
//!
//! Guards (quality and goal gates): confidence < 60 turns `proceed` into `fix`; a `fix` at
//! `retry_count >= max_retries` becomes `escalate` (W002); a `fix` with confidence > 95 after a
//! retry *suggests* `proceed` (reported, not applied: `--dry-run` shows it before deciding).
//!
//! `proceed` on `post-milestone` is A_STRUCTURAL_EVALUATE: the next milestone's chain is
//! inserted (A_ADVANCE_MILESTONE) or the session ends, as the caller's [`MilestonePlanner`]
//! says ([`crate::milestone_gate`]).
//!
//! Every settled gate appends a line to `decisions.ndjson` (before status.json is written);
//! a line a crash left for the same gate, never applied, is removed first.

use crate::Context;
use crate::decisions;
use crate::discovery::Pick;
use crate::error::{RalphError, Result};
pub use crate::gate::{Adjusted, apply_guards, parse_confidence, parse_verdict};
use crate::gate::{Class, claimable_gate, class, kind, settle};
use crate::handle::Target;
use crate::milestone_gate::{self as milestone, MilestonePlanner};
use crate::session::Session;
use crate::store::{self, Change};
use crate::time;
use crate::verbs::{Output, index_in, parse_index};
use serde_json::{Map, Value, json};

#[derive(Debug, Clone, Default)]
pub struct DecideArgs {
    pub index: String,
    pub verdict: String,
    pub confidence: String,
    pub reason: Option<String>,
    pub gaps: Vec<String>,
    pub dry_run: bool,
    pub expect_revision: Option<u64>,
    /// `post-milestone` only: how to plan a next milestone of several phases (`unified` or
    /// `independent`); without it, such an advance is refused (auto-mode sessions take
    /// unified).
    pub planning_mode: Option<String>,
}

/// What deciding did.
struct Decided {
    index: usize,
    gate: String,
    requested: &'static str,
    adjusted: Adjusted,
    inserted: usize,
    effect: &'static str,
    record: Value,
}

/// Decides the gate `args` name; `planner` works out what `proceed` on the milestone gate does.
pub fn run<'a>(
    ctx: &Context,
    session: impl Into<Target<'a>>,
    args: &DecideArgs,
    planner: &dyn MilestonePlanner,
) -> Result<Output> {
    let requested = parse_verdict(&args.verdict)?;
    let confidence = parse_confidence(&args.confidence)?;
    parse_index(&args.index)?;
    let (d, s) = store::transact(ctx, session, args.expect_revision, |s| {
        if s.status() != "running" {
            return Err(RalphError::NotRunning {
                status: s.status().to_string(),
            });
        }
        let index = index_in(&args.index, s.len())?;
        let (gate, retry, max) = claimable_gate(s, index)?;
        let class = class(&gate);
        let guarded = matches!(class, Class::Quality | Class::Goal);
        let adjusted = apply_guards(requested, confidence, retry, max, guarded);
        let planning = args
            .planning_mode
            .as_deref()
            .map(milestone::parse_planning)
            .transpose()?;
        let (effect, inserted, extra) = if args.dry_run {
            ("dry-run", 0, Map::new())
        } else if gate == milestone::GATE && adjusted.verdict == "proceed" {
            milestone::settle(ctx, s, index, planning, planner)?
        } else {
            let (effect, inserted) = settle(ctx, s, index, &gate, class, &adjusted, &args.gaps)?;
            (effect, inserted, Map::new())
        };
        let revision = s.revision().saturating_add(1);
        let record = json!({
            "id": format!("DEC-{}-{revision}", time::now_millis()),
            "timestamp": time::now_iso(),
            "source": "ralph",
            "node_id": gate,
            "type": kind(class),
            "verdict": adjusted.verdict,
            "confidence_score": confidence,
            "close_call": adjusted.close_call,
            "summary": args.reason.clone().unwrap_or_default(),
            "session_id": s.id,
            "step_index": index,
            "requested_verdict": requested,
            "guards": adjusted.guards,
            "suggested": adjusted.suggested,
            "retry_count": retry,
            "max_retries": max,
            "gaps": args.gaps,
            "effect": effect,
            "inserted": inserted,
            "revision": revision,
        });
        let mut record = record;
        if let Value::Object(r) = &mut record {
            r.extend(extra);
        }
        let decided = Decided {
            index,
            gate,
            requested,
            adjusted,
            inserted,
            effect,
            record,
        };
        if args.dry_run {
            return Ok(Change::keep(decided));
        }
        // A line a crash left for this very gate was never applied: it is replaced.
        decisions::drop_unapplied(&s.dir, index, &decided.gate, retry, s.revision())?;
        // Fsynced with status.json's temp file, before its rename: on the disk first.
        let log = decisions::append_unsynced(&s.dir, &decided.record)?;
        Ok(Change::write(decided).syncing(log))
    })?;
    Ok(report(&s, &d, args))
}

/// `advance`: settles the pending `post-milestone` gate (the first step not finished must be
/// it) with `proceed`: the next milestone's chain, or the end of the session.
pub fn advance<'a>(
    ctx: &Context,
    session: impl Into<Target<'a>>,
    planning_mode: Option<String>,
    dry_run: bool,
    expect_revision: Option<u64>,
    planner: &dyn MilestonePlanner,
) -> Result<Output> {
    let (h, s) = session.into().open(ctx, Pick::Active)?;
    let open = s
        .all_steps()
        .find(|st| !matches!(st.status(), "completed" | "skipped"));
    let Some(index) = open
        .filter(|st| st.decision() == Some(milestone::GATE))
        .map(|st| st.index())
    else {
        let at = open.map_or_else(
            || "nothing is left to run".to_string(),
            |st| format!("step {} ({}) comes first", st.index(), st.label()),
        );
        return Err(RalphError::usage(
            "NOT_AT_MILESTONE",
            format!("no post-milestone gate is next: {at}"),
        ));
    };
    let args = DecideArgs {
        index: index.to_string(),
        verdict: "proceed".into(),
        confidence: "100".into(),
        reason: Some(format!("{}: settled by code", milestone::GATE)),
        dry_run,
        expect_revision,
        planning_mode,
        ..DecideArgs::default()
    };
    run(ctx, &h, &args, planner)
}

fn report(s: &Session, d: &Decided, args: &DecideArgs) -> Output {
    let mut text = String::new();
    let reason = args
        .reason
        .as_deref()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    let prefix = if args.dry_run { "[dry-run] " } else { "" };
    text.push_str(&format!(
        "{prefix}◆ Decision: {} [step {}] → {}{reason}\n",
        d.gate, d.index, d.adjusted.verdict
    ));
    if d.requested != d.adjusted.verdict {
        text.push_str(&format!("  requested: {}\n", d.requested));
    }
    for g in &d.adjusted.guards {
        text.push_str(&format!("  guard: {g}\n"));
    }
    for w in &d.adjusted.warnings {
        text.push_str(&format!("  {w}\n"));
    }
    if let Some(sug) = d.adjusted.suggested {
        text.push_str(&format!(
            "  suggestion: {sug} (confidence > 95 after a retry; not applied — decide again with --verdict {sug} if you agree)\n"
        ));
    }
    if d.adjusted.close_call {
        text.push_str("  close call (confidence 50–70)\n");
    }
    match d.effect {
        "inserted" => text.push_str(&format!(
            "  +{} steps inserted after step {}\n",
            d.inserted, d.index
        )),
        "paused" => text.push_str("  session paused — a person has to look at this gate\n"),
        "session-completed" => text.push_str(&format!("  session completed\n  {} done\n", s.id)),
        "milestone-advanced" => text.push_str(&format!(
            "  milestone {} → {}: +{} steps inserted after step {}\n",
            d.record["milestone_from"].as_str().unwrap_or("?"),
            d.record["milestone_to"].as_str().unwrap_or("?"),
            d.inserted,
            d.index
        )),
        _ => {}
    }
    let json = json!({
        "ok": true,
        "session_id": s.id,
        "index": d.index,
        "gate": d.gate,
        "requested": d.requested,
        "verdict": d.adjusted.verdict,
        "guards": d.adjusted.guards,
        "warnings": d.adjusted.warnings,
        "suggested": d.adjusted.suggested,
        "close_call": d.adjusted.close_call,
        "effect": d.effect,
        "inserted": d.inserted,
        "dry_run": args.dry_run,
        "session_status": s.status(),
        "revision": s.revision(),
        "decision": d.record,
    });
    Output::new(json).out(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;
    // The verb without a milestone planner: these gates are not the milestone gate.
    use crate::testing::decide::run;

    /// `decide 0 proceed 90`
    fn proceed_at_0() -> DecideArgs {
        DecideArgs {
            index: "0".into(),
            verdict: "proceed".into(),
            confidence: "90".into(),
            ..DecideArgs::default()
        }
    }

    #[test]
    fn guards() {
        let a = apply_guards("proceed", 55, 0, 2, true);
        assert_eq!(a.verdict, "fix");
        assert!(a.close_call);
        assert_eq!(a.warnings, ["W004: low confidence (55)"]);
        assert_eq!(apply_guards("fix", 80, 2, 2, true).verdict, "escalate");
        assert_eq!(apply_guards("proceed", 30, 2, 2, true).verdict, "escalate");
        assert_eq!(apply_guards("proceed", 80, 2, 2, true).verdict, "proceed");
        let a = apply_guards("fix", 97, 1, 2, true);
        assert_eq!((a.verdict, a.suggested), ("fix", Some("proceed")));
        assert_eq!(apply_guards("fix", 97, 0, 2, true).suggested, None);
        assert_eq!(apply_guards("proceed", 10, 5, 2, false).verdict, "proceed");
    }

    /// A decide killed between its log line and its status.json write left the gate pending
    /// and a line behind; deciding the gate again replaces that line instead of adding one.
    #[test]
    fn a_gate_decided_again_after_a_crash_is_logged_once() {
        let tmp = tempfile::tempdir().unwrap();
        let ctx = testing::context(tmp.path());
        let path = testing::new_session(&ctx, "goal-audit");
        let doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let gate = doc["steps"][0]["decision"].as_str().unwrap().to_string();
        let log = path.with_file_name(decisions::FILE);
        let earlier = json!({"id": "DEC-1-0", "step_index": 7, "node_id": gate, "retry_count": 0});
        let stale = json!({"id": "DEC-2-1", "step_index": 0, "node_id": gate, "retry_count": 0,
            "verdict": "fix"});
        std::fs::write(&log, format!("{earlier}\n{stale}\n")).unwrap();
        run(&ctx, None, &proceed_at_0()).unwrap();
        let lines: Vec<Value> = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{lines:#?}");
        assert_eq!(lines[0], earlier);
        assert_eq!(lines[1]["step_index"], 0);
        assert_eq!(lines[1]["verdict"], "proceed");
    }

    /// A_APPLY_GOAL_DONE: without it a decomposed session never completes (E010 at the end).
    #[test]
    fn a_met_goal_audit_marks_the_goals_done_and_completes_the_session() {
        let tmp = tempfile::tempdir().unwrap();
        let ctx = testing::context(tmp.path());
        let path = testing::new_session(&ctx, "goal-audit");
        let read = || -> Value { serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap() };
        let mut doc = read();
        doc["task_decomposition"] = json!([{"id": "G1", "goal": "g", "boundary": "b",
            "done_when": "d", "evidence": "verification.json", "lifecycle": ["verify"],
            "status": "pending", "completion_confirmed": false, "completed_at": null}]);
        doc["task_decomposition_all_done"] = json!(false);
        std::fs::write(&path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
        run(&ctx, None, &proceed_at_0()).unwrap();
        let doc = read();
        assert_eq!(doc["status"], "completed");
        assert_eq!(doc["task_decomposition_all_done"], true);
        assert_eq!(doc["task_decomposition"][0]["status"], "done");
        assert_eq!(doc["task_decomposition"][0]["completion_confirmed"], true);
    }
}
