//! The `development_status` vocabulary of BMAD's `sprint-status.yaml`: what a key names (epic,
//! story, retrospective) and the statuses of each, in rank order, with the legacy values
//! mapped (`drafted` → `ready-for-dev`, `contexted` → `in-progress`).

/// What a `development_status` key names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyKind {
    /// `epic-N`
    Epic(u32),
    /// `epic-N-retrospective`
    Retrospective(u32),
    /// `{epic}-{story}[letter]-{slug}`
    Story { epic: u32 },
    /// Anything else: kept and reported, never touched.
    Unrecognized,
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
        KeyKind::Unrecognized => return None,
    };
    list.iter().position(|s| *s == mapped)
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
    }
}
