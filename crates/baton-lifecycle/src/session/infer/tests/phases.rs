//! A_RESOLVE_PHASE, rule by rule, and the D-007 milestone lookup.

use super::fixture::*;
use crate::session::infer::{Options, Position, question};
use serde_json::json;

#[test]
fn rule1_phase_number_in_the_intent() {
    let p = Project::with_state(two_phases());
    for intent in [
        "finish phase 2",
        "Phase2 please",
        "work on P2",
        "phase   2 billing",
    ] {
        let inf = p.infer_auto(intent);
        assert_eq!(inf.phase, Some(2), "{intent}");
        assert!(inf.explicit_phase);
        assert!(!inf.phase_is_new);
        assert_eq!(inf.phase_slug.as_deref(), Some("billing"));
    }
}

#[test]
fn rule1_two_phase_numbers_ask_even_with_auto() {
    let p = Project::with_state(two_phases());
    let inf = p.infer_auto("phase 1 and phase 2");
    assert_eq!(inf.questions.len(), 1);
    let q = &inf.questions[0];
    assert_eq!(q.id, question::PHASE);
    assert!(q.even_with_auto);
    let values: Vec<&str> = q.options.iter().map(|o| o.value.as_str()).collect();
    assert_eq!(values, ["1", "2"]);
    assert_eq!(q.options[0].label, "phase 1 (auth)");
}

#[test]
fn rule2_intent_phrase_matches_a_phase_slug() {
    let p = Project::with_state(two_phases());
    let inf = p.infer_auto("add invoices to billing");
    assert_eq!(inf.phase, Some(2));
    assert!(!inf.phase_is_new);
    assert!(!inf.explicit_phase);
    assert_eq!(inf.milestone.as_deref(), Some("M1"));
}

#[test]
fn rule2_intent_phrase_matches_an_artifact_path() {
    let mut state = json!({"current_milestone": "M1",
        "milestones": [{"id": "M1", "phases": [1, 2, 3]}]});
    state["artifacts"] = json!([{"id": "ANL-004", "type": "analyze", "phase": 3, "status": "completed",
        "path": "scratch/20260101-analyze-P3-search-index", "created_at": "2026-01-01T00:00:00Z"}]);
    let p = Project::with_state(state);
    let inf = p.infer_auto("speed up the search index");
    assert_eq!(inf.phase, Some(3));
    assert!(!inf.phase_is_new);
    assert_eq!(inf.position, Position::Stage("plan"));
}

#[test]
fn rule2_no_match_is_a_new_phase_after_the_known_ones() {
    let p = Project::with_state(two_phases());
    let inf = p.infer_auto("csv export");
    assert!(inf.phase_is_new);
    assert_eq!(inf.phase, Some(3));
    assert_eq!(
        inf.milestone.as_deref(),
        Some("M1"),
        "a new phase joins the current milestone"
    );
}

#[test]
fn rule2_several_matches_ask() {
    let mut state = two_phases();
    state["milestones"][0]["phase_slugs"] = json!({"1": "auth", "2": "auth-tokens"});
    let p = Project::with_state(state);
    let inf = p.infer_auto("auth tokens expiry");
    assert_eq!(inf.questions.len(), 1);
    assert_eq!(inf.questions[0].id, question::PHASE);
}

#[test]
fn rule3_no_phrase_takes_the_latest_in_progress_artifact() {
    let arts = vec![
        artifact(
            "PLN-001",
            "plan",
            Some(1),
            "in_progress",
            "2026-01-01T10:00:00Z",
        ),
        artifact(
            "PLN-002",
            "plan",
            Some(2),
            "in_progress",
            "2026-01-02T10:00:00Z",
        ),
        artifact(
            "ANL-003",
            "analyze",
            Some(1),
            "completed",
            "2026-01-03T10:00:00Z",
        ),
    ];
    let p = with_artifacts(two_phases(), arts);
    let inf = p.infer_auto("continue");
    assert_eq!(inf.phase, Some(2));
    assert_eq!(inf.position, Position::Stage("plan"));
}

#[test]
fn rule4_first_incomplete_phase_of_the_current_milestone() {
    let mut state = two_phases();
    state["milestones"][0]["phases"] =
        json!([{"number": 1, "status": "completed"}, {"number": 2, "status": "active"}]);
    let p = Project::with_state(state);
    assert_eq!(p.infer_auto("keep going").phase, Some(2));
    // Without statuses a completed verify artifact marks a phase done.
    let arts = vec![artifact(
        "VRF-001",
        "verify",
        Some(1),
        "completed",
        "2026-01-01T10:00:00Z",
    )];
    let p = with_artifacts(two_phases(), arts);
    assert_eq!(p.infer_auto("keep going").phase, Some(2));
    let p = Project::with_state(two_phases());
    assert_eq!(p.infer_auto("keep going").phase, Some(1));
}

#[test]
fn rule5_early_positions_have_no_phase() {
    let p = Project::with_state(two_phases());
    let inf = p.infer_auto("overhaul the whole UI");
    assert_eq!(inf.position, Position::Stage("analyze-macro"));
    assert_eq!(inf.phase, None);
    assert!(!inf.phase_is_new);
}

#[test]
fn rule6_nothing_resolves_asks_even_with_auto_and_the_answer_is_consumed() {
    let mut state = two_phases();
    state["milestones"][0]["phases"] =
        json!([{"number": 1, "status": "done"}, {"number": 2, "status": "completed"}]);
    let p = Project::with_state(state);
    let inf = p.infer_auto("continue");
    assert_eq!(
        inf.questions.len(),
        1,
        "only the phase question while it is open"
    );
    assert_eq!(inf.questions[0].id, question::PHASE);
    assert!(inf.questions[0].even_with_auto);

    let inf = p.infer_with("continue", &answered(&[(question::PHASE, "2")], true));
    assert!(inf.questions.is_empty(), "{:?}", inf.questions);
    assert_eq!(inf.phase, Some(2));
    assert_eq!(inf.position, Position::Stage("analyze"));
}

#[test]
fn a_phase_answer_that_is_not_a_number_is_refused() {
    let p = Project::with_state(two_phases());
    let err = crate::session::infer::infer(
        p.root(),
        "continue",
        &answered(&[(question::PHASE, "the second one")], true),
    )
    .unwrap_err();
    assert_eq!(err.code(), "ANSWER_INVALID");
    assert!(err.to_string().contains("the second one"), "{err}");
}

#[test]
fn d007_milestone_from_phase_slugs_else_current() {
    let state = json!({"current_milestone": "M2", "milestones": [
        {"id": "M1", "status": "completed", "phase_slugs": {"1": "auth"}},
        {"id": "M2", "status": "active", "phases": [2]}]});
    let p = Project::with_state(state);
    assert_eq!(p.infer_auto("phase 1").milestone.as_deref(), Some("M1"));
    assert_eq!(p.infer_auto("phase 2").milestone.as_deref(), Some("M2"));
    assert_eq!(
        p.infer_auto("phase 7").milestone.as_deref(),
        Some("M2"),
        "fallback: current_milestone"
    );
}

#[test]
fn an_empty_intent_is_refused() {
    let p = Project::empty();
    let err = crate::session::infer::infer(p.root(), "  \n", &Options::default()).unwrap_err();
    assert_eq!(err.code(), "INTENT_EMPTY");
}
