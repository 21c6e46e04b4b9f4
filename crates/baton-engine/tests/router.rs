//! The command router, rule by rule (crewagent menu contract §5, steps 0–5), on a copy of the
//! example package whose `sm` agent has a menu with every kind of item.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_engine::router::{Kind, Menu, ResolvedCommand, RouteError, Surface, resolve};
use baton_package::Package;
use baton_testkit::{copy_dir, example};
use serde_json::{Value, json};

fn package() -> (tempfile::TempDir, Package) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pkg");
    copy_dir(&example("create-story-micro"), &dir);
    std::fs::create_dir_all(dir.join("tasks")).unwrap();
    std::fs::write(
        dir.join("tasks/validate.md"),
        "# Validate a story\n\nCheck the story against the template.\n",
    )
    .unwrap();
    let path = dir.join("agents.json");
    let mut agents: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    agents["agents"][0]["prompts"] =
        json!([{"id": "brief", "content": "Write a brief of the sprint."}]);
    agents["agents"][0]["menu"] = json!([
        {"trigger": "create-story", "workflow": "workflow.md", "description": "[CS] Create the next story file",
         "triggers": [{"type": "alias", "match": "cs-new"}]},
        {"trigger": "web-thing", "action": "Open the web board", "description": "Web board", "web-only": true},
        {"cmd": "*validate-story", "exec": "tasks/validate.md", "description": "Validate a story", "data": "assets/story-template.md"},
        {"trigger": "ide-thing", "action": "#brief", "description": "IDE brief", "ide-only": true},
        {"trigger": "party", "action": "Start a party mode discussion", "description": "Party mode"},
        {"trigger": "menu-again", "action": "menu.show", "description": "Redisplay the menu and stats"},
        {"trigger": "bye", "action": "agent.dismiss", "description": "Dismiss the agent"},
        {"trigger": "continue-run", "action": "run.resume", "description": "Resume the latest run"},
        {"trigger": "classic", "workflow": "{project-root}/_bmad/bmm/workflows/create-story/workflow.yaml", "description": "Classic create story"},
        {"trigger": "ghost", "workflow": "no-such-flow", "description": "Unknown workflow"},
        {"description": "Review stories and code",
         "triggers": [{"type": "handler", "match": "review code", "action": "#brief"},
                      {"type": "handler", "match": "review story", "exec": "tasks/validate.md"}]},
        {"trigger": "story-stats", "action": "#brief", "description": "Sprint statistics"},
        {"trigger": "both", "action": "x", "description": "Both flags", "ide-only": true, "web-only": true},
        {"trigger": "run-exec-wf", "exec": "{package-root}/workflow.md", "description": "Run the workflow through exec"},
        {"trigger": "lost-prompt", "action": "#missing", "description": "A prompt that is not there"},
        {"trigger": "classic-exec", "exec": "tasks/old.xml", "description": "Classic task"},
        {"trigger": "checked", "workflow": "create-story-micro", "validate-workflow": "gone.md", "description": "Checked first"}
    ]);
    std::fs::write(&path, serde_json::to_vec_pretty(&agents).unwrap()).unwrap();
    let package = Package::load(&dir).unwrap_or_else(|e| panic!("{e}"));
    (tmp, package)
}

fn run(p: &Package, surface: Surface, input: &str) -> Result<ResolvedCommand, RouteError> {
    let agent = p.agent("sm").unwrap();
    resolve(p, agent, &Menu::of(agent, surface), input)
}

fn ok(p: &Package, input: &str) -> ResolvedCommand {
    run(p, Surface::Terminal, input).unwrap_or_else(|e| panic!("{input:?}: {e:?}"))
}

fn err(p: &Package, input: &str) -> String {
    run(p, Surface::Terminal, input)
        .map(|c| panic!("{input:?} resolved to {c:?}"))
        .unwrap_err()
        .code
        .to_string()
}

fn json_of(c: &ResolvedCommand) -> Value {
    serde_json::to_value(c).unwrap()
}

#[test]
fn step_0_visibility_on_a_terminal_and_on_the_web() {
    let (_t, p) = package();
    let agent = p.agent("sm").unwrap();
    let term = Menu::of(agent, Surface::Terminal);
    let labels: Vec<(usize, &str)> = term
        .visible()
        .map(|i| (i.index.unwrap(), i.description.as_str()))
        .collect();
    assert_eq!(labels.len(), 15);
    assert_eq!(labels[0], (1, "[CS] Create the next story file"));
    assert_eq!(
        labels[1],
        (2, "Validate a story"),
        "web-only is hidden and not numbered"
    );
    assert_eq!(labels[2], (3, "IDE brief"), "ide-only shows in a terminal");
    assert!(
        term.warnings
            .iter()
            .any(|w| w.contains("both ide-only and web-only"))
    );
    let web = Menu::of(agent, Surface::Web);
    assert_eq!(web.item(2).unwrap().description, "Web board");
    assert_eq!(web.item(3).unwrap().description, "Validate a story");
    assert!(web.visible().all(|i| i.description != "IDE brief"));
    assert_eq!(ok(&p, "2").kind, Kind::ExecScript);
    let on_web = run(&p, Surface::Web, "2").unwrap();
    assert_eq!(
        json_of(&on_web)["actionRef"],
        json!({"type": "inline", "text": "Open the web board"})
    );
    assert_eq!(
        ok(&p, "web-thing").kind,
        Kind::Chat,
        "a hidden item cannot be triggered"
    );
}

#[test]
fn step_1_empty_input_shows_the_menu() {
    let (_t, p) = package();
    for input in ["", "   ", "\n"] {
        let c = ok(&p, input);
        assert_eq!(
            (c.kind, json_of(&c)["confidence"].clone()),
            (Kind::ShowMenu, json!("exact"))
        );
    }
}

#[test]
fn step_2_numbers_pick_visible_items_and_out_of_range_asks() {
    let (_t, p) = package();
    let c = ok(&p, "1");
    assert_eq!(
        json_of(&c),
        json!({
            "kind": "StartWorkflow", "confidence": "exact", "reason": "number match of menu item 1",
            "matchedMenuItemIndex": 1, "matchedMenuItemId": "create-story",
            "workflowRef": {"type": "packagePath", "workflowMdPath": "workflow.md", "workflowId": "create-story-micro"}
        })
    );
    let c = ok(&p, "2");
    assert_eq!(
        json_of(&c)["dataRef"],
        json!({"type": "path", "path": "assets/story-template.md", "parseAs": "text"})
    );
    for input in ["0", "16", "99999999999999999999999999"] {
        let c = ok(&p, input);
        assert_eq!(c.kind, Kind::ClarifyChoice, "{input}");
        assert_eq!(
            c.reason.as_deref(),
            Some(format!("there is no item {input}: choose a number from 1 to 15").as_str())
        );
        assert_eq!(c.candidates.len(), 15);
        assert_eq!(c.candidates[0].label, "1. [CS] Create the next story file");
    }
}

#[test]
fn step_3_exact_trigger_cmd_alias_code_and_handlers() {
    let (_t, p) = package();
    for input in [
        "create-story",
        "*create-story",
        "CREATE-STORY",
        "  cs-new ",
        "CS",
        "*cs",
    ] {
        let c = ok(&p, input);
        assert_eq!(
            (c.kind, c.matched_menu_item_index),
            (Kind::StartWorkflow, Some(1)),
            "{input}"
        );
        assert_eq!(json_of(&c)["confidence"], "exact", "{input}");
    }
    for input in ["validate-story", "*validate-story"] {
        let c = ok(&p, input);
        assert_eq!(c.kind, Kind::ExecScript, "{input}");
        assert_eq!(
            json_of(&c)["execRef"],
            json!({"type": "markdown", "mdPath": "tasks/validate.md"})
        );
    }
    let c = ok(&p, "ide-thing");
    assert_eq!(
        json_of(&c)["actionRef"],
        json!({"type": "promptId", "id": "brief"})
    );
    assert_eq!(c.kind, Kind::RunAction);
    let c = ok(&p, "party");
    assert_eq!(
        json_of(&c)["actionRef"],
        json!({"type": "inline", "text": "Start a party mode discussion"})
    );
    assert_eq!(ok(&p, "menu-again").kind, Kind::ShowMenu);
    assert_eq!(
        json_of(&ok(&p, "menu-again"))["actionRef"],
        json!({"type": "builtin", "name": "menu.show"})
    );
    assert_eq!(ok(&p, "bye").kind, Kind::DismissAgent);
    assert_eq!(ok(&p, "continue-run").kind, Kind::ResumeRun);
    // Handler triggers: the handler's own target, the parent's index.
    let c = ok(&p, "review code");
    assert_eq!(
        (c.kind, c.matched_menu_item_index),
        (Kind::RunAction, Some(10))
    );
    let c = ok(&p, "Review Story");
    assert_eq!(
        (c.kind, c.matched_menu_item_index),
        (Kind::ExecScript, Some(10))
    );
    // An exec that is a workflow starts it.
    let c = ok(&p, "run-exec-wf");
    assert_eq!(c.kind, Kind::StartWorkflow);
    assert_eq!(c.workflow_ref.unwrap().workflow_id(), "create-story-micro");
}

#[test]
fn unusable_targets_are_refused_with_their_codes() {
    let (_t, p) = package();
    assert_eq!(err(&p, "classic"), "NOT_SUPPORTED_CLASSIC_WORKFLOW");
    assert_eq!(err(&p, "classic-exec"), "NOT_SUPPORTED_CLASSIC_WORKFLOW");
    assert_eq!(err(&p, "ghost"), "UNKNOWN_WORKFLOW");
    assert_eq!(err(&p, "lost-prompt"), "UNKNOWN_PROMPT_ID");
    assert_eq!(err(&p, "checked"), "VALIDATION_FAILED");
    let e = run(&p, Surface::Terminal, "8").unwrap_err();
    assert_eq!(e.code, "NOT_SUPPORTED_CLASSIC_WORKFLOW");
    assert!(e.hint.unwrap().contains("v1.1"));
}

#[test]
fn step_4_fuzzy_prefers_triggers_and_whole_words_and_asks_on_ties() {
    let (_t, p) = package();
    let c = ok(&p, "create");
    assert_eq!(
        (c.kind, c.matched_menu_item_index),
        (Kind::StartWorkflow, Some(1))
    );
    assert_eq!(json_of(&c)["confidence"], "high");
    // A trigger beats a description: "stats" is in story-stats and in item 6's description.
    let c = ok(&p, "stats");
    assert_eq!(c.matched_menu_item_index, Some(11));
    // A handler's match beats its parent's description.
    let c = ok(&p, "code");
    assert_eq!(
        (c.kind, c.matched_menu_item_index),
        (Kind::RunAction, Some(10))
    );
    assert_eq!(json_of(&c)["confidence"], "medium");
    // A description match alone is low confidence.
    let c = ok(&p, "latest run");
    assert_eq!(
        (c.kind, json_of(&c)["confidence"].clone()),
        (Kind::ResumeRun, json!("low"))
    );
    // Whole word beats substring: "story" is a whole word of create-story, validate-story
    // and story-stats: a tie, so the router asks, by parent index.
    let c = ok(&p, "story");
    assert_eq!(c.kind, Kind::ClarifyChoice);
    let indexes: Vec<usize> = c.candidates.iter().map(|c| c.index).collect();
    assert_eq!(indexes, [1, 2, 11]);
    assert_eq!(c.candidates[1].label, "2. Validate a story");
    // "valid" is a substring of one trigger only.
    assert_eq!(ok(&p, "valid").kind, Kind::ExecScript);
}

#[test]
fn step_5_anything_else_is_chat_and_details_follow_the_label() {
    let (_t, p) = package();
    let c = ok(&p, "what is a good acceptance criterion?");
    assert_eq!(c.kind, Kind::Chat);
    assert_eq!(
        c.input.as_deref(),
        Some("what is a good acceptance criterion?")
    );
    assert_eq!(ok(&p, "x").kind, Kind::Chat, "one letter is no fuzzy match");
    let c = ok(&p, "create-story\nfor epic 2, story 3");
    assert_eq!(c.kind, Kind::StartWorkflow);
    assert_eq!(c.input.as_deref(), Some("for epic 2, story 3"));
    let c = ok(&p, "2\nthe one about login");
    assert_eq!(
        (c.kind, c.input.as_deref()),
        (Kind::ExecScript, Some("the one about login"))
    );
}

#[test]
fn global_commands_work_whatever_the_menu() {
    let (_t, p) = package();
    assert_eq!(ok(&p, "/menu").kind, Kind::ShowMenu);
    assert_eq!(ok(&p, "*help").kind, Kind::ShowMenu);
    assert_eq!(ok(&p, "/dismiss").kind, Kind::DismissAgent);
    assert_eq!(ok(&p, "*exit").kind, Kind::DismissAgent);
    assert_eq!(ok(&p, "/resume").kind, Kind::ResumeRun);
    let c = ok(&p, "/pause");
    assert_eq!(c.kind, Kind::ShowMenu);
    assert!(c.reason.unwrap().contains("none is running"));
    // A menu trigger of the same name wins over the global word.
    assert_eq!(ok(&p, "*bye").kind, Kind::DismissAgent);
}
