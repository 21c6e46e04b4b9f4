//! Property test of the ralph verbs: random sequences of `next`, `complete`, `retry`, `skip`,
//! `pause`, `resume`, `decide`, `insert`, `release` and `abandon` on one session, with the file
//! re-read and checked after every verb:
//!
//! - it parses and validates (indexes contiguous, known statuses);
//! - a refused verb wrote nothing (same bytes); an accepted one bumped `revision` by at most 1;
//! - only the step the active pointer names is running, and the claim names the same step;
//! - `next` never claims a step while an earlier step is still pending (no step past a gate);
//! - a completed gate carries its verdict and is confirmed;
//! - a completed session has every step confirmed or skipped.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_lifecycle::ralph::Context;
use baton_lifecycle::ralph::schema;
use baton_lifecycle::ralph::verbs::{
    self, complete::CompleteArgs, decide::DecideArgs, insert::InsertArgs, new::NewArgs,
};
use proptest::prelude::*;
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone)]
enum Op {
    Next(u8),
    CompleteActive(u8),
    Complete(usize, u8),
    Retry(usize),
    Skip(usize, bool),
    Pause,
    Resume,
    DecideFirstPending(u8, u8),
    Decide(usize, u8, u8),
    Insert(usize, u8),
    Release(bool),
    Abandon,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => any::<u8>().prop_map(Op::Next),
        6 => (0u8..4).prop_map(Op::CompleteActive),
        1 => (0usize..40, 0u8..4).prop_map(|(i, s)| Op::Complete(i, s)),
        1 => (0usize..40).prop_map(Op::Retry),
        1 => (0usize..40, any::<bool>()).prop_map(|(i, f)| Op::Skip(i, f)),
        1 => Just(Op::Pause),
        2 => Just(Op::Resume),
        4 => (0u8..3, 0u8..=100).prop_map(|(v, c)| Op::DecideFirstPending(v, c)),
        1 => (0usize..40, 0u8..3, 0u8..=100).prop_map(|(i, v, c)| Op::Decide(i, v, c)),
        1 => (0usize..40, 0u8..5).prop_map(|(i, t)| Op::Insert(i, t)),
        1 => any::<bool>().prop_map(Op::Release),
        1 => (0u8..10).prop_filter_map("rare", |x| (x == 0).then_some(Op::Abandon)),
    ]
}

struct World {
    _tmp: tempfile::TempDir,
    ctx: Context,
    status: PathBuf,
}

fn world() -> World {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let project = tmp.path().join("project");
    // This crate's own manifest dir: the shared target dir may hold a testkit built elsewhere.
    let skills = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/skills");
    baton_testkit::copy_dir(&skills.join("claude"), &home.join(".claude"));
    baton_testkit::copy_dir(&skills.join("maestro"), &home.join(".maestro"));
    std::fs::create_dir_all(&project).unwrap();
    let ctx = Context {
        project: project.clone(),
        home: Some(home.clone()),
        maestro_home: Some(home.join(".maestro")),
        cli: "baton ralph".into(),
        owner: "prop@test".into(),
        lock_timeout: Duration::from_secs(5),
        bundled_commands: None,
        warnings: Default::default(),
    };
    let out = verbs::new::run(
        &ctx,
        &NewArgs {
            intent: "add CSV export".into(),
            chain: "plan,verify,review,goal-audit,milestone-complete".into(),
            ..NewArgs::default()
        },
    )
    .unwrap();
    let path = out.json["path"].as_str().unwrap().to_string();
    World {
        _tmp: tmp,
        ctx,
        status: PathBuf::from(path),
    }
}

const STATUSES: [&str; 4] = ["DONE", "DONE_WITH_CONCERNS", "NEEDS_RETRY", "BLOCKED"];
const VERDICTS: [&str; 3] = ["proceed", "fix", "escalate"];
const TEMPLATES: [&str; 5] = [
    "post-verify",
    "post-business-test",
    "post-review",
    "post-test",
    "post-goal-audit",
];

fn steps(doc: &Value) -> &Vec<Value> {
    doc["steps"].as_array().unwrap()
}

/// Applies one op; returns whether it was accepted and, for an accepted `next`, the step.
fn apply(w: &World, doc: &Value, op: &Op) -> (bool, Option<usize>) {
    let ctx = &w.ctx;
    let len = steps(doc).len();
    let active = doc["active_step_index"].as_u64().map(|a| a as usize);
    let first_pending = steps(doc).iter().position(|s| s["status"] == "pending");
    let complete = |i: usize, s: u8| {
        let args = CompleteArgs {
            index: i.to_string(),
            status: STATUSES[s as usize].into(),
            evidence: vec!["e".into()],
            ..CompleteArgs::default()
        };
        verbs::complete::run(ctx, None, &args).is_ok()
    };
    let decide = |i: usize, v: u8, c: u8| {
        let args = DecideArgs {
            index: i.to_string(),
            verdict: VERDICTS[v as usize].into(),
            confidence: c.to_string(),
            gaps: vec!["a gap".into()],
            ..DecideArgs::default()
        };
        verbs::decide::run(ctx, None, &args).is_ok()
    };
    match op {
        Op::Next(owner) => match verbs::next::run(ctx, None, Some(&format!("o{owner}")), None) {
            Ok(out) => (true, out.json["index"].as_u64().map(|i| i as usize)),
            Err(_) => (false, None),
        },
        Op::CompleteActive(s) => (active.is_some_and(|a| complete(a, *s)), None),
        Op::Complete(i, s) => (complete(i % (len + 2), *s), None),
        Op::Retry(i) => {
            let args = CompleteArgs {
                index: (i % (len + 1)).to_string(),
                status: "NEEDS_RETRY".into(),
                ..CompleteArgs::default()
            };
            (verbs::complete::run(ctx, None, &args).is_ok(), None)
        }
        Op::Skip(i, force) => {
            let idx = (i % (len + 1)).to_string();
            (
                verbs::control::skip(ctx, None, &idx, None, *force, None).is_ok(),
                None,
            )
        }
        Op::Pause => (verbs::control::pause(ctx, None, None).is_ok(), None),
        Op::Resume => (verbs::control::resume(ctx, None, None).is_ok(), None),
        Op::DecideFirstPending(v, c) => (first_pending.is_some_and(|i| decide(i, *v, *c)), None),
        Op::Decide(i, v, c) => (decide(i % (len + 1), *v, *c), None),
        Op::Insert(i, t) if len < 60 => {
            let args = InsertArgs {
                after: (i % (len + 1)).to_string(),
                template: TEMPLATES[*t as usize].into(),
                gaps: vec!["G1: gap".into()],
                ..InsertArgs::default()
            };
            (verbs::insert::run(ctx, None, &args).is_ok(), None)
        }
        Op::Insert(..) => (false, None),
        Op::Release(force) => (
            verbs::control::release(ctx, None, *force, None).is_ok(),
            None,
        ),
        Op::Abandon => (verbs::control::abandon(ctx, None, None, None).is_ok(), None),
    }
}

fn check(before: &[u8], after: &[u8], accepted: bool, claimed: Option<usize>, op: &Op) {
    let doc = schema::parse(after).unwrap_or_else(|e| panic!("{op:?}: invalid file {e:?}"));
    let old = schema::parse(before).unwrap();
    let (r0, r1) = (
        old["revision"].as_u64().unwrap_or(0),
        doc["revision"].as_u64().unwrap_or(0),
    );
    if accepted {
        assert!(r1 == r0 || r1 == r0 + 1, "{op:?}: revision {r0} → {r1}");
    } else {
        assert_eq!(before, after, "{op:?} was refused but wrote");
    }
    let active = doc["active_step_index"].as_u64().map(|a| a as usize);
    for (i, s) in steps(&doc).iter().enumerate() {
        if s["status"] == "running" {
            assert_eq!(
                active,
                Some(i),
                "{op:?}: step {i} running without the pointer"
            );
        }
        if s["decision"].is_string() && s["status"] == "completed" {
            assert_eq!(s["completion_confirmed"], true, "{op:?}: gate {i}");
            assert!(s["verdict"].is_string(), "{op:?}: gate {i} without verdict");
        }
    }
    if let Some(a) = active {
        assert_eq!(
            steps(&doc)[a]["status"],
            "running",
            "{op:?}: pointer on a step not running"
        );
    }
    match &doc["active_claim"] {
        Value::Null => {}
        c => assert_eq!(c["index"].as_u64().map(|i| i as usize), active, "{op:?}"),
    }
    if let Some(k) = claimed {
        assert!(
            steps(&doc)[..k].iter().all(|s| s["status"] != "pending"),
            "{op:?}: claimed {k} past a pending step"
        );
    }
    if doc["status"] == "completed" {
        assert!(steps(&doc).iter().all(|s| s["status"] == "skipped"
            || (s["status"] == "completed" && s["completion_confirmed"] == true)));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn verbs_keep_the_session_consistent(ops in proptest::collection::vec(op(), 1..40)) {
        let w = world();
        for op in &ops {
            let before = std::fs::read(&w.status).unwrap();
            let doc: Value = serde_json::from_slice(&before).unwrap();
            let (accepted, claimed) = apply(&w, &doc, op);
            let after = std::fs::read(&w.status).unwrap();
            check(&before, &after, accepted, claimed, op);
        }
    }
}

/// The walk a well-behaved agent does reaches the end: every step claimed once, every gate
/// decided, the session completed.
#[test]
fn an_honest_walk_completes_the_session() {
    let w = world();
    let mut claims = 0;
    for _ in 0..200 {
        let doc: Value = serde_json::from_slice(&std::fs::read(&w.status).unwrap()).unwrap();
        if doc["status"] == "completed" {
            break;
        }
        let Some(i) = steps(&doc).iter().position(|s| s["status"] == "pending") else {
            panic!("nothing pending in a running session");
        };
        if steps(&doc)[i]["decision"].is_string() {
            assert!(apply(&w, &doc, &Op::DecideFirstPending(0, 90)).0);
        } else {
            let (ok, claimed) = apply(&w, &doc, &Op::Next(1));
            assert!(ok);
            assert_eq!(claimed, Some(i));
            claims += 1;
            let doc: Value = serde_json::from_slice(&std::fs::read(&w.status).unwrap()).unwrap();
            assert!(apply(&w, &doc, &Op::CompleteActive(0)).0);
        }
    }
    let doc: Value = serde_json::from_slice(&std::fs::read(&w.status).unwrap()).unwrap();
    assert_eq!(doc["status"], "completed");
    assert_eq!(claims, 4);
    // new + one next and one complete per step + one decide per gate (4 gates).
    assert_eq!(doc["revision"], 1 + 2 * 4 + 4);
}
