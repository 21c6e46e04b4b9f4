//! What the intent's words say: an explicit phase number (`phase 2`, `P3`), a phrase that names
//! a phase (its slug), and the stage overrides of A_INFER_POSITION (brainstorm and blueprint
//! words). Plain word matching, deterministic, bounded by the intent's length.

use super::state_file::phase_number_str;

/// Only this much of the intent is looked at (an intent is a sentence, not a document).
pub const MAX_INTENT_CHARS: usize = 4_000;

/// The intent in lowercase words (letters and digits; everything else separates).
pub fn words(intent: &str) -> Vec<String> {
    head(intent)
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

fn head(intent: &str) -> &str {
    match intent.char_indices().nth(MAX_INTENT_CHARS) {
        Some((i, _)) => &intent[..i],
        None => intent,
    }
}

/// The distinct phase numbers the intent names: `phase 2`, `phase2`, `Phase  12`, `P3`.
pub fn explicit_phases(intent: &str) -> Vec<u64> {
    let ws = words(intent);
    let mut out = Vec::new();
    for (i, w) in ws.iter().enumerate() {
        let n = if w == "phase" {
            ws.get(i + 1).and_then(|next| phase_number_str(next))
        } else if let Some(rest) = w.strip_prefix("phase") {
            phase_number_str(rest)
        } else if let Some(rest) = w.strip_prefix('p') {
            phase_number_str(rest)
        } else {
            None
        };
        if let Some(n) = n
            && !out.contains(&n)
        {
            out.push(n);
        }
    }
    out
}

/// Words that carry no subject: verbs of doing, articles, and "go on" words. What remains of an
/// intent after them is the phrase that may name a phase.
const FILLER: &[&str] = &[
    "a",
    "an",
    "the",
    "to",
    "of",
    "in",
    "on",
    "for",
    "and",
    "or",
    "with",
    "into",
    "from",
    "at",
    "by",
    "this",
    "that",
    "these",
    "those",
    "it",
    "its",
    "is",
    "be",
    "please",
    "let",
    "lets",
    "us",
    "we",
    "our",
    "my",
    "me",
    "i",
    "do",
    "make",
    "get",
    "add",
    "implement",
    "build",
    "create",
    "write",
    "fix",
    "finish",
    "complete",
    "continue",
    "resume",
    "keep",
    "going",
    "go",
    "next",
    "work",
    "current",
    "phase",
    "step",
    "stage",
    "milestone",
    "start",
    "run",
    "rest",
    "remaining",
    "up",
    "now",
    "new",
];

/// The phrase left when filler words and phase numbers are dropped, as a slug
/// (`dark-mode-toggle`); `None` when nothing remains ("continue", "finish phase 2").
pub fn derived_slug(intent: &str) -> Option<String> {
    let kept: Vec<String> = words(intent)
        .into_iter()
        .filter(|w| !FILLER.contains(&w.as_str()))
        .filter(|w| phase_number_str(w).is_none())
        .filter(|w| !(w.starts_with('p') && phase_number_str(&w[1..]).is_some()))
        .take(6)
        .collect();
    (!kept.is_empty()).then(|| kept.join("-"))
}

/// Whether every word of `slug` (split on `-`, `_`, spaces; numbers ignored) is a word of the
/// intent. An empty slug matches nothing.
pub fn slug_matches(slug: &str, intent_words: &[String]) -> bool {
    let parts: Vec<String> = slug
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty() && phase_number_str(w).is_none())
        .map(str::to_string)
        .collect();
    !parts.is_empty() && parts.iter().all(|p| intent_words.contains(p))
}

/// The slug in an artifact directory name `{YYYYMMDD}-{type}-[P{N}-|M{N}-]{slug}` (any leading
/// path is dropped); `None` when the name has no slug part.
pub fn artifact_slug(path: &str) -> Option<String> {
    let name = path.trim_end_matches('/').rsplit('/').next()?;
    let mut parts = name.split('-');
    let date = parts.next()?;
    if date.len() != 8 || !date.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    parts.next()?; // the artifact type
    let mut rest: Vec<&str> = parts.collect();
    if let Some(first) = rest.first() {
        let numbered = |p: &str| {
            first
                .strip_prefix(p)
                .is_some_and(|n| phase_number_str(n).is_some())
        };
        if numbered("P") || numbered("M") {
            rest.remove(0);
        }
    }
    (!rest.is_empty()).then(|| rest.join("-"))
}

/// A stage the intent asks for by name (A_INFER_POSITION's first two overrides).
pub fn stage_override(intent: &str) -> Option<&'static str> {
    let ws = words(intent);
    let has = |list: &[&str]| ws.iter().any(|w| list.contains(&w.as_str()));
    let text = head(intent).to_lowercase();
    let has_text = |list: &[&str]| list.iter().any(|t| text.contains(t));
    if has(&[
        "brainstorm",
        "brainstorming",
        "ideate",
        "ideation",
        "explore",
    ]) || has_text(&["头脑风暴", "探索", "设计思路"])
    {
        return Some("brainstorm");
    }
    // Not a bare "spec": "fix the spec parser" is no request for a blueprint.
    if has(&["blueprint", "specification"])
        || has_text(&["规格", "正式文档", "spec-generate", "7-phase"])
    {
        return Some("blueprint");
    }
    None
}

/// "new feature X" (新功能): a medium intent the seed still sends to the macro analysis.
pub fn names_new_feature(intent: &str) -> bool {
    let ws = words(intent);
    ws.windows(2).any(|w| w[0] == "new" && w[1] == "feature") || head(intent).contains("新功能")
}
