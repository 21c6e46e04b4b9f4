//! A session started without `-y`: a model-judged gate's verdict waits for a person (seed
//! 003's ask_user after the gate evaluation). The answer is kept before the pause, a kill in
//! between does not ask the model again; the person accepts it (settled as the model said,
//! guards and fix loop included) or overrides it (recorded as theirs). An auto-mode session
//! never stops there.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::session_world;
use baton_lifecycle::ralph::check::{self, Scope};
use baton_lifecycle::ralph::discovery::{self, Pick};
use baton_lifecycle::ralph::verbs;
use baton_lifecycle::session::apply::finish_step;
use baton_lifecycle::session::completion;
use baton_lifecycle::session::gate::{GateEnd, GateTick, evaluate};
use baton_lifecycle::session::intervene::{self, Choice, Pause};
use baton_llm::testing::{Reply, ScriptedServer};
use baton_llm::{HttpChatModel, LlmConfig};
use serde_json::Value;
use session_world::World;
use std::path::PathBuf;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const OWNER: &str = "review@test";

const FIX: &str = "---VERDICT---\nSTATUS: fix\nREASON: one check fails\n\
    GAP_SUMMARY: the header row is missing\nCONFIDENCE: high\nCONFIDENCE_SCORE: 88\n\
    WEAKEST_DIMENSION: correctness\n---END---";

fn world(auto: bool) -> World {
    session_world::world_with("plan,verify,milestone-complete", OWNER, auto)
}

fn doc(w: &World) -> Value {
    let doc: Value = serde_json::from_slice(&std::fs::read(&w.status).unwrap()).unwrap();
    let findings = check::check(&w.ctx, doc.as_object(), &[], Scope::All);
    assert!(!check::has_errors(&findings), "{findings:?}");
    doc
}

fn decisions(w: &World) -> Vec<Value> {
    std::fs::read_to_string(w.status.with_file_name("decisions.ndjson"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn review_dir(w: &World) -> PathBuf {
    w.status.with_file_name("gate-review")
}

fn pause(w: &World) -> Option<Pause> {
    let s = discovery::find(&w.ctx, None, Pick::Any)
        .unwrap()
        .into_session()
        .unwrap();
    intervene::why_paused(&s)
}

/// plan and verify done: the next pending step is the post-verify gate.
fn reach_gate(w: &World) -> usize {
    for cite in ["plan.md", "verification.json"] {
        let out = verbs::next::run(&w.ctx, None, Some(OWNER), None).unwrap();
        let i = out.json["index"].as_u64().unwrap() as usize;
        let args = serde_json::json!({"status": "DONE", "evidence": [cite]}).to_string();
        finish_step(
            &w.ctx,
            None,
            i,
            Some(OWNER),
            Some(completion::parse(&args).unwrap()),
        )
        .unwrap();
    }
    let doc = doc(w);
    let steps = doc["steps"].as_array().unwrap();
    let i = steps.iter().position(|s| s["status"] == "pending").unwrap();
    assert_eq!(steps[i]["decision"], "post-verify");
    i
}

async fn scripted(replies: Vec<Reply>) -> (ScriptedServer, HttpChatModel) {
    let server = ScriptedServer::start(replies).await.unwrap();
    let model = HttpChatModel::new(LlmConfig {
        base_url: server.base_url(),
        model: Some("scripted".into()),
        stream: false,
        retry_base_delay: Duration::from_millis(5),
        max_retries: 0,
        ..LlmConfig::default()
    })
    .unwrap();
    (server, model)
}

async fn judge(w: &World, reply: &str) -> GateTick {
    let (_server, model) = scripted(vec![Reply::text(reply)]).await;
    evaluate(&w.ctx, None, &model, &CancellationToken::new())
        .await
        .unwrap()
}

/// A non-auto session at its gate, judged `fix` by the model and paused.
async fn reviewed() -> (World, usize) {
    let w = world(false);
    let gate = reach_gate(&w);
    let tick = judge(&w, FIX).await;
    assert_eq!(tick.end, GateEnd::Review);
    assert_eq!(tick.model_calls, 1);
    (w, gate)
}

#[tokio::test]
async fn without_y_the_gate_pauses_with_the_verdict_and_accept_inserts_the_fix_loop() {
    let (w, gate) = reviewed().await;
    let d = doc(&w);
    assert_eq!(d["status"], "paused");
    assert_eq!(d["steps"][gate]["status"], "pending");
    assert!(decisions(&w).is_empty(), "nothing is settled yet");
    assert!(review_dir(&w).join(format!("{gate}.0.json")).is_file());
    assert_eq!(
        pause(&w),
        Some(Pause::GateReview {
            index: gate,
            gate: "post-verify".into(),
            verdict: "fix",
            reason: "one check fails".into(),
            confidence: 88,
        })
    );
    let before = d["steps"].as_array().unwrap().len();

    intervene::decide(&w.ctx, None, Choice::Accept, "").unwrap();
    let d = doc(&w);
    assert_eq!(d["status"], "running");
    assert_eq!(d["steps"][gate]["verdict"], "fix");
    assert!(d["steps"].as_array().unwrap().len() > before, "fix loop");
    let dec = decisions(&w);
    assert_eq!(dec.len(), 1);
    assert_eq!(dec[0]["confidence_score"], 88);
    assert_eq!(dec[0]["summary"], "one check fails");
    assert_eq!(
        dec[0]["gaps"],
        serde_json::json!(["the header row is missing"])
    );
    assert!(!review_dir(&w).join(format!("{gate}.0.json")).exists());
}

#[tokio::test]
async fn a_person_overrides_the_verdict_and_the_decision_says_so() {
    let (w, gate) = reviewed().await;
    let before = doc(&w)["steps"].as_array().unwrap().len();
    intervene::decide(&w.ctx, None, Choice::Proceed, "the header is optional").unwrap();
    let d = doc(&w);
    assert_eq!(d["steps"][gate]["verdict"], "proceed");
    assert_eq!(d["steps"].as_array().unwrap().len(), before, "no fix loop");
    let dec = decisions(&w);
    assert_eq!(dec.len(), 1);
    assert_eq!(dec[0]["verdict"], "proceed");
    assert_eq!(dec[0]["confidence_score"], 100);
    let summary = dec[0]["summary"].as_str().unwrap();
    assert!(
        summary.contains("a person chose proceed over the model's fix (confidence 88)")
            && summary.contains("the header is optional"),
        "{summary}"
    );

    // A person's fix inserts the loop as the model's would.
    let (w, gate) = reviewed().await;
    let before = doc(&w)["steps"].as_array().unwrap().len();
    intervene::decide(&w.ctx, None, Choice::Fix, "").unwrap();
    let d = doc(&w);
    assert_eq!(d["steps"][gate]["verdict"], "fix");
    assert!(d["steps"].as_array().unwrap().len() > before);

    // Choices of other pauses are refused with nothing written.
    let (w, _) = reviewed().await;
    let e = intervene::decide(&w.ctx, None, Choice::Retry, "").unwrap_err();
    assert_eq!(e.code(), "CHOICE_NOT_APPLICABLE");
    assert_eq!(doc(&w)["status"], "paused");
    intervene::decide(&w.ctx, None, Choice::Abort, "").unwrap();
    assert_eq!(doc(&w)["status"], "failed");
}

#[tokio::test]
async fn a_kill_after_the_answer_was_kept_pauses_again_without_a_second_call() {
    let (w, gate) = reviewed().await;
    // The kill came before the pause was written: the session is still running.
    verbs::control::resume(&w.ctx, None, None).unwrap();
    assert_eq!(doc(&w)["status"], "running");
    let (server, model) = scripted(vec![]).await;
    let tick = evaluate(&w.ctx, None, &model, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        (tick.index, tick.end, tick.model_calls),
        (gate, GateEnd::Review, 0)
    );
    assert!(server.received().is_empty(), "the model was asked again");
    assert_eq!(doc(&w)["status"], "paused");
    assert!(matches!(
        pause(&w),
        Some(Pause::GateReview { verdict: "fix", .. })
    ));
}

#[tokio::test]
async fn the_guards_apply_to_the_proposed_verdict() {
    let w = world(false);
    let gate = reach_gate(&w);
    let low = FIX
        .replace("STATUS: fix", "STATUS: proceed")
        .replace("SCORE: 88", "SCORE: 40");
    judge(&w, &low).await;
    let Some(Pause::GateReview {
        index,
        verdict,
        confidence,
        ..
    }) = pause(&w)
    else {
        panic!("not a gate review: {:?}", pause(&w));
    };
    assert_eq!((index, verdict, confidence), (gate, "fix", 40));
}

#[tokio::test]
async fn an_auto_session_never_pauses_at_the_gate() {
    let w = world(true);
    let gate = reach_gate(&w);
    let tick = judge(&w, FIX).await;
    assert!(matches!(tick.end, GateEnd::Settled(_)));
    let d = doc(&w);
    assert_eq!(d["status"], "running");
    assert_eq!(d["steps"][gate]["verdict"], "fix");
    assert!(!review_dir(&w).exists());
}

#[test]
fn the_review_choices_parse() {
    for c in [Choice::Accept, Choice::Fix, Choice::Escalate] {
        assert_eq!(Choice::parse(&c.as_str().to_uppercase()), Some(c));
    }
}

#[tokio::test]
async fn a_damaged_kept_answer_is_an_error_naming_the_file() {
    let (w, gate) = reviewed().await;
    let file = review_dir(&w).join(format!("{gate}.0.json"));
    std::fs::write(&file, "{not json").unwrap();
    // Nothing to show for the gate: the pause reads as one by hand.
    assert_eq!(pause(&w), Some(Pause::ByHand));
    verbs::control::resume(&w.ctx, None, None).unwrap();
    let (server, model) = scripted(vec![]).await;
    let e = evaluate(&w.ctx, None, &model, &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(e.code(), "GATE_REVIEW_INVALID");
    assert!(e.to_string().contains(&file.display().to_string()), "{e}");
    assert!(server.received().is_empty());
}
