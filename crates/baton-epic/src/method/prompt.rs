//! The prompt of a phase run that runs an installed BMAD skill or workflow: a header the run
//! is recognised by, what baton asks of this run (the story, its files, a review's summary),
//! how the run works here (paths, no person watching, no subagents, how it ends), then the
//! skill's rendered text. Every path in it is project-relative.

use super::Installed;
use super::render::Rendered;
use baton_llm::ToolDef;
use serde_json::{Value, json};

/// The first line of every such prompt.
pub const HEADER: &str = "BMAD_PHASE";
/// The tool that ends the run.
pub const FINISH_TOOL: &str = "phase.complete";
/// Longest summary the finish tool accepts.
const MAX_SUMMARY: usize = 4000;

/// The rules said once, before the prompt (a system layer).
pub const RULES: &str = "You run one phase of `baton epic`, BMAD's implementation loop, as the \
project's own BMAD skill or workflow given in the first message. Work with your tools. Nobody \
watches this run: make the decisions the skill leaves to its user yourself, the unattended way \
(continue at checkpoints, choose the recommended option, keep going), and ask a question (a plain \
text answer, no tool call) only when the work cannot go on without a person. When the skill's \
work is finished, or it halts, call phase.complete exactly once. baton decides what happens next \
from the files the skill writes (the story or spec status, the sprint status, the review \
findings, the code), not from what you say.";

/// Who the run is for, and what baton asks of it.
#[derive(Debug, Clone)]
pub struct Ask<'a> {
    pub story_key: &'a str,
    pub epic_id: &'a str,
    /// The phase's name (`dev`, …; `retrospective` for an epic's retrospective).
    pub phase: &'a str,
    pub review_cycle: u32,
    /// The implementation artifacts folder (project-relative).
    pub artifacts: &'a str,
    /// What baton asks, in a few lines (the invocation the skill takes as its input).
    pub request: String,
}

/// The whole first message of the run.
pub fn compose(inst: &Installed, rendered: &Rendered, how: &str, ask: &Ask<'_>) -> String {
    let mut p = String::new();
    p.push_str(&format!(
        "{HEADER}\n- storyKey: {}\n- epicId: {}\n- phase: {}\n- reviewCycle: {}\n- implementationArtifacts: {}\n- method: {} ({}, {})\n- rendered: {how}\n\n",
        ask.story_key,
        ask.epic_id,
        ask.phase,
        ask.review_cycle,
        ask.artifacts,
        inst.name,
        inst.kind_name(),
        inst.rel
    ));
    p.push_str("## What baton asks of this run\n\n");
    p.push_str(ask.request.trim_end());
    p.push_str("\n\n## How to work here\n\n");
    p.push_str(
        "- `@project/` is the project root (also the terminal's working directory: there, write \
         paths without `@project/`). Every path below is written that way.\n",
    );
    if !rendered.snapshot.is_empty() {
        p.push_str(&format!(
            "- `@pkg/` holds this {}'s files, already rendered (read-only). A bare path the text \
             names (`steps/step-01.md`, `./checklist.md`) is under `@pkg/`.\n",
            if inst.is_skill() { "skill" } else { "workflow" }
        ));
    }
    p.push_str(
        "- baton already resolved the configuration and customization values in the text below: \
         do not run `render_skill.py` or `resolve_customization.py` for it again.\n\
         - This runner has no subagents. Where the text has a subagent do some work, do that \
         work yourself, here, one part after the other, each with fresh eyes as the text asks; \
         never halt for lack of subagents.\n\
         - Write every file the text says to write (the story or spec file and its status, \
         review findings, sprint-status.yaml): baton reads them when you finish.\n",
    );
    p.push_str(&format!(
        "- When the text's work is done, or it halts with a status, call `{FINISH_TOOL}` once \
         with a one-line summary.\n\n"
    ));
    p.push_str(&format!(
        "## The {} `{}`\n\n",
        if inst.is_skill() { "skill" } else { "workflow" },
        inst.name
    ));
    p.push_str(rendered.text.trim_end());
    p.push('\n');
    p
}

/// `phase.complete {summary}`.
pub fn finish_tool() -> ToolDef {
    ToolDef {
        name: FINISH_TOOL.into(),
        description: "End this phase run once the skill's work is done or it halted. baton reads \
                      the outcome from the files the skill wrote; the summary is only shown."
            .into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "summary": {"type": "string", "description": "One line: what was done, or why it halted."}
            },
            "additionalProperties": false
        }),
    }
}

/// The finish tool's arguments: an object with at most a short `summary`.
pub fn validate(args: &str) -> Result<Value, String> {
    let v: Value = if args.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(args).map_err(|e| format!("arguments are not JSON: {e}"))?
    };
    let Some(map) = v.as_object() else {
        return Err("arguments must be an object: {\"summary\": \"…\"}".into());
    };
    if let Some(extra) = map.keys().find(|k| *k != "summary") {
        return Err(format!("unknown argument {extra:?}; only summary is taken"));
    }
    match map.get("summary") {
        None => Ok(json!({"summary": ""})),
        Some(Value::String(s)) if s.chars().count() <= MAX_SUMMARY => Ok(json!({"summary": s})),
        Some(Value::String(_)) => Err(format!("summary is over {MAX_SUMMARY} characters")),
        Some(_) => Err("summary must be a string".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::method::Kind;

    #[test]
    fn the_prompt_carries_the_skill_and_what_is_asked() {
        let inst = Installed {
            name: "bmad-build-auto".into(),
            rel: ".claude/skills/bmad-build-auto".into(),
            kind: Kind::Rendered,
            shim: false,
            description: None,
        };
        let rendered = Rendered {
            text: "# Build\nMARKER at @pkg/step-01.md\n".into(),
            snapshot: vec![("step-01.md".into(), b"x".to_vec())],
            how: "resolved by baton".into(),
            applied: Vec::new(),
        };
        let ask = Ask {
            story_key: "1-2-glass",
            epic_id: "epic-1",
            phase: "dev",
            review_cycle: 1,
            artifacts: "impl",
            request: "Implement story 1-2-glass.".into(),
        };
        let p = compose(
            &inst,
            &rendered,
            "resolved by baton (uv is not on PATH)",
            &ask,
        );
        assert!(p.starts_with("BMAD_PHASE\n- storyKey: 1-2-glass\n"), "{p}");
        assert!(p.contains("- phase: dev\n"), "{p}");
        assert!(p.contains("Implement story 1-2-glass."), "{p}");
        assert!(p.contains("`@pkg/`"), "{p}");
        assert!(p.ends_with("MARKER at @pkg/step-01.md\n"), "{p}");
    }

    #[test]
    fn the_finish_call_takes_only_a_short_summary() {
        assert_eq!(validate("").unwrap(), json!({"summary": ""}));
        assert_eq!(
            validate("{\"summary\": \"done\"}").unwrap()["summary"],
            "done"
        );
        assert!(validate("{\"status\": \"done\"}").is_err());
        assert!(validate("[1]").is_err());
        assert!(validate(&format!("{{\"summary\": \"{}\"}}", "x".repeat(5000))).is_err());
    }
}
