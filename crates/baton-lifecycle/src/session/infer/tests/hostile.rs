//! A damaged or hostile `.workflow/`: every problem is an error naming the file and the field,
//! never a panic, an unbounded read or a read outside `.workflow/`.

use super::fixture::*;
use crate::session::infer::InferError;
use serde_json::json;

fn field_of(err: &InferError) -> String {
    match err {
        InferError::Field { field, .. } | InferError::PathOutside { field, .. } => field.clone(),
        other => panic!("expected a located field error, got {other:?}"),
    }
}

fn located(state: serde_json::Value) -> (String, InferError) {
    let p = Project::with_state(state);
    let err = p.infer_err("phase 1");
    (field_of(&err), err)
}

#[test]
fn wrong_types_name_the_field() {
    let cases = [
        (json!([1, 2]), "(root)"),
        (json!({"artifacts": {"a": 1}}), "artifacts"),
        (json!({"milestones": "M1"}), "milestones"),
        (json!({"current_milestone": 3}), "current_milestone"),
        (json!({"milestones": [{"id": 1}]}), "milestones[0].id"),
        (
            json!({"milestones": [{"id": "M1", "phases": [true]}]}),
            "milestones[0].phases[0]",
        ),
        (
            json!({"milestones": [{"id": "M1", "phases": [-1]}]}),
            "milestones[0].phases[0]",
        ),
        (
            json!({"milestones": [{"id": "M1", "phases": [{"status": "x"}]}]}),
            "milestones[0].phases[0].number",
        ),
        (
            json!({"milestones": [{"id": "M1", "phase_slugs": {"one": "auth"}}]}),
            "milestones[0].phase_slugs.one",
        ),
        (
            json!({"milestones": [{"id": "M1", "phase_slugs": 5}]}),
            "milestones[0].phase_slugs",
        ),
        (
            json!({"artifacts": [{"id": "A", "type": "plan", "status": "completed"},
                                  {"id": "B", "type": "plan", "status": "completed", "phase": "x"}]}),
            "artifacts[1].phase",
        ),
        (
            json!({"artifacts": [{"id": "A", "type": "plan", "status": "done"}]}),
            "artifacts[0].status",
        ),
        (
            json!({"artifacts": [{"id": "A", "type": "plan", "status": "completed", "created_at": 17}]}),
            "artifacts[0].created_at",
        ),
        (
            json!({"artifacts": [{"id": "A", "type": "plan", "status": "completed", "phase": 1e300}]}),
            "artifacts[0].phase",
        ),
    ];
    for (state, field) in cases {
        let (got, err) = located(state.clone());
        assert_eq!(got, field, "{state}");
        assert_eq!(err.code(), "PROJECT_FILE_INVALID");
        assert!(err.to_string().contains("state.json"), "{err}");
        assert!(err.hint().is_some());
    }
}

#[test]
fn missing_required_fields_name_the_field() {
    for (state, field) in [
        (
            json!({"artifacts": [{"type": "plan", "status": "completed"}]}),
            "artifacts[0].id",
        ),
        (
            json!({"artifacts": [{"id": "A", "status": "completed"}]}),
            "artifacts[0].type",
        ),
        (
            json!({"artifacts": [{"id": "A", "type": "plan"}]}),
            "artifacts[0].status",
        ),
        (json!({"milestones": [{"name": "x"}]}), "milestones[0].id"),
    ] {
        let (got, err) = located(state);
        assert_eq!(got, field);
        assert!(err.to_string().contains("missing"), "{err}");
    }
}

#[test]
fn not_json_gives_the_line() {
    let p = Project::empty();
    p.write(".workflow/state.json", "{\n  \"milestones\": [\n  oops\n}");
    let err = p.infer_err("phase 1");
    assert_eq!(err.code(), "PROJECT_FILE_INVALID");
    assert!(matches!(err, InferError::Json { line: 3, .. }), "{err:?}");
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let p = Project::empty();
    let deep = format!("{{\"x\": {}{}}}", "[".repeat(100_000), "]".repeat(100_000));
    p.write(".workflow/state.json", &deep);
    assert!(matches!(p.infer_err("phase 1"), InferError::Json { .. }));
}

#[test]
fn a_huge_state_file_is_refused_unread() {
    let p = Project::empty();
    let pad = "x".repeat((crate::session::infer::files::MAX_STATE_BYTES + 1) as usize);
    p.write(".workflow/state.json", &format!("{{\"pad\": \"{pad}\"}}"));
    let err = p.infer_err("phase 1");
    assert_eq!(err.code(), "PROJECT_FILE_TOO_LARGE");
}

#[test]
fn a_state_file_that_is_a_directory_is_an_error() {
    let p = Project::empty();
    std::fs::create_dir_all(p.workflow().join("state.json")).unwrap();
    let err = p.infer_err("phase 1");
    assert!(err.to_string().contains("state.json"), "{err}");
}

#[test]
fn artifact_paths_outside_the_workflow_are_refused() {
    for bad in ["../../etc", "/etc", "scratch/../../x", ""] {
        let state = json!({"milestones": [{"id": "M1", "phases": [1]}],
            "artifacts": [{"id": "A", "type": "verify", "phase": 1, "status": "completed", "path": bad}]});
        let (field, err) = located(state);
        assert_eq!(field, "artifacts[0].path", "{bad:?}");
        assert_eq!(err.code(), "ARTIFACT_PATH_OUTSIDE");
    }
}

#[cfg(unix)]
#[test]
fn a_symlink_out_of_the_workflow_is_refused_when_read() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("verification.json"),
        r#"{"passed": true}"#,
    )
    .unwrap();
    let state = json!({"current_milestone": "M1", "milestones": [{"id": "M1", "phases": [1]}],
        "artifacts": [{"id": "V", "type": "verify", "phase": 1, "status": "completed",
                       "path": "scratch/link", "created_at": "2026-01-01T00:00:00Z"}]});
    let p = Project::with_state(state);
    std::fs::create_dir_all(p.workflow().join("scratch")).unwrap();
    std::os::unix::fs::symlink(outside.path(), p.workflow().join("scratch/link")).unwrap();
    let err = p.infer_err("phase 1");
    assert_eq!(err.code(), "ARTIFACT_PATH_OUTSIDE");
    assert_eq!(field_of(&err), "artifacts[0].path");
}

#[test]
fn damaged_result_files_name_the_file_and_field() {
    let cases = [
        ("verification.json", r#"{"passed": "yes"}"#, "passed"),
        ("verification.json", r#"{"gaps": []}"#, "passed"),
        (
            "verification.json",
            r#"{"passed": false, "gaps": "many"}"#,
            "gaps",
        ),
        (
            "verification.json",
            r#"{"passed": false, "gaps": [3]}"#,
            "gaps[0]",
        ),
        ("verification.json", r#"[true]"#, "(root)"),
    ];
    for (file, text, field) in cases {
        let v = artifact(
            "VRF-001",
            "verify",
            Some(1),
            "completed",
            "2026-01-03T10:00:00Z",
        );
        let p = with_artifacts(two_phases(), vec![v.clone()]);
        p.write(&format!("{}/{file}", dir(&v)), text);
        let err = p.infer_err("phase 1");
        assert_eq!(field_of(&err), field, "{text}");
        assert!(err.to_string().contains(file), "{err}");
    }
    let v = artifact(
        "VRF-001",
        "verify",
        Some(1),
        "completed",
        "2026-01-03T10:00:00Z",
    );
    let p = with_artifacts(two_phases(), vec![v.clone()]);
    p.write(
        &format!("{}/verification.json", dir(&v)),
        r#"{"passed": true}"#,
    );
    p.write(&format!("{}/review.json", dir(&v)), r#"{"verdict": 1}"#);
    assert_eq!(field_of(&p.infer_err("phase 1")), "verdict");
}

#[test]
fn a_damaged_conclusions_file_names_its_field() {
    let a = artifact(
        "ANL-002",
        "analyze",
        None,
        "completed",
        "2026-01-01T10:00:00Z",
    );
    let p = with_artifacts(json!({"milestones": []}), vec![a.clone()]);
    p.write(
        &format!("{}/conclusions.json", dir(&a)),
        r#"{"scope_verdict": "gigantic"}"#,
    );
    let err = p.infer_err("continue");
    assert_eq!(field_of(&err), "scope_verdict");
    assert!(err.to_string().contains("conclusions.json"), "{err}");
}

#[test]
fn a_huge_result_file_is_refused() {
    let v = artifact(
        "VRF-001",
        "verify",
        Some(1),
        "completed",
        "2026-01-03T10:00:00Z",
    );
    let p = with_artifacts(two_phases(), vec![v.clone()]);
    let pad = " ".repeat((crate::session::infer::files::MAX_RESULT_BYTES + 1) as usize);
    p.write(
        &format!("{}/verification.json", dir(&v)),
        &format!("{{\"passed\": true}}{pad}"),
    );
    assert_eq!(p.infer_err("phase 1").code(), "PROJECT_FILE_TOO_LARGE");
}

#[test]
fn unknown_fields_and_types_are_ignored() {
    let state = json!({"version": "2.0", "extra": {"a": [1]}, "current_milestone": null,
        "milestones": [{"id": "M1", "phases": ["1-auth", {"id": "2", "name": "billing"}], "whatever": 1}],
        "artifacts": [{"id": "Z", "type": "harvest", "phase": 1, "status": "completed"}]});
    let p = Project::with_state(state);
    let inf = p.infer_auto("phase 1");
    assert_eq!(inf.phase_slug.as_deref(), Some("auth"));
    assert_eq!(
        inf.position,
        crate::session::infer::Position::Stage("analyze")
    );
}

/// A large registry that is valid but shaped to make naive lookups quadratic: 20,000 phases
/// without a status, each with a completed verify artifact (rule 4 checks them all), and
/// milestone-less artifacts (unified mode's D-007 lookups). Linear work takes well under a
/// second even unoptimised.
#[test]
fn a_large_registry_stays_fast() {
    let n = 20_000u64;
    let phases: Vec<u64> = (1..=n).collect();
    let mut arts: Vec<serde_json::Value> = phases
        .iter()
        .map(|i| {
            json!({"id": format!("V-{i}"), "type": "verify", "phase": i,
                        "status": "completed", "created_at": "2026-01-01T00:00:00Z"})
        })
        .collect();
    arts.push(json!({"id": "P-1", "type": "plan", "phase": n + 1, "status": "in_progress"}));
    let state = json!({"current_milestone": "M1",
        "milestones": [{"id": "M1", "phases": phases}, {"id": "M2", "phases": [n + 1, n + 2]}],
        "artifacts": arts});
    let p = Project::with_state(state);
    let started = std::time::Instant::now();
    let inf = p.infer_auto("keep going");
    let took = started.elapsed();
    assert_eq!(inf.phase, Some(n + 1), "rule 3: the in-progress artifact");
    assert_eq!(inf.milestone.as_deref(), Some("M2"));
    assert!(took < std::time::Duration::from_secs(3), "took {took:?}");
    // Rule 4 over all of them: every phase of M1 verified, so none is incomplete → ask.
    let mut state2: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p.workflow().join("state.json")).unwrap())
            .unwrap();
    state2["artifacts"].as_array_mut().unwrap().pop();
    state2["milestones"].as_array_mut().unwrap().pop();
    let p = Project::with_state(state2);
    let started = std::time::Instant::now();
    let inf = p.infer_auto("keep going");
    let took = started.elapsed();
    assert_eq!(inf.questions.len(), 1);
    assert_eq!(inf.questions[0].options.len(), 50, "options are capped");
    assert!(took < std::time::Duration::from_secs(3), "took {took:?}");
    eprintln!("large registry: {took:?}");
}
