//! `baton agent` without a terminal: one input with `--input` (and `--json`: the resolved
//! command and what happened), chats logged in the store, and a whole session read from a
//! pipe (menu, `create-story`, the question answered after `/menu`, `/dismiss`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use crate::common;

use baton_llm::Trace;
use baton_llm::testing::{Reply, ScriptedServer};
use common::{Baton, example, repo, trace_until_question, walk};
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn project(tmp: &Path) -> PathBuf {
    baton_testkit::sample_project(tmp)
}

fn pkg() -> String {
    example("create-story-micro").display().to_string()
}

/// `baton agent …` against a scripted model server, with `stdin` as the person.
fn agent_with_model(baton: &Baton, base_url: &str, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_baton"))
        .arg("agent")
        .arg(pkg())
        .args(args)
        .current_dir(repo())
        .env("BATON_HOME", baton.home.path())
        .env("OPENAI_BASE_URL", base_url)
        .env("BATON_MODEL", "scripted")
        .env("OPENAI_API_KEY", "sk-test")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn the_menu_and_a_clarifying_question_need_no_model() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let p = project(tmp.path());
    let p = p.to_str().unwrap();
    let shown = baton.run(&["agent", &pkg(), "-p", p, "--input", "", "--json"]);
    assert_eq!(shown.code, 0, "{}{}", shown.stdout, shown.stderr);
    let v = shown.json();
    assert_eq!(v["event"], "SHOW_MENU");
    assert_eq!(v["command"]["kind"], "ShowMenu");
    assert_eq!(v["agent"], "sm", "the agent with a menu is the default");
    assert_eq!(
        v["menu"],
        json!([{"index": 1, "description": "Create the next story file", "trigger": "create-story"}])
    );
    let asked = baton
        .run(&["agent", &pkg(), "-p", p, "--input", "7", "--json"])
        .json();
    assert_eq!(asked["event"], "CLARIFY_CHOICE");
    assert_eq!(
        asked["command"]["reason"],
        "there is no item 7: choose a number from 1 to 1"
    );
    let text = baton.run(&["agent", &pkg(), "-p", p, "--input", "/menu"]);
    assert_eq!(text.code, 0);
    assert!(
        text.stdout.contains("Bob — Scrum Master"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("1. Create the next story file  [create-story]")
    );
}

#[test]
fn create_story_starts_the_workflow_in_this_terminal() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let p = project(tmp.path());
    let trace = baton_testkit::demo_trace();
    let done = baton.run(&[
        "agent",
        &pkg(),
        "--agent",
        "sm",
        "-p",
        p.to_str().unwrap(),
        "--input",
        "*create-story",
        "--replay",
        trace.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(done.code, 0, "{}{}", done.stdout, done.stderr);
    let v = done.json();
    assert_eq!(v["event"], "RUN_STARTED");
    assert_eq!(v["command"]["kind"], "StartWorkflow");
    assert_eq!(v["command"]["confidence"], "exact");
    assert_eq!(
        v["command"]["workflowRef"]["workflowId"],
        "create-story-micro"
    );
    assert_eq!(v["run"]["phase"], "completed");
    let runs = baton.run(&["runs", "list", "--json"]).json();
    assert_eq!(runs[0]["activeAgentId"], "sm");
    assert!(
        p.join("artifacts/stories/1-2-user-authentication.md")
            .is_file()
    );
}

#[test]
fn a_run_that_asks_waits_and_resume_says_what_it_waits_for() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let p = project(tmp.path());
    let p = p.to_str().unwrap();
    let trace = trace_until_question(tmp.path());
    let started = baton.run(&[
        "agent",
        &pkg(),
        "-p",
        p,
        "--input",
        "1",
        "--replay",
        trace.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(started.code, 10, "{}{}", started.stdout, started.stderr);
    assert_eq!(started.json()["run"]["phase"], "waiting-user");
    let resumed = baton.run(&["agent", &pkg(), "-p", p, "--input", "/resume", "--json"]);
    assert_eq!(resumed.code, 10, "{}", resumed.stdout);
    let v = resumed.json();
    assert_eq!(v["command"]["kind"], "ResumeRun");
    assert_eq!(v["error"]["code"], "RUN_WAITING");
    assert!(
        v["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("baton answer")
    );
}

#[test]
fn unknown_agents_and_classic_workflows_are_refused() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let p = project(tmp.path());
    let p = p.to_str().unwrap();
    let nobody = baton.run(&[
        "agent",
        &pkg(),
        "-p",
        p,
        "--agent",
        "nobody",
        "--input",
        "",
        "--json",
    ]);
    assert_eq!(nobody.code, 2);
    assert_eq!(nobody.json()["error"]["code"], "AGENT_NOT_FOUND");
    assert!(
        nobody.json()["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("sm, summarizer")
    );
    let needs_input = baton.run(&["agent", &pkg(), "-p", p, "--json"]);
    assert_eq!(needs_input.code, 2);
    assert_eq!(needs_input.json()["error"]["code"], "USAGE");

    let copy = tmp.path().join("pkg");
    baton_testkit::copy_dir(&example("create-story-micro"), &copy);
    let agents = copy.join("agents.json");
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&agents).unwrap()).unwrap();
    doc["agents"][0]["menu"] = json!([{
        "trigger": "classic",
        "workflow": "{project-root}/_bmad/bmm/workflows/4-implementation/create-story/workflow.yaml",
        "description": "Create story (classic)"
    }]);
    std::fs::write(&agents, serde_json::to_vec(&doc).unwrap()).unwrap();
    let refused = baton.run(&[
        "agent",
        copy.to_str().unwrap(),
        "-p",
        p,
        "--input",
        "classic",
        "--json",
    ]);
    assert_eq!(refused.code, 2, "{}", refused.stdout);
    let v = refused.json();
    assert_eq!(v["error"]["code"], "NOT_SUPPORTED_CLASSIC_WORKFLOW");
    assert_eq!(v["command"], Value::Null);
    assert_eq!(baton.run(&["runs", "list", "--json"]).json(), json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_goes_to_the_persona_and_is_kept_in_the_store() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let p = project(tmp.path());
    let p = p.to_str().unwrap();
    let server = ScriptedServer::start(vec![
        Reply::text("Hello, I am Bob. Type 1 to create the next story."),
        Reply::text("Then I would read the epics."),
    ])
    .await
    .unwrap();
    let first = agent_with_model(
        &baton,
        &server.base_url(),
        &[
            "--agent",
            "sm",
            "-p",
            p,
            "--input",
            "what can you do?",
            "--json",
        ],
        "",
    );
    let (out, err) = text(&first);
    assert_eq!(first.status.code(), Some(0), "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["event"], "CHAT_RESPONSE");
    assert_eq!(v["command"]["kind"], "Chat");
    assert_eq!(
        v["assistant"],
        "Hello, I am Bob. Type 1 to create the next story."
    );
    let id = v["conversationId"].as_str().unwrap().to_string();
    let body = &server.received()[0].body;
    assert!(
        body.get("tools")
            .is_none_or(|t| t.as_array().unwrap().is_empty())
    );
    let messages = body["messages"].as_array().unwrap();
    let all: Vec<&str> = messages
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(
        all.iter()
            .any(|c| c.starts_with("You are Bob (Scrum Master)."))
    );
    assert!(
        all.iter()
            .any(|c| c.contains("1. Create the next story file (create-story)"))
    );
    assert_eq!(*all.last().unwrap(), "USER_INPUT\nwhat can you do?");

    // The conversation is in the store and goes on with --conversation.
    let log = walk(baton.home.path())
        .into_iter()
        .find(|f| f.ends_with(format!("conversations/{id}/conversation.jsonl")))
        .expect("conversation log");
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("Hello, I am Bob.")
    );
    let second = agent_with_model(
        &baton,
        &server.base_url(),
        &[
            "-p",
            p,
            "--conversation",
            &id,
            "--input",
            "and then?",
            "--json",
        ],
        "",
    );
    assert_eq!(second.status.code(), Some(0), "{:?}", text(&second));
    let body = &server.received()[1].body;
    let contents: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    let n = contents.len();
    assert_eq!(
        contents[n - 3..],
        [
            "USER_INPUT\nwhat can you do?",
            "Hello, I am Bob. Type 1 to create the next story.",
            "USER_INPUT\nand then?"
        ]
    );
    let other = baton.run(&[
        "agent",
        &pkg(),
        "-p",
        p,
        "--agent",
        "summarizer",
        "--conversation",
        &id,
        "--input",
        "hi",
        "--replay",
        baton_testkit::demo_trace().to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(other.json()["error"]["code"], "CONVERSATION_AGENT_MISMATCH");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_from_a_pipe_runs_create_story_with_the_menu_mid_run() {
    let baton = Baton::new();
    let tmp = tempfile::tempdir().unwrap();
    let p = project(tmp.path());
    let trace = Trace::load(&baton_testkit::demo_trace()).unwrap();
    let server = ScriptedServer::start(Reply::from_trace(&trace))
        .await
        .unwrap();
    let session = agent_with_model(
        &baton,
        &server.base_url(),
        &["-p", p.to_str().unwrap()],
        "create-story\n/menu\n1-2-user-authentication\n/dismiss\n",
    );
    let (out, err) = text(&session);
    assert_eq!(session.status.code(), Some(0), "{out}{err}");
    assert_eq!(
        out.matches("1. Create the next story file  [create-story]")
            .count(),
        2,
        "the menu at the start and after /menu: {out}"
    );
    assert!(out.contains("While the run asks: /menu"), "{out}");
    assert!(out.contains("Which story should I prepare?"), "{out}");
    assert!(out.contains("completed: run"), "{out}");
    assert!(out.trim_end().ends_with("Bob is dismissed."), "{out}");
    assert_eq!(server.received().len(), 10);
    // The answer reached the model as the user's input, not the /menu.
    let third = server.received()[2].body.to_string();
    assert!(third.contains("1-2-user-authentication"));
    assert!(!third.contains("/menu"));
    assert!(
        p.join("artifacts/stories/1-2-user-authentication.md")
            .is_file()
    );
}
