//! The session loop against a strict scripted server, on real session files: a full session
//! with one post-verify `fix` (the loop inserted, re-judged at retry 1, then proceed) reaches
//! `completed`, and the files pass `ralph check` (no E finding) after every tick.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_lifecycle::ralph::Context;
use baton_lifecycle::ralph::check::{self, Scope};
use baton_lifecycle::ralph::verbs::{self, new::NewArgs};
use baton_lifecycle::session::run::{RunSettings, SessionEnd, Tick, run};
use baton_lifecycle::session::step_run::ModelSource;
use baton_llm::testing::{Reply, ScriptedServer};
use baton_llm::{HttpChatModel, LlmConfig};
use baton_store::{RunKind, Store};
use serde_json::Value;
use std::path::{Path, PathBuf};
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

fn status_doc(ctx: &Context, status: &Path) -> Value {
    let doc: Value = serde_json::from_slice(&std::fs::read(status).unwrap()).unwrap();
    let findings = check::check(ctx, doc.as_object(), &[], Scope::All);
    assert!(!check::has_errors(&findings), "{findings:?}");
    doc
}

fn done(evidence: &str) -> Reply {
    let args = serde_json::json!({"status": "DONE", "evidence": [evidence]}).to_string();
    Reply::tool_calls(&[("c", "session_complete", &args)])
}

fn verdict(status: &str, score: u8) -> Reply {
    Reply::text(&format!(
        "---VERDICT---\nSTATUS: {status}\nREASON: judged\nGAP_SUMMARY: header row\n\
         CONFIDENCE: high\nCONFIDENCE_SCORE: {score}\nWEAKEST_DIMENSION: tests\n---END---"
    ))
}

#[tokio::test]
async fn a_session_with_one_fix_loop_runs_to_completed() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let project = tmp.path().join("project");
    let skills = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/skills");
    baton_testkit::copy_dir(&skills.join("claude"), &home.join(".claude"));
    baton_testkit::copy_dir(&skills.join("maestro"), &home.join(".maestro"));
    std::fs::create_dir_all(project.join(".workflow/scratch")).unwrap();
    std::fs::write(
        project.join(".workflow/scratch/verification.json"),
        r#"{"status":"passed","gaps":[]}"#,
    )
    .unwrap();
    let ctx = context(&project, &home);
    let out = verbs::new::run(
        &ctx,
        &NewArgs {
            intent: "add CSV export".into(),
            chain: "plan,verify,milestone-complete".into(),
            // Auto mode: the gates settle without asking anybody.
            auto: true,
            ..NewArgs::default()
        },
    )
    .unwrap();
    let status = PathBuf::from(out.json["path"].as_str().unwrap());
    let v = ".workflow/scratch/verification.json";
    let server = ScriptedServer::start(vec![
        done("plan.md"),
        done(v),
        verdict("fix", 80),
        done("debug.md"),
        done("plan.md"),
        done("src/export.rs"),
        done(v),
        verdict("proceed", 90),
        done("milestone.md"),
    ])
    .await
    .unwrap();
    let model = HttpChatModel::new(LlmConfig {
        base_url: server.base_url(),
        model: Some("scripted".into()),
        stream: false,
        retry_base_delay: Duration::from_millis(5),
        ..LlmConfig::default()
    })
    .unwrap();
    let mut ticks: Vec<Tick> = Vec::new();
    let mut after = |t: &Tick| {
        status_doc(&ctx, &status);
        ticks.push(t.clone());
    };
    let store = Store::new(tmp.path().join("store"));
    let mut settings = RunSettings::new("run@test", &store, ModelSource::Live(&model));
    settings.max_turns = 5;
    settings.after_tick = Some(&mut after);
    let report = run(&ctx, None, settings).await.unwrap();
    assert_eq!(report.end, SessionEnd::Completed, "{ticks:#?}");
    assert_eq!(server.remaining(), 0, "every scripted answer was used");
    // What the model was asked, steps and gates, is counted once each.
    assert_eq!(report.spent.model_calls, 9);
    assert_eq!(
        report.spent.usage.total_tokens,
        7 * 29 + 2 * 18,
        "7 steps, 2 verdicts"
    );
    let doc = status_doc(&ctx, &status);
    assert_eq!(doc["status"], "completed");
    let gates: Vec<(String, u64, String)> = doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["decision"] == "post-verify")
        .map(|s| {
            (
                s["decision"].as_str().unwrap().to_string(),
                s["retry_count"].as_u64().unwrap_or(0),
                s["verdict"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(
        gates,
        [
            ("post-verify".into(), 0, "fix".into()),
            ("post-verify".into(), 1, "proceed".into())
        ]
    );
    let decisions = std::fs::read_to_string(status.with_file_name("decisions.ndjson")).unwrap();
    let ids: Vec<Value> = decisions
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["id"].clone())
        .collect();
    let unique: std::collections::BTreeSet<String> = ids
        .iter()
        .map(|i| i.as_str().unwrap().to_string())
        .collect();
    assert_eq!(unique.len(), ids.len(), "no decision twice");
    // Every execution step ran as a task run of the store.
    let runs = store.project(&project).unwrap().list_runs().unwrap();
    assert_eq!(runs.len(), 7, "{runs:#?}");
    assert!(runs.iter().all(|r| r.kind == RunKind::Task));
}
