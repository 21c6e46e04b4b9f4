//! The `development_status` vocabulary of BMAD's `sprint-status.yaml`: what a key names (epic,
//! story, retrospective) and the statuses of each, in rank order, with the legacy values
//! mapped (`drafted` → `ready-for-dev`, `contexted` → `in-progress`, and a retrospective's
//! `completed`, legal in the generations before 6.x, → `done`).
//!
//! The key grammar is BMAD 6.12's own (`sprint_plan.py`): `^epic-(\d+)$`,
//! `^epic-(\d+)-retrospective$` and the story prefix match `^(\d+)-(\d+)([a-z]?)-.+` (so
//! `10-1-3-x` is story 1 of epic 10, as BMAD reads it). bmad-loop's retrospective action items
//! (`epic-N-retro-item-M[-slug]`) are known too; they are shown, never run. Every other key is
//! unrecognized: kept byte for byte, reported with its line, never run.

/// What a `development_status` key names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyKind {
    /// `epic-N`
    Epic(u32),
    /// `epic-N-retrospective`
    Retrospective(u32),
    /// `{epic}-{story}[letter]-{slug}`
    Story { epic: u32 },
    /// `epic-N-retro-item-M[-slug]`: a retrospective action item, as bmad-loop writes them.
    RetroItem { epic: u32, item: u32 },
    /// Anything else: kept and reported, never touched.
    Unrecognized,
}

/// BMAD 6.12's key grammar, for hints.
pub const GRAMMAR: &str = "BMAD's keys are epic-N, epic-N-retrospective and N-M-slug for a \
     story, where N and M are numbers and M may end in one lower-case letter (2-6a-slug)";

impl KeyKind {
    /// `epic`, `story`, `retrospective`, `retro-item` or `unrecognized`.
    pub fn as_str(&self) -> &'static str {
        match self {
            KeyKind::Epic(_) => "epic",
            KeyKind::Retrospective(_) => "retrospective",
            KeyKind::Story { .. } => "story",
            KeyKind::RetroItem { .. } => "retro-item",
            KeyKind::Unrecognized => "unrecognized",
        }
    }
}

/// Classifies a key with BMAD's grammar (the retrospective pattern is checked before the epic
/// one).
pub fn classify(key: &str) -> KeyKind {
    if let Some(rest) = key.strip_prefix("epic-") {
        if let Some(n) = rest.strip_suffix("-retrospective").and_then(number) {
            return KeyKind::Retrospective(n);
        }
        if let Some(n) = number(rest) {
            return KeyKind::Epic(n);
        }
        if let Some((epic, item)) = retro_item(rest) {
            return KeyKind::RetroItem { epic, item };
        }
        return KeyKind::Unrecognized;
    }
    story_epic(key).map_or(KeyKind::Unrecognized, |epic| KeyKind::Story { epic })
}

fn number(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `N-retro-item-M` or `N-retro-item-M-slug` (after `epic-`).
fn retro_item(rest: &str) -> Option<(u32, u32)> {
    let (epic, after) = rest.split_once("-retro-item-")?;
    let epic = number(epic)?;
    let (item, slug) = match after.split_once('-') {
        Some((item, slug)) => (item, Some(slug)),
        None => (after, None),
    };
    if slug.is_some_and(str::is_empty) {
        return None;
    }
    Some((epic, number(item)?))
}

/// `^(\d+)-(\d+)([a-z]?)-.+`: the epic number of a story key.
fn story_epic(key: &str) -> Option<u32> {
    let (epic, rest) = key.split_once('-')?;
    let epic = number(epic)?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let mut tail = &rest[digits..];
    if let Some(c) = tail.chars().next()
        && c.is_ascii_lowercase()
    {
        tail = &tail[1..];
    }
    let slug = tail.strip_prefix('-')?;
    (!slug.is_empty()).then_some(epic)
}

/// Accepts `epic-3` or `3`; returns the epic number.
pub fn parse_epic_id(text: &str) -> Option<u32> {
    let t = text.trim();
    number(t.strip_prefix("epic-").unwrap_or(t))
}

pub fn epic_key(n: u32) -> String {
    format!("epic-{n}")
}

/// Story statuses in rank order.
pub const STORY_STATUSES: [&str; 5] = ["backlog", "ready-for-dev", "in-progress", "review", "done"];
pub const EPIC_STATUSES: [&str; 3] = ["backlog", "in-progress", "done"];
pub const RETRO_STATUSES: [&str; 2] = ["optional", "done"];

/// The rank of a status for its kind of key, legacy values mapped; `None` for a value BMAD
/// does not define (a third-party `blocked`, `deferred`, …).
pub fn rank(kind: &KeyKind, status: &str) -> Option<usize> {
    let (list, mapped): (&[&str], &str) = match kind {
        KeyKind::Story { .. } => (
            &STORY_STATUSES,
            if status == "drafted" {
                "ready-for-dev"
            } else {
                status
            },
        ),
        KeyKind::Epic(_) => (
            &EPIC_STATUSES,
            if status == "contexted" {
                "in-progress"
            } else {
                status
            },
        ),
        KeyKind::Retrospective(_) => (
            &RETRO_STATUSES,
            if status == "completed" {
                "done"
            } else {
                status
            },
        ),
        KeyKind::RetroItem { .. } | KeyKind::Unrecognized => return None,
    };
    list.iter().position(|s| *s == mapped)
}

/// Whether `status` is one BMAD defines for this kind of key (legacy values included).
pub fn defined(kind: &KeyKind, status: &str) -> bool {
    rank(kind, status).is_some()
}

/// The statuses BMAD defines for this kind of key, for messages.
pub fn statuses_of(kind: &KeyKind) -> &'static [&'static str] {
    match kind {
        KeyKind::Story { .. } => &STORY_STATUSES,
        KeyKind::Epic(_) => &EPIC_STATUSES,
        KeyKind::Retrospective(_) => &RETRO_STATUSES,
        KeyKind::RetroItem { .. } | KeyKind::Unrecognized => &[],
    }
}

/// The modern status a legacy value stands for, when `status` is one: `drafted` (story) →
/// `ready-for-dev`, `contexted` (epic) → `in-progress` (BMAD 6.12's own map), `completed`
/// (retrospective, legal in the alpha and `.bmad` generations) → `done`.
pub fn legacy(kind: &KeyKind, status: &str) -> Option<&'static str> {
    match (kind, status) {
        (KeyKind::Story { .. }, "drafted") => Some("ready-for-dev"),
        (KeyKind::Epic(_), "contexted") => Some("in-progress"),
        (KeyKind::Retrospective(_), "completed") => Some("done"),
        _ => None,
    }
}

/// Why the loop does not run a key whose status BMAD does not define (`status` is not
/// `defined`), in a sentence: what the value looks like and what the loop does with it.
pub fn not_runnable_reason(kind: &KeyKind, status: &str) -> String {
    let what = match kind {
        KeyKind::Epic(_) => "epic",
        KeyKind::Retrospective(_) => "retrospective",
        _ => "story",
    };
    let known = statuses_of(kind).join(", ");
    let lower = status.trim().to_ascii_lowercase().replace([' ', '_'], "-");
    let looks = if status.trim().is_empty() {
        "an empty value".to_string()
    } else if status.contains('/') || status.ends_with(".yaml") || status.ends_with(".md") {
        "a file path, not a status".to_string()
    } else if lower != status && statuses_of(kind).contains(&lower.as_str()) {
        format!("not a BMAD status as written (BMAD writes `{lower}`, lower-case with hyphens)")
    } else {
        match lower.as_str() {
            "awaiting-operator" => {
                "bmad-loop's mark for a story that waits on its operator".to_string()
            }
            "blocked" | "on-hold" => "a mark that the work waits on something".to_string(),
            "deferred" | "skipped" | "postponed" | "wont-do" | "cancelled" | "canceled" => {
                "a mark that the work was put aside".to_string()
            }
            "split" | "merged" | "superseded" | "replaced" | "obsolete" => {
                "a mark that the work moved to other keys".to_string()
            }
            _ => format!("not a status BMAD defines for {what}s"),
        }
    };
    let does = match kind {
        KeyKind::Epic(_) => {
            "the loop runs none of its stories and changes nothing without asking you first"
        }
        KeyKind::Retrospective(_) => "the loop never runs or changes retrospectives",
        _ => "the loop does not run it and changes nothing without asking you first",
    };
    format!("{looks} ({what} statuses: {known}); {does}")
}

/// The status a legacy value stands for (`drafted` → `ready-for-dev`, …); others unchanged.
pub fn normalized<'a>(kind: &KeyKind, status: &'a str) -> &'a str {
    match (kind, status) {
        (KeyKind::Story { .. }, "drafted") => "ready-for-dev",
        (KeyKind::Epic(_), "contexted") => "in-progress",
        (KeyKind::Retrospective(_), "completed") => "done",
        _ => status,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_bmad_grammar() {
        assert_eq!(classify("epic-1"), KeyKind::Epic(1));
        assert_eq!(
            classify("epic-12-retrospective"),
            KeyKind::Retrospective(12)
        );
        assert_eq!(classify("1-2-user-auth"), KeyKind::Story { epic: 1 });
        assert_eq!(classify("2-6a-split-story"), KeyKind::Story { epic: 2 });
        assert_eq!(classify("2-6a-"), KeyKind::Unrecognized);
        assert_eq!(classify("2-x-story"), KeyKind::Unrecognized);
        assert_eq!(classify("epic-x"), KeyKind::Unrecognized);
        assert_eq!(classify("notes"), KeyKind::Unrecognized);
        // BMAD 6.12's story pattern is a prefix match: 10-1-3-x is story 1 of epic 10.
        assert_eq!(classify("10-1-3-dock-lights"), KeyKind::Story { epic: 10 });
        assert_eq!(classify("0-5-1-setup"), KeyKind::Story { epic: 0 });
        // Outside 6.12's grammar, as the real projects write them.
        for key in [
            "epic-3a",
            "epic-2.5",
            "epic-0-5",
            "epic-3a-retrospective",
            "3a-1-perch-sensor",
            "2.5-1-frost-alarm",
            "15-TD-1-dock-cleanup",
            "8a-01-intake",
            "1-8.1-split",
            "tech-01-log-rotation",
            "batch-01A-import",
            "1-2",
            "epic-1-retro-item-",
            "epic-1-retro-item-x",
        ] {
            assert_eq!(classify(key), KeyKind::Unrecognized, "{key}");
        }
        // bmad-loop's retrospective action items.
        assert_eq!(
            classify("epic-1-retro-item-1"),
            KeyKind::RetroItem { epic: 1, item: 1 }
        );
        assert_eq!(
            classify("epic-4-retro-item-12-split-the-form"),
            KeyKind::RetroItem { epic: 4, item: 12 }
        );
        assert_eq!(parse_epic_id("epic-3a"), None);
        assert_eq!(parse_epic_id("3a"), None);
        assert_eq!(parse_epic_id("epic-3"), Some(3));
        assert_eq!(parse_epic_id("3"), Some(3));
        assert_eq!(parse_epic_id("three"), None);
    }

    #[test]
    fn legacy_values_rank_as_their_modern_names() {
        let story = KeyKind::Story { epic: 1 };
        assert_eq!(rank(&story, "drafted"), rank(&story, "ready-for-dev"));
        assert_eq!(rank(&KeyKind::Epic(1), "contexted"), Some(1));
        assert_eq!(rank(&story, "blocked"), None);
        assert!(rank(&story, "review") > rank(&story, "in-progress"));
        assert_eq!(legacy(&story, "drafted"), Some("ready-for-dev"));
        assert_eq!(legacy(&KeyKind::Epic(1), "contexted"), Some("in-progress"));
        assert_eq!(
            legacy(&KeyKind::Retrospective(1), "completed"),
            Some("done")
        );
        assert_eq!(legacy(&story, "completed"), None);
        assert!(defined(&KeyKind::Retrospective(1), "completed"));
    }

    #[test]
    fn statuses_bmad_does_not_define_are_named_with_a_reason() {
        let story = KeyKind::Story { epic: 1 };
        for status in [
            "blocked",
            "deferred",
            "skipped",
            "split",
            "merged",
            "superseded",
            "on-hold",
            "awaiting-operator",
            "In progress",
            "docs/archive/sprint-status_epics1to13.yaml",
            "completed",
            "pending",
        ] {
            assert!(!defined(&story, status), "{status}");
            let reason = not_runnable_reason(&story, status);
            assert!(reason.contains("does not run it"), "{reason}");
        }
        assert!(not_runnable_reason(&story, "In progress").contains("`in-progress`"));
        assert!(not_runnable_reason(&story, "docs/x.yaml").contains("file path"));
        assert!(not_runnable_reason(&story, "awaiting-operator").contains("bmad-loop"));
        let epic = not_runnable_reason(&KeyKind::Epic(2), "blocked");
        assert!(epic.contains("none of its stories"), "{epic}");
        assert!(!defined(&KeyKind::Epic(2), "blocked"));
        assert!(!defined(&KeyKind::Epic(2), "drafted"));
        assert!(!defined(&KeyKind::RetroItem { epic: 1, item: 1 }, "open"));
    }
}
