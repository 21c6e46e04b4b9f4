//! The end of a session tick on real session files: a step's `session.complete` (or its
//! absence) and a gate's `---VERDICT---` answer, applied through ralph's verbs. After every
//! change the file must still pass ralph's check without an E finding.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::session_world;
use baton_lifecycle::ralph::verbs;
use baton_lifecycle::session::apply::{finish_step, pause_at_escalation, settle_gate};
use baton_lifecycle::session::completion::{self, Status};
use serde_json::Value;
use session_world::World;

fn world(chain: &str) -> World {
    session_world::world(chain, "tick@test")
}

impl World {
    fn step(&self, i: usize) -> Value {
        self.doc()["steps"][i].clone()
    }

    /// Claims the next execution step, as a tick does before running it.
    fn claim(&self) -> usize {
        let out = verbs::next::run(&self.ctx, None, Some("tick@test"), None).unwrap();
        out.json["index"].as_u64().unwrap() as usize
    }

    /// Runs every step up to the first pending gate named `gate` (other gates proceed).
    fn advance_to(&self, gate: &str) -> usize {
        loop {
            let doc = self.doc();
            let steps = doc["steps"].as_array().unwrap();
            let i = steps.iter().position(|s| s["status"] == "pending").unwrap();
            match steps[i]["decision"].as_str() {
                Some(g) if g == gate => return i,
                Some(_) => {
                    settle_gate(&self.ctx, None, i, &quality("proceed", 90)).unwrap();
                }
                None => {
                    let i = self.claim();
                    let done = completion::parse(r#"{"status":"DONE"}"#).unwrap();
                    finish_step(&self.ctx, None, i, Some("tick@test"), Some(done)).unwrap();
                }
            }
        }
    }
}

fn quality(status: &str, score: u8) -> String {
    format!(
        "I read verification.json.\n---VERDICT---\nSTATUS: {status}\nREASON: checked\n\
         GAP_SUMMARY: export drops the header\nCONFIDENCE: medium\nCONFIDENCE_SCORE: {score}\n\
         WEAKEST_DIMENSION: tests\n---END---"
    )
}

const CHAIN: &str = "plan,verify,review,goal-audit,milestone-complete";

#[test]
fn a_step_with_session_complete_is_completed_with_its_evidence() {
    let w = world(CHAIN);
    let i = w.claim();
    let c = completion::parse(r#"{"status":"DONE","evidence":["plan.md","notes.md"]}"#).unwrap();
    finish_step(&w.ctx, None, i, Some("tick@test"), Some(c)).unwrap();
    let step = w.step(i);
    assert_eq!(step["status"], "completed");
    assert_eq!(step["completion_status"], "DONE");
    assert_eq!(
        step["completion_evidence"],
        serde_json::json!(["plan.md", "notes.md"])
    );
    assert!(w.doc()["active_step_index"].is_null());
}

#[test]
fn a_step_without_session_complete_retries_once_then_blocks_and_pauses() {
    let w = world(CHAIN);
    let i = w.claim();
    let (first, _) = finish_step(&w.ctx, None, i, Some("tick@test"), None).unwrap();
    assert_eq!(first.status, Status::NeedsRetry);
    assert_eq!(w.step(i)["status"], "pending");
    assert_eq!(w.step(i)["retried"], true);
    assert_eq!(w.doc()["status"], "running");

    assert_eq!(w.claim(), i, "the retried step is the next one");
    let (second, _) = finish_step(&w.ctx, None, i, Some("tick@test"), None).unwrap();
    assert_eq!(second.status, Status::Blocked);
    assert_eq!(w.step(i)["status"], "failed");
    assert_eq!(w.doc()["status"], "paused");
}

#[test]
fn a_fix_verdict_inserts_the_template_and_a_follow_up_gate_with_retry_plus_one() {
    let w = world(CHAIN);
    let gate = w.advance_to("post-verify");
    let before = w.doc()["steps"].as_array().unwrap().len();
    settle_gate(&w.ctx, None, gate, &quality("fix", 80)).unwrap();
    let doc = w.doc();
    let steps = doc["steps"].as_array().unwrap();
    assert_eq!(steps[gate]["status"], "completed");
    assert_eq!(steps[gate]["verdict"], "fix");
    assert!(steps.len() > before, "the fix loop was inserted");
    let follow = steps
        .iter()
        .skip(gate + 1)
        .find(|s| s["decision"] == "post-verify")
        .unwrap();
    assert_eq!(follow["retry_count"], 1);
    let d = w.decisions();
    assert_eq!(d.len(), 1, "plan and verify precede the first gate");
    assert_eq!(d[0]["verdict"], "fix");
    assert_eq!(d[0]["gaps"], serde_json::json!(["export drops the header"]));
}

#[test]
fn low_confidence_proceed_is_overridden_to_fix() {
    let w = world(CHAIN);
    let gate = w.advance_to("post-verify");
    settle_gate(&w.ctx, None, gate, &quality("proceed", 55)).unwrap();
    assert_eq!(w.step(gate)["verdict"], "fix");
    let d = w.decisions();
    assert_eq!(d[0]["requested_verdict"], "proceed");
    assert_eq!(d[0]["verdict"], "fix");
    assert_eq!(d[0]["close_call"], true);
}

#[test]
fn an_unparsable_answer_is_a_fix_recorded_with_e004() {
    let w = world(CHAIN);
    let gate = w.advance_to("post-verify");
    settle_gate(&w.ctx, None, gate, "Looks good to me, ship it!").unwrap();
    assert_eq!(w.step(gate)["verdict"], "fix");
    let d = w.decisions();
    assert!(d[0]["summary"].as_str().unwrap().starts_with("E004"));
}

#[test]
fn a_goal_audit_with_one_unmet_sub_goal_inserts_its_mini_loop() {
    let w = world(CHAIN);
    let gate = w.advance_to("post-goal-audit");
    let answer = "---VERDICT---\nSTATUS=has_unmet\n\
                  UNMET=[{\"id\":\"G2\",\"gap\":\"no CSV header\",\"target_phase\":\"1\"}]\n\
                  CONFIDENCE_SCORE=85\n---END---";
    settle_gate(&w.ctx, None, gate, answer).unwrap();
    let doc = w.doc();
    let steps = doc["steps"].as_array().unwrap();
    assert!(
        steps.iter().any(|s| s["goal_ref"] == "G2"),
        "the unmet sub-goal's steps are tagged: {steps:#?}"
    );
    let d = w.decisions();
    let last = d.last().unwrap();
    assert_eq!(last["type"], "goal-gate");
    assert_eq!(last["gaps"], serde_json::json!(["G2: no CSV header"]));
}

#[test]
fn gates_a_model_does_not_judge_are_refused() {
    let w = world(CHAIN);
    let err = settle_gate(&w.ctx, None, 0, &quality("proceed", 90)).unwrap_err();
    assert_eq!(err.code(), "NOT_A_GATE");
}

#[test]
fn a_fix_at_max_retries_escalates_and_pauses_for_a_person() {
    let w = world(CHAIN);
    for _ in 0..2 {
        let gate = w.advance_to("post-verify");
        settle_gate(&w.ctx, None, gate, &quality("fix", 80)).unwrap();
        assert_eq!(w.step(gate)["verdict"], "fix");
    }
    let gate = w.advance_to("post-verify");
    assert_eq!(w.step(gate)["retry_count"], 2);
    settle_gate(&w.ctx, None, gate, &quality("fix", 80)).unwrap();
    assert_eq!(w.step(gate)["verdict"], "escalate");
    assert_eq!(w.decisions().last().unwrap()["verdict"], "escalate");
    // quality-debug runs, then the escalation gate pauses the session for a person.
    let pause = w.advance_to("post-debug-escalate");
    assert_eq!(w.step(pause - 1)["skill"], "quality-debug");
    pause_at_escalation(&w.ctx, None, pause).unwrap();
    let doc = w.doc();
    assert_eq!(doc["status"], "paused");
    assert_eq!(doc["steps"][pause]["status"], "pending");
    assert!(pause_at_escalation(&w.ctx, None, 0).is_err());
}

/// maestro v0.5's completion record: what the model passes to `session.complete` lands in
/// the step's `completion_summary`, `completion_decisions`, `completion_caveats` and
/// `completion_deferred` (null when not given), and the next step's prompt carries it in its
/// session anchor.
#[test]
fn the_completion_record_of_session_complete_lands_in_status_json() {
    let w = world(CHAIN);
    let i = w.claim();
    let call = r#"{"status":"DONE","evidence":["plan.json"],"summary":"Planned the export",
        "decisions":["comma separator"],"caveats":"no streaming","deferred":["xlsx"]}"#;
    let done = completion::parse(call).unwrap();
    finish_step(&w.ctx, None, i, Some("tick@test"), Some(done)).unwrap();
    let s = w.step(i);
    assert_eq!(s["completion_summary"], "Planned the export");
    assert_eq!(
        s["completion_decisions"],
        serde_json::json!(["comma separator"])
    );
    assert_eq!(s["completion_caveats"], "no streaming");
    assert_eq!(s["completion_deferred"], serde_json::json!(["xlsx"]));
    let next = verbs::next::run(&w.ctx, None, Some("tick@test"), None).unwrap();
    let prompt = next.json["prompt"].as_str().unwrap();
    assert!(prompt.starts_with("<session_anchor>\n"), "{prompt}");
    assert!(
        prompt.contains("- [0] maestro-plan (plan): Planned the export\n  ⚠️ no streaming"),
        "{prompt}"
    );
    assert!(prompt.contains("- Deferred work: xlsx"), "{prompt}");
    // Without a record, the fields are null (a protocol-2 session writes them always).
    let i = next.json["index"].as_u64().unwrap() as usize;
    let done = completion::parse(r#"{"status":"DONE"}"#).unwrap();
    finish_step(&w.ctx, None, i, Some("tick@test"), Some(done)).unwrap();
    let s = w.step(i);
    for k in [
        "completion_summary",
        "completion_decisions",
        "completion_caveats",
        "completion_deferred",
    ] {
        assert_eq!(s[k], Value::Null, "{k}");
    }
    // Bad records are refused back to the model, not written.
    for bad in [
        r#"{"status":"DONE","decisions":"x","deferred":[1]}"#,
        r#"{"status":"DONE","summary":7}"#,
        r#"{"status":"DONE","note":"x"}"#,
    ] {
        assert!(completion::parse(bad).is_err(), "{bad}");
    }
}
