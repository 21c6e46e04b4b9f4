//! The package `baton new` writes: the smallest valid v1.1 package (a manifest, one agent, a
//! two-step workflow with an end node) and a scripted trace that runs it offline with
//! `baton run --replay`. Only the file contents are made here; the caller writes them.

use serde_json::{Value, json};

/// The trace written beside the package files. Not part of the workflow: a run reads it only
/// when `--replay` names it.
pub const TRACE_FILE: &str = "first-run.trace.json";
/// The answer the scripted user gives to the first step's question.
pub const SCRIPTED_TOPIC: &str = "why a test should wait on events, not on sleeps";
/// The scripted model's last words, which `baton run` prints when the run completes.
pub const SCRIPTED_CLOSING: &str = "The note is written.";

const AGENT: &str = "guide";
const STEP_1: &str = "step-01-ask-topic";
const STEP_2: &str = "step-02-write-note";
const END: &str = "end-99";
/// Fixed, so two `baton new` give identical packages (and identical install ids).
const UPDATED_AT: &str = "2026-01-01T00:00:00Z";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TemplateError {
    #[error(
        "'{0}' cannot be a package name: use letters, digits, '.', '_' and '-', starting with a letter or digit"
    )]
    NameInvalid(String),
}

impl TemplateError {
    pub fn code(&self) -> &'static str {
        match self {
            TemplateError::NameInvalid(_) => "NEW_NAME_INVALID",
        }
    }

    pub fn hint(&self) -> String {
        match self {
            TemplateError::NameInvalid(_) => "pass --name NAME, e.g. --name my-workflow".into(),
        }
    }
}

/// One file of the new package: its package-relative path and content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFile {
    pub path: String,
    pub content: String,
}

/// The files of a new package named `name` (also its workflow id and its artifacts' folder),
/// the scripted trace included.
pub fn new_package(name: &str) -> Result<Vec<NewFile>, TemplateError> {
    check_name(name)?;
    let file = |path: &str, content: String| NewFile {
        path: path.to_string(),
        content,
    };
    Ok(vec![
        file("bmad.json", pretty(&manifest(name))),
        file("agents.json", pretty(&agents())),
        file("workflow.md", workflow_md(name)),
        file("workflow.graph.json", pretty(&graph(name))),
        file(&format!("steps/{STEP_1}.md"), step_1()),
        file(&format!("steps/{STEP_2}.md"), step_2(name)),
        file(&format!("steps/{END}.md"), end_step(name)),
        file(TRACE_FILE, pretty(&trace(name))),
    ])
}

/// The name becomes a workflow id and a folder under `artifacts/`, so it keeps to id
/// characters (no `:`, which some file systems refuse).
fn check_name(name: &str) -> Result<(), TemplateError> {
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if first_ok && rest_ok && name.len() <= 100 {
        Ok(())
    } else {
        Err(TemplateError::NameInvalid(name.to_string()))
    }
}

fn pretty(value: &Value) -> String {
    // Serializing a `Value` cannot fail; the fallback keeps the function total.
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string()) + "\n"
}

fn note_path(name: &str) -> String {
    format!("artifacts/{name}/note.md")
}

fn manifest(name: &str) -> Value {
    json!({
        "schemaVersion": "1.1",
        "name": name,
        "version": "0.1.0",
        "description": "A two-step workflow: ask for a topic, then write a short note about it.",
        "entry": {
            "workflow": "workflow.md",
            "graph": "workflow.graph.json",
            "agents": "agents.json"
        }
    })
}

fn agents() -> Value {
    json!({
        "schemaVersion": "1.1",
        "agents": [{
            "id": AGENT,
            "metadata": {"name": "Gus", "title": "Guide", "icon": "🧭"},
            "persona": {
                "role": "Writes short, plain notes",
                "identity": "A patient writer who asks one question before writing.",
                "communication_style": "Short sentences; no jargon.",
                "principles": ["Ask before assuming.", "Write only what the step asks for."]
            }
        }]
    })
}

fn graph(name: &str) -> Value {
    let node = |id: &str, kind: &str, title: &str| {
        json!({
            "id": id,
            "type": kind,
            "file": format!("steps/{id}.md"),
            "title": title,
            "agentId": AGENT
        })
    };
    let mut write = node(STEP_2, "step", "Write the note");
    write["outputs"] = json!([note_path(name)]);
    json!({
        "schemaVersion": "1.1",
        "entryNodeId": STEP_1,
        "nodes": [node(STEP_1, "step", "Ask for a topic"), write, node(END, "end", "Finish")],
        "edges": [
            {"from": STEP_1, "to": STEP_2, "label": "next"},
            {"from": STEP_2, "to": END, "label": "next"}
        ]
    })
}

fn workflow_md(name: &str) -> String {
    format!(
        r#"---
schemaVersion: "1.1"
workflowType: "{name}"
runId: ""
updatedAt: ""
currentNodeId: ""
stepsCompleted: []
variables: {{}}
decisionLog: []
artifacts: []
---

# {name}

## Goal

Ask the user for a topic, then write a short note about it to `{note}`.

## How to run this workflow

1. Read this frontmatter; `currentNodeId` is where the run stands (empty means the entry node).
2. Find the node's outgoing edges in the graph and open its step file.
3. Do what the step says, then update this frontmatter (stepsCompleted, currentNodeId,
   variables, artifacts, updatedAt).
4. At the end node set `variables.workflowStatus` to `complete`.
"#,
        note = note_path(name)
    )
}

fn step_1() -> String {
    format!(
        r#"---
schemaVersion: "1.1"
nodeId: "{STEP_1}"
type: "step"
title: "Ask for a topic"
agentId: "{AGENT}"
setsVariables: ["topic"]
transitions:
  - to: "{STEP_2}"
    label: "next"
    isDefault: true
---

# Ask for a topic

## Goal

Know what the note is about.

## Instructions

1. Ask the user, in one sentence, what the note should be about, and wait for the answer.

## Completion

Append `{STEP_1}` to `stepsCompleted`, set `variables.topic` to the answer, set
`currentNodeId` to `{STEP_2}`.
"#
    )
}

fn step_2(name: &str) -> String {
    let note = note_path(name);
    format!(
        r#"---
schemaVersion: "1.1"
nodeId: "{STEP_2}"
type: "step"
title: "Write the note"
agentId: "{AGENT}"
outputs:
  - "{note}"
transitions:
  - to: "{END}"
    label: "next"
    isDefault: true
---

# Write the note

## Goal

A note of three to five lines about `variables.topic`.

## Instructions

1. Write `@project/{note}`: a title line, then the note.

## Completion

Append `{STEP_2}` to `stepsCompleted`, append `{note}` to `artifacts`, set `currentNodeId`
to `{END}`.
"#
    )
}

fn end_step(name: &str) -> String {
    let note = note_path(name);
    format!(
        r#"---
schemaVersion: "1.1"
nodeId: "{END}"
type: "end"
title: "Finish"
agentId: "{AGENT}"
transitions: []
---

# Finish

## Goal

Close the run.

## Instructions

1. Tell the user where the note is (`{note}`).

## Completion

Append `{END}` to `stepsCompleted`, set `variables.workflowStatus` to `complete`.
"#
    )
}

/// What a model following the steps answers, turn by turn, and the user's one answer. Requests
/// are composed by baton when replaying; only the answers are recorded.
fn trace(name: &str) -> Value {
    let note = note_path(name);
    let mut call_no = 0;
    let mut call = |tool: &str, arguments: Value| {
        call_no += 1;
        json!({"id": format!("tc{call_no:02}"), "name": tool, "arguments": arguments})
    };
    let patch = |update: Value| json!({"path": "@state/workflow.md", "operation": "updateFrontmatter", "update": update});
    let turns = [
        (
            "",
            vec![
                call("fs.read", json!({"path": "@state/workflow.md"})),
                call(
                    "fs.read",
                    json!({"path": format!("@pkg/steps/{STEP_1}.md")}),
                ),
            ],
        ),
        ("What should the note be about?", vec![]),
        (
            "",
            vec![call(
                "fs.apply_patch",
                patch(json!({
                    "stepsCompleted": {"append": [STEP_1]},
                    "variables": {"set": {"topic": SCRIPTED_TOPIC}},
                    "currentNodeId": {"set": STEP_2},
                    "updatedAt": {"set": UPDATED_AT}
                })),
            )],
        ),
        (
            "",
            vec![
                call(
                    "fs.read",
                    json!({"path": format!("@pkg/steps/{STEP_2}.md")}),
                ),
                call(
                    "fs.write",
                    json!({
                        "path": format!("@project/{note}"),
                        "content": format!(
                            "# {SCRIPTED_TOPIC}\n\nA sleep guesses how long something takes; an event says it happened.\nOn a busy machine the guess is wrong, and the test fails for no reason.\nWait for the event, with a generous upper bound.\n"
                        )
                    }),
                ),
                call(
                    "fs.apply_patch",
                    patch(json!({
                        "stepsCompleted": {"append": [STEP_2]},
                        "artifacts": {"append": [note]},
                        "currentNodeId": {"set": END},
                        "updatedAt": {"set": UPDATED_AT}
                    })),
                ),
            ],
        ),
        (
            "",
            vec![
                call("fs.read", json!({"path": format!("@pkg/steps/{END}.md")})),
                call(
                    "fs.apply_patch",
                    patch(json!({
                        "stepsCompleted": {"append": [END]},
                        "variables": {"set": {"workflowStatus": "complete"}},
                        "updatedAt": {"set": UPDATED_AT}
                    })),
                ),
            ],
        ),
    ];
    // The node each answer is given at: a replay of a workflow edited since then stops with
    // REPLAY_MISMATCH naming the node, rather than acting on the wrong step.
    let nodes = [STEP_1, STEP_1, STEP_1, STEP_2, END];
    let mut dialogues: Vec<Value> = Vec::new();
    for (i, ((content, tool_calls), node)) in turns.into_iter().zip(nodes).enumerate() {
        dialogues.push(json!({
            "id": format!("C{:02}", i + 1),
            "nodeId": node,
            "response": {"assistant": {"role": "assistant", "content": content, "toolCalls": tool_calls}}
        }));
        // The model asked in turn 2; the scripted user answers before the next call.
        if i == 1 {
            dialogues.push(json!({
                "id": "U01",
                "type": "user_input",
                "uiToRuntime": {"rawText": SCRIPTED_TOPIC}
            }));
        }
    }
    dialogues.push(json!({
        "id": format!("C{:02}", dialogues.len()),
        "nodeId": END,
        "response": {"assistant": {
            "role": "assistant",
            "content": format!("{SCRIPTED_CLOSING} It is at {note}."),
            "toolCalls": []
        }}
    }));
    json!({
        "traceVersion": "crewagent.runtime.llm.trace.v1",
        "workflow": {"package": name, "workflowType": name},
        "note": "Written by `baton new`: what a model following the steps answers, so `baton run --replay` runs the package offline. It follows the steps as written; once you change them, run with a real model (--model).",
        "dialogues": dialogues
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Diagnostics;
    use crate::files::{Origin, PackageFiles};
    use crate::validate::{ValidateOptions, validate_files};
    use std::collections::BTreeMap;

    #[test]
    fn the_new_package_is_valid_without_warnings() {
        let files: BTreeMap<String, Vec<u8>> = new_package("hello")
            .unwrap()
            .into_iter()
            .map(|f| (f.path, f.content.into_bytes()))
            .collect();
        let files = PackageFiles::from_map(Origin::Directory("hello".into()), files);
        let report = validate_files(files, &ValidateOptions::default(), Diagnostics::default());
        assert!(report.ok(), "{:?}", report.diagnostics);
        assert_eq!(
            report.diagnostics.warnings().count(),
            0,
            "{:?}",
            report.diagnostics
        );
        assert_eq!(report.workflow_ids, ["hello"]);
    }

    #[test]
    fn names_keep_to_id_characters() {
        for bad in ["", "-x", ".hidden", "a b", "a/b", "a:b", "é"] {
            assert_eq!(
                new_package(bad).unwrap_err(),
                TemplateError::NameInvalid(bad.into()),
                "{bad:?}"
            );
        }
        assert!(new_package("my_flow-2.0").is_ok());
    }

    #[test]
    fn the_trace_answers_each_step_once() {
        let files = new_package("hello").unwrap();
        let trace = files.iter().find(|f| f.path == TRACE_FILE).unwrap();
        let value: Value = serde_json::from_str(&trace.content).unwrap();
        let dialogues = value["dialogues"].as_array().unwrap();
        let ids: Vec<&str> = dialogues
            .iter()
            .map(|d| d["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["C01", "C02", "U01", "C03", "C04", "C05", "C06"]);
    }
}
