//! One decision tick: the first pending step is a gate; one model call (no tools) reads the
//! gate's result files and answers the `---VERDICT---` block; the answer is settled through
//! [`super::apply::settle_gate`] (guards, fix-loop templates, `decisions.ndjson`).
//!
//! Result files are the evidence earlier steps cited in `session.complete`, matched by file
//! name (post-verify → verification.json, …), read inside the project only and bounded. A
//! missing file is said so in the prompt: missing evidence counts as unmet, and a quality gate
//! with none of its files is settled `fix` even if the model says `proceed`. A model that fails
//! to answer is a `fix` (E005), as seed 003 says; a stopped call decides nothing.
//!
//! A session started without `-y` (`auto_mode` not true) does not settle: the answer is kept
//! ([`super::review`]) and the session pauses for a person to accept or override it; a gate
//! whose answer is already kept pauses again without a call.

use super::apply::{form_of, settle_gate_checked};
use super::milestone::Planner;
use super::review::{self, Review};
use super::verdict::Form;
use baton_llm::{CallOptions, ChatModel, ChatRequest, Message, Usage};
use baton_ralph::Context;
use baton_ralph::Target;
use baton_ralph::discovery::Pick;
use baton_ralph::error::{RalphError, Result};
use baton_ralph::session::Session;
use baton_ralph::verbs::{Output, control, decide};
use serde_json::Value;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

/// Most bytes of one result file put in the prompt.
const MAX_FILE: usize = 64 * 1024;

const QUALITY_RULES: &str = "You judge one quality gate of a lifecycle session from the \
result files below. Answer with exactly one block, nothing inside it but these lines:\n\
---VERDICT---\nSTATUS: proceed|fix|escalate\nREASON: <one line>\nGAP_SUMMARY: <what is missing, \
or none>\nCONFIDENCE: high|medium|low\nCONFIDENCE_SCORE: <0-100>\nWEAKEST_DIMENSION: <one word>\n\
---END---";

const GOAL_RULES: &str = "You audit whether a lifecycle session met its sub-goals. A sub-goal \
whose evidence is missing is unmet. Answer with exactly one block:\n---VERDICT---\n\
STATUS: all_met|has_unmet\nREASON: <one line>\nUNMET: [{\"id\":\"G1\",\"gap\":\"...\",\
\"target_phase\":\"...\"}] (a JSON array on one line; [] when all are met)\n\
CONFIDENCE_SCORE: <0-100>\n---END---";

/// The files a gate reads (seed 003's gate table).
pub fn inputs(gate: &str) -> &'static [&'static str] {
    match gate {
        "post-verify" => &["verification.json"],
        "post-review" => &["review.json"],
        "post-test" => &["uat.md", "test-results.json"],
        "post-business-test" => &["report.json"],
        _ => &[],
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum GateEnd {
    /// The gate was settled; `decide`'s JSON report.
    Settled(Value),
    /// The call was stopped; the gate stays pending.
    Interrupted,
    /// The model's answer is kept and the session paused for a person (no `-y`).
    Review,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GateTick {
    pub index: usize,
    pub gate: String,
    pub end: GateEnd,
    /// Model calls made (0 when a kept answer was reused).
    pub model_calls: usize,
    pub usage: Usage,
}

/// The evidence paths cited by completed steps before `index`, newest first.
pub(crate) fn cited(s: &Session, index: usize) -> Vec<String> {
    let mut out = Vec::new();
    for step in s.all_steps().take(index) {
        match step.get("completion_evidence") {
            Some(Value::String(p)) => out.push(p.clone()),
            Some(Value::Array(a)) => {
                out.extend(a.iter().filter_map(|v| v.as_str().map(str::to_owned)))
            }
            _ => {}
        }
    }
    out.reverse();
    out
}

/// `path` inside the project, or `None` (absolute paths elsewhere, `..` escapes, links out).
pub(crate) fn inside(project: &Path, path: &str) -> Option<PathBuf> {
    let root = project.canonicalize().ok()?;
    let full = root.join(path).canonicalize().ok()?;
    full.starts_with(&root).then_some(full)
}

pub(crate) fn read_bounded(path: &Path) -> Option<String> {
    // Up to one byte more than shown, to say that more was left out (the size is known).
    let size = std::fs::metadata(path).ok()?.len();
    let cap = (MAX_FILE as u64).saturating_add(1);
    let file = baton_autopilot::untrusted::open_nonblocking(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(file, cap), &mut bytes).ok()?;
    let cut = bytes.len().min(MAX_FILE);
    let mut text = String::from_utf8_lossy(&bytes[..cut]).into_owned();
    if bytes.len() > MAX_FILE {
        let _ = write!(
            text,
            "\n[… {} more bytes not shown]",
            size.saturating_sub(MAX_FILE as u64)
        );
    }
    Some(text)
}

/// Most bytes of evidence a goal audit shows, all sub-goals together.
const MAX_GOAL_EVIDENCE: usize = 4 * MAX_FILE;

/// The evidence files the sub-goals name (`evidence: "verification.json|review.json"`), as
/// cited by earlier steps: an audit that only saw the decomposition would judge the goals
/// from their own wording. Each file once, newest citation, inside the project, bounded.
fn goal_evidence(ctx: &Context, s: &Session, paths: &[String], out: &mut String) {
    let goals = s.doc.get("task_decomposition").and_then(Value::as_array);
    let mut wanted: Vec<String> = Vec::new();
    for goal in goals.into_iter().flatten() {
        let names = goal.get("evidence").and_then(Value::as_str).unwrap_or("");
        for name in names.split(['|', ',']).map(str::trim) {
            // Only a file name is matched: a sub-goal cannot point the audit at any path.
            let name = Path::new(name)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned());
            if let Some(name) = name.filter(|n| !wanted.contains(n)) {
                wanted.push(name);
            }
        }
    }
    let mut shown = 0usize;
    for name in wanted {
        let found = paths.iter().find(|p| {
            Path::new(p.as_str())
                .file_name()
                .is_some_and(|n| n.to_string_lossy() == name)
        });
        let Some(path) = found else {
            let _ = write!(
                out,
                "\n## evidence {name}\nMISSING: no earlier step cited it\n"
            );
            continue;
        };
        if shown >= MAX_GOAL_EVIDENCE {
            let _ = write!(
                out,
                "\n## evidence {name} ({path})\n[not shown: evidence limit reached]\n"
            );
            continue;
        }
        match inside(&ctx.project, path).and_then(|f| read_bounded(&f)) {
            Some(body) => {
                shown += body.len();
                let _ = write!(out, "\n## evidence {name} ({path})\n{body}\n");
            }
            None => {
                let _ = write!(
                    out,
                    "\n## evidence {name} ({path})\nMISSING: not readable inside the project\n"
                );
            }
        }
    }
}

/// The newest cited path named `wanted` and its text, when it can be read inside the project.
fn evidence(ctx: &Context, paths: &[String], wanted: &str) -> Option<(String, String)> {
    let found = paths.iter().find(|p| {
        Path::new(p.as_str())
            .file_name()
            .is_some_and(|n| n.to_string_lossy() == wanted)
    })?;
    let body = inside(&ctx.project, found).and_then(|f| read_bounded(&f))?;
    Some((found.clone(), body))
}

/// A quality gate none of whose result files an earlier step produced (cited, readable inside
/// the project): the files it lacks. Empty when the gate has its evidence or reads none.
pub fn missing_evidence(ctx: &Context, s: &Session, index: usize, gate: &str) -> Vec<&'static str> {
    let wanted = inputs(gate);
    let paths = cited(s, index);
    if wanted.iter().any(|w| evidence(ctx, &paths, w).is_some()) {
        return Vec::new();
    }
    wanted.to_vec()
}

/// The user message of a gate's call.
pub fn prompt(ctx: &Context, s: &Session, index: usize, gate: &str, form: Form) -> String {
    let mut out = format!(
        "Session {} — intent: {}\nGate: {gate} (step {index})\n",
        s.id,
        s.intent()
    );
    if let Some(step) = s.step(index) {
        let _ = writeln!(
            out,
            "Retry {} of at most {}.",
            step.retry_count(),
            step.max_retries()
        );
    }
    if form == Form::GoalAudit {
        for key in [
            "boundary_contract",
            "execution_criteria",
            "task_decomposition",
        ] {
            let value = s.doc.get(key).cloned().unwrap_or(Value::Null);
            let text = serde_json::to_string_pretty(&value).unwrap_or_default();
            let _ = write!(
                out,
                "\n## {key}\n{}\n",
                text.chars().take(MAX_FILE).collect::<String>()
            );
        }
    }
    let paths = cited(s, index);
    if form == Form::GoalAudit {
        goal_evidence(ctx, s, &paths, &mut out);
    }
    for wanted in inputs(gate) {
        match evidence(ctx, &paths, wanted) {
            Some((p, body)) => {
                let _ = write!(out, "\n## {wanted} ({p})\n{body}\n");
            }
            _ => {
                let _ = write!(
                    out,
                    "\n## {wanted}\nMISSING: no earlier step produced it (missing evidence \
                     counts against proceeding)\n"
                );
            }
        }
    }
    out
}

/// Evaluates the first pending step, which must be a gate a model judges.
pub async fn evaluate<'a>(
    ctx: &Context,
    session: impl Into<Target<'a>>,
    model: &dyn ChatModel,
    cancel: &CancellationToken,
) -> Result<GateTick> {
    let (h, s) = session.into().open(ctx, Pick::Active)?;
    let (index, gate) = s
        .all_steps()
        .find(|st| st.status() == "pending")
        .and_then(|st| st.decision().map(|g| (st.index(), g.to_string())))
        .ok_or_else(|| {
            RalphError::usage("NO_PENDING_GATE", "the next pending step is not a gate")
        })?;
    let form = form_of(&gate).ok_or_else(|| {
        RalphError::usage(
            "GATE_NOT_MODEL_EVALUATED",
            format!("gate {gate} is settled by code or by a person, not by a model verdict"),
        )
    })?;
    // Seed 003: without auto mode a person confirms or overrides the verdict.
    let reviewed = s.doc.get("auto_mode").and_then(Value::as_bool) != Some(true);
    if reviewed && review::read(&s, index)?.is_some() {
        control::pause(ctx, &h, None)?;
        return Ok(GateTick {
            index,
            gate,
            end: GateEnd::Review,
            model_calls: 0,
            usage: Usage::default(),
        });
    }
    let rules = match form {
        Form::Quality => QUALITY_RULES,
        Form::GoalAudit => GOAL_RULES,
    };
    let request = ChatRequest {
        messages: vec![
            Message::system(rules),
            Message::user(prompt(ctx, &s, index, &gate, form)),
        ],
        tools: Vec::new(),
        options: Default::default(),
    };
    let options = CallOptions {
        on_event: None,
        cancel: Some(cancel),
    };
    let answer = model.chat(&request, options).await;
    if cancel.is_cancelled() {
        return Ok(GateTick {
            index,
            gate,
            end: GateEnd::Interrupted,
            model_calls: 1,
            usage: Usage::default(),
        });
    }
    let failed =
        |e: &baton_llm::LlmError| format!("E005: the gate's model call failed ({}): {e}", e.code());
    if reviewed {
        let retry = s.step(index).map_or(0, |st| st.retry_count());
        let (kept, usage) = match &answer {
            Ok(response) => (
                Review::answered(index, &gate, retry, response.message.text()),
                response.usage.unwrap_or_default(),
            ),
            Err(e) => (
                Review {
                    index,
                    gate: gate.clone(),
                    retry,
                    answer: None,
                    error: Some(failed(e)),
                },
                Usage::default(),
            ),
        };
        // Kept before the pause: a kill in between pauses on the next tick without a call.
        review::write(&s.dir, &kept)?;
        control::pause(ctx, &h, None)?;
        return Ok(GateTick {
            index,
            gate,
            end: GateEnd::Review,
            model_calls: 1,
            usage,
        });
    }
    // Without its evidence a gate is a fix, whatever the model says.
    let missing = match form {
        Form::Quality => missing_evidence(ctx, &s, index, &gate),
        Form::GoalAudit => Vec::new(),
    };
    let (out, usage): (Output, Usage) = match answer {
        Ok(response) => (
            settle_gate_checked(ctx, &h, index, response.message.text(), &missing)?,
            response.usage.unwrap_or_default(),
        ),
        Err(e) => {
            let args = review::failed_call_args(index, failed(&e));
            (decide::run(ctx, &h, &args, &Planner)?, Usage::default())
        }
    };
    Ok(GateTick {
        index,
        gate,
        end: GateEnd::Settled(out.json),
        model_calls: 1,
        usage,
    })
}
