//! A person's decision on a paused session, on real session files: a failed step retried,
//! skipped or abandoned; an escalation let through; choices that do not fit refused with
//! nothing written. The files pass ralph's check after every change.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::session_world;
use baton_lifecycle::ralph::check::{self, Scope};
use baton_lifecycle::ralph::discovery::{self, Pick};
use baton_lifecycle::ralph::verbs::{self, decide::DecideArgs};
use baton_lifecycle::session::apply::{finish_step, pause_at_escalation};
use baton_lifecycle::session::completion;
use baton_lifecycle::session::intervene::{self, Choice, Pause};
use serde_json::Value;
use session_world::World;

const OWNER: &str = "person@test";

fn doc(w: &World) -> Value {
    let doc: Value = serde_json::from_slice(&std::fs::read(&w.status).unwrap()).unwrap();
    let findings = check::check(&w.ctx, doc.as_object(), &[], Scope::All);
    assert!(!check::has_errors(&findings), "{findings:?}");
    doc
}

fn pause(w: &World) -> Option<Pause> {
    let s = discovery::find(&w.ctx, None, Pick::Any)
        .unwrap()
        .into_session()
        .unwrap();
    intervene::why_paused(&s)
}

fn claim(w: &World) -> usize {
    let out = verbs::next::run(&w.ctx, None, Some(OWNER), None).unwrap();
    out.json["index"].as_u64().unwrap() as usize
}

fn finish(w: &World, verdict: &str) -> usize {
    let i = claim(w);
    let c = completion::parse(verdict).unwrap();
    finish_step(&w.ctx, None, i, Some(OWNER), Some(c)).unwrap();
    i
}

/// A session whose first step failed (BLOCKED).
fn failed() -> World {
    let w = session_world::world("plan,execute,milestone-complete", OWNER);
    finish(
        &w,
        r#"{"status":"BLOCKED","reason":"the API key is missing"}"#,
    );
    w
}

#[test]
fn a_failed_step_is_retried_with_a_fresh_allowance() {
    let w = failed();
    assert_eq!(
        pause(&w),
        Some(Pause::FailedStep {
            index: 0,
            label: doc(&w)["steps"][0]["skill"].as_str().unwrap().to_string(),
            reason: Some("the API key is missing".into()),
        })
    );
    intervene::decide(&w.ctx, None, Choice::Retry, "").unwrap();
    let d = doc(&w);
    assert_eq!(d["status"], "running");
    assert_eq!(d["steps"][0]["status"], "pending");
    assert_eq!(d["steps"][0]["retried"], false);
    assert_eq!(d["steps"][0]["completion_status"], Value::Null);
    assert_eq!(pause(&w), None);
    // The step runs again.
    assert_eq!(claim(&w), 0);
}

#[test]
fn a_failed_step_is_skipped_or_the_session_abandoned() {
    let w = failed();
    intervene::decide(&w.ctx, None, Choice::Skip, "done by hand").unwrap();
    let d = doc(&w);
    assert_eq!(d["status"], "running");
    assert_eq!(d["steps"][0]["status"], "skipped");
    assert_eq!(d["steps"][0]["concerns"], "done by hand");
    assert_eq!(claim(&w), 1);

    let w = failed();
    intervene::decide(&w.ctx, None, Choice::Abort, "").unwrap();
    let d = doc(&w);
    assert_eq!(d["status"], "failed");
    assert_eq!(d["abandon_reason"], "aborted by a person");
}

#[test]
fn a_choice_that_does_not_fit_is_refused_and_nothing_is_written() {
    let w = failed();
    let before = std::fs::read(&w.status).unwrap();
    let e = intervene::decide(&w.ctx, None, Choice::Proceed, "").unwrap_err();
    assert_eq!(e.code(), "CHOICE_NOT_APPLICABLE");
    assert!(e.to_string().contains("retry, skip, abort"), "{e}");
    assert_eq!(std::fs::read(&w.status).unwrap(), before);

    let running = session_world::world("plan", OWNER);
    let e = intervene::decide(&running.ctx, None, Choice::Retry, "").unwrap_err();
    assert_eq!(e.code(), "SESSION_NOT_PAUSED");
    assert_eq!(Choice::parse(" Abandon "), Some(Choice::Abort));
    assert_eq!(Choice::parse("later"), None);
}

#[test]
fn an_escalation_is_let_through_and_logged() {
    let w = session_world::world("verify,milestone-complete", OWNER);
    finish(&w, r#"{"status":"DONE"}"#);
    let gate = doc(&w)["steps"]
        .as_array()
        .unwrap()
        .iter()
        .position(|s| s["decision"] == "post-verify")
        .unwrap();
    let args = DecideArgs {
        index: gate.to_string(),
        verdict: "escalate".into(),
        confidence: "90".into(),
        ..DecideArgs::default()
    };
    verbs::decide::run(&w.ctx, None, &args).unwrap();
    finish(&w, r#"{"status":"DONE"}"#); // quality-debug
    let escalation = doc(&w)["steps"]
        .as_array()
        .unwrap()
        .iter()
        .position(|s| s["decision"] == "post-debug-escalate")
        .unwrap();
    pause_at_escalation(&w.ctx, None, escalation).unwrap();
    assert_eq!(pause(&w), Some(Pause::Escalation { index: escalation }));
    let e = intervene::decide(&w.ctx, None, Choice::Retry, "").unwrap_err();
    assert_eq!(e.code(), "CHOICE_NOT_APPLICABLE");

    intervene::decide(&w.ctx, None, Choice::Proceed, "fixed the header by hand").unwrap();
    let d = doc(&w);
    assert_eq!(d["status"], "running");
    assert_eq!(d["steps"][escalation]["status"], "completed");
    assert_eq!(d["steps"][escalation]["verdict"], "proceed");
    let log = std::fs::read_to_string(w.status.with_file_name("decisions.ndjson")).unwrap();
    let last: Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(last["node_id"], "post-debug-escalate");
    assert_eq!(last["verdict"], "proceed");
    assert!(
        last["summary"]
            .as_str()
            .unwrap()
            .ends_with("fixed the header by hand")
    );
}
