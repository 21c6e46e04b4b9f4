//! A session's budget against a strict scripted server whose calls cost a fixed number of
//! tokens: no step or gate call that could cross it is sent, the loop stops with
//! `BUDGET_EXCEEDED`, what was spent counts again after a restart, and a larger budget
//! finishes the session as an unbudgeted one does.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_engine::spend::{BUDGET_EXCEEDED, BudgetConfig};
use baton_lifecycle::ralph::Context;
use baton_lifecycle::ralph::discovery::{self, Pick};
use baton_lifecycle::ralph::verbs::{self, new::NewArgs};
use baton_lifecycle::session::budget;
use baton_lifecycle::session::run::{RunSettings, SessionEnd, run};
use baton_lifecycle::session::step_run::ModelSource;
use baton_llm::testing::{Reply, ScriptedServer};
use baton_llm::{HttpChatModel, LlmConfig};
use baton_store::Store;
use std::path::Path;
use std::time::Duration;

fn context(project: &Path, home: &Path) -> Context {
    Context {
        project: project.to_path_buf(),
        home: Some(home.to_path_buf()),
        maestro_home: Some(home.join(".maestro")),
        cli: "baton ralph".into(),
        owner: "run@test".into(),
        lock_timeout: Duration::from_secs(5),
        bundled_commands: None,
        warnings: Default::default(),
    }
}

fn done(evidence: &str) -> Reply {
    let args = serde_json::json!({"status": "DONE", "evidence": [evidence]}).to_string();
    Reply::tool_calls(&[("c", "session_complete", &args)])
}

fn verdict(status: &str) -> Reply {
    Reply::text(&format!(
        "---VERDICT---\nSTATUS: {status}\nREASON: judged\nGAP_SUMMARY: none\n\
         CONFIDENCE: high\nCONFIDENCE_SCORE: 90\nWEAKEST_DIMENSION: tests\n---END---"
    ))
}

struct World {
    tmp: tempfile::TempDir,
    ctx: Context,
    server: ScriptedServer,
    model: HttpChatModel,
    store: Store,
}

/// A session of three steps and a quality gate (plan, verify, the gate, milestone-complete)
/// whose model answers in 4 calls: 3 steps at 29 tokens, one verdict at 18.
async fn world() -> World {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let project = tmp.path().join("project");
    let skills = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/skills");
    baton_testkit::copy_dir(&skills.join("claude"), &home.join(".claude"));
    baton_testkit::copy_dir(&skills.join("maestro"), &home.join(".maestro"));
    std::fs::create_dir_all(project.join(".workflow/scratch")).unwrap();
    let v = ".workflow/scratch/verification.json";
    std::fs::write(project.join(v), r#"{"status":"passed","gaps":[]}"#).unwrap();
    let ctx = context(&project, &home);
    verbs::new::run(
        &ctx,
        &NewArgs {
            intent: "add CSV export".into(),
            chain: "plan,verify,milestone-complete".into(),
            auto: true,
            ..NewArgs::default()
        },
    )
    .unwrap();
    let server = ScriptedServer::start(vec![
        done("plan.md"),
        done(v),
        verdict("proceed"),
        done("milestone.md"),
    ])
    .await
    .unwrap();
    let model = HttpChatModel::new(LlmConfig {
        base_url: server.base_url(),
        model: Some("scripted".into()),
        stream: false,
        retry_base_delay: Duration::from_millis(5),
        max_completion_tokens: 200,
        ..LlmConfig::default()
    })
    .unwrap();
    let store = Store::new(tmp.path().join("store"));
    World {
        tmp,
        ctx,
        server,
        model,
        store,
    }
}

impl World {
    async fn run(&self, tokens: Option<u64>) -> SessionEnd {
        let mut settings =
            RunSettings::new("run@test", &self.store, ModelSource::Live(&self.model));
        settings.max_turns = 5;
        settings.budget = BudgetConfig {
            tokens,
            ..BudgetConfig::default()
        };
        run(&self.ctx, None, settings).await.unwrap().end
    }

    /// `(estimate, cost)` of each model call, in chain order: the step runs' audit lines and
    /// the gate's ledger line.
    fn calls(&self) -> Vec<(u64, u64)> {
        let s = discovery::find(&self.ctx, None, Pick::Any)
            .unwrap()
            .into_session()
            .unwrap();
        let project = self.store.project(&self.ctx.project).unwrap();
        let lines = |path: &Path| -> Vec<(u64, u64)> {
            std::fs::read_to_string(path)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
                .filter(|l| l["kind"] == "engine.turn")
                .map(|l| {
                    let e = &l["estimate"];
                    // What budgets charge: the larger of the server's figures and baton's count.
                    let usage: baton_llm::Usage =
                        serde_json::from_value(l["usage"].clone()).unwrap();
                    let counted: baton_engine::spend::Counted =
                        serde_json::from_value(l["counted"].clone()).unwrap();
                    (
                        e["promptTokens"].as_u64().unwrap() + e["maxTokens"].as_u64().unwrap(),
                        baton_engine::spend::charge(Some(&usage), counted, None).total_tokens,
                    )
                })
                .collect()
        };
        let mut gates = lines(&s.dir.join(budget::LEDGER)).into_iter();
        let mut out = Vec::new();
        for st in s.all_steps() {
            if let Some(gate) = st.decision() {
                if baton_lifecycle::session::apply::form_of(gate).is_some() {
                    out.extend(gates.next());
                }
            } else if let Some(run) = baton_lifecycle::session::step_run::any_link(&s, st.index()) {
                out.extend(lines(&project.run_paths(&run).execution_log));
            }
        }
        out
    }

    fn spent(&self) -> u64 {
        let s = discovery::find(&self.ctx, None, Pick::Any)
            .unwrap()
            .into_session()
            .unwrap();
        let project = self.store.project(&self.ctx.project).unwrap();
        budget::usage(&s, &project).total.total_tokens
    }
}

#[tokio::test]
async fn a_session_budget_stops_before_a_crossing_step_or_gate_call() {
    // Zero: nothing is sent.
    let w = world().await;
    let end = w.run(Some(0)).await;
    assert!(
        matches!(&end, SessionEnd::Interrupted { code, .. } if *code == BUDGET_EXCEEDED),
        "{end:?}"
    );
    assert_eq!(w.server.received().len(), 0);
    assert_eq!(w.run(None).await, SessionEnd::Completed);
    assert_eq!(w.server.remaining(), 0);
    let total = w.spent();
    assert_eq!(
        total,
        3 * 29 + 18,
        "3 steps and a verdict, counted once each"
    );
    drop(w.tmp);

    // The calls in order (plan, verify, the gate's verdict, milestone-complete): what each
    // was estimated at and what it cost, from the session's records.
    let w = world().await;
    assert_eq!(w.run(None).await, SessionEnd::Completed);
    let calls = w.calls();
    assert_eq!(calls.len(), 4);
    drop(w.tmp);

    // A budget 10 tokens short of letting call k through: the calls before it that fit are
    // sent, call k is not; the same budget again sends nothing; no budget finishes the session.
    for k in 1..calls.len() {
        let budget = calls[..k].iter().map(|c| c.1).sum::<u64>() + calls[k].0 - 10;
        let expected = allowed(&calls, budget);
        assert!(expected <= k, "{expected} {k}");
        let w = world().await;
        match w.run(Some(budget)).await {
            SessionEnd::Interrupted { code, message } => {
                assert_eq!(code, BUDGET_EXCEEDED, "{message}");
                assert!(message.contains("session"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(w.server.received().len(), expected, "budget {budget}");
        assert!(w.spent() <= budget, "spent {} of {budget}", w.spent());
        let again = w.run(Some(budget)).await;
        assert!(matches!(again, SessionEnd::Interrupted { .. }));
        assert_eq!(w.server.received().len(), expected, "nothing more sent");
        assert_eq!(w.run(None).await, SessionEnd::Completed);
        assert_eq!(w.server.remaining(), 0);
        assert_eq!(w.spent(), total);
    }
}

/// How many calls a budget lets through: call k goes only if what was spent before it plus
/// its estimate stays within the budget.
fn allowed(calls: &[(u64, u64)], budget: u64) -> usize {
    let mut spent = 0;
    for (k, (estimate, cost)) in calls.iter().enumerate() {
        if spent + estimate > budget {
            return k;
        }
        spent += cost;
    }
    calls.len()
}
