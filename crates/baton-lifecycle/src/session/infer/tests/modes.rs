//! Scope verdict, quality mode, planning mode, breadth and the clarification rounds.

use super::fixture::*;
use crate::session::infer::breadth::classify;
use crate::session::infer::{Breadth, Options, Position, QualityMode, ScopeVerdict, question};
use baton_ralph::chain::PlanningMode;
use serde_json::json;

// --- scope verdict ---

#[test]
fn scope_verdict_from_the_macro_analysis_conclusions() {
    for (verdict, want) in [
        ("large", ScopeVerdict::Large),
        ("medium", ScopeVerdict::Medium),
        ("small", ScopeVerdict::Small),
    ] {
        let a = artifact(
            "ANL-002",
            "analyze",
            None,
            "completed",
            "2026-01-01T10:00:00Z",
        );
        let p = with_artifacts(json!({"milestones": []}), vec![a.clone()]);
        p.write_json(
            &format!("{}/conclusions.json", dir(&a)),
            json!({"scope_verdict": verdict}),
        );
        let inf = p.infer_auto("continue");
        assert_eq!(inf.position, Position::Stage("roadmap"));
        assert_eq!(inf.scope_verdict, Some(want));
        assert_eq!(inf.analyze_macro_id.as_deref(), Some("ANL-002"));
    }
}

#[test]
fn scope_verdict_missing_is_unknown() {
    let a = artifact(
        "ANL-002",
        "analyze",
        None,
        "completed",
        "2026-01-01T10:00:00Z",
    );
    let p = with_artifacts(json!({"milestones": []}), vec![a.clone()]);
    assert_eq!(
        p.infer_auto("continue").scope_verdict,
        Some(ScopeVerdict::Unknown)
    );
    p.write_json(
        &format!("{}/conclusions.json", dir(&a)),
        json!({"summary": "x"}),
    );
    assert_eq!(
        p.infer_auto("continue").scope_verdict,
        Some(ScopeVerdict::Unknown)
    );
}

#[test]
fn scope_verdict_at_analyze_macro_without_analysis_is_unknown() {
    let p = Project::with_state(json!({"milestones": []}));
    let inf = p.infer_auto("continue");
    assert_eq!(inf.position, Position::Stage("analyze-macro"));
    assert_eq!(inf.scope_verdict, Some(ScopeVerdict::Unknown));
    assert_eq!(inf.analyze_macro_id, None);
}

#[test]
fn scope_verdict_is_skipped_outside_its_positions() {
    let a = artifact(
        "ANL-002",
        "analyze",
        None,
        "completed",
        "2026-01-01T10:00:00Z",
    );
    let b = artifact(
        "PLN-001",
        "plan",
        Some(1),
        "completed",
        "2026-01-02T10:00:00Z",
    );
    let p = with_artifacts(two_phases(), vec![a.clone(), b]);
    p.write_json(
        &format!("{}/conclusions.json", dir(&a)),
        json!({"scope_verdict": "small"}),
    );
    let inf = p.infer_auto("phase 1");
    assert_eq!(inf.position, Position::Stage("execute"));
    assert_eq!(inf.scope_verdict, None);
    assert_eq!(
        inf.analyze_macro_id.as_deref(),
        Some("ANL-002"),
        "still there for --from"
    );
}

#[test]
fn blueprint_id_from_the_registry_or_the_folder() {
    let p = Project::with_state(two_phases());
    p.write(".workflow/blueprint/BLP-auth-20260101/spec.md", "x");
    p.write(".workflow/blueprint/BLP-billing-20260301/spec.md", "x");
    assert_eq!(
        p.infer_auto("phase 1").blueprint_id.as_deref(),
        Some("BLP-billing-20260301")
    );
    let mut state = two_phases();
    state["artifacts"] = json!([{"id": "BLP-007", "type": "spec", "status": "completed"}]);
    let p = Project::with_state(state);
    assert_eq!(
        p.infer_auto("phase 1").blueprint_id.as_deref(),
        Some("BLP-007")
    );
}

// --- quality mode ---

#[test]
fn quality_requested_wins() {
    let p = Project::with_state(two_phases());
    p.write(".workflow/specs/REQ-001.md", "# req");
    let opts = Options {
        quality: Some(QualityMode::Quick),
        auto: true,
        ..Options::default()
    };
    assert_eq!(p.infer_with("phase 1", &opts).quality, QualityMode::Quick);
}

#[test]
fn quality_full_with_requirements_and_a_clear_phase() {
    let p = Project::with_state(two_phases());
    p.write(".workflow/specs/REQ-001.md", "# req");
    assert_eq!(p.infer_auto("phase 1").quality, QualityMode::Full);
    // No phase (an early position): the phase scope is not clear.
    assert_eq!(
        p.infer_auto("overhaul the UI").quality,
        QualityMode::Standard
    );
}

#[test]
fn quality_standard_by_default() {
    let p = Project::with_state(two_phases());
    p.write(".workflow/specs/NOTES.md", "# not a requirement");
    assert_eq!(p.infer_auto("phase 1").quality, QualityMode::Standard);
}

// --- planning mode ---

#[test]
fn planning_independent_for_early_positions() {
    let p = Project::with_state(two_phases());
    let inf = p.infer("overhaul the UI");
    assert_eq!(inf.planning_mode, Some(PlanningMode::Independent));
    assert!(
        inf.questions
            .iter()
            .all(|q| q.id != question::PLANNING_MODE)
    );
}

#[test]
fn planning_independent_for_a_new_phase() {
    let p = Project::with_state(two_phases());
    let inf = p.infer("csv export");
    assert!(inf.phase_is_new);
    assert_eq!(inf.planning_mode, Some(PlanningMode::Independent));
}

#[test]
fn planning_independent_for_an_explicit_phase() {
    let p = Project::with_state(two_phases());
    let inf = p.infer("phase 2");
    assert_eq!(inf.planning_mode, Some(PlanningMode::Independent));
}

#[test]
fn planning_independent_for_a_one_phase_milestone() {
    let p = Project::with_state(one_phase());
    let inf = p.infer("continue");
    assert_eq!(inf.phase, Some(1));
    assert_eq!(inf.planning_mode, Some(PlanningMode::Independent));
}

#[test]
fn planning_unified_for_a_multi_phase_milestone_under_auto() {
    let p = Project::with_state(two_phases());
    let inf = p.infer_auto("continue");
    assert_eq!(inf.planning_mode, Some(PlanningMode::Unified));
    assert!(inf.questions.is_empty());
}

#[test]
fn planning_asked_for_a_multi_phase_milestone_without_auto_then_consumed() {
    let p = Project::with_state(two_phases());
    let inf = p.infer("continue");
    assert_eq!(inf.planning_mode, None);
    let q = inf
        .questions
        .iter()
        .find(|q| q.id == question::PLANNING_MODE)
        .unwrap();
    assert!(!q.even_with_auto);
    assert!(!q.free_text);
    assert_eq!(q.options[0].value, "unified");
    assert!(q.text.contains("2 phases"));

    let all = [
        (question::PLANNING_MODE, "independent"),
        (question::CLARIFY_SCOPE, "src/"),
        (question::CLARIFY_CONSTRAINTS, "none"),
        (question::CLARIFY_DONE, "tests green"),
    ];
    let inf = p.infer_with("continue", &answered(&all, false));
    assert_eq!(inf.planning_mode, Some(PlanningMode::Independent));
    assert!(inf.questions.is_empty(), "{:?}", inf.questions);

    let err = crate::session::infer::infer(
        p.root(),
        "continue",
        &answered(&[(question::PLANNING_MODE, "both")], false),
    )
    .unwrap_err();
    assert_eq!(err.code(), "ANSWER_INVALID");
}

// --- breadth ---

#[test]
fn breadth_classification() {
    for (intent, want) in [
        ("rewrite the storage layer", Breadth::Broad),
        ("migrate from MySQL to Postgres", Breadth::Broad),
        ("overhaul onboarding", Breadth::Broad),
        ("refactor everything around sessions", Breadth::Broad),
        ("重构 支付模块", Breadth::Broad),
        ("fix the crash in src/parser.rs", Breadth::Narrow),
        ("speed up parser.rs", Breadth::Narrow),
        ("make parse_args() accept -v", Breadth::Narrow),
        ("fix login redirect", Breadth::Narrow),
        ("handle issue #42", Breadth::Narrow),
        ("add a retry button to the upload dialog", Breadth::Narrow),
        ("improve search relevance", Breadth::Medium),
        ("support dark mode", Breadth::Medium),
        ("bump to version 1.2", Breadth::Medium),
    ] {
        assert_eq!(classify(intent), want, "{intent}");
    }
}

fn ids(inf: &crate::session::infer::Inference) -> Vec<&str> {
    inf.questions.iter().map(|q| q.id.as_str()).collect()
}

#[test]
fn broad_intent_asks_three_rounds_even_with_auto() {
    let p = Project::with_state(two_phases());
    p.write("src/lib.rs", "");
    p.write("docs/a.md", "");
    let inf = p.infer_auto("rewrite the storage layer");
    assert_eq!(inf.breadth, Breadth::Broad);
    assert_eq!(
        ids(&inf),
        [
            question::CLARIFY_SCOPE,
            question::CLARIFY_CONSTRAINTS,
            question::CLARIFY_DONE
        ]
    );
    assert!(
        inf.questions
            .iter()
            .all(|q| q.even_with_auto && q.free_text)
    );
    let scope: Vec<&str> = inf.questions[0]
        .options
        .iter()
        .map(|o| o.value.as_str())
        .collect();
    assert_eq!(scope, ["docs/ only", "src/ only", "the whole project"]);

    let opts = answered(&[(question::CLARIFY_SCOPE, "storage/ only")], true);
    let inf = p.infer_with("rewrite the storage layer", &opts);
    assert_eq!(
        ids(&inf),
        [question::CLARIFY_CONSTRAINTS, question::CLARIFY_DONE]
    );
    assert_eq!(inf.clarification.scope.as_deref(), Some("storage/ only"));
}

#[test]
fn medium_intent_asks_unless_auto() {
    let p = Project::with_state(one_phase());
    let inf = p.infer("improve search relevance");
    assert_eq!(inf.breadth, Breadth::Medium);
    assert_eq!(inf.questions.len(), 3);
    assert!(inf.questions.iter().all(|q| !q.even_with_auto));
    assert!(
        p.infer_auto("improve search relevance")
            .questions
            .is_empty()
    );
}

#[test]
fn narrow_intent_never_asks() {
    let p = Project::with_state(one_phase());
    let inf = p.infer("fix login redirect in auth.rs");
    assert_eq!(inf.breadth, Breadth::Narrow);
    assert!(inf.questions.is_empty(), "{:?}", inf.questions);
    assert!(inf.decompose);
}

#[test]
fn no_clarification_where_decomposition_is_skipped() {
    let p = Project::empty();
    p.write("src/main.rs", "");
    let inf = p.infer_auto("rewrite the storage layer");
    assert_eq!(inf.position, Position::Stage("init"));
    assert!(!inf.decompose);
    assert!(inf.questions.is_empty());
}
