//! Nothing in `sprint-status.yaml` is hidden: what the board and the plan cannot show as
//! epics and stories is listed here, with its line: keys outside BMAD's grammar
//! (`unrecognized`), keys whose value BMAD does not define (`notRunnable`, with the reason),
//! legacy values read as their modern names (`legacyMapped`) and bmad-loop's retrospective
//! action items (`retroItems`). The epic and story arguments of the commands are checked here
//! against the same grammar, so a key that is in the file is never called missing.

use super::error::{EpicError, Result};
use baton_bmad::keys::{self, KeyKind};
use baton_bmad::sprint::SprintStatus;
use serde::Serialize;

/// A key outside BMAD's grammar: kept byte for byte, never run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Unrecognized {
    pub key: String,
    pub status: String,
    /// 1-based line in sprint-status.yaml.
    pub line: usize,
}

/// An epic, story or retrospective whose value BMAD does not define.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NotRunnable {
    pub key: String,
    pub status: String,
    /// What the value looks like and what the loop does with it.
    pub reason: String,
    /// `epic`, `story` or `retrospective`.
    pub kind: &'static str,
    pub line: usize,
}

/// A legacy value the loop reads as its modern name (and never writes back).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LegacyMapped {
    pub key: String,
    pub status: String,
    pub mapped_to: &'static str,
    pub line: usize,
}

/// A retrospective action item (`epic-N-retro-item-M`, bmad-loop): shown, never run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RetroItem {
    pub key: String,
    pub epic: u32,
    pub status: String,
    pub line: usize,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Findings {
    /// Every key of the file outside BMAD's grammar (whatever epic was asked for).
    pub unrecognized: Vec<Unrecognized>,
    /// Of the epic asked for (or of every epic).
    pub not_runnable: Vec<NotRunnable>,
    pub legacy_mapped: Vec<LegacyMapped>,
    pub retro_items: Vec<RetroItem>,
    /// Sentences for a person, when the file as a whole needs one (no key BMAD's loop can run).
    pub warnings: Vec<String>,
}

fn described(kind: &KeyKind) -> &'static str {
    match kind {
        KeyKind::Epic(_) => "an epic",
        KeyKind::Retrospective(_) => "a retrospective",
        KeyKind::Story { .. } => "a story",
        KeyKind::RetroItem { .. } => "a retrospective action item",
        KeyKind::Unrecognized => "a key outside BMAD's grammar",
    }
}

fn epic_of(kind: &KeyKind) -> Option<u32> {
    match kind {
        KeyKind::Epic(n) | KeyKind::Retrospective(n) => Some(*n),
        KeyKind::Story { epic } | KeyKind::RetroItem { epic, .. } => Some(*epic),
        KeyKind::Unrecognized => None,
    }
}

/// What `sprint` holds besides runnable epics and stories: of epic `epic`, or of all.
pub fn of(sprint: &SprintStatus, epic: Option<u32>) -> Findings {
    let mut f = Findings::default();
    let mut recognized = 0;
    for e in sprint.entries() {
        if e.kind == KeyKind::Unrecognized {
            f.unrecognized.push(Unrecognized {
                key: e.key.clone(),
                status: e.status.clone(),
                line: e.line,
            });
            continue;
        }
        recognized += 1;
        let Some(n) = epic_of(&e.kind) else { continue };
        if epic.is_some_and(|w| w != n) {
            continue;
        }
        if let KeyKind::RetroItem { epic, .. } = e.kind {
            f.retro_items.push(RetroItem {
                key: e.key.clone(),
                epic,
                status: e.status.clone(),
                line: e.line,
            });
        } else if let Some(mapped_to) = keys::legacy(&e.kind, &e.status) {
            f.legacy_mapped.push(LegacyMapped {
                key: e.key.clone(),
                status: e.status.clone(),
                mapped_to,
                line: e.line,
            });
        } else if !keys::defined(&e.kind, &e.status) {
            f.not_runnable.push(NotRunnable {
                key: e.key.clone(),
                status: e.status.clone(),
                reason: keys::not_runnable_reason(&e.kind, &e.status),
                kind: e.kind.as_str(),
                line: e.line,
            });
        }
    }
    if recognized == 0 {
        f.warnings.push(format!(
            "none of the {} keys of {} follows BMAD's key grammar, so the loop runs none of them \
             (each is listed as unrecognized); {}",
            f.unrecognized.len(),
            sprint.shown(),
            keys::GRAMMAR
        ));
    }
    f
}

/// The entry of `key` outside the grammar, as an error that says where it is.
fn outside_grammar(sprint: &SprintStatus, key: &str, line: usize, asked: &str) -> EpicError {
    EpicError::usage(
        "EPIC_KEY_OUTSIDE_GRAMMAR",
        format!(
            "{asked:?}: the key {key} is in {} line {line} but outside BMAD's key grammar, so the \
             loop does not run it",
            sprint.shown()
        ),
    )
    .hint(format!(
        "{}; rename the key (and its stories' keys) in sprint-status.yaml to follow it, as BMAD's \
         sprint-planning would write it, then run the command again; `baton epic status` lists \
         every key outside the grammar",
        keys::GRAMMAR
    ))
}

/// The epic a command names (`epic-N` or `N`). A name outside BMAD's grammar is refused with
/// the grammar, and with its line when the file has such a key (`epic-3a`).
pub fn epic_arg(sprint: &SprintStatus, text: &str) -> Result<u32> {
    if let Some(n) = keys::parse_epic_id(text) {
        return Ok(n);
    }
    let t = text.trim();
    let candidates = [t.to_string(), format!("epic-{t}")];
    for c in &candidates {
        if let Some(e) = sprint.get(c) {
            if e.kind == KeyKind::Unrecognized {
                return Err(outside_grammar(sprint, &e.key, e.line, text));
            }
            // A story, retrospective or action item named where an epic is wanted.
            if let Some(n) = epic_of(&e.kind) {
                return Err(EpicError::usage(
                    "EPIC_ID_INVALID",
                    format!(
                        "{text:?} is {} (line {}), not an epic",
                        described(&e.kind),
                        e.line
                    ),
                )
                .hint(format!(
                    "name the epic: epic-{n} (or {n}); one story runs with `baton epic story <KEY>`"
                )));
            }
        }
    }
    Err(
        EpicError::usage("EPIC_ID_INVALID", format!("{text:?} is not an epic id")).hint(format!(
            "name the epic as in sprint-status.yaml: epic-1 (or 1); {}",
            keys::GRAMMAR
        )),
    )
}

/// The epic of the story a command names. A key in the file but outside the grammar, or of
/// another kind, is refused as such (never "has no story").
pub fn story_arg(sprint: &SprintStatus, key: &str) -> Result<u32> {
    match sprint.get(key) {
        Some(e) => match e.kind {
            KeyKind::Story { epic } => Ok(epic),
            KeyKind::Unrecognized => Err(outside_grammar(sprint, &e.key, e.line, key)),
            _ => Err(EpicError::usage(
                "STORY_NOT_FOUND",
                format!(
                    "{key} is {} in {} (line {}), not a story",
                    described(&e.kind),
                    sprint.shown(),
                    e.line
                ),
            )
            .hint("story keys look like 1-2-user-login; `baton epic status` lists them")),
        },
        None => {
            let hint = if matches!(keys::classify(key), KeyKind::Story { .. }) {
                "story keys are written as in sprint-status.yaml; `baton epic status` lists them"
                    .to_string()
            } else {
                format!("{}; `baton epic status` lists the stories", keys::GRAMMAR)
            };
            Err(EpicError::usage(
                "STORY_NOT_FOUND",
                format!("{} has no story {key}", sprint.shown()),
            )
            .hint(hint))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "development_status:\n  epic-1: contexted\n  1-1-a: drafted\n  1-2-b: blocked\n  1-3-c: \"In progress\"\n  epic-1-retrospective: completed\n  epic-1-retro-item-1: open\n  epic-2: blocked\n  2-1-x: backlog\n  epic-2-retrospective: skipped\n  epic-3a: in-progress\n  3a-1-perch: ready-for-dev\n  2.5-1-frost: backlog\n";

    fn sprint() -> SprintStatus {
        SprintStatus::parse("impl/sprint-status.yaml", TEXT.to_string()).unwrap()
    }

    #[test]
    fn every_key_is_either_runnable_or_listed_with_its_line() {
        let f = of(&sprint(), None);
        let unrecognized: Vec<(&str, &str, usize)> = f
            .unrecognized
            .iter()
            .map(|u| (u.key.as_str(), u.status.as_str(), u.line))
            .collect();
        assert_eq!(
            unrecognized,
            [
                ("epic-3a", "in-progress", 11),
                ("3a-1-perch", "ready-for-dev", 12),
                ("2.5-1-frost", "backlog", 13)
            ]
        );
        let odd: Vec<(&str, &str, &str, usize)> = f
            .not_runnable
            .iter()
            .map(|n| (n.key.as_str(), n.status.as_str(), n.kind, n.line))
            .collect();
        assert_eq!(
            odd,
            [
                ("1-2-b", "blocked", "story", 4),
                ("1-3-c", "In progress", "story", 5),
                ("epic-2", "blocked", "epic", 8),
                ("epic-2-retrospective", "skipped", "retrospective", 10)
            ]
        );
        let mapped: Vec<(&str, &str)> = f
            .legacy_mapped
            .iter()
            .map(|m| (m.key.as_str(), m.mapped_to))
            .collect();
        assert_eq!(
            mapped,
            [
                ("epic-1", "in-progress"),
                ("1-1-a", "ready-for-dev"),
                ("epic-1-retrospective", "done")
            ]
        );
        assert_eq!(f.retro_items.len(), 1);
        assert_eq!(f.retro_items[0].line, 7);
        assert!(f.warnings.is_empty());
        // One epic: its own keys, and every unrecognized key of the file.
        let two = of(&sprint(), Some(2));
        assert_eq!(two.not_runnable.len(), 2);
        assert_eq!(two.unrecognized.len(), 3);
        assert!(two.legacy_mapped.is_empty() && two.retro_items.is_empty());
    }

    #[test]
    fn a_file_with_only_unrecognized_keys_says_so() {
        let s = SprintStatus::parse(
            "s.yaml",
            "development_status:\n  epic-8a: in-progress\n  8a-01-intake: backlog\n".into(),
        )
        .unwrap();
        let f = of(&s, None);
        assert_eq!(f.unrecognized.len(), 2);
        assert_eq!(f.warnings.len(), 1);
        assert!(f.warnings[0].contains("none of the 2 keys of s.yaml"));
    }

    #[test]
    fn arguments_outside_the_grammar_are_refused_with_the_grammar_and_the_line() {
        let s = sprint();
        assert_eq!(epic_arg(&s, "epic-2").unwrap(), 2);
        assert_eq!(epic_arg(&s, "2").unwrap(), 2);
        for arg in ["3a", "epic-3a"] {
            let e = epic_arg(&s, arg).unwrap_err();
            assert_eq!(e.code, "EPIC_KEY_OUTSIDE_GRAMMAR");
            assert!(
                e.message
                    .contains("epic-3a is in impl/sprint-status.yaml line 11"),
                "{}",
                e.message
            );
            assert!(e.hint.unwrap().contains("epic-N, epic-N-retrospective"));
        }
        let e = epic_arg(&s, "2.5").unwrap_err();
        assert_eq!(e.code, "EPIC_ID_INVALID");
        assert!(e.hint.unwrap().contains("N-M-slug"));
        assert_eq!(epic_arg(&s, "2-1-x").unwrap_err().code, "EPIC_ID_INVALID");

        assert_eq!(story_arg(&s, "2-1-x").unwrap(), 2);
        let e = story_arg(&s, "3a-1-perch").unwrap_err();
        assert_eq!(e.code, "EPIC_KEY_OUTSIDE_GRAMMAR");
        assert!(e.message.contains("line 12"), "{}", e.message);
        assert!(!e.message.contains("has no story"));
        let e = story_arg(&s, "epic-2").unwrap_err();
        assert_eq!(e.code, "STORY_NOT_FOUND");
        assert!(e.message.contains("epic-2 is an epic in"), "{}", e.message);
        let e = story_arg(&s, "9-9-missing").unwrap_err();
        assert!(e.message.contains("has no story 9-9-missing"));
    }
}
