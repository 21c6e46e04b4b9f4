//! The played model's part for phase runs of an installed BMAD skill or workflow (task runs
//! whose first message starts with `BMAD_PHASE`): it does what the project's skill says, with
//! the files tools, then calls `phase_complete`. Like the rest of the player it keeps no memory:
//! the first turn writes, the turn after the writes' results finishes.
//!
//! - dev, a `build` skill: the spec the request names (or a new `spec-{key}.md`) gets
//!   `status: done` (or `blocked` with a blocking condition), and the code file is written;
//! - dev, any other skill or a classic workflow: the story file gets `Status: review`, and the
//!   code;
//! - code-review: `### Review Findings` appended to the spec or story file, its status set to
//!   `done` (or `in-progress` when the scenario asks for changes at that cycle), and the story's
//!   value in sprint-status.yaml set to the same, as BMAD's review skill does;
//! - retrospective (an epic's `bmad-retrospective`): the document the request names, and, as
//!   BMAD's skill does, `epic-N-retrospective: done` plus an action item in sprint-status.yaml;
//! - any other phase (create-story): the story file, `Status: ready-for-dev`.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use std::path::Path;

/// What a method phase's request says.
#[derive(Debug, Clone, Default)]
pub struct Header {
    pub story: String,
    pub phase: String,
    pub cycle: u32,
    pub method: String,
    pub artifacts: String,
}

fn content(m: &Value) -> &str {
    m.get("content").and_then(Value::as_str).unwrap_or("")
}

/// The first user message of a method phase run, if this request belongs to one.
pub fn prompt_of(body: &Value) -> Option<String> {
    let messages = body["messages"].as_array()?;
    let first = messages.iter().find(|m| m["role"] == "user")?;
    let text = content(first);
    text.starts_with("BMAD_PHASE\n").then(|| text.to_string())
}

pub fn header(prompt: &str) -> Header {
    let field = |name: &str| {
        prompt
            .lines()
            .find_map(|l| l.strip_prefix(&format!("- {name}: ")))
            .unwrap_or("")
            .trim()
            .to_string()
    };
    Header {
        story: field("storyKey"),
        phase: field("phase"),
        cycle: field("reviewCycle").parse().unwrap_or(1),
        method: field("method"),
        artifacts: field("implementationArtifacts"),
    }
}

/// A path the request names after `label` (`Its spec file: `@project/x``), project-relative.
fn named(prompt: &str, label: &str) -> Option<String> {
    let line = prompt.lines().find(|l| l.starts_with(label))?;
    let start = line.find("`@project/")? + "`@project/".len();
    let rest = &line[start..];
    Some(rest[..rest.find('`')?].to_string())
}

/// `status:` in the frontmatter (or a `Status:` line) set to `status`; a frontmatter is added
/// to a text without one.
fn with_status(text: &str, status: &str, frontmatter: bool) -> String {
    if frontmatter {
        if let Some(rest) = text.strip_prefix("---\n")
            && let Some(end) = rest.find("\n---")
        {
            let front: Vec<String> = rest[..end]
                .lines()
                .map(|l| {
                    if l.starts_with("status:") {
                        format!("status: '{status}'")
                    } else {
                        l.to_string()
                    }
                })
                .collect();
            let mut front = front.join("\n");
            if !front.contains("status:") {
                front.push_str(&format!("\nstatus: '{status}'"));
            }
            return format!("---\n{front}{}", &rest[end..]);
        }
        return format!("---\nstatus: '{status}'\n---\n{text}");
    }
    let mut found = false;
    let mut out: Vec<String> = text
        .lines()
        .map(|l| {
            if l.starts_with("Status:") {
                found = true;
                format!("Status: {status}")
            } else {
                l.to_string()
            }
        })
        .collect();
    if !found {
        out.insert(0, format!("Status: {status}"));
    }
    out.join("\n") + "\n"
}

/// What a method phase turn answers: `(tool name, arguments)` calls.
pub fn turn(
    project: &Path,
    prompt: &str,
    messages: &[Value],
    changes: &[(String, u32)],
    blocked: &[String],
) -> Vec<(&'static str, Value)> {
    let h = header(prompt);
    let answered = messages.iter().any(|m| m["role"] == "tool");
    if answered {
        return vec![(
            "phase_complete",
            json!({"summary": format!("{} of {} done by the played model", h.phase, h.story)}),
        )];
    }
    let read = |rel: &str| std::fs::read_to_string(project.join(rel)).unwrap_or_default();
    let write = |rel: &str, text: String| {
        (
            "fs_write",
            json!({"path": format!("@project/{rel}"), "content": text}),
        )
    };
    let key = h.story.clone();
    let code = write(
        &format!("src/{key}.txt"),
        format!(
            "{}built by {} in cycle {}\n",
            read(&format!("src/{key}.txt")),
            h.method,
            h.cycle
        ),
    );
    match h.phase.as_str() {
        "dev" | "build" if h.method.contains("build") => {
            let spec = named(prompt, "Its spec file:")
                .unwrap_or_else(|| format!("{}/spec-{key}.md", h.artifacts));
            let before = read(&spec);
            let mut text = if before.is_empty() {
                format!("---\ntitle: '{key}'\nstatus: 'draft'\n---\n# {key}\n")
            } else {
                before
            };
            let status = if blocked.contains(&key) {
                text.push_str("\n## Auto Run Result\n\nStatus: blocked\nBlocking condition: the played model found an intent gap\n");
                "blocked"
            } else {
                text.push_str(&format!(
                    "\n## Auto Run Result\n\nbuilt in cycle {}\n",
                    h.cycle
                ));
                "done"
            };
            vec![code, write(&spec, with_status(&text, status, true))]
        }
        "dev" => {
            let story =
                named(prompt, "Story file:").unwrap_or_else(|| format!("{}/{key}.md", h.artifacts));
            let text = read(&story);
            let text = if text.is_empty() {
                format!("# Story {key}\n\nStatus: in-progress\n")
            } else {
                text
            };
            vec![
                code,
                write(
                    &story,
                    with_status(
                        &format!("{text}\n## Change Log\n\n- built in cycle {}\n", h.cycle),
                        "review",
                        false,
                    ),
                ),
            ]
        }
        "retrospective" => {
            let doc = named(prompt, "Retrospective document to write:")
                .expect("the request names the document");
            let sprint_rel = format!("{}/sprint-status.yaml", h.artifacts);
            let sprint: String = read(&sprint_rel)
                .lines()
                .map(|l| {
                    if l.trim_start().starts_with(&format!("{key}:")) {
                        format!("  {key}: done")
                    } else {
                        l.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
                + "\n  - epic: 1\n    action: \"Played: keep the review findings short\"\n    status: open\n";
            vec![
                write(
                    &doc,
                    format!(
                        "---\nepic: 1\nverdict: accepted\nheadless: true\n---\n# Retrospective of {key}\n\n## Assumptions\n\n- run headless by the played model\n"
                    ),
                ),
                write(&sprint_rel, sprint),
            ]
        }
        "code-review" => {
            let (file, frontmatter) = match named(prompt, "Its spec file:") {
                Some(spec) => (spec, true),
                None => (
                    named(prompt, "Its story file:")
                        .unwrap_or_else(|| format!("{}/{key}.md", h.artifacts)),
                    false,
                ),
            };
            let changes_asked = changes.iter().any(|(s, c)| *s == key && *c == h.cycle);
            let status = if changes_asked { "in-progress" } else { "done" };
            let findings = if changes_asked {
                format!(
                    "- [ ] [Review][Patch] cycle {}: handle the empty input in src/{key}.txt\n",
                    h.cycle
                )
            } else {
                "- none: every criterion holds\n".to_string()
            };
            let text = format!("{}\n### Review Findings\n\n{findings}", read(&file));
            // The review skill also syncs the sprint status; baton undoes that write and applies
            // the status with its own writer.
            let sprint_rel = format!("{}/sprint-status.yaml", h.artifacts);
            let sprint: String = read(&sprint_rel)
                .lines()
                .map(|l| {
                    if l.trim_start().starts_with(&format!("{key}:")) {
                        format!("  {key}: {status}")
                    } else {
                        l.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
                + "\n";
            vec![
                write(&file, with_status(&text, status, frontmatter)),
                write(&sprint_rel, sprint),
            ]
        }
        _ => {
            let story = named(prompt, "Create the story file")
                .unwrap_or_else(|| format!("{}/{key}.md", h.artifacts));
            vec![write(
                &story,
                format!("# Story {key}\n\nStatus: ready-for-dev\n\n## Tasks\n\n- [ ] build it\n"),
            )]
        }
    }
}
