//! A_INFER_POSITION: intent overrides, the bootstrap table, the phase-aware table and the
//! refinements from the gate result files; build rule 2's completed stages.

use super::fixture::*;
use crate::session::infer::{Failed, Position};
use serde_json::json;

fn stage(p: &Position) -> &'static str {
    p.name()
}

// --- bootstrap table ---

#[test]
fn no_workflow_and_no_sources_is_brainstorm() {
    let p = Project::empty();
    p.write("notes.txt", "ideas");
    let inf = p.infer("a tool that tidies photo folders");
    assert_eq!(inf.position, Position::Stage("brainstorm"));
    assert_eq!(inf.phase, None);
    assert!(!inf.decompose, "brainstorm skips the decomposition");
    assert!(inf.questions.is_empty(), "{:?}", inf.questions);
}

#[test]
fn no_workflow_with_sources_is_init() {
    let p = Project::empty();
    p.write("src/lib.rs", "pub fn f() {}");
    let inf = p.infer("make the parser faster");
    assert_eq!(inf.position, Position::Stage("init"));
    assert_eq!(
        inf.scope_verdict, None,
        "S_RESOLVE_SCOPE is skipped for init"
    );
    assert!(inf.questions.is_empty());
}

#[test]
fn workflow_without_state_is_init() {
    let p = Project::empty();
    p.write(".workflow/project.md", "# p");
    assert_eq!(
        p.infer("make the parser faster").position,
        Position::Stage("init")
    );
}

#[test]
fn state_present_goes_to_the_phase_tables() {
    let p = Project::with_state(one_phase());
    let inf = p.infer("phase 1");
    assert_eq!(inf.position, Position::Stage("analyze"));
    assert_eq!(inf.phase, Some(1));
}

// --- intent overrides ---

#[test]
fn brainstorm_and_blueprint_words_override_everything() {
    let p = Project::with_state(two_phases());
    assert_eq!(
        stage(&p.infer("brainstorm the billing page").position),
        "brainstorm"
    );
    assert_eq!(
        stage(&p.infer("write a blueprint for billing").position),
        "blueprint"
    );
    assert_eq!(stage(&p.infer("头脑风暴 支付").position), "brainstorm");
    // Even in an empty folder, where bootstrap would say brainstorm.
    assert_eq!(
        stage(&Project::empty().infer("blueprint the app").position),
        "blueprint"
    );
}

#[test]
fn broad_intent_without_phase_number_is_analyze_macro() {
    let p = Project::with_state(two_phases());
    let inf = p.infer_auto("rewrite the storage layer");
    assert_eq!(inf.position, Position::Stage("analyze-macro"));
    assert_eq!(inf.phase, None, "rule 5: early stages have no phase");
    assert_eq!(inf.milestone.as_deref(), Some("M1"));
    // With a phase number the override does not apply.
    let inf = p.infer_auto("rewrite phase 2 storage");
    assert_eq!(inf.position, Position::Stage("analyze"));
    assert_eq!(inf.phase, Some(2));
}

#[test]
fn new_feature_intent_is_analyze_macro() {
    let p = Project::with_state(two_phases());
    assert_eq!(
        stage(&p.infer_auto("new feature: exports").position),
        "analyze-macro"
    );
}

#[test]
fn bootstrap_wins_over_the_broad_override() {
    let p = Project::empty();
    p.write("src/main.rs", "fn main() {}");
    assert_eq!(
        stage(&p.infer_auto("rewrite everything in Rust").position),
        "init"
    );
}

// --- phase-aware table ---

#[test]
fn new_phase_is_analyze() {
    let p = Project::with_state(two_phases());
    let inf = p.infer_auto("dark mode toggle");
    assert_eq!(inf.position, Position::Stage("analyze"));
    assert!(inf.phase_is_new);
    assert_eq!(inf.phase, Some(3));
    assert_eq!(inf.phase_slug.as_deref(), Some("dark-mode-toggle"));
}

#[test]
fn no_milestones_no_roadmap_with_macro_analysis_is_roadmap() {
    let a = artifact(
        "ANL-001",
        "analyze",
        None,
        "completed",
        "2026-01-01T10:00:00Z",
    );
    let p = with_artifacts(json!({"milestones": []}), vec![a]);
    let inf = p.infer_auto("continue");
    assert_eq!(inf.position, Position::Stage("roadmap"));
    assert_eq!(inf.analyze_macro_id.as_deref(), Some("ANL-001"));
    assert_eq!(inf.phase, None);
}

#[test]
fn no_milestones_no_roadmap_no_analysis_is_analyze_macro() {
    let p = Project::with_state(json!({"milestones": [], "artifacts": []}));
    let inf = p.infer_auto("dark mode toggle");
    assert_eq!(inf.position, Position::Stage("analyze-macro"));
    assert!(!inf.phase_is_new);
}

#[test]
fn a_roadmap_without_milestones_goes_to_the_phase_table() {
    let p = Project::with_state(json!({"milestones": [], "artifacts": []}));
    p.write(".workflow/roadmap.md", "# Roadmap");
    let inf = p.infer_auto("dark mode toggle");
    assert_eq!(inf.position, Position::Stage("analyze"));
    assert!(inf.phase_is_new);
    assert_eq!(inf.phase, Some(1));
}

#[test]
fn existing_phase_without_artifacts_is_analyze() {
    let p = Project::with_state(two_phases());
    assert_eq!(p.infer_auto("phase 2").position, Position::Stage("analyze"));
}

#[test]
fn latest_artifact_decides_the_next_stage() {
    for (kind, next) in [
        ("analyze", "plan"),
        ("plan", "execute"),
        ("execute", "verify"),
    ] {
        let older = artifact(
            "X-001",
            "analyze",
            Some(1),
            "completed",
            "2026-01-01T10:00:00Z",
        );
        let latest = artifact("X-002", kind, Some(1), "completed", "2026-01-02T10:00:00Z");
        let p = with_artifacts(two_phases(), vec![latest, older]);
        let inf = p.infer_auto("phase 1");
        assert_eq!(inf.position, Position::Stage(next), "latest {kind}");
    }
}

#[test]
fn other_phases_artifacts_are_ignored() {
    let other = artifact(
        "PLN-009",
        "plan",
        Some(2),
        "completed",
        "2026-01-05T10:00:00Z",
    );
    let mine = artifact(
        "ANL-001",
        "analyze",
        Some(1),
        "completed",
        "2026-01-01T10:00:00Z",
    );
    let p = with_artifacts(two_phases(), vec![mine, other]);
    assert_eq!(p.infer_auto("phase 1").position, Position::Stage("plan"));
}

#[test]
fn unfinished_latest_artifact_restarts_its_stage() {
    for status in ["in_progress", "pending", "failed"] {
        let a = artifact(
            "ANL-001",
            "analyze",
            Some(1),
            "completed",
            "2026-01-01T10:00:00Z",
        );
        let b = artifact("PLN-001", "plan", Some(1), status, "2026-01-02T10:00:00Z");
        let p = with_artifacts(two_phases(), vec![a, b]);
        assert_eq!(
            p.infer_auto("phase 1").position,
            Position::Stage("plan"),
            "{status}"
        );
    }
}

#[test]
fn latest_debug_artifact_leads_to_plan() {
    let a = artifact(
        "EXC-001",
        "execute",
        Some(1),
        "completed",
        "2026-01-01T10:00:00Z",
    );
    let b = artifact(
        "DBG-001",
        "debug",
        Some(1),
        "completed",
        "2026-01-02T10:00:00Z",
    );
    let p = with_artifacts(two_phases(), vec![a, b]);
    assert_eq!(p.infer_auto("phase 1").position, Position::Stage("plan"));
}

#[test]
fn equal_timestamps_fall_back_to_registry_order() {
    let a = artifact(
        "ANL-001",
        "analyze",
        Some(1),
        "completed",
        "2026-01-01T10:00:00Z",
    );
    let b = artifact(
        "PLN-001",
        "plan",
        Some(1),
        "completed",
        "2026-01-01T10:00:00Z",
    );
    let p = with_artifacts(two_phases(), vec![a, b]);
    assert_eq!(p.infer_auto("phase 1").position, Position::Stage("execute"));
}

// --- refinement from verify results ---

fn verified(extra: Vec<serde_json::Value>) -> (Project, serde_json::Value) {
    let v = artifact(
        "VRF-001",
        "verify",
        Some(1),
        "completed",
        "2026-01-03T10:00:00Z",
    );
    let mut all = vec![
        artifact(
            "EXC-001",
            "execute",
            Some(1),
            "completed",
            "2026-01-02T10:00:00Z",
        ),
        v.clone(),
    ];
    all.extend(extra);
    (with_artifacts(two_phases(), all), v)
}

#[test]
fn verification_failed_is_verify_failed_with_gaps() {
    let (p, v) = verified(vec![]);
    p.write_json(
        &format!("{}/verification.json", dir(&v)),
        json!({"passed": false, "gaps": ["login 500s", {"description": "no logout"}]}),
    );
    let inf = p.infer_auto("phase 1");
    assert_eq!(
        inf.position,
        Position::Failed {
            kind: Failed::Verify,
            gaps: vec!["login 500s".into(), "no logout".into()]
        }
    );
    assert_eq!(inf.position.name(), "verify-failed");
    // Gaps alone fail too.
    p.write_json(
        &format!("{}/verification.json", dir(&v)),
        json!({"passed": true, "gaps": ["x"]}),
    );
    assert!(matches!(
        p.infer_auto("phase 1").position,
        Position::Failed {
            kind: Failed::Verify,
            ..
        }
    ));
}

#[test]
fn an_artifact_path_naming_a_file_means_its_folder() {
    let mut v = artifact(
        "VRF-001",
        "verify",
        Some(1),
        "completed",
        "2026-01-03T10:00:00Z",
    );
    let folder = v["path"].as_str().unwrap().to_string();
    v["path"] = json!(format!("{folder}/verification.json"));
    let p = with_artifacts(two_phases(), vec![]);
    let mut state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p.workflow().join("state.json")).unwrap())
            .unwrap();
    state["artifacts"] = json!([v]);
    p.write_json(".workflow/state.json", state);
    p.write_json(
        &format!(".workflow/{folder}/verification.json"),
        json!({"passed": true}),
    );
    assert_eq!(
        p.infer_auto("phase 1").position,
        Position::Stage("business-test")
    );
}

#[test]
fn verification_passed_without_review_is_business_test() {
    let (p, v) = verified(vec![]);
    p.write_json(
        &format!("{}/verification.json", dir(&v)),
        json!({"passed": true, "gaps": []}),
    );
    assert_eq!(
        p.infer_auto("phase 1").position,
        Position::Stage("business-test")
    );
}

#[test]
fn verify_artifact_without_its_result_file_reruns_verify() {
    let (p, _) = verified(vec![]);
    assert_eq!(p.infer_auto("phase 1").position, Position::Stage("verify"));
}

#[test]
fn review_block_is_review_failed() {
    let r = artifact(
        "REV-001",
        "review",
        Some(1),
        "completed",
        "2026-01-04T10:00:00Z",
    );
    let (p, v) = verified(vec![r.clone()]);
    p.write_json(
        &format!("{}/verification.json", dir(&v)),
        json!({"passed": true}),
    );
    p.write_json(
        &format!("{}/review.json", dir(&r)),
        json!({"verdict": "BLOCK", "issues": [{"title": "SQL injection"}]}),
    );
    assert_eq!(
        p.infer_auto("phase 1").position,
        Position::Failed {
            kind: Failed::Review,
            gaps: vec!["SQL injection".into()]
        }
    );
}

#[test]
fn review_passing_without_uat_is_test() {
    let r = artifact(
        "REV-001",
        "review",
        Some(1),
        "completed",
        "2026-01-04T10:00:00Z",
    );
    let (p, v) = verified(vec![r.clone()]);
    p.write_json(
        &format!("{}/verification.json", dir(&v)),
        json!({"passed": true}),
    );
    p.write_json(
        &format!("{}/review.json", dir(&r)),
        json!({"verdict": "PASS"}),
    );
    assert_eq!(p.infer_auto("phase 1").position, Position::Stage("test"));
}

#[test]
fn review_in_the_verify_dir_counts() {
    let (p, v) = verified(vec![]);
    p.write_json(
        &format!("{}/verification.json", dir(&v)),
        json!({"passed": true}),
    );
    p.write_json(
        &format!("{}/review.json", dir(&v)),
        json!({"verdict": "WARN"}),
    );
    assert_eq!(p.infer_auto("phase 1").position, Position::Stage("test"));
}

#[test]
fn a_review_older_than_the_verify_is_not_read() {
    let old = artifact(
        "REV-000",
        "review",
        Some(1),
        "completed",
        "2026-01-01T00:00:00Z",
    );
    let (p, v) = verified(vec![old.clone()]);
    p.write_json(
        &format!("{}/verification.json", dir(&v)),
        json!({"passed": true}),
    );
    p.write_json(
        &format!("{}/review.json", dir(&old)),
        json!({"verdict": "PASS"}),
    );
    assert_eq!(
        p.infer_auto("phase 1").position,
        Position::Stage("business-test")
    );
}

fn tested(uat: &str) -> Position {
    let t = artifact(
        "TST-001",
        "test",
        Some(1),
        "completed",
        "2026-01-05T10:00:00Z",
    );
    let r = artifact(
        "REV-001",
        "review",
        Some(1),
        "completed",
        "2026-01-04T10:00:00Z",
    );
    let (p, v) = verified(vec![r.clone(), t.clone()]);
    p.write_json(
        &format!("{}/verification.json", dir(&v)),
        json!({"passed": true}),
    );
    p.write_json(
        &format!("{}/review.json", dir(&r)),
        json!({"verdict": "PASS"}),
    );
    p.write(&format!("{}/uat.md", dir(&t)), uat);
    p.infer_auto("phase 1").position
}

#[test]
fn uat_all_passed_is_milestone_audit() {
    let uat = "# UAT\n| case | result |\n| login | ✅ pass |\n| logout | passed |\nSummary: 2 passed, 0 failed\n";
    assert_eq!(tested(uat), Position::Stage("milestone-audit"));
}

#[test]
fn uat_with_failures_is_test_failed() {
    let uat = "# UAT\n- login: PASS\n- export: FAIL (timeout)\n- import ❌ wrong encoding\n";
    assert_eq!(
        tested(uat),
        Position::Failed {
            kind: Failed::Test,
            gaps: vec![
                "- export: FAIL (timeout)".into(),
                "- import ❌ wrong encoding".into()
            ]
        }
    );
}

#[test]
fn inconclusive_uat_reruns_test() {
    assert_eq!(tested("# UAT\nnothing ran yet\n"), Position::Stage("test"));
}

// --- build rule 2: completed stages ---

#[test]
fn completed_stages_of_the_current_cycle() {
    let arts = vec![
        artifact(
            "ANL-001",
            "analyze",
            Some(1),
            "completed",
            "2026-01-01T10:00:00Z",
        ),
        artifact(
            "PLN-001",
            "plan",
            Some(1),
            "completed",
            "2026-01-02T10:00:00Z",
        ),
        artifact(
            "EXC-001",
            "execute",
            Some(1),
            "failed",
            "2026-01-03T10:00:00Z",
        ),
        artifact(
            "PLN-002",
            "plan",
            Some(2),
            "completed",
            "2026-01-02T10:00:00Z",
        ),
    ];
    let p = with_artifacts(two_phases(), arts);
    let inf = p.infer_auto("phase 1");
    assert_eq!(inf.completed_stages, vec!["analyze", "plan"]);
    assert_eq!(inf.position, Position::Stage("execute"));
}

#[test]
fn a_replan_makes_the_later_stages_stale() {
    let arts = vec![
        artifact(
            "ANL-001",
            "analyze",
            Some(1),
            "completed",
            "2026-01-01T10:00:00Z",
        ),
        artifact(
            "PLN-001",
            "plan",
            Some(1),
            "completed",
            "2026-01-02T10:00:00Z",
        ),
        artifact(
            "EXC-001",
            "execute",
            Some(1),
            "completed",
            "2026-01-03T10:00:00Z",
        ),
        artifact(
            "VRF-001",
            "verify",
            Some(1),
            "completed",
            "2026-01-04T10:00:00Z",
        ),
        artifact(
            "PLN-002",
            "plan",
            Some(1),
            "completed",
            "2026-01-05T10:00:00Z",
        ),
    ];
    let p = with_artifacts(two_phases(), arts);
    let inf = p.infer_auto("phase 1");
    assert_eq!(inf.completed_stages, vec!["analyze", "plan"]);
    assert_eq!(inf.position, Position::Stage("execute"));
}

#[test]
fn unified_mode_counts_the_whole_milestone() {
    let arts = vec![
        artifact(
            "ANL-001",
            "analyze",
            Some(1),
            "completed",
            "2026-01-01T10:00:00Z",
        ),
        artifact(
            "ANL-002",
            "analyze",
            Some(2),
            "completed",
            "2026-01-01T11:00:00Z",
        ),
        artifact(
            "PLN-002",
            "plan",
            Some(2),
            "completed",
            "2026-01-02T10:00:00Z",
        ),
        artifact(
            "EXC-001",
            "execute",
            Some(1),
            "in_progress",
            "2026-01-03T10:00:00Z",
        ),
    ];
    let p = with_artifacts(two_phases(), arts);
    let inf = p.infer_auto("continue");
    assert_eq!(
        inf.phase,
        Some(1),
        "rule 3: the in-progress artifact's phase"
    );
    assert_eq!(
        inf.planning_mode,
        Some(baton_ralph::chain::PlanningMode::Unified)
    );
    assert_eq!(inf.completed_stages, vec!["analyze", "plan"]);
}
