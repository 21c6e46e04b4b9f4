//! A decision tick against a strict scripted server: one model call with the gate's result
//! files, its `---VERDICT---` answer settled with the guards; an unparsable answer and a failed
//! call are both `fix` (E004, E005); evidence outside the project is never read.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::session_world;
use baton_lifecycle::ralph::verbs;
use baton_lifecycle::session::apply::finish_step;
use baton_lifecycle::session::completion;
use baton_lifecycle::session::gate::{GateEnd, evaluate};
use baton_llm::testing::{Reply, ScriptedServer};
use baton_llm::{HttpChatModel, LlmConfig};
use session_world::World;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn world() -> World {
    let w = session_world::world("plan,verify,milestone-complete", "gate@test");
    std::fs::create_dir_all(w.ctx.project.join(".workflow/scratch")).unwrap();
    w
}

impl World {
    /// plan, then verify citing `evidence`: the next pending step is the post-verify gate.
    fn reach_post_verify(&self, evidence: &str) -> usize {
        for cite in ["plan.md", evidence] {
            let out = verbs::next::run(&self.ctx, None, Some("gate@test"), None).unwrap();
            let i = out.json["index"].as_u64().unwrap() as usize;
            let args = serde_json::json!({"status": "DONE", "evidence": [cite]}).to_string();
            let done = completion::parse(&args).unwrap();
            finish_step(&self.ctx, None, i, Some("gate@test"), Some(done)).unwrap();
        }
        let doc = self.doc();
        let steps = doc["steps"].as_array().unwrap();
        let i = steps.iter().position(|s| s["status"] == "pending").unwrap();
        assert_eq!(steps[i]["decision"], "post-verify");
        i
    }
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

const FIX: &str = "---VERDICT---\nSTATUS: fix\nREASON: one check fails\n\
    GAP_SUMMARY: the header row is missing\nCONFIDENCE: high\nCONFIDENCE_SCORE: 88\n\
    WEAKEST_DIMENSION: correctness\n---END---";

#[tokio::test]
async fn the_gate_reads_its_result_file_and_a_fix_inserts_the_loop() {
    let w = world();
    std::fs::write(
        w.ctx.project.join(".workflow/scratch/verification.json"),
        r#"{"status":"gaps_found","gaps":["no header row"]}"#,
    )
    .unwrap();
    let gate = w.reach_post_verify(".workflow/scratch/verification.json");
    let before = w.doc()["steps"].as_array().unwrap().len();
    let (server, model) = scripted(vec![Reply::text(FIX)]).await;
    let tick = evaluate(&w.ctx, None, &model, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!((tick.index, tick.gate.as_str()), (gate, "post-verify"));
    assert!(matches!(tick.end, GateEnd::Settled(_)));
    let body = &server.received()[0].body;
    assert!(
        body.get("tools")
            .is_none_or(|t| t.as_array().is_none_or(Vec::is_empty))
    );
    let user = body["messages"][1]["content"].as_str().unwrap();
    assert!(user.contains(r#""gaps":["no header row"]"#), "{user}");
    let doc = w.doc();
    assert_eq!(doc["steps"][gate]["verdict"], "fix");
    assert!(doc["steps"].as_array().unwrap().len() > before);
    let d = w.decisions();
    assert_eq!(d.len(), 1);
    assert_eq!(
        d[0]["gaps"],
        serde_json::json!(["the header row is missing"])
    );
}

#[tokio::test]
async fn an_unparsable_answer_and_a_failed_call_are_both_fix() {
    let w = world();
    let gate = w.reach_post_verify("verification.json");
    let (_server, model) = scripted(vec![Reply::text("All good, ship it.")]).await;
    evaluate(&w.ctx, None, &model, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(w.doc()["steps"][gate]["verdict"], "fix");
    assert!(
        w.decisions()[0]["summary"]
            .as_str()
            .unwrap()
            .starts_with("E004")
    );

    let w = world();
    let gate = w.reach_post_verify("verification.json");
    let (_server, model) = scripted(vec![Reply::error(400, "bad request")]).await;
    evaluate(&w.ctx, None, &model, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(w.doc()["steps"][gate]["verdict"], "fix");
    assert!(
        w.decisions()[0]["summary"]
            .as_str()
            .unwrap()
            .starts_with("E005")
    );
}

const PROCEED: &str = "---VERDICT---\nSTATUS: proceed\nREASON: verification passed\n\
    GAP_SUMMARY: none\nCONFIDENCE: high\nCONFIDENCE_SCORE: 95\n\
    WEAKEST_DIMENSION: none\n---END---";

#[tokio::test]
async fn a_proceed_without_its_evidence_file_is_a_fix() {
    // verify cited verification.json but never wrote it: the model says proceed anyway.
    let w = world();
    let gate = w.reach_post_verify(".workflow/scratch/verification.json");
    let before = w.doc()["steps"].as_array().unwrap().len();
    let (server, model) = scripted(vec![Reply::text(PROCEED)]).await;
    evaluate(&w.ctx, None, &model, &CancellationToken::new())
        .await
        .unwrap();
    let user = server.received()[0].body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(user.contains("MISSING"), "{user}");
    let doc = w.doc();
    assert_eq!(doc["steps"][gate]["verdict"], "fix");
    assert!(
        doc["steps"].as_array().unwrap().len() > before,
        "the fix loop is inserted"
    );
    let d = w.decisions();
    assert!(
        d[0]["summary"]
            .as_str()
            .unwrap()
            .starts_with("EVIDENCE_MISSING"),
        "{d:?}"
    );
    assert_eq!(
        d[0]["gaps"],
        serde_json::json!(["verification.json missing"])
    );

    // The same answer with the file written: proceed applies.
    let w = world();
    std::fs::write(
        w.ctx.project.join(".workflow/scratch/verification.json"),
        r#"{"status":"passed","gaps":[]}"#,
    )
    .unwrap();
    let gate = w.reach_post_verify(".workflow/scratch/verification.json");
    let (_server, model) = scripted(vec![Reply::text(PROCEED)]).await;
    evaluate(&w.ctx, None, &model, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(w.doc()["steps"][gate]["verdict"], "proceed");
}

#[tokio::test]
async fn evidence_outside_the_project_is_not_read() {
    let w = world();
    let secret = w.tmp.path().join("verification.json");
    std::fs::write(&secret, "TOP SECRET").unwrap();
    w.reach_post_verify("../verification.json");
    let (server, model) = scripted(vec![Reply::text(FIX)]).await;
    evaluate(&w.ctx, None, &model, &CancellationToken::new())
        .await
        .unwrap();
    let user = server.received()[0].body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!user.contains("TOP SECRET"));
    assert!(user.contains("MISSING"), "{user}");
}

#[test]
fn a_goal_audit_sees_the_evidence_its_sub_goals_name() {
    use baton_lifecycle::ralph::discovery::{self, Pick};
    use baton_lifecycle::session::gate::prompt;
    use baton_lifecycle::session::verdict::Form;
    let w = world();
    std::fs::write(
        w.ctx.project.join(".workflow/scratch/verification.json"),
        r#"{"status":"passed","checks":["header row summed"]}"#,
    )
    .unwrap();
    let gate = w.reach_post_verify(".workflow/scratch/verification.json");
    let mut doc = w.doc();
    doc["task_decomposition"] = serde_json::json!([
        {"id": "G1", "goal": "sum with a header", "evidence": "verification.json|review.json"},
        {"id": "G2", "goal": "escape hatch", "evidence": "../../etc/passwd"}
    ]);
    std::fs::write(&w.status, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let s = discovery::find(&w.ctx, None, Pick::Active)
        .unwrap()
        .into_session()
        .unwrap();
    let text = prompt(&w.ctx, &s, gate, "post-goal-audit", Form::GoalAudit);
    assert!(text.contains("header row summed"), "{text}");
    assert!(text.contains("## evidence review.json\nMISSING"), "{text}");
    // A sub-goal names a file, never a path the audit would read.
    assert!(!text.contains("root:"), "{text}");
    assert!(text.contains("## evidence passwd\nMISSING"), "{text}");
}
