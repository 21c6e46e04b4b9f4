//! A loopback OpenAI-compatible server that plays a lifecycle session the way a model would,
//! answering each request from the request alone (so a killed and continued session gets the
//! same answers as one that ran straight through):
//!
//! - the build phase's decomposition call gets one valid decomposition (one sub-goal);
//! - a step's task run (`skill=<name>` in the step prompt) calls `session_complete` with DONE
//!   and the evidence the scenario names for the skill — or first asks the scenario's question
//!   in plain text, until an answer follows the prompt in the conversation;
//! - a quality gate answers the scenario's verdict for `(gate, retry)`, else `proceed` at 90;
//! - the goal audit answers `all_met`.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_testkit::json_server::JsonServer;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// What the played model does besides the plain work.
#[derive(Debug, Clone, Default)]
pub struct Scenario {
    /// `(gate, retry_count, STATUS, CONFIDENCE_SCORE)`.
    pub verdicts: Vec<(String, u64, String, u8)>,
    /// `(skill, question)`: the step asks before working, until it is answered.
    pub questions: Vec<(String, String)>,
    /// `(skill, evidence path)`; a skill not listed cites `<skill>.md`.
    pub evidence: Vec<(String, String)>,
    /// `(skill, reason)`: the step ends BLOCKED with that reason.
    pub blocked: Vec<(String, String)>,
    /// How long each answer to a step of `slow_skill` takes (a slow model, for tests that act
    /// while a step runs).
    pub delay: std::time::Duration,
    pub slow_skill: Option<String>,
    /// Skills whose steps only ever read a file: they never call `session_complete`.
    pub busy: Vec<String>,
}

struct Shared {
    scenario: Scenario,
    /// `(kind, name)` per request: `("step", skill)`, `("gate", gate)`, `("audit", "")`,
    /// `("decompose", "")`, `("other", "")`.
    served: Mutex<Vec<(String, String)>>,
    /// The model name of each request.
    models: Mutex<Vec<String>>,
    next_id: AtomicU64,
}

pub struct Player {
    server: JsonServer,
    shared: Arc<Shared>,
}

impl Player {
    pub fn start(scenario: Scenario) -> Player {
        let shared = Arc::new(Shared {
            scenario,
            served: Mutex::new(Vec::new()),
            models: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(1),
        });
        let s = shared.clone();
        let server = JsonServer::start(Arc::new(move |body: &Value| {
            let model = body["model"].as_str().unwrap_or("").to_string();
            s.models.lock().unwrap().push(model);
            play(&s, body)
        }));
        Player { server, shared }
    }

    pub fn base_url(&self) -> String {
        self.server.base_url()
    }

    pub fn served(&self) -> Vec<(String, String)> {
        self.shared.served.lock().unwrap().clone()
    }

    /// The model name of each request served so far.
    pub fn models(&self) -> Vec<String> {
        self.shared.models.lock().unwrap().clone()
    }

    /// How many requests went to steps of `skill`.
    pub fn step_calls(&self, skill: &str) -> usize {
        self.served()
            .iter()
            .filter(|(k, n)| k == "step" && n == skill)
            .count()
    }
}

fn text_reply(content: &str) -> Value {
    json!({
        "id": "chatcmpl-session-player", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    })
}

fn call_reply(shared: &Shared, name: &str, args: Value) -> Value {
    let id = format!("call_{}", shared.next_id.fetch_add(1, Ordering::SeqCst));
    json!({
        "id": "chatcmpl-session-player", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}]},
            "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29}
    })
}

fn content(m: &Value) -> &str {
    m.get("content").and_then(Value::as_str).unwrap_or("")
}

/// `after` up to the end of its line, in `text`.
fn field<'a>(text: &'a str, after: &str) -> Option<&'a str> {
    let at = text.find(after)? + after.len();
    let rest = &text[at..];
    Some(rest[..rest.find(['\n', ' ']).unwrap_or(rest.len())].trim())
}

fn served(shared: &Shared, kind: &str, name: &str) {
    shared
        .served
        .lock()
        .unwrap()
        .push((kind.to_string(), name.to_string()));
}

fn play(shared: &Shared, body: &Value) -> Value {
    let messages: Vec<Value> = body["messages"].as_array().cloned().unwrap_or_default();
    let system = messages.first().map(content).unwrap_or("");
    let user = messages
        .iter()
        .find(|m| m["role"] == "user")
        .map(content)
        .unwrap_or("");
    if system.starts_with("You decompose") {
        served(shared, "decompose", "");
        return text_reply(&decomposition().to_string());
    }
    if system.starts_with("You judge one quality gate") {
        let gate = field(user, "Gate: ").unwrap_or("?").to_string();
        let retry: u64 = field(user, "Retry ")
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        served(shared, "gate", &gate);
        let (status, score) = shared
            .scenario
            .verdicts
            .iter()
            .find(|(g, r, _, _)| *g == gate && *r == retry)
            .map_or(("proceed".to_string(), 90), |(_, _, s, c)| (s.clone(), *c));
        return text_reply(&format!(
            "---VERDICT---\nSTATUS: {status}\nREASON: played verdict for {gate} at retry {retry}\n\
             GAP_SUMMARY: {}\nCONFIDENCE: high\nCONFIDENCE_SCORE: {score}\n\
             WEAKEST_DIMENSION: tests\n---END---",
            if status == "proceed" {
                "none"
            } else {
                "the header row is missing"
            }
        ));
    }
    if system.starts_with("You audit whether") {
        served(shared, "audit", "");
        return text_reply(
            "---VERDICT---\nSTATUS: all_met\nREASON: every sub-goal has its evidence\n\
             UNMET: []\nCONFIDENCE_SCORE: 90\n---END---",
        );
    }
    if system.contains("one step of a lifecycle session") {
        let skill = field(user, "skill=").unwrap_or("?").to_string();
        served(shared, "step", &skill);
        if shared.scenario.slow_skill.as_deref() == Some(skill.as_str()) {
            std::thread::sleep(shared.scenario.delay);
        }
        if shared.scenario.busy.contains(&skill) {
            return call_reply(shared, "fs_read", json!({"path": "README.md"}));
        }
        if let Some((_, reason)) = shared.scenario.blocked.iter().find(|(s, _)| *s == skill) {
            return call_reply(
                shared,
                "session_complete",
                json!({"status": "BLOCKED", "reason": reason}),
            );
        }
        // An answer is a user message after the step prompt.
        let answered = messages.iter().filter(|m| m["role"] == "user").count() > 1;
        if let Some((_, q)) = shared.scenario.questions.iter().find(|(s, _)| *s == skill)
            && !answered
        {
            return text_reply(q);
        }
        let evidence = shared
            .scenario
            .evidence
            .iter()
            .find(|(s, _)| *s == skill)
            .map_or(format!("{skill}.md"), |(_, e)| e.clone());
        return call_reply(
            shared,
            "session_complete",
            json!({"status": "DONE", "evidence": [evidence]}),
        );
    }
    served(shared, "other", "");
    text_reply("I do not know this request.")
}

/// One sub-goal whose evidence is the verification file.
pub fn decomposition() -> Value {
    json!({
        "boundary_contract": {
            "in_scope": ["CSV export of the task list"],
            "out_of_scope": ["other formats"],
            "constraints": ["no new dependency"],
            "definition_of_done": "the export test passes"
        },
        "execution_criteria": ["keep the existing API", "fix problems instead of hiding them"],
        "task_decomposition": [{
            "id": "G1", "goal": "tasks export as CSV with a header row",
            "boundary": "the export command only",
            "done_when": "verification.json lists no gaps",
            "evidence": "verification.json",
            "lifecycle": ["execute", "verify"], "status": "pending"
        }]
    })
}
