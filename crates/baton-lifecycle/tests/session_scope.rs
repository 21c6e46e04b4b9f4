//! The scope gate settled by code: the macro analysis's `conclusions.json` (cited by the
//! analyze-macro step) decides whether roadmap and phase analyze run; the gate is consumed
//! through `decide` with a `scope-gate` line; status.json stays valid for `ralph check`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::session_world;
use baton_lifecycle::ralph::verbs;
use baton_lifecycle::session::apply::finish_step;
use baton_lifecycle::session::completion;
use baton_lifecycle::session::scope;
use serde_json::Value;
use session_world::World;

const CHAIN: &str = "analyze-macro,roadmap,analyze,plan,execute,verify,milestone-complete";
const OWNER: &str = "scope@test";

fn world(conclusions: Option<&str>) -> World {
    let w = session_world::world(CHAIN, OWNER);
    let dir = w.ctx.project.join(".workflow/scratch/ANL-001");
    std::fs::create_dir_all(&dir).unwrap();
    if let Some(body) = conclusions {
        std::fs::write(dir.join("conclusions.json"), body).unwrap();
    }
    w
}

impl World {
    /// Runs analyze-macro citing its conclusions; returns the scope gate's index.
    fn reach_scope_gate(&self) -> usize {
        let out = verbs::next::run(&self.ctx, None, Some(OWNER), None).unwrap();
        let i = out.json["index"].as_u64().unwrap() as usize;
        let args = serde_json::json!({
            "status": "DONE",
            "evidence": [".workflow/scratch/ANL-001/conclusions.json"]
        })
        .to_string();
        let done = completion::parse(&args).unwrap();
        finish_step(&self.ctx, None, i, Some(OWNER), Some(done)).unwrap();
        let doc = self.doc();
        let steps = doc["steps"].as_array().unwrap();
        let g = steps.iter().position(|s| s["status"] == "pending").unwrap();
        assert_eq!(steps[g]["decision"], scope::GATE);
        g
    }
}

fn stage_step<'a>(doc: &'a Value, stage: &str) -> &'a Value {
    doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == stage && s["decision"].is_null())
        .unwrap()
}

#[test]
fn a_small_scope_skips_roadmap_and_analyze_and_plans_from_the_analysis() {
    let w = world(Some(r#"{"id": "ANL-001", "scope_verdict": "small"}"#));
    let gate = w.reach_scope_gate();
    scope::settle(&w.ctx, None, gate).unwrap();
    let doc = w.doc();
    assert_eq!(doc["scope_verdict"], "small");
    assert_eq!(doc["analyze_macro_id"], "ANL-001");
    assert_eq!(doc["steps"][gate]["status"], "completed");
    assert_eq!(doc["steps"][gate]["completion_confirmed"], true);
    assert_eq!(doc["active_step_index"], Value::Null);
    for stage in ["roadmap", "analyze"] {
        let st = stage_step(&doc, stage);
        assert_eq!(st["status"], "skipped", "{stage}");
        assert_eq!(st["completion_confirmed"], false);
    }
    let plan = stage_step(&doc, "plan");
    assert_eq!(plan["status"], "pending");
    assert_eq!(plan["args"], "--from analyze:ANL-001");
    assert_eq!(plan["scope"], "standalone");
    assert_eq!(plan["source_artifact_ref"], "analyze:ANL-001");
    // Execution goes on at plan.
    let next = doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["status"] == "pending")
        .unwrap();
    assert_eq!(next["stage"], "plan");
    let d = w.decisions();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0]["type"], "scope-gate");
    assert_eq!(d[0]["node_id"], "post-analyze-scope");
    let summary = d[0]["summary"].as_str().unwrap();
    assert!(summary.contains("scope small"), "{summary}");
    assert!(summary.contains("analyze:ANL-001"), "{summary}");
    let out = verbs::check::run(&w.ctx, None).unwrap();
    assert_eq!(out.json["ok"], true, "{}", out.json);
}

#[test]
fn a_large_scope_keeps_the_chain_and_points_roadmap_at_the_analysis() {
    let w = world(Some(
        r#"{"analyze_macro_id": "ANL-007", "scope_verdict": "large"}"#,
    ));
    let gate = w.reach_scope_gate();
    scope::settle(&w.ctx, None, gate).unwrap();
    let doc = w.doc();
    assert_eq!(doc["scope_verdict"], "large");
    assert_eq!(doc["analyze_macro_id"], "ANL-007");
    let roadmap = stage_step(&doc, "roadmap");
    assert_eq!(roadmap["status"], "pending");
    assert_eq!(roadmap["args"], "--from analyze:ANL-007");
    assert_eq!(roadmap["source_artifact_ref"], "analyze:ANL-007");
    assert_eq!(stage_step(&doc, "analyze")["status"], "pending");
    let plan = stage_step(&doc, "plan");
    assert_eq!(plan["args"], "{phase}");
    let d = w.decisions();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0]["type"], "scope-gate");
    assert!(d[0]["summary"].as_str().unwrap().contains("scope large"));
}

#[test]
fn missing_or_unreadable_conclusions_are_unknown_and_take_the_large_path() {
    for body in [
        None,
        Some(r#"{"scope_verdict": "gigantic"}"#),
        Some("not json"),
    ] {
        let w = world(body);
        let gate = w.reach_scope_gate();
        scope::settle(&w.ctx, None, gate).unwrap();
        let doc = w.doc();
        assert_eq!(doc["scope_verdict"], "unknown", "{body:?}");
        assert_eq!(doc["analyze_macro_id"], Value::Null);
        for stage in ["roadmap", "analyze", "plan"] {
            assert_eq!(stage_step(&doc, stage)["status"], "pending", "{stage}");
        }
        // No id: the roadmap keeps its placeholder rather than naming an analysis.
        assert_eq!(
            stage_step(&doc, "roadmap")["args"],
            "--from analyze:{analyze_macro_id}"
        );
        let d = w.decisions();
        assert_eq!(d.len(), 1);
        let summary = d[0]["summary"].as_str().unwrap();
        assert!(summary.contains("defaults to large"), "{summary}");
    }
}

#[test]
fn a_small_scope_without_an_analysis_id_keeps_the_chain() {
    let w = world(Some(r#"{"scope_verdict": "medium"}"#));
    let gate = w.reach_scope_gate();
    scope::settle(&w.ctx, None, gate).unwrap();
    let doc = w.doc();
    assert_eq!(doc["scope_verdict"], "medium");
    assert_eq!(stage_step(&doc, "roadmap")["status"], "pending");
    assert!(
        w.decisions()[0]["summary"]
            .as_str()
            .unwrap()
            .contains("no analysis id")
    );
}

#[test]
fn conclusions_outside_the_project_are_not_read() {
    let w = world(None);
    let outside = w.tmp.path().join("conclusions.json");
    std::fs::write(&outside, r#"{"id": "ANL-9", "scope_verdict": "small"}"#).unwrap();
    let out = verbs::next::run(&w.ctx, None, Some(OWNER), None).unwrap();
    let i = out.json["index"].as_u64().unwrap() as usize;
    let args = serde_json::json!({"status": "DONE", "evidence": ["../conclusions.json"]});
    let done = completion::parse(&args.to_string()).unwrap();
    finish_step(&w.ctx, None, i, Some(OWNER), Some(done)).unwrap();
    // The step did cite it: only the gate's reading refuses it.
    assert_eq!(
        w.doc()["steps"][i]["completion_evidence"],
        "../conclusions.json"
    );
    scope::settle(&w.ctx, None, i + 1).unwrap();
    let doc = w.doc();
    assert_eq!(doc["scope_verdict"], "unknown");
    assert_eq!(stage_step(&doc, "roadmap")["status"], "pending");
}

#[test]
fn a_gate_that_is_not_the_pending_scope_gate_is_refused_without_a_write() {
    let w = world(Some(r#"{"id": "ANL-001", "scope_verdict": "small"}"#));
    let before = std::fs::read(&w.status).unwrap();
    // analyze-macro has not run: the gate is not ready.
    assert!(scope::settle(&w.ctx, None, 1).is_err());
    assert!(scope::settle(&w.ctx, None, 0).is_err());
    assert_eq!(std::fs::read(&w.status).unwrap(), before);
}

/// The session loop routes the scope gate here: one tick settles it with no model call.
#[tokio::test]
async fn the_session_loop_settles_the_scope_gate_by_code() {
    use baton_lifecycle::session::run::{RunSettings, SessionEnd, Tick, run};
    use baton_lifecycle::session::step_run::ModelSource;
    use baton_llm::testing::ScriptedServer;
    use baton_llm::{HttpChatModel, LlmConfig};

    let w = world(Some(r#"{"id": "ANL-001", "scope_verdict": "small"}"#));
    let gate = w.reach_scope_gate();
    // Strict and empty: any model call would fail the run.
    let server = ScriptedServer::start(Vec::new()).await.unwrap();
    let model = HttpChatModel::new(LlmConfig {
        base_url: server.base_url(),
        model: Some("scripted".into()),
        stream: false,
        max_retries: 0,
        ..LlmConfig::default()
    })
    .unwrap();
    let store = baton_store::Store::new(w.tmp.path().join("store"));
    let mut settings = RunSettings::new(OWNER, &store, ModelSource::Live(&model));
    let cancel = settings.cancel.clone();
    let mut ticks: Vec<Tick> = Vec::new();
    // Stopped after the first tick: the next one would run the plan step.
    let mut after = |t: &Tick| {
        ticks.push(t.clone());
        cancel.cancel();
    };
    settings.after_tick = Some(&mut after);
    let report = run(&w.ctx, None, settings).await.unwrap();
    assert!(matches!(report.end, SessionEnd::Interrupted { .. }));
    assert_eq!(report.spent.model_calls, 0);
    assert_eq!(
        ticks,
        vec![Tick::Gate {
            index: gate,
            gate: scope::GATE.into()
        }]
    );
    assert!(server.received().is_empty());
    let doc = w.doc();
    assert_eq!(doc["scope_verdict"], "small");
    assert_eq!(stage_step(&doc, "roadmap")["status"], "skipped");
    assert_eq!(w.decisions()[0]["type"], "scope-gate");
}

/// Without `-y`, an unknown scope verdict is asked (seed 003: large or medium/small); the
/// answer is applied as that verdict and said in the decision.
#[test]
fn an_unknown_scope_without_y_asks_a_person() {
    use baton_lifecycle::ralph::discovery::{self, Pick};
    use baton_lifecycle::session::intervene::{self, Choice, Pause};
    let w = session_world::world_with(CHAIN, OWNER, false);
    let dir = w.ctx.project.join(".workflow/scratch/ANL-001");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("conclusions.json"), r#"{"id": "ANL-001"}"#).unwrap();
    let gate = w.reach_scope_gate();
    let settled = scope::settle(&w.ctx, None, gate).unwrap();
    assert!(matches!(settled, scope::Settled::Asked));
    let doc = w.doc();
    assert_eq!(doc["status"], "paused");
    assert_eq!(doc["steps"][gate]["status"], "pending");
    assert_eq!(doc["steps"][gate]["asked"], scope::QUESTION);
    assert!(w.decisions().is_empty(), "nothing decided yet");
    let s = discovery::find(&w.ctx, None, Pick::Active)
        .unwrap()
        .into_session()
        .unwrap();
    let pause = intervene::why_paused(&s).unwrap();
    assert!(matches!(&pause, Pause::Question { index, .. } if *index == gate));
    let words: Vec<&str> = pause.choices().iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(words, ["large", "small", "abort"]);
    assert!(pause.question_text().unwrap().contains("no scope verdict"));
    // A word that does not fit is refused; `small` collapses the chain.
    assert!(intervene::decide(&w.ctx, None, Choice::Unified, "").is_err());
    intervene::decide(&w.ctx, None, Choice::Small, "").unwrap();
    let doc = w.doc();
    assert_eq!(doc["status"], "running");
    assert_eq!(doc["scope_verdict"], "small");
    assert_eq!(stage_step(&doc, "roadmap")["status"], "skipped");
    assert_eq!(stage_step(&doc, "plan")["args"], "--from analyze:ANL-001");
    let d = w.decisions();
    assert_eq!(d.len(), 1);
    let summary = d[0]["summary"].as_str().unwrap();
    assert!(summary.contains("a person chose small"), "{summary}");
}
