//! `session::start` end to end on temp projects with the sample skills and a strict scripted
//! server: `-y` creates a session ralph's `check` accepts, with the decomposition stored;
//! without `-y` the plan is shown first and nothing is written until `create`; questions, an
//! active session, a missing skill and a rejected decomposition write nothing (and the first
//! three cost no model call); brainstorm creates without a decomposition.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_lifecycle::ralph::Context;
use baton_lifecycle::ralph::check::{self, Scope};
use baton_lifecycle::ralph::verbs::{self, insert::InsertArgs, new::NewArgs};
use baton_lifecycle::session::start::{StartOptions, StartOutcome, create, plan, start};
use baton_llm::testing::{Reply, ScriptedServer};
use baton_llm::{HttpChatModel, LlmConfig};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

struct World {
    _tmp: tempfile::TempDir,
    ctx: Context,
}

/// A project with `state` as `.workflow/state.json` (none when `None`) and a home holding the
/// sample command files.
fn world(state: Option<Value>) -> World {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let project = tmp.path().join("project");
    let skills = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/skills");
    baton_testkit::copy_dir(&skills.join("claude"), &home.join(".claude"));
    baton_testkit::copy_dir(&skills.join("maestro"), &home.join(".maestro"));
    std::fs::create_dir_all(&project).unwrap();
    if let Some(state) = state {
        std::fs::create_dir_all(project.join(".workflow")).unwrap();
        std::fs::write(project.join(".workflow/state.json"), state.to_string()).unwrap();
    }
    let mut ctx = Context::from_env(&project, "baton ralph");
    ctx.home = Some(home.clone());
    ctx.maestro_home = Some(home.join(".maestro"));
    ctx.owner = "start@test".into();
    ctx.lock_timeout = Duration::from_secs(5);
    World { _tmp: tmp, ctx }
}

/// Milestone M1 with phase 1 `auth`, whose analysis is done: the chain starts at plan.
fn analysed() -> Value {
    json!({
        "current_milestone": "M1",
        "milestones": [{"id": "M1", "status": "active", "phases": [1],
                        "phase_slugs": {"1": "auth"}}],
        "artifacts": [{"id": "ANL-001", "type": "analyze", "milestone": "M1", "phase": 1,
                       "scope": "phase", "path": "scratch/anl-001", "status": "completed",
                       "depends_on": [], "harvested": false,
                       "created_at": "2026-11-01T10:00:00Z", "completed_at": null}]
    })
}

const INTENT: &str = "fix the token refresh bug in auth.rs for phase 1";

fn decomposition() -> Value {
    json!({
        "boundary_contract": {"in_scope": ["src/auth.rs"], "out_of_scope": ["the UI"],
                              "constraints": [], "definition_of_done": "refresh test passes"},
        "execution_criteria": ["backward-compatible"],
        "task_decomposition": [
            {"id": "G1", "goal": "refresh works", "boundary": "auth.rs",
             "done_when": "verification.json passed", "evidence": "verification.json",
             "lifecycle": ["execute", "verify"]}
        ]
    })
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

fn opts(intent: &str, auto: bool) -> StartOptions {
    StartOptions {
        intent: intent.into(),
        auto,
        ..StartOptions::default()
    }
}

fn sessions(ctx: &Context) -> Vec<PathBuf> {
    match std::fs::read_dir(ctx.sessions_root()) {
        Ok(d) => d.flatten().map(|e| e.path()).collect(),
        Err(_) => Vec::new(),
    }
}

fn read(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn assert_checks(ctx: &Context, doc: &Value) {
    let findings = check::check(ctx, doc.as_object(), &[], Scope::All);
    assert!(!check::has_errors(&findings), "{findings:?}");
}

#[tokio::test]
async fn auto_creates_a_checked_session_with_its_decomposition() {
    let w = world(Some(analysed()));
    let (server, model) = scripted(vec![Reply::text(&decomposition().to_string())]).await;
    let out = start(
        &w.ctx,
        &opts(INTENT, true),
        &model,
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    let StartOutcome::Created(created) = out else {
        panic!("expected a created session, got {out:?}");
    };
    assert_eq!(server.received().len(), 1);
    assert!(created.session_id.starts_with("ralph-"));
    let doc = read(&created.path);
    assert_checks(&w.ctx, &doc);
    assert_eq!(doc["status"], "running");
    assert_eq!(doc["lifecycle_position"], "plan");
    assert_eq!(doc["phase"], 1);
    assert_eq!(doc["milestone"], "M1");
    assert_eq!(doc["auto_mode"], true);
    assert_eq!(doc["planning_mode"], "independent");
    assert_eq!(doc["task_decomposition"][0]["id"], "G1");
    assert_eq!(doc["task_decomposition"][0]["status"], "pending");
    assert_eq!(doc["task_decomposition_all_done"], false);
    assert_eq!(doc["boundary_contract"]["in_scope"], json!(["src/auth.rs"]));
    let steps = doc["steps"].as_array().unwrap();
    let labels: Vec<String> = created.steps.iter().map(|l| l.line()).collect();
    assert_eq!(labels.len(), steps.len());
    assert_eq!(labels[0], "0. maestro-plan {phase} [global]");
    assert_eq!(labels[1], "1. maestro-execute {phase} [global] → G1");
    assert_eq!(steps[1]["goal_ref"], "G1");
    assert_eq!(steps[1]["milestone_id"], "M1");
    assert!(
        steps
            .iter()
            .all(|s| s["decision"].is_string() || s["command_scope"] == "global")
    );
    let gates: Vec<&str> = steps
        .iter()
        .filter_map(|s| s["decision"].as_str())
        .collect();
    assert!(
        gates.ends_with(&["post-goal-audit", "post-milestone"]),
        "{gates:?}"
    );
    assert_eq!(steps.last().unwrap()["stage"], "milestone-complete");
}

#[tokio::test]
async fn without_auto_the_plan_comes_first_and_create_writes_it() {
    let w = world(Some(analysed()));
    let (_server, model) = scripted(vec![Reply::text(&decomposition().to_string())]).await;
    let out = start(
        &w.ctx,
        &opts(INTENT, false),
        &model,
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    let StartOutcome::Planned(p) = out else {
        panic!("expected a plan, got {out:?}");
    };
    assert!(
        sessions(&w.ctx).is_empty(),
        "nothing is written before create"
    );
    let shown = p.to_json();
    assert_eq!(shown["lifecycle_position"], "plan");
    assert_eq!(shown["steps"][0]["skill"], "maestro-plan");
    assert_eq!(shown["task_decomposition"][0]["id"], "G1");
    let planned_steps = p.steps.clone();
    let created = create(&w.ctx, *p).unwrap();
    let doc = read(&created.path);
    assert_checks(&w.ctx, &doc);
    assert_eq!(doc["steps"], Value::Array(planned_steps));
    assert_eq!(doc["auto_mode"], false);
}

#[tokio::test]
async fn a_broad_intent_asks_first_even_with_auto() {
    let w = world(Some(analysed()));
    let (server, model) = scripted(Vec::new()).await;
    let out = plan(
        &w.ctx,
        &opts("rewrite the whole auth module", true),
        &model,
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    let StartOutcome::Questions(qs) = out else {
        panic!("expected questions, got {out:?}");
    };
    assert!(!qs.is_empty());
    assert!(server.received().is_empty());
    assert!(sessions(&w.ctx).is_empty());
}

#[tokio::test]
async fn an_active_session_is_refused_before_any_call() {
    let w = world(Some(analysed()));
    let first = verbs::new::run(
        &w.ctx,
        &NewArgs {
            intent: "earlier".into(),
            chain: "plan,milestone-complete".into(),
            ..NewArgs::default()
        },
    )
    .unwrap();
    let (server, model) = scripted(Vec::new()).await;
    let e = start(
        &w.ctx,
        &opts(INTENT, true),
        &model,
        &CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), "SESSION_ACTIVE");
    assert!(
        e.hints()[0].contains("baton session continue"),
        "{:?}",
        e.hints()
    );
    assert!(server.received().is_empty());
    assert_eq!(sessions(&w.ctx).len(), 1);
    assert!(first.json["session_id"].is_string());
}

#[tokio::test]
async fn create_checks_again_for_a_session_started_meanwhile() {
    let w = world(Some(analysed()));
    let (_server, model) = scripted(vec![Reply::text(&decomposition().to_string())]).await;
    let StartOutcome::Planned(p) = plan(
        &w.ctx,
        &opts(INTENT, false),
        &model,
        &CancellationToken::new(),
    )
    .await
    .unwrap() else {
        panic!("expected a plan");
    };
    verbs::new::run(
        &w.ctx,
        &NewArgs {
            intent: "meanwhile".into(),
            chain: "plan".into(),
            ..NewArgs::default()
        },
    )
    .unwrap();
    assert_eq!(create(&w.ctx, *p).unwrap_err().code(), "SESSION_ACTIVE");
    assert_eq!(sessions(&w.ctx).len(), 1);
}

#[tokio::test]
async fn a_missing_skill_is_e006_with_nothing_written_and_no_call() {
    let w = world(Some(analysed()));
    let commands = w.ctx.home.clone().unwrap().join(".claude/commands");
    std::fs::remove_file(commands.join("quality-review.md")).unwrap();
    let (server, model) = scripted(vec![Reply::text(&decomposition().to_string())]).await;
    let e = start(
        &w.ctx,
        &opts(INTENT, true),
        &model,
        &CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), "E006");
    assert!(e.to_string().contains("quality-review"), "{e}");
    assert!(server.received().is_empty());
    assert!(!w.ctx.sessions_root().exists());
}

#[tokio::test]
async fn a_rejected_decomposition_writes_nothing() {
    let w = world(Some(analysed()));
    let (server, model) = scripted(vec![Reply::text("no"), Reply::text("[]")]).await;
    let e = start(
        &w.ctx,
        &opts(INTENT, true),
        &model,
        &CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), "DECOMPOSITION_INVALID");
    assert_eq!(server.received().len(), 2);
    assert!(!w.ctx.sessions_root().exists());
}

#[tokio::test]
async fn brainstorm_needs_no_decomposition() {
    // No .workflow/ and no sources: the bootstrap table says brainstorm.
    let w = world(None);
    let (server, model) = scripted(Vec::new()).await;
    let out = start(
        &w.ctx,
        &opts("a tool that tracks reading habits", true),
        &model,
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    let StartOutcome::Created(created) = out else {
        panic!("expected a created session, got {out:?}");
    };
    assert!(server.received().is_empty());
    let doc = read(&created.path);
    assert_checks(&w.ctx, &doc);
    assert_eq!(doc["lifecycle_position"], "brainstorm");
    assert!(doc.get("task_decomposition").is_none());
    let steps = doc["steps"].as_array().unwrap();
    assert_eq!(steps[0]["skill"], "maestro-brainstorm");
    assert!(!steps.iter().any(|s| s["decision"] == "post-goal-audit"));
    assert_eq!(steps.last().unwrap()["decision"], "post-milestone");
}

#[tokio::test]
async fn an_empty_intent_is_refused() {
    let w = world(None);
    let (_server, model) = scripted(Vec::new()).await;
    let e = plan(&w.ctx, &opts("  ", true), &model, &CancellationToken::new())
        .await
        .unwrap_err();
    assert_eq!(e.code(), "INTENT_EMPTY");
}

#[tokio::test]
async fn steps_inserted_later_get_their_goal_too() {
    // Build rule 14: a fix loop inserted into a decomposed session takes rule 7's goal refs.
    let w = world(Some(analysed()));
    let (_server, model) = scripted(vec![Reply::text(&decomposition().to_string())]).await;
    let out = start(
        &w.ctx,
        &opts(INTENT, true),
        &model,
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    let StartOutcome::Created(created) = out else {
        panic!("expected a created session, got {out:?}");
    };
    let gate = created
        .steps
        .iter()
        .position(|l| l.decision.as_deref() == Some("post-verify"))
        .unwrap();
    verbs::insert::run(
        &w.ctx,
        None,
        &InsertArgs {
            after: gate.to_string(),
            template: "post-verify".into(),
            gaps: vec!["refresh fails".into()],
            ..InsertArgs::default()
        },
    )
    .unwrap();
    let doc = read(&created.path);
    assert_checks(&w.ctx, &doc);
    let inserted: Vec<(&str, &Value)> = doc["steps"].as_array().unwrap()[gate + 1..gate + 6]
        .iter()
        .map(|s| (s["stage"].as_str().unwrap(), &s["goal_ref"]))
        .collect();
    assert_eq!(
        inserted,
        [
            ("debug", &Value::Null),
            ("plan", &Value::Null),
            ("execute", &json!("G1")),
            ("verify", &json!("G1")),
            ("verify", &Value::Null),
        ]
    );
}

#[tokio::test]
async fn a_missing_required_reading_is_refused_before_any_call() {
    // The command file exists but a file it requires does not: `ralph check` would report
    // E007 on the new session, so it is not created.
    let w = world(Some(analysed()));
    let workflows = w.ctx.home.clone().unwrap().join(".maestro/workflows");
    std::fs::remove_file(workflows.join("verify.md")).unwrap();
    let (server, model) = scripted(vec![Reply::text(&decomposition().to_string())]).await;
    let e = start(
        &w.ctx,
        &opts(INTENT, true),
        &model,
        &CancellationToken::new(),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), "E007");
    assert!(e.to_string().contains("verify.md"), "{e}");
    assert!(
        e.hints()
            .iter()
            .any(|h| h.starts_with("nothing was created"))
    );
    assert!(server.received().is_empty());
    assert!(!w.ctx.sessions_root().exists());
}

#[tokio::test]
async fn a_failed_verification_starts_with_its_fix_loop() {
    // verify-failed has no row in the seed's build table: the chain opens with the post-verify
    // fix loop fed with the gaps of verification.json, then the stages after verify.
    let mut state = analysed();
    let artifact = |id: &str, kind: &str, path: &str, at: &str| {
        json!({"id": id, "type": kind, "milestone": "M1", "phase": 1, "scope": "phase",
               "path": path, "status": "completed", "depends_on": [], "harvested": false,
               "created_at": at, "completed_at": null})
    };
    state["artifacts"] = json!([
        artifact(
            "EXC-001",
            "execute",
            "scratch/exc-001",
            "2026-11-02T10:00:00Z"
        ),
        artifact(
            "VRF-001",
            "verify",
            "scratch/vrf-001",
            "2026-11-03T10:00:00Z"
        ),
    ]);
    let w = world(Some(state));
    let dir = w.ctx.project.join(".workflow/scratch/vrf-001");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("verification.json"),
        json!({"passed": false, "gaps": ["refresh returns 500"]}).to_string(),
    )
    .unwrap();
    let (_server, model) = scripted(vec![Reply::text(&decomposition().to_string())]).await;
    let out = start(
        &w.ctx,
        &opts(INTENT, true),
        &model,
        &CancellationToken::new(),
    )
    .await
    .unwrap();
    let StartOutcome::Created(created) = out else {
        panic!("expected a created session, got {out:?}");
    };
    let doc = read(&created.path);
    assert_checks(&w.ctx, &doc);
    assert_eq!(doc["lifecycle_position"], "verify-failed");
    let lines: Vec<String> = created.steps.iter().map(|l| l.line()).collect();
    assert_eq!(
        lines[..6],
        [
            "0. quality-debug \"refresh returns 500\" [global]",
            "1. maestro-plan --gaps {phase} [global]",
            "2. maestro-execute {phase} [global] → G1",
            "3. maestro-verify {phase} [global] → G1",
            "4. ◆ post-verify",
            "5. quality-review {phase} [global]",
        ]
    );
}

#[tokio::test]
async fn a_project_command_file_wins_over_the_global_one() {
    let w = world(Some(analysed()));
    let global = w
        .ctx
        .home
        .clone()
        .unwrap()
        .join(".claude/commands/maestro-plan.md");
    let local = w.ctx.project.join(".claude/commands/maestro-plan.md");
    std::fs::create_dir_all(local.parent().unwrap()).unwrap();
    std::fs::copy(&global, &local).unwrap();
    let (_server, model) = scripted(vec![Reply::text(&decomposition().to_string())]).await;
    let StartOutcome::Planned(p) = plan(
        &w.ctx,
        &opts(INTENT, false),
        &model,
        &CancellationToken::new(),
    )
    .await
    .unwrap() else {
        panic!("expected a plan");
    };
    assert_eq!(p.steps[0]["skill"], "maestro-plan");
    assert_eq!(p.steps[0]["command_scope"], "project");
    let path = PathBuf::from(p.steps[0]["command_path"].as_str().unwrap());
    assert_eq!(path.canonicalize().unwrap(), local.canonicalize().unwrap());
    assert_eq!(p.steps[1]["command_scope"], "global");
}

/// Figure: the build phase's own cost with no model call (a brainstorm chain, which skips the
/// decomposition). Run with `--ignored --nocapture`, in release for a meaningful number.
#[tokio::test]
#[ignore]
async fn figure_build_phase_overhead() {
    let (_server, model) = scripted(Vec::new()).await;
    let w = world(None);
    let o = opts("a tool that tracks reading habits", true);
    let n = 200;
    let t = std::time::Instant::now();
    for _ in 0..n {
        let out = plan(&w.ctx, &o, &model, &CancellationToken::new())
            .await
            .unwrap();
        assert!(matches!(out, StartOutcome::Planned(_)));
    }
    let per_plan = t.elapsed() / n;
    let StartOutcome::Planned(p) = plan(&w.ctx, &o, &model, &CancellationToken::new())
        .await
        .unwrap()
    else {
        panic!("expected a plan");
    };
    let t = std::time::Instant::now();
    let created = create(&w.ctx, *p).unwrap();
    let per_create = t.elapsed();
    eprintln!(
        "FIGURE build phase without the model: plan {per_plan:?} (inference, {}-step chain, \
         command resolution, check), create {per_create:?} (durable write)",
        created.steps.len()
    );
}
