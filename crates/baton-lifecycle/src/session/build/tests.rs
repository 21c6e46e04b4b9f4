//! The exact chain for each row of the position tables, each quality and planning mode, the
//! scope gating, the `--from` injection and the goal refs (build rules 0–13), fed with
//! [`Inference`] values directly.

use super::goals::Goal;
use super::rules::{build, stages_of};
use crate::session::infer::{
    Breadth, Clarification, Failed, Inference, Position, QualityMode, ScopeVerdict,
};
use baton_ralph::chain::PlanningMode;
use serde_json::Value;

/// Phase 2 of milestone M1, independent, standard quality, nothing completed.
fn inf(position: &'static str) -> Inference {
    Inference {
        phase: Some(2),
        phase_slug: None,
        phase_is_new: false,
        milestone: Some("M1".into()),
        position: Position::Stage(position),
        completed_stages: Vec::new(),
        quality: QualityMode::Standard,
        planning_mode: Some(PlanningMode::Independent),
        scope_verdict: None,
        breadth: Breadth::Narrow,
        decompose: true,
        analyze_macro_id: None,
        blueprint_id: None,
        explicit_phase: false,
        clarification: Clarification::default(),
        questions: Vec::new(),
    }
}

/// `stage: skill args [G1] <source> @milestone` for a step, `◆ gate` for a decision.
fn show(step: &Value) -> String {
    let s = |k: &str| step[k].as_str().unwrap_or("");
    if let Some(gate) = step["decision"].as_str() {
        assert_eq!(step["command_scope"], Value::Null);
        assert_eq!(
            step["goal_ref"],
            Value::Null,
            "decision nodes never get a goal"
        );
        assert_eq!(
            (step["retry_count"].as_u64(), step["max_retries"].as_u64()),
            (Some(0), Some(2))
        );
        return format!("◆ {gate}");
    }
    let mut out = format!("{}: {}", s("stage"), s("skill"));
    if !s("args").is_empty() {
        out.push_str(&format!(" {}", s("args")));
    }
    if !s("goal_ref").is_empty() {
        out.push_str(&format!(" [{}]", s("goal_ref")));
    }
    if !s("source_artifact_ref").is_empty() {
        out.push_str(&format!(" <{}>", s("source_artifact_ref")));
    }
    if !s("milestone_id").is_empty() {
        out.push_str(&format!(" @{}", s("milestone_id")));
    }
    out
}

fn chain(inf: &Inference, goals: &[Goal]) -> Vec<String> {
    let steps = build(inf, goals).unwrap();
    for (i, step) in steps.iter().enumerate() {
        assert_eq!(step["index"], i);
        assert_eq!(step["status"], "pending");
        assert_eq!(step["completion_confirmed"], false);
        assert_eq!(step["completion_status"], Value::Null);
        assert_eq!(step["completion_evidence"], Value::Null);
        assert_eq!(step["deferred_reads"], serde_json::json!([]));
        assert_eq!(step["load"], Value::Null);
        // Rule 13: exactly the steps carrying {phase} name the milestone.
        let has_phase = step["args"].as_str().unwrap_or("").contains("{phase}");
        let expected = match &inf.milestone {
            Some(m) if has_phase => Value::String(m.clone()),
            _ => Value::Null,
        };
        assert_eq!(step["milestone_id"], expected, "{step}");
    }
    steps.iter().map(show).collect()
}

fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

const STANDARD_TAIL: &str = "
    review: quality-review {phase} @M1
    ◆ post-review
    test-gen: quality-auto-test {phase} @M1
    test: quality-test {phase} @M1
    ◆ post-test
    milestone-audit: maestro-milestone-audit
    milestone-complete: maestro-milestone-complete
    ◆ post-milestone";

fn with_tail(head: &str) -> Vec<String> {
    lines(&format!("{head}\n{STANDARD_TAIL}"))
}

#[test]
fn phase_aware_rows_start_at_their_stage() {
    let verify = "verify: maestro-verify {phase} @M1\n◆ post-verify";
    let execute = format!("execute: maestro-execute {{phase}} @M1\n{verify}");
    let plan = format!("plan: maestro-plan {{phase}} @M1\n{execute}");
    let analyze = format!("analyze: maestro-analyze {{phase}} @M1\n{plan}");
    assert_eq!(chain(&inf("analyze"), &[]), with_tail(&analyze));
    assert_eq!(chain(&inf("plan"), &[]), with_tail(&plan));
    assert_eq!(chain(&inf("execute"), &[]), with_tail(&execute));
    assert_eq!(chain(&inf("verify"), &[]), with_tail(verify));
    let steps = build(&inf("plan"), &[]).unwrap();
    assert_eq!(steps[0]["scope"], "phase");
}

#[test]
fn refinement_rows_start_later() {
    // business-test is a full-quality stage: in standard mode the row starts at review.
    assert_eq!(chain(&inf("business-test"), &[]), lines(STANDARD_TAIL));
    let mut full = inf("business-test");
    full.quality = QualityMode::Full;
    assert_eq!(
        chain(&full, &[]),
        lines(&format!(
            "business-test: quality-auto-test {{phase}} @M1\n◆ post-business-test\n{STANDARD_TAIL}"
        ))
    );
    assert_eq!(
        chain(&inf("test"), &[]),
        lines(
            "test: quality-test {phase} @M1
             ◆ post-test
             milestone-audit: maestro-milestone-audit
             milestone-complete: maestro-milestone-complete
             ◆ post-milestone"
        )
    );
    assert_eq!(
        chain(&inf("milestone-audit"), &[]),
        lines(
            "milestone-audit: maestro-milestone-audit
             milestone-complete: maestro-milestone-complete
             ◆ post-milestone"
        )
    );
}

#[test]
fn failed_rows_start_with_their_fix_loop() {
    let mut i = inf("verify");
    i.position = Position::Failed {
        kind: Failed::Verify,
        gaps: vec!["no header row".into()],
    };
    assert_eq!(
        chain(&i, &[]),
        with_tail(
            "debug: quality-debug \"no header row\"
             plan: maestro-plan --gaps {phase} @M1
             execute: maestro-execute {phase} @M1
             verify: maestro-verify {phase} @M1
             ◆ post-verify"
        )
    );
    i.position = Position::Failed {
        kind: Failed::Review,
        gaps: Vec::new(),
    };
    let got = chain(&i, &[]);
    assert_eq!(got[0], "debug: quality-debug \"{gap_summary}\"");
    assert_eq!(
        got[3..6],
        lines(
            "review: quality-review {phase} @M1\n◆ post-review\ntest-gen: quality-auto-test {phase} @M1"
        )[..]
    );
    i.position = Position::Failed {
        kind: Failed::Test,
        gaps: vec!["login fails".into()],
    };
    let got = chain(&i, &[]);
    assert_eq!(got[0], "debug: quality-debug --from-uat \"login fails\"");
    assert_eq!(got[11], "◆ post-test");
    assert_eq!(
        got[12..],
        lines(
            "milestone-audit: maestro-milestone-audit
             milestone-complete: maestro-milestone-complete
             ◆ post-milestone"
        )[..]
    );
}

#[test]
fn bootstrap_rows_run_the_whole_lifecycle() {
    let mut i = inf("brainstorm");
    i.phase = None;
    i.milestone = None;
    i.decompose = false;
    let got = chain(&i, &[]);
    assert_eq!(
        got[..8],
        lines(
            "brainstorm: maestro-brainstorm \"{intent}\"
             blueprint: maestro-blueprint \"{intent}\"
             init: maestro-init
             analyze-macro: maestro-analyze \"{intent}\"
             ◆ post-analyze-scope
             roadmap: maestro-roadmap --from analyze:{analyze_macro_id}
             analyze: maestro-analyze {phase}
             plan: maestro-plan {phase}"
        )[..]
    );
    // Without a milestone the {phase} steps carry milestone_id null.
    let steps = build(&i, &[]).unwrap();
    assert_eq!(steps[6]["milestone_id"], Value::Null);
    i.position = Position::Stage("init");
    assert_eq!(chain(&i, &[])[0], "init: maestro-init");
    assert_eq!(got.last().map(String::as_str), Some("◆ post-milestone"));
}

#[test]
fn roadmap_row_takes_the_known_analysis() {
    let mut i = inf("roadmap");
    i.phase = None;
    i.analyze_macro_id = Some("ANL-007".into());
    i.scope_verdict = Some(ScopeVerdict::Large);
    let got = chain(&i, &[]);
    assert_eq!(
        got[..3],
        lines(
            "roadmap: maestro-roadmap --from analyze:ANL-007 <analyze:ANL-007>
             analyze: maestro-analyze {phase} @M1
             plan: maestro-plan {phase} @M1"
        )[..]
    );
}

#[test]
fn quality_modes_shape_the_pipeline() {
    let mut i = inf("verify");
    i.quality = QualityMode::Full;
    assert_eq!(
        chain(&i, &[]),
        lines(&format!(
            "verify: maestro-verify {{phase}} @M1
             ◆ post-verify
             business-test: quality-auto-test {{phase}} @M1
             ◆ post-business-test
             {STANDARD_TAIL}"
        ))
    );
    i.quality = QualityMode::Quick;
    assert_eq!(
        chain(&i, &[]),
        lines(
            "verify: maestro-verify {phase} @M1
             ◆ post-verify
             review: quality-review {phase} --tier quick @M1
             ◆ post-review
             milestone-audit: maestro-milestone-audit
             milestone-complete: maestro-milestone-complete
             ◆ post-milestone"
        )
    );
}

#[test]
fn unified_mode_drops_the_phase() {
    let mut i = inf("analyze");
    i.planning_mode = Some(PlanningMode::Unified);
    assert_eq!(
        chain(&i, &[]),
        lines(
            "analyze: maestro-analyze
             plan: maestro-plan
             execute: maestro-execute
             verify: maestro-verify
             ◆ post-verify
             review: quality-review
             ◆ post-review
             test-gen: quality-auto-test
             test: quality-test
             ◆ post-test
             milestone-audit: maestro-milestone-audit
             milestone-complete: maestro-milestone-complete
             ◆ post-milestone"
        )
    );
    assert_eq!(build(&i, &[]).unwrap()[1]["scope"], "milestone");
}

#[test]
fn completed_stages_are_skipped_but_never_the_last() {
    let mut i = inf("analyze");
    i.completed_stages = vec!["plan", "review", "milestone-complete"];
    let got = chain(&i, &[]);
    assert_eq!(got[1], "execute: maestro-execute {phase} @M1");
    assert!(
        !got.iter()
            .any(|l| l.starts_with("review:") || l == "◆ post-review")
    );
    assert_eq!(
        got[got.len() - 2..],
        lines("milestone-complete: maestro-milestone-complete\n◆ post-milestone")[..]
    );
}

#[test]
fn a_small_scope_at_the_macro_start_skips_roadmap_and_analyze() {
    let mut i = inf("analyze-macro");
    i.phase = None;
    for (scope, expected) in [
        (
            ScopeVerdict::Small,
            "plan: maestro-plan --from analyze:{analyze_macro_id}",
        ),
        (
            ScopeVerdict::Medium,
            "plan: maestro-plan --from analyze:{analyze_macro_id}",
        ),
        (
            ScopeVerdict::Large,
            "roadmap: maestro-roadmap --from analyze:{analyze_macro_id}",
        ),
        (
            ScopeVerdict::Unknown,
            "roadmap: maestro-roadmap --from analyze:{analyze_macro_id}",
        ),
    ] {
        i.scope_verdict = Some(scope);
        // An older analysis is not named: this chain makes a new one.
        i.analyze_macro_id = Some("ANL-001".into());
        let got = chain(&i, &[]);
        assert_eq!(
            got[..2],
            lines("analyze-macro: maestro-analyze \"{intent}\"\n◆ post-analyze-scope")[..]
        );
        assert_eq!(got[2], expected, "{scope:?}");
        if matches!(scope, ScopeVerdict::Small | ScopeVerdict::Medium) {
            assert_eq!(got[3], "execute: maestro-execute {phase} @M1", "{scope:?}");
        } else {
            assert_eq!(
                got[3..5],
                lines("analyze: maestro-analyze {phase} @M1\nplan: maestro-plan {phase} @M1")[..],
                "{scope:?}"
            );
        }
    }
    i.scope_verdict = Some(ScopeVerdict::Small);
    assert_eq!(build(&i, &[]).unwrap()[2]["scope"], "standalone");
}

#[test]
fn from_injection_at_the_plan_row() {
    let mut i = inf("plan");
    i.analyze_macro_id = Some("ANL-003".into());
    i.scope_verdict = Some(ScopeVerdict::Small);
    assert_eq!(
        chain(&i, &[])[0],
        "plan: maestro-plan --from analyze:ANL-003 <analyze:ANL-003>"
    );
    i.scope_verdict = Some(ScopeVerdict::Large);
    assert_eq!(chain(&i, &[])[0], "plan: maestro-plan {phase} @M1");
    // A blueprint gives way to a phase number, and is used without one.
    i.blueprint_id = Some("BLP-002".into());
    assert_eq!(chain(&i, &[])[0], "plan: maestro-plan {phase} @M1");
    i.phase = None;
    assert_eq!(
        chain(&i, &[])[0],
        "plan: maestro-plan --from blueprint:BLP-002 <blueprint:BLP-002>"
    );
    assert_eq!(build(&i, &[]).unwrap()[0]["scope"], "standalone");
}

fn goal(id: &str, lifecycle: &[&str]) -> Goal {
    Goal {
        id: id.into(),
        goal: format!("goal {id}"),
        boundary: String::new(),
        done_when: "verification.json passed".into(),
        evidence: "verification.json".into(),
        lifecycle: lifecycle.iter().map(|s| s.to_string()).collect(),
    }
}

#[test]
fn a_decomposition_adds_the_goal_audit_and_goal_refs() {
    let goals = [
        goal("G10", &["execute"]),
        goal("G2", &["execute", "verify"]),
        goal("G3", &["review", "test"]),
    ];
    assert_eq!(
        chain(&inf("execute"), &goals),
        lines(
            "execute: maestro-execute {phase} [G2] @M1
             verify: maestro-verify {phase} [G2] @M1
             ◆ post-verify
             review: quality-review {phase} [G3] @M1
             ◆ post-review
             test-gen: quality-auto-test {phase} @M1
             test: quality-test {phase} [G3] @M1
             ◆ post-test
             milestone-audit: maestro-milestone-audit
             ◆ post-goal-audit
             milestone-complete: maestro-milestone-complete
             ◆ post-milestone"
        )
    );
    // Quick mode: the audit still follows the last evidence stage (review).
    let mut quick = inf("verify");
    quick.quality = QualityMode::Quick;
    let got = chain(&quick, &goals);
    let review = got.iter().position(|l| l == "◆ post-review").unwrap();
    let audit = got.iter().position(|l| l == "◆ post-goal-audit").unwrap();
    let complete = got
        .iter()
        .position(|l| l.starts_with("milestone-complete"))
        .unwrap();
    assert!(review < audit && audit + 1 == complete, "{got:?}");
}

#[test]
fn stages_of_lists_execution_stages_once() {
    let steps = build(&inf("verify"), &[]).unwrap();
    assert_eq!(
        stages_of(&steps),
        [
            "verify",
            "review",
            "test-gen",
            "test",
            "milestone-audit",
            "milestone-complete"
        ]
    );
}

#[test]
fn long_failed_gaps_are_cut() {
    let mut i = inf("verify");
    i.position = Position::Failed {
        kind: Failed::Verify,
        gaps: vec!["x".repeat(10_000); 500],
    };
    let steps = build(&i, &[]).unwrap();
    assert!(steps[0]["args"].as_str().unwrap().len() < 4000);
}
