//! A lifecycle step gets the project's tool settings like any run: with `baton.toml` enabling
//! the terminal, a step told to run the checks calls `terminal.run` and gets the command's
//! real output (before, step runs had no terminal and no MCP whatever `baton.toml` said:
//! `TOOL_NOT_AVAILABLE`). Driven through the session loop against a strict scripted server.

use baton_lifecycle::ralph::Context;
use baton_lifecycle::ralph::verbs::{self, new::NewArgs};
use baton_lifecycle::session::run::{RunSettings, SessionEnd, run};
use baton_lifecycle::session::step_run::ModelSource;
use baton_llm::testing::{Reply, ScriptedServer};
use baton_llm::{HttpChatModel, LlmConfig};
use baton_store::Store;
use baton_tools::ToolsConfig;
use serde_json::Value;
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

/// The tool results the model got back, from the requests the server received.
fn tool_results(server: &ScriptedServer) -> Vec<Value> {
    server
        .received()
        .iter()
        .flat_map(|r| r.body["messages"].as_array().cloned().unwrap_or_default())
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| serde_json::from_str(m["content"].as_str()?).ok())
        .collect()
}

#[tokio::test]
async fn a_step_runs_the_checks_when_baton_toml_enables_the_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let project = tmp.path().join("project");
    let skills = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/skills");
    baton_testkit::copy_dir(&skills.join("claude"), &home.join(".claude"));
    baton_testkit::copy_dir(&skills.join("maestro"), &home.join(".maestro"));
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("baton.toml"),
        "[tools.terminal]\nenabled = true\nallowed_commands = [\"echo\"]\n",
    )
    .unwrap();
    let ctx = context(&project, &home);
    verbs::new::run(
        &ctx,
        &NewArgs {
            intent: "run the checks".into(),
            chain: "plan,milestone-complete".into(),
            auto: true,
            ..NewArgs::default()
        },
    )
    .unwrap();
    let run_checks = serde_json::json!({"command": "echo", "args": ["all 12 checks pass"]});
    let server = ScriptedServer::start(vec![
        Reply::tool_calls(&[("t1", "terminal_run", &run_checks.to_string())]),
        done("plan.md"),
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
    let store = Store::new(tmp.path().join("store"));
    let mut settings = RunSettings::new("run@test", &store, ModelSource::Live(&model));
    settings.max_turns = 5;
    // As `baton session` loads them: the store's config.toml, then the project's baton.toml.
    settings.tools = ToolsConfig::load(Some(store.home()), Some(&project)).unwrap();
    let report = run(&ctx, None, settings).await.unwrap();
    assert_eq!(report.end, SessionEnd::Completed);
    assert_eq!(server.remaining(), 0);
    // The step's model was offered the terminal and told so.
    let first = &server.received()[0].body;
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(tools.contains(&"terminal_run"), "{tools:?}");
    let results = tool_results(&server);
    let ran = results
        .iter()
        .find(|r| r.get("exitCode").is_some() || r.pointer("/error/code").is_some())
        .unwrap_or_else(|| panic!("no terminal result: {results:?}"));
    assert_eq!(ran["ok"], true, "{ran}");
    assert_eq!(ran["exitCode"], 0, "{ran}");
    assert!(
        ran["stdout"]
            .as_str()
            .unwrap()
            .contains("all 12 checks pass"),
        "{ran}"
    );
}
