//! A loopback OpenAI-compatible server that plays every phase of the epic autopilot the way a
//! model would: it reads `@state/workflow.md` for the phase's variables, writes the files the
//! phase is meant to produce with `fs.write`, walks the workflow graph with real state patches
//! (the transition guard checks them), asks the questions a scenario says it asks, and gives the
//! review verdicts the scenario asks for.
//!
//! It keeps no memory between requests, except the failures a scenario injects: each answer is
//! computed from the request and the project's files, so a killed and resumed orchestrator gets
//! the same answers as one that ran straight through. It depends on no node id of any package:
//! the phase's work is done at the entry node, every other node is walked, the end completes.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_testkit::json_server::JsonServer;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

// Kept beside this file; declared here so every test that includes the player gets it.
#[path = "method_player.rs"]
pub mod method_player;

pub const COMPLETION_PREFIX: &str = "The workflow is complete.";
pub const FINALIZE_PREFIX: &str = "Finalize end node";

/// What the played model does besides the plain work.
#[derive(Debug, Clone, Default)]
pub struct Scenario {
    /// `(story, phase, review cycle, question)`: the phase asks before working, until an answer
    /// is in its conversation.
    pub questions: Vec<(String, String, u32, String)>,
    /// `(story, review cycle)`: the code review requests changes at that cycle.
    pub changes: Vec<(String, u32)>,
    /// `(story, phase, n)`: the next `n` runs of that phase fail (HTTP 400 after the state read).
    pub failures: Vec<(String, String, usize)>,
    /// `(story, phase, question)`: the phase escalates in the agent-state file (and completes)
    /// until that question is answered there.
    pub escalations: Vec<(String, String, String)>,
    /// `(story, phase)`: the phase completes without producing its output.
    pub lazy: Vec<(String, String)>,
    /// Stories whose code review writes a verdict outside the contract.
    pub broken_review: Vec<String>,
    /// `(story, phase)`: the phase also overwrites `sprint-status.yaml`, which it must not.
    pub tamper: Vec<(String, String)>,
    /// How long each answer takes (a slow model, for tests that act while a phase runs).
    pub delay: std::time::Duration,
    /// Stories whose dev phase, run by an installed build skill, halts `blocked`.
    pub blocked: Vec<String>,
    /// Stories whose dev phase also writes the same line of `src/shared.txt` (`shared: <story>`
    /// as its first line), so that their branches conflict. A dev run told of a conflict (its
    /// `verifyOutput`) resolves it: the epic branch's file (the main work tree's) then its line.
    pub same_lines: Vec<String>,
    /// `(tool, arguments)` calls a dev phase run of an installed method makes on its first turn,
    /// besides its work (a hostile model writing the method's files).
    pub method_dev_calls: Vec<(String, Value)>,
}

struct Shared {
    project: PathBuf,
    scenario: Scenario,
    failures_left: Mutex<HashMap<(String, String), usize>>,
    /// Requests served, by the phase of their run.
    served: Mutex<Vec<String>>,
    /// The tools offered with each request, by the phase of its run.
    offered: Mutex<Vec<(String, Vec<String>)>>,
    /// The model name of each request.
    models: Mutex<Vec<String>>,
    /// `(phase, whole request)` of every request of an installed method's phase run.
    method_requests: Mutex<Vec<(String, String)>>,
    next_id: AtomicU64,
    /// Requests answered (every one, the delay included).
    requests: AtomicU64,
    /// Model checks answered (`baton_epic::model_check`, before an epic writes anything).
    checks: AtomicU64,
    /// `(story, verifyOutput)` of each dev run of a `same_lines` story that resolved a conflict.
    resolved: Mutex<Vec<(String, String)>>,
}

/// The played model; its server stops when it is dropped.
pub struct Player {
    server: JsonServer,
    shared: Arc<Shared>,
}

impl Player {
    pub fn start(project: &Path, scenario: Scenario) -> Player {
        let failures_left = scenario
            .failures
            .iter()
            .map(|(s, p, n)| ((s.clone(), p.clone()), *n))
            .collect();
        let shared = Arc::new(Shared {
            project: project.to_path_buf(),
            scenario,
            failures_left: Mutex::new(failures_left),
            served: Mutex::new(Vec::new()),
            offered: Mutex::new(Vec::new()),
            models: Mutex::new(Vec::new()),
            method_requests: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
            requests: AtomicU64::new(0),
            checks: AtomicU64::new(0),
            resolved: Mutex::new(Vec::new()),
        });
        let s = shared.clone();
        let server = JsonServer::start_with_status(Arc::new(move |body: &Value| {
            std::thread::sleep(s.scenario.delay);
            s.requests.fetch_add(1, Ordering::SeqCst);
            let model = body["model"].as_str().unwrap_or("").to_string();
            s.models.lock().unwrap().push(model);
            play(&s, body)
        }));
        Player { server, shared }
    }

    pub fn base_url(&self) -> String {
        self.server.base_url()
    }

    /// `(story, verifyOutput)` of each dev run that resolved a conflict of `same_lines`.
    pub fn resolved(&self) -> Vec<(String, String)> {
        self.shared.resolved.lock().unwrap().clone()
    }

    /// How many model checks were answered so far (they are not phase requests).
    pub fn checks(&self) -> u64 {
        self.shared.checks.load(Ordering::SeqCst)
    }

    /// How many requests were answered so far.
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// Phases of the requests served so far (`""` before the state was read).
    pub fn served(&self) -> Vec<String> {
        self.shared.served.lock().unwrap().clone()
    }

    /// The whole requests (JSON text) of the phase runs of installed BMAD methods, by phase.
    pub fn method_requests(&self, phase: &str) -> Vec<String> {
        self.shared
            .method_requests
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _)| p == phase)
            .map(|(_, r)| r.clone())
            .collect()
    }

    /// The model name of each request served so far.
    pub fn models(&self) -> Vec<String> {
        self.shared.models.lock().unwrap().clone()
    }

    /// The tool names (wire form) offered to the runs of `phase`.
    pub fn offered(&self, phase: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .shared
            .offered
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _)| p == phase)
            .flat_map(|(_, t)| t.clone())
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

fn text_reply(content: &str) -> Value {
    json!({
        "id": "chatcmpl-player", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    })
}

fn calls_reply(shared: &Shared, calls: Vec<(&str, Value)>) -> Value {
    let calls: Vec<Value> = calls
        .into_iter()
        .map(|(name, args)| {
            let id = format!("call_{}", shared.next_id.fetch_add(1, Ordering::SeqCst));
            json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}})
        })
        .collect();
    json!({
        "id": "chatcmpl-player", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": calls}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29}
    })
}

fn content(m: &Value) -> &str {
    m.get("content").and_then(Value::as_str).unwrap_or("")
}

/// The last result of an `fs.read` of the state, as the state's frontmatter.
fn last_state_read(messages: &[Value]) -> Option<Value> {
    let mut read_ids = Vec::new();
    for m in messages {
        for c in m
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let f = &c["function"];
            let args: Value =
                serde_json::from_str(f["arguments"].as_str().unwrap_or("{}")).unwrap_or_default();
            if f["name"] == "fs_read" && args["path"] == "@state/workflow.md" {
                read_ids.push(c["id"].as_str().unwrap_or("").to_string());
            }
        }
    }
    let result = messages.iter().rev().find(|m| {
        m["role"] == "tool"
            && read_ids
                .iter()
                .any(|id| m.get("tool_call_id").and_then(Value::as_str) == Some(id))
    })?;
    let result: Value = serde_json::from_str(content(result)).ok()?;
    let text = result.get("content")?.as_str()?;
    let rest = text.strip_prefix("---\n")?;
    let end = rest.find("\n---")?;
    serde_saphyr::from_str::<Value>(&rest[..end]).ok()
}

/// `(current node, next node or None at an end node)` from the last NODE_BRIEF.
fn brief(messages: &[Value]) -> Option<(String, Option<String>)> {
    let b = messages
        .iter()
        .rev()
        .map(content)
        .find(|c| c.starts_with("NODE_BRIEF"))?;
    let node = b
        .lines()
        .find_map(|l| l.strip_prefix("- currentNodeId: "))?
        .trim()
        .to_string();
    let next = b
        .lines()
        .find_map(|l| l.strip_prefix("- allowed next: "))
        .and_then(|rest| {
            if rest.starts_with("none") {
                None
            } else {
                rest.split_whitespace().next().map(str::to_owned)
            }
        });
    Some((node, next))
}

/// The raw text of the user's answers in the request.
fn answers(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["role"] == "user")
        .map(content)
        .filter(|c| c.starts_with("USER_INPUT"))
        .map(|c| {
            let mut lines = c.lines().skip(1);
            let first = lines.next().unwrap_or("");
            let rest: Vec<&str> = if first.starts_with("- forNodeId:") {
                lines.collect()
            } else {
                std::iter::once(first).chain(lines).collect()
            };
            rest.join("\n")
        })
        .collect()
}

fn var(state: &Value, key: &str) -> String {
    state["variables"][key].as_str().unwrap_or("").to_string()
}

fn play(shared: &Shared, body: &Value) -> (u16, Value) {
    let messages: Vec<Value> = body["messages"].as_array().cloned().unwrap_or_default();
    // The check `baton epic` sends before it writes anything: no phase's request.
    if messages.len() == 1 && messages[0]["content"] == "Reply with the single word: ready" {
        shared.checks.fetch_add(1, Ordering::SeqCst);
        return (200, text_reply("ready"));
    }
    // A phase run of the project's installed BMAD skill or workflow (a task run).
    if let Some(prompt) = method_player::prompt_of(body) {
        let phase = method_player::header(&prompt).phase;
        shared.served.lock().unwrap().push(phase.clone());
        shared
            .method_requests
            .lock()
            .unwrap()
            .push((phase.clone(), body.to_string()));
        let story = method_player::header(&prompt).story;
        let lazy = shared.scenario.lazy.contains(&(story, phase.clone()));
        let mut calls: Vec<(&str, Value)> = match lazy {
            // Completes at once, having written nothing.
            true => vec![("phase_complete", json!({"summary": "nothing to do"}))],
            false => method_player::turn(
                &shared.project,
                &prompt,
                &messages,
                &shared.scenario.changes,
                &shared.scenario.blocked,
            ),
        };
        let first_turn = !messages.iter().any(|m| m["role"] == "tool");
        if (phase == "dev" || phase == "build") && first_turn {
            calls.extend(
                shared
                    .scenario
                    .method_dev_calls
                    .iter()
                    .map(|(name, args)| (name.as_str(), args.clone())),
            );
        }
        return (200, calls_reply(shared, calls));
    }
    let last = messages.last().map(content).unwrap_or("");
    if last.starts_with(COMPLETION_PREFIX) {
        return (200, text_reply("Phase done; the files are in place."));
    }
    // The post-run profile (the workflow completed, e.g. just before a crash): nothing to do.
    let directive = messages
        .iter()
        .rev()
        .map(content)
        .find(|c| c.starts_with("RUN_DIRECTIVE"));
    if directive.is_some_and(|d| !d.contains("- currentNodeId:")) {
        return (200, text_reply("Phase done; the files are in place."));
    }
    // A tool call that failed (a step redone after a crash): look at the state again.
    let failed = messages.last().is_some_and(|m| {
        m["role"] == "tool"
            && serde_json::from_str::<Value>(content(m)).is_ok_and(|v| v["ok"] == false)
    });
    let read = if failed {
        None
    } else {
        last_state_read(&messages)
    };
    let Some(state) = read else {
        shared.served.lock().unwrap().push(String::new());
        return (
            200,
            calls_reply(
                shared,
                vec![("fs_read", json!({"path": "@state/workflow.md"}))],
            ),
        );
    };
    let story = var(&state, "storyKey");
    let phase = var(&state, "phase");
    shared.served.lock().unwrap().push(phase.clone());
    let tools = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.pointer("/function/name").and_then(Value::as_str))
        .map(str::to_owned)
        .collect();
    shared.offered.lock().unwrap().push((phase.clone(), tools));
    {
        let mut left = shared.failures_left.lock().unwrap();
        if let Some(n) = left.get_mut(&(story.clone(), phase.clone()))
            && *n > 0
        {
            *n -= 1;
            return (
                400,
                json!({"error": {"message": "scripted failure", "type": "invalid_request_error"}}),
            );
        }
    }
    let Some((node, next)) = brief(&messages) else {
        return (200, text_reply("No NODE_BRIEF in the request."));
    };
    let done = |n: &str| {
        state["stepsCompleted"]
            .as_array()
            .is_some_and(|s| s.iter().any(|x| x == n))
    };
    if state["variables"]["workflowStatus"] == "complete" || (next.is_none() && done(&node)) {
        return (200, text_reply("Phase done; the files are in place."));
    }
    let entry = state["stepsCompleted"]
        .as_array()
        .is_none_or(|s| s.is_empty());
    let finalize = last.starts_with(FINALIZE_PREFIX);
    let mut calls = Vec::new();
    if entry && !finalize {
        let cycle: u32 = var(&state, "reviewCycle").parse().unwrap_or(1);
        let heard = answers(&messages);
        let asks = shared
            .scenario
            .questions
            .iter()
            .find(|(s, p, c, _)| *s == story && *p == phase && *c == cycle);
        if let Some((_, _, _, q)) = asks
            && heard.is_empty()
        {
            return (200, text_reply(q));
        }
        match escalation(shared, &state, &story, &phase) {
            Some(write) => calls.push(write),
            None => calls.extend(work(shared, &state, &heard)),
        }
    }
    let update = match &next {
        Some(to) if !finalize => json!({
            "stepsCompleted": {"append": [node]},
            "currentNodeId": {"set": to},
            "updatedAt": {"set": "2026-11-22T10:00:00Z"}
        }),
        _ => json!({
            "stepsCompleted": {"append": [node]},
            "variables": {"set": {"workflowStatus": "complete"}},
            "updatedAt": {"set": "2026-11-22T10:00:00Z"}
        }),
    };
    calls.push((
        "fs_apply_patch",
        json!({"path": "@state/workflow.md", "operation": "updateFrontmatter", "update": update}),
    ));
    (200, calls_reply(shared, calls))
}

/// The agent-state escalation of a scenario, unless its question is answered in the file.
fn escalation(
    shared: &Shared,
    state: &Value,
    story: &str,
    phase: &str,
) -> Option<(&'static str, Value)> {
    let (_, _, question) = shared
        .scenario
        .escalations
        .iter()
        .find(|(s, p, _)| s == story && p == phase)?;
    let dir = var(state, "implementationArtifacts");
    let file = shared
        .project
        .join(&dir)
        .join(format!("{story}.agent-state.json"));
    let answered = std::fs::read(&file)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|v| v["questions"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .any(|q| q["question"] == question.as_str() && q["answer"].is_string());
    if answered {
        return None;
    }
    let doc = json!({
        "storyKey": story, "phase": phase, "blockedAt": "entry", "blockReason": "critical_decision",
        "questions": [{"id": "q1", "question": question, "context": "asked by the played model", "answer": null}],
        "artifactsProduced": []
    });
    Some((
        "fs_write",
        json!({"path": format!("@project/{dir}/{story}.agent-state.json"), "content": serde_json::to_string_pretty(&doc).unwrap()}),
    ))
}

fn title_of(story: &str) -> String {
    story
        .splitn(3, '-')
        .nth(2)
        .unwrap_or(story)
        .replace('-', " ")
}

fn story_text(story: &str, status: &str, extra: &str) -> String {
    let mut parts = story.splitn(3, '-');
    let (e, s) = (parts.next().unwrap_or("0"), parts.next().unwrap_or("0"));
    format!(
        "# Story {e}.{s}: {}\n\nStatus: {status}\n\n## Story\n\nAs a user, I want {}, so that the epic moves on.\n\n## Acceptance Criteria\n\n1. It works. [Source: artifacts/epics.md]\n\n## Tasks / Subtasks\n\n- [{}] Task 1 (AC: #1)\n\n## Dev Agent Record\n\n### File List\n\n- src/{story}.txt\n{extra}",
        title_of(story),
        title_of(story),
        if status == "review" { "x" } else { " " },
    )
}

/// The story file as it is on disk, with its status line set and `extra` appended (as a model
/// editing it would); a fresh one when it is missing.
fn edit_story(shared: &Shared, story_file: &str, story: &str, status: &str, extra: &str) -> String {
    match std::fs::read_to_string(shared.project.join(story_file)) {
        Ok(text) => {
            let mut out: String = text
                .lines()
                .map(|l| {
                    if l.starts_with("Status: ") {
                        format!("Status: {status}")
                    } else {
                        l.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n");
            out.push('\n');
            // Done twice (a run resumed after a kill redoes its node) is done once.
            if !text.contains(extra) {
                out.push_str(extra);
            }
            out
        }
        Err(_) => story_text(story, status, extra),
    }
}

/// The files each phase writes.
fn work(shared: &Shared, state: &Value, heard: &[String]) -> Vec<(&'static str, Value)> {
    let story = var(state, "storyKey");
    let phase = var(state, "phase");
    let story_file = var(state, "storyFile");
    let dir = var(state, "implementationArtifacts");
    let cycle: u32 = var(state, "reviewCycle").parse().unwrap_or(1);
    if shared
        .scenario
        .lazy
        .iter()
        .any(|(s, p)| *s == story && *p == phase)
    {
        return Vec::new();
    }
    let write = |path: String, content: String| {
        (
            "fs_write",
            json!({"path": format!("@project/{path}"), "content": content}),
        )
    };
    let mut extra = Vec::new();
    if shared
        .scenario
        .tamper
        .iter()
        .any(|(s, p)| *s == story && *p == phase)
    {
        extra.push(write(
            format!("{dir}/sprint-status.yaml"),
            "development_status: {}\n".into(),
        ));
    }
    // Answers given in the agent-state file (an escalation answered) count too.
    let mut answers: Vec<String> = heard.to_vec();
    if let Some(v) = std::fs::read(
        shared
            .project
            .join(&dir)
            .join(format!("{story}.agent-state.json")),
    )
    .ok()
    .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
    {
        for q in v["questions"].as_array().into_iter().flatten() {
            if let Some(a) = q["answer"].as_str() {
                answers.push(a.to_string());
            }
        }
    }
    let mut calls = match phase.as_str() {
        "create-story" => {
            let decisions: String = answers
                .iter()
                .map(|a| format!("- decided: {a}\n"))
                .collect();
            let extra = if decisions.is_empty() {
                String::new()
            } else {
                format!("\n### Decisions\n\n{decisions}")
            };
            vec![write(
                story_file,
                story_text(&story, "ready-for-dev", &extra),
            )]
        }
        "validate" => vec![write(
            story_file.clone(),
            edit_story(
                shared,
                &story_file,
                &story,
                "ready-for-dev",
                "\n### Validation\n\nno change\n",
            ),
        )],
        "dev" => {
            // The code grows cycle after cycle, as a developer's would.
            let mut before =
                std::fs::read_to_string(shared.project.join(format!("src/{story}.txt")))
                    .unwrap_or_else(|_| format!("implementation of {story}\n"));
            // A node redone after a kill rewrites this cycle's lines, it does not add them twice.
            if let Some(at) = before.find(&format!("cycle {cycle}\n")) {
                before.truncate(at);
            }
            let mut code = format!("{before}cycle {cycle}\n");
            for a in &answers {
                code.push_str(&format!("answer: {a}\n"));
            }
            let review = var(state, "reviewSummary");
            if !review.is_empty() {
                code.push_str(&format!("fixed: {review}\n"));
            }
            let verify_output = var(state, "verifyOutput");
            if !verify_output.is_empty() {
                code.push_str("fixed a failed check\n");
            }
            let mut shared_line = Vec::new();
            if shared.scenario.same_lines.contains(&story) {
                let line = format!("shared: {story}\n");
                let text = if verify_output.contains("conflicted in") {
                    shared
                        .resolved
                        .lock()
                        .unwrap()
                        .push((story.clone(), verify_output.clone()));
                    let theirs = std::fs::read_to_string(shared.project.join("src/shared.txt"))
                        .unwrap_or_default();
                    if theirs.contains(&line) {
                        theirs
                    } else {
                        format!("{theirs}{line}")
                    }
                } else {
                    line
                };
                shared_line.push(write("src/shared.txt".into(), text));
            }
            let mut calls = shared_line;
            calls.extend([
                write(format!("src/{story}.txt"), code),
                write(
                    story_file.clone(),
                    edit_story(
                        shared,
                        &story_file,
                        &story,
                        "review",
                        &format!("\n## Change Log\n\n- implemented in cycle {cycle}\n"),
                    ),
                ),
            ]);
            calls
        }
        "revision" => vec![write(
            format!("src/{story}.revision.txt"),
            format!("revised in cycle {cycle}\n"),
        )],
        "code-review" => {
            let changes = shared
                .scenario
                .changes
                .iter()
                .any(|(s, c)| *s == story && *c == cycle);
            let verdict = if shared.scenario.broken_review.contains(&story) {
                json!({"reviewResult": "approve", "summary": "looks fine"})
            } else if changes {
                json!({"reviewResult": "changes-requested", "summary": format!("cycle {cycle}: handle the empty input in src/{story}.txt")})
            } else {
                json!({"reviewResult": "approved", "summary": format!("cycle {cycle}: every criterion holds")})
            };
            vec![write(
                format!("{dir}/{story}.review.json"),
                serde_json::to_string_pretty(&verdict).unwrap(),
            )]
        }
        _ => Vec::new(),
    };
    calls.extend(extra);
    calls
}
