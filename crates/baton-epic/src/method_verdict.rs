//! How the loop judges a phase run of an installed BMAD skill or workflow: from the files the
//! skill writes, never from what the model says.
//!
//! Before the run, the story's files are marked (path and digest): its spec files
//! (`spec-{key}.md`, `spec-{e}-{s}-….md` in the artifacts folder, as `bmad-build` and
//! `bmad-build-auto` name them), its story file, and any `bmad-build-auto-result-*.md`. After
//! the run, only a file the run changed (or made) counts, with the status it declares
//! (frontmatter `status:` or a `Status:` line), and the value the run wrote for the story in
//! `sprint-status.yaml` (read before that write was undone).
//!
//! - dev: `blocked` pauses the loop with the file's blocking condition (no retry: the skill
//!   halts the same way again until a person changes the spec); `done`, `review` or
//!   `in-review` is a finished build; anything else is an incomplete phase (retried once).
//! - code-review: `{key}.review.json` when the run wrote one; else `done` approves and
//!   `in-progress` asks for changes, with the `Review Findings` the skill appended as the
//!   developer's instruction.

use super::error::{EpicError, Result};
use super::method::files::Reader;
use super::progress::{InFlight, Mark};
use crate::ctx::Ctx;
use baton_bmad::phase::Phase;
use baton_epic_state::review::{self, Review};
use sha2::{Digest, Sha256};

/// Longest review summary taken from a findings section.
const MAX_SUMMARY: usize = 4000;
/// Longest file read for a verdict.
const MAX_FILE: u64 = 1 << 20;

/// What the files say about a finished phase run of an installed method.
pub(super) enum Judged {
    /// The phase is not run by an installed method (or this phase is judged elsewhere).
    NotMethod,
    Passed,
    /// Not finished: retried once, then the loop pauses.
    Failed(EpicError),
    /// The skill halted: the loop pauses until a person acts.
    Blocked(EpicError),
}

/// A story file after the run.
struct Seen {
    path: String,
    changed: bool,
    status: Option<String>,
    text: String,
}

fn digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The part of a status the loop compares (`'Done'` → `done`, `In review` → `in-review`).
fn norm(status: &str) -> String {
    status
        .trim()
        .trim_matches(['"', '\''])
        .to_ascii_lowercase()
        .replace([' ', '_'], "-")
}

/// The text under the first heading that names review findings, up to the next heading of the
/// same or a higher level.
fn findings_section(text: &str) -> Option<String> {
    let mut lines = text.lines();
    let level = loop {
        let line = lines.next()?;
        let t = line.trim_start();
        if t.starts_with('#') && t.to_ascii_lowercase().contains("review findings") {
            break t.chars().take_while(|c| *c == '#').count();
        }
    };
    let mut out = String::new();
    for line in lines {
        let t = line.trim_start();
        let hashes = t.chars().take_while(|c| *c == '#').count();
        if hashes > 0 && hashes <= level && t[hashes..].starts_with(' ') {
            break;
        }
        out.push_str(line);
        out.push('\n');
        if out.len() > MAX_SUMMARY {
            break;
        }
    }
    let out: String = out.trim().chars().take(MAX_SUMMARY).collect();
    (!out.is_empty()).then_some(out)
}

/// A `Blocking condition:` line of a file.
fn blocking_condition(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let t = l.trim().trim_start_matches(['-', '*', ' ']);
        let lower = t.to_ascii_lowercase();
        lower
            .starts_with("blocking condition")
            .then(|| t.split_once(':').map(|(_, v)| v.trim().to_string()))
            .flatten()
            .filter(|v| !v.is_empty())
    })
}

impl Ctx<'_> {
    /// The spec files of story `key` in the artifacts folder (project-relative, sorted).
    pub(super) fn spec_files(&self, key: &str) -> Vec<String> {
        let mut parts = key.splitn(3, '-');
        let prefix = match (parts.next(), parts.next(), parts.next()) {
            (Some(e), Some(s), Some(_)) => format!("spec-{e}-{s}-"),
            _ => format!("spec-{key}-"),
        };
        let exact = format!("spec-{key}.md");
        let mut out: Vec<String> = self
            .layout
            .dir
            .names(10_000)
            .into_iter()
            .filter(|n| *n == exact || (n.starts_with(&prefix) && n.ends_with(".md")))
            .map(|n| self.layout.rel_file(&n))
            .collect();
        out.sort();
        out
    }

    /// Every file that can say where story `key` stands after a run.
    fn evidence_paths(&self, key: &str) -> Vec<String> {
        let mut out = self.spec_files(key);
        let results = self
            .layout
            .dir
            .names(10_000)
            .into_iter()
            .filter(|n| n.starts_with("bmad-build-auto-result-") && n.ends_with(".md"))
            .map(|n| self.layout.rel_file(&n));
        out.extend(results);
        if let Some(sp) = self.progress.story.as_ref().filter(|s| s.key == key)
            && let Some(file) = self.variables(sp).get("storyFile").and_then(|v| v.as_str())
            && !file.is_empty()
        {
            out.push(file.to_string());
        }
        out.sort();
        out.dedup();
        out
    }

    /// The story's files as they are now (marked before a run).
    pub(super) fn marks(&self, key: &str) -> Vec<Mark> {
        let Ok(reader) = Reader::open(&self.layout.project) else {
            return Vec::new();
        };
        self.evidence_paths(key)
            .into_iter()
            .map(|path| {
                let sha256 = reader
                    .bytes(&path, MAX_FILE)
                    .ok()
                    .flatten()
                    .map(|b| digest(&b));
                Mark { path, sha256 }
            })
            .collect()
    }

    fn inflight(&self) -> Option<&InFlight> {
        self.progress.story.as_ref().and_then(|s| s.run.as_ref())
    }

    /// The story's files now, each said changed when the run changed or made it.
    fn seen(&self, key: &str) -> Result<Vec<Seen>> {
        let reader = Reader::open(&self.layout.project)?;
        let before: Vec<Mark> = self
            .inflight()
            .and_then(|i| i.marks.clone())
            .unwrap_or_default();
        let mut paths = self.evidence_paths(key);
        paths.extend(before.iter().map(|m| m.path.clone()));
        paths.sort();
        paths.dedup();
        let mut out = Vec::new();
        for path in paths {
            let Some(bytes) = reader.bytes(&path, MAX_FILE)? else {
                continue;
            };
            let now = digest(&bytes);
            let was = before
                .iter()
                .find(|m| m.path == path)
                .and_then(|m| m.sha256.clone());
            let text = String::from_utf8_lossy(&bytes).into_owned();
            out.push(Seen {
                changed: was.as_deref() != Some(now.as_str()),
                status: baton_bmad::story_files::declared_status(&text).map(|(s, _)| s),
                path,
                text,
            });
        }
        Ok(out)
    }

    /// The installed method of `phase`, if one runs it.
    fn method_name(&self, phase: Phase) -> Option<String> {
        self.specs
            .get(&phase)
            .and_then(|s| s.method.as_ref())
            .map(|m| m.installed.name.clone())
    }

    /// The verdict of a finished phase run of an installed method, from the story's files.
    pub(super) fn judge_method(&self, phase: Phase, key: &str) -> Result<Judged> {
        let Some(name) = self.method_name(phase) else {
            return Ok(Judged::NotMethod);
        };
        if !phase.is_implementation() {
            return Ok(Judged::NotMethod);
        }
        let seen = self.seen(key)?;
        let changed: Vec<&Seen> = seen.iter().filter(|s| s.changed).collect();
        if let Some(b) = changed
            .iter()
            .find(|s| s.status.as_deref().map(norm).as_deref() == Some("blocked"))
        {
            let why = blocking_condition(&b.text)
                .map(|c| format!(" (blocking condition: {c})"))
                .unwrap_or_default();
            return Ok(Judged::Blocked(
                EpicError::failure(
                    "EPIC_PHASE_BLOCKED",
                    format!("{name} halted the dev phase of {key}: {} says blocked{why}", b.path),
                )
                .hint(format!(
                    "resolve what it names, set the status in {} back (to ready-for-dev or in-progress), then `baton epic resume`",
                    b.path
                )),
            ));
        }
        let finished = |s: &str| matches!(norm(s).as_str(), "done" | "review" | "in-review");
        let by_file = changed
            .iter()
            .any(|s| s.status.as_deref().is_some_and(finished));
        let by_sprint = self
            .inflight()
            .and_then(|i| i.sprint_wrote.as_deref())
            .is_some_and(finished);
        if by_file || by_sprint {
            return Ok(Judged::Passed);
        }
        let said: Vec<String> = seen
            .iter()
            .map(|s| {
                format!(
                    "{} {}{}",
                    s.path,
                    s.status.as_deref().unwrap_or("(no status)"),
                    if s.changed { "" } else { ", unchanged" }
                )
            })
            .collect();
        Ok(Judged::Failed(EpicError::failure(
            "EPIC_PHASE_INCOMPLETE",
            format!(
                "the dev phase ({name}) ended without moving story {key} on: {}; a finished build sets its spec's status to done, or its story's to review",
                if said.is_empty() {
                    "no story or spec file".to_string()
                } else {
                    said.join("; ")
                }
            ),
        )))
    }

    /// The code-review verdict: `{key}.review.json`; for an installed method without one, the
    /// status the skill set in the story's files (or in sprint-status.yaml).
    pub(super) fn review_of(&self, key: &str) -> Result<Review> {
        if let Some(r) = Review::load(&self.layout.dir, &self.layout.rel, key)? {
            return Ok(r);
        }
        let json = self.layout.rel_file(&format!("{key}{}", review::SUFFIX));
        let Some(name) = self.method_name(Phase::CodeReview) else {
            return Err(EpicError::failure(
                "EPIC_PHASE_OUTPUT_MISSING",
                format!("the code-review phase completed without {json}"),
            ));
        };
        let seen = self.seen(key)?;
        let set = |s: &Seen| s.status.as_deref().map(norm);
        let verdict = seen
            .iter()
            .filter(|s| s.changed)
            .find_map(|s| match set(s).as_deref() {
                Some("done") => Some((true, Some(s))),
                Some("in-progress" | "ready-for-dev") => Some((false, Some(s))),
                _ => None,
            })
            .or_else(|| {
                match self
                    .inflight()
                    .and_then(|i| i.sprint_wrote.as_deref())
                    .map(norm)
                    .as_deref()
                {
                    Some("done") => Some((true, None)),
                    Some("in-progress" | "ready-for-dev") => Some((false, None)),
                    _ => None,
                }
            });
        let Some((approved, file)) = verdict else {
            return Err(EpicError::failure(
                "EPIC_PHASE_OUTPUT_MISSING",
                format!(
                    "the code-review phase ({name}) completed without a verdict: no {json}, and it set story {key} neither to done nor to in-progress (in its story or spec file, or in sprint-status.yaml)"
                ),
            ));
        };
        let findings = seen
            .iter()
            .filter(|s| s.changed)
            .find_map(|s| findings_section(&s.text));
        let source = match file {
            Some(f) => format!(
                "{} says {}",
                f.path,
                if approved { "done" } else { "in-progress" }
            ),
            None => format!(
                "it set sprint-status.yaml to {}",
                if approved { "done" } else { "in-progress" }
            ),
        };
        let summary = match findings {
            Some(f) => format!("{name}: {source}. Review findings:\n{f}"),
            None => format!("{name}: {source}"),
        };
        Ok(Review {
            approved,
            summary: summary.chars().take(MAX_SUMMARY).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_and_blocking_conditions_are_read_from_the_text() {
        let text = "# Spec\n\n## Tasks\n- [x] a\n\n### Review Findings\n\n- [ ] [Review][Patch] handle empty input\n#### detail\nmore\n### Next\nno\n";
        assert_eq!(
            findings_section(text).unwrap(),
            "- [ ] [Review][Patch] handle empty input\n#### detail\nmore"
        );
        assert_eq!(findings_section("# none\n"), None);
        assert_eq!(
            blocking_condition("Status: blocked\nBlocking condition: intent gap\n").as_deref(),
            Some("intent gap")
        );
        assert_eq!(norm("'In Review'"), "in-review");
        assert_eq!(digest(b"").len(), 64);
    }
}
