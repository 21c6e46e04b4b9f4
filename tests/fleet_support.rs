//! The workflow and the played model of the work queue's fleet test (`cli_worker_fleet`) and of
//! its benchmark (`crates/baton/examples/queue_worker.rs`).
//!
//! The package is a straight line of `steps` step nodes and an end node; at every node the
//! model writes one file, `fleet/<node>.md`, naming its run, and patches the state along the
//! edge (at the end node: complete); then it answers the completion request. A run is
//! `steps + 2` model turns, all but the last writing a file.
//!
//! The played model keeps no memory: each answer is computed from the request (the node in its
//! last `NODE_BRIEF` or `RUN_DIRECTIVE`), so a run resumed by another process after a kill gets
//! the answer the first one would have had. It tells runs apart by the model name each was
//! submitted with, logs every request per run (the node it asked about, the directive's
//! intent, when it arrived and when it was answered), and is strict as OpenAI is: a request
//! with a tool call without its result, or an orphan result, gets HTTP 400 and is logged as a
//! violation, as is a failed tool result.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_testkit::json_server::JsonServer;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the model answers the completion request with (the turn's label in the log).
pub const DONE: &str = "done";

/// The node ids of a package of `steps` steps, in order.
pub fn nodes(steps: usize) -> Vec<String> {
    let mut n: Vec<String> = (1..=steps).map(|i| format!("step-{i}")).collect();
    n.push("end".into());
    n
}

/// The turns a run needs, by label: every node, then the completion answer.
pub fn turns(steps: usize) -> Vec<String> {
    let mut t = nodes(steps);
    t.push(DONE.into());
    t
}

/// The file the model writes at `node`, and what it holds for `run`.
pub fn written(run: &str, node: &str) -> (String, String) {
    (
        format!("fleet/{node}.md"),
        format!("# {node}\n\nrun: {run}\nnode: {node}\n"),
    )
}

/// Writes the package into `<dir>/fleet-steps` and returns its directory.
pub fn write_package(dir: &Path, steps: usize) -> PathBuf {
    let pkg = dir.join("fleet-steps");
    std::fs::create_dir_all(pkg.join("steps")).unwrap();
    let write = |rel: &str, text: String| std::fs::write(pkg.join(rel), text).unwrap();
    write(
        "bmad.json",
        json!({
            "schemaVersion": "1.1",
            "name": "fleet-steps",
            "version": "1.0.0",
            "description": "A straight line of steps, each leaving one file in the project.",
            "author": "baton tests",
            "createdAt": "2026-11-22T00:00:00Z",
            "entry": {"workflow": "workflow.md", "graph": "workflow.graph.json", "agents": "agents.json"}
        })
        .to_string(),
    );
    write(
        "agents.json",
        json!({"schemaVersion": "1.1", "agents": [{
            "id": "writer",
            "metadata": {"name": "Fleet", "title": "Step writer", "icon": "F",
                         "description": "Leaves one file per step."},
            "persona": {"role": "Leaves one file per step", "identity": "A played model.",
                        "communication_style": "Terse.", "principles": ["One file per step."]},
            "tools": {"fs": {"enabled": true, "maxReadBytes": 65536, "maxWriteBytes": 65536},
                      "mcp": {"enabled": false, "allowedServers": []}}
        }]})
        .to_string(),
    );
    let ids = nodes(steps);
    let graph_nodes: Vec<Value> = ids
        .iter()
        .map(|id| {
            json!({"id": id, "type": if id == "end" { "end" } else { "step" },
                   "file": format!("steps/{id}.md"), "title": id, "agentId": "writer",
                   "outputs": [format!("fleet/{id}.md")]})
        })
        .collect();
    let edges: Vec<Value> = ids
        .windows(2)
        .map(|w| json!({"from": w[0], "to": w[1], "label": "next"}))
        .collect();
    write(
        "workflow.graph.json",
        json!({"schemaVersion": "1.1", "entryNodeId": ids[0], "nodes": graph_nodes, "edges": edges})
            .to_string(),
    );
    write(
        "workflow.md",
        format!(
            "---\nschemaVersion: \"1.1\"\nworkflowType: \"fleet-steps\"\nrunId: \"\"\nupdatedAt: \"\"\n\
             currentNodeId: \"{}\"\nstepsCompleted: []\nvariables: {{}}\ndecisionLog: []\n\
             artifacts: []\n---\n\n# Fleet steps\n\nEach step leaves its file under `fleet/`, then \
             moves `currentNodeId` along its edge; the end node completes the workflow.\n",
            ids[0]
        ),
    );
    for id in &ids {
        let kind = if id == "end" { "end" } else { "step" };
        write(
            &format!("steps/{id}.md"),
            format!(
                "---\nschemaVersion: \"1.1\"\nnodeId: \"{id}\"\ntype: \"{kind}\"\ntitle: \"{id}\"\n\
                 agentId: \"writer\"\noutputs:\n  - \"fleet/{id}.md\"\n---\n\n# {id}\n\n## Goal\n\n\
                 Leave this step's file in the project.\n\n## Instructions\n\n1. Write \
                 `@project/fleet/{id}.md`.\n2. Patch `@state/workflow.md`: append `{id}` to \
                 `stepsCompleted` and move on along the edge.\n"
            ),
        );
    }
    pkg
}

/// One request the played model received.
#[derive(Debug, Clone)]
pub struct Turn {
    /// The node asked about, or [`DONE`] for the completion request.
    pub label: String,
    /// The last `RUN_DIRECTIVE`'s intent (start, continue, resume).
    pub intent: String,
    pub arrived: Instant,
    /// When the answer was handed to the server (`None`: refused).
    pub answered: Option<Instant>,
}

struct Shared {
    delay: Duration,
    steps: usize,
    runs: Mutex<BTreeMap<String, Vec<Turn>>>,
    violations: Mutex<Vec<String>>,
    next_id: AtomicU64,
}

/// The played model; its server stops when it is dropped.
pub struct Player {
    server: JsonServer,
    shared: Arc<Shared>,
}

impl Player {
    /// A model for the package of `steps` steps that takes `delay` to answer each request.
    pub fn start(steps: usize, delay: Duration) -> Player {
        let shared = Arc::new(Shared {
            delay,
            steps,
            runs: Mutex::new(BTreeMap::new()),
            violations: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
        });
        let s = shared.clone();
        let server = JsonServer::start_with_status(Arc::new(move |body: &Value| play(&s, body)));
        Player { server, shared }
    }

    pub fn base_url(&self) -> String {
        self.server.base_url()
    }

    /// Every run's requests, by the model name it was submitted with.
    pub fn runs(&self) -> BTreeMap<String, Vec<Turn>> {
        self.shared.runs.lock().unwrap().clone()
    }

    /// The requests of one run.
    pub fn run(&self, model: &str) -> Vec<Turn> {
        self.runs().get(model).cloned().unwrap_or_default()
    }

    /// Requests refused or tool results that failed, described.
    pub fn violations(&self) -> Vec<String> {
        self.shared.violations.lock().unwrap().clone()
    }
}

fn content(m: &Value) -> &str {
    m.get("content").and_then(Value::as_str).unwrap_or("")
}

fn field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .map(str::trim)
}

fn play(shared: &Shared, body: &Value) -> (u16, Value) {
    let arrived = Instant::now();
    let model = body["model"].as_str().unwrap_or("").to_string();
    let messages: Vec<Value> = body["messages"].as_array().cloned().unwrap_or_default();
    let directive = messages
        .iter()
        .rev()
        .map(content)
        .find(|c| c.starts_with("RUN_DIRECTIVE"))
        .unwrap_or("");
    let intent = field(directive, "- intent: ").unwrap_or("").to_string();
    // The node: the last brief's or directive's; none once the workflow is complete (the
    // completion request, or a post-run directive).
    let node = messages
        .iter()
        .map(content)
        .filter(|c| c.starts_with("NODE_BRIEF") || c.starts_with("RUN_DIRECTIVE"))
        .filter_map(|c| field(c, "- currentNodeId: "))
        .next_back()
        .map(str::to_owned);
    let last = messages.last().map(content).unwrap_or("");
    let complete = last.starts_with("The workflow is complete.")
        || (!directive.is_empty() && field(directive, "- currentNodeId: ").is_none());
    let label = match (&node, complete) {
        (Some(n), false) => n.clone(),
        _ => DONE.to_string(),
    };
    let index = {
        let mut runs = shared.runs.lock().unwrap();
        let turns = runs.entry(model.clone()).or_default();
        turns.push(Turn {
            label: label.clone(),
            intent,
            arrived,
            answered: None,
        });
        turns.len() - 1
    };
    let mut problems = Vec::new();
    if let Some(v) = baton_llm::testing::violation(body) {
        problems.push(format!("{model} {label}: refused: {v}"));
    }
    for m in messages.iter().filter(|m| m["role"] == "tool") {
        if serde_json::from_str::<Value>(content(m)).is_ok_and(|v| v["ok"] == false) {
            problems.push(format!("{model} {label}: a tool failed: {}", content(m)));
        }
    }
    if !problems.is_empty() {
        let refused = problems.iter().any(|p| p.contains(": refused: "));
        shared.violations.lock().unwrap().extend(problems.clone());
        if refused {
            return (
                400,
                json!({"error": {"message": problems.join("; "), "type": "invalid_request_error"}}),
            );
        }
    }
    std::thread::sleep(shared.delay);
    let reply = match node.filter(|_| !complete) {
        None => {
            json!({"role": "assistant", "content": "Done: every step left its file under fleet/."})
        }
        Some(node) => {
            let order = nodes(shared.steps);
            let next = order
                .iter()
                .position(|n| *n == node)
                .and_then(|i| order.get(i + 1))
                .cloned();
            let update = match next {
                Some(to) => {
                    json!({"stepsCompleted": {"append": [node]}, "currentNodeId": {"set": to}})
                }
                None => json!({"stepsCompleted": {"append": [node]},
                               "variables": {"set": {"workflowStatus": "complete"}}}),
            };
            let (path, text) = written(&model, &node);
            let id = shared.next_id.fetch_add(2, Ordering::SeqCst);
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": format!("call_{id}"), "type": "function", "function": {"name": "fs_write",
                 "arguments": json!({"path": format!("@project/{path}"), "content": text}).to_string()}},
                {"id": format!("call_{}", id + 1), "type": "function", "function": {"name": "fs_apply_patch",
                 "arguments": json!({"path": "@state/workflow.md", "operation": "updateFrontmatter",
                                     "update": update}).to_string()}}
            ]})
        }
    };
    let finish = if reply["tool_calls"].is_array() {
        "tool_calls"
    } else {
        "stop"
    };
    if let Some(turn) = shared
        .runs
        .lock()
        .unwrap()
        .get_mut(&model)
        .and_then(|t| t.get_mut(index))
    {
        turn.answered = Some(Instant::now());
    }
    (
        200,
        json!({
            "id": "chatcmpl-fleet", "object": "chat.completion",
            "choices": [{"index": 0, "message": reply, "finish_reason": finish}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}
        }),
    )
}
