//! S_DECOMPOSE: one tool-less model call that must answer the session's boundary contract,
//! execution criteria and sub-goals as JSON ([`super::goals`] validates it). A rejected answer
//! gets one more call with the located problems; a second rejection is
//! `DECOMPOSITION_INVALID`. Nothing here writes a file.

use super::error::{BuildError, Result};
use super::goals::{self, Decomposition, MAX_GOALS};
use crate::session::infer::Inference;
use baton_llm::{CallOptions, ChatModel, ChatRequest, Message, Usage};
use std::fmt::Write as _;
use tokio_util::sync::CancellationToken;

/// Calls in all: the first answer and one retry.
pub const ATTEMPTS: u32 = 2;
/// Most characters of a rejected answer echoed back to the model.
const ECHO_CHARS: usize = 4000;

const RULES: &str = "You decompose a software change into a boundary contract, execution \
criteria and outcome-oriented sub-goals for an automated lifecycle session \
(analyze → plan → execute → verify → review → test). Answer with ONE JSON object and nothing \
else, exactly this shape:\n\
{\"boundary_contract\": {\"in_scope\": [\"…\"], \"out_of_scope\": [\"…\"], \"constraints\": \
[\"…\"], \"definition_of_done\": \"…\"},\n \"execution_criteria\": [\"…\"],\n \
\"task_decomposition\": [{\"id\": \"G1\", \"goal\": \"<deliverable>\", \"boundary\": \
\"<in/out note>\", \"done_when\": \"<objectively checkable condition on an artifact the \
session produces>\", \"evidence\": \"verification.json|review.json|uat.md|<test path>\", \
\"lifecycle\": [\"<stages that produce the evidence>\"], \"status\": \"pending\"}]}\n\
Rules: ids run G1, G2, … in order; sub-goals are outcomes, not lifecycle stages; lifecycle \
names only stages of the chain listed below; in_scope and lifecycle are never empty; \
execution criteria cover backward compatibility, scope freeze, the test bar, fixing instead \
of hiding problems, incremental commits, as far as they apply.";

/// The facts the model decomposes from.
fn user_message(intent: &str, inf: &Inference, stages: &[String], folders: &[String]) -> String {
    let mut m = format!("Intent: {intent}\n");
    let _ = writeln!(
        m,
        "Phase: {}",
        inf.phase.map_or("none".to_string(), |p| p.to_string())
    );
    if let Some(slug) = &inf.phase_slug {
        let _ = writeln!(m, "Phase slug: {slug}");
    }
    if let Some(ms) = &inf.milestone {
        let _ = writeln!(m, "Milestone: {ms}");
    }
    let _ = writeln!(m, "Starting position: {}", inf.position.name());
    let _ = writeln!(m, "Intent breadth: {}", inf.breadth.as_str());
    let _ = writeln!(m, "Chain stages: {}", stages.join(", "));
    if !folders.is_empty() {
        // The model has no tools here: the project's top folders let it name a real scope.
        let _ = writeln!(m, "Project folders: {}", folders.join(", "));
    }
    let c = &inf.clarification;
    for (label, answer) in [
        ("scope", &c.scope),
        ("constraints", &c.constraints),
        ("definition of done", &c.done),
    ] {
        if let Some(a) = answer {
            let _ = writeln!(m, "The user's answer on {label}: {a}");
        }
    }
    let _ = write!(m, "At most {MAX_GOALS} sub-goals.");
    m
}

/// What the call produced, with the tokens it cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Decomposed {
    pub decomposition: Decomposition,
    pub usage: Usage,
    /// 1 when the first answer was accepted, 2 after a retry.
    pub attempts: u32,
}

/// Asks the model for the decomposition; see the module doc.
pub async fn decompose(
    model: &dyn ChatModel,
    intent: &str,
    inf: &Inference,
    stages: &[String],
    folders: &[String],
    cancel: &CancellationToken,
) -> Result<Decomposed> {
    let mut messages = vec![
        Message::system(RULES),
        Message::user(user_message(intent, inf, stages, folders)),
    ];
    let mut usage = Usage::default();
    let mut problem = String::new();
    for attempt in 1..=ATTEMPTS {
        let request = ChatRequest {
            messages: messages.clone(),
            tools: Vec::new(),
            options: Default::default(),
        };
        let options = CallOptions {
            on_event: None,
            cancel: Some(cancel),
        };
        let answer = model.chat(&request, options).await;
        if cancel.is_cancelled() {
            return Err(BuildError::Interrupted);
        }
        let response = answer.map_err(|e| BuildError::DecompositionCall {
            code: e.code(),
            message: e.to_string(),
        })?;
        usage.add(response.usage.unwrap_or_default());
        let text = response.message.text().to_string();
        match goals::parse(&text) {
            Ok(decomposition) => {
                return Ok(Decomposed {
                    decomposition,
                    usage,
                    attempts: attempt,
                });
            }
            Err(rejected) => {
                problem = rejected.to_string();
                let echoed: String = text.chars().take(ECHO_CHARS).collect();
                messages.push(Message::assistant(echoed));
                messages.push(Message::user(format!(
                    "Your answer was rejected: {problem}\nAnswer again with only the corrected \
                     JSON object."
                )));
            }
        }
    }
    Err(BuildError::DecompositionInvalid {
        attempts: ATTEMPTS,
        problem,
    })
}
