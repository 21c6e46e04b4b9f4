//! Intent breadth (A_DECOMPOSE_TASKS step 1) and the clarification rounds it calls for:
//! broad intents are clarified even with `-y`, medium ones unless `-y`, narrow ones never.

use super::inference::{Breadth, Choice, Clarification, Question, question};
use super::intent::words;
use std::collections::BTreeMap;

/// Words of a broad intent (the seed's list, with its Chinese terms).
const BROAD: &[&str] = &[
    "rewrite",
    "rewriting",
    "overhaul",
    "migrate",
    "migrating",
    "migration",
    "revamp",
    "redo",
    "refactor",
    "refactoring",
    "restructure",
    "rearchitect",
    "entire",
    "whole",
    "comprehensive",
];
const BROAD_ZH: &[&str] = &["重构", "全面", "重写", "重做", "整体", "迁移"];
/// Words that name a bug.
const BUG: &[&str] = &[
    "fix", "fixes", "bug", "typo", "crash", "crashes", "panic", "panics",
];

/// Classifies the intent: broad words first (they win over a named target, as in the seed's
/// table order), then a named file, function or bug, or "add Y to Z", else medium.
pub fn classify(intent: &str) -> Breadth {
    let ws = words(intent);
    if ws.iter().any(|w| BROAD.contains(&w.as_str())) || BROAD_ZH.iter().any(|t| intent.contains(t))
    {
        return Breadth::Broad;
    }
    let tokens: Vec<&str> = intent
        .split_whitespace()
        .map(|t| {
            t.trim_matches(|c: char| matches!(c, ',' | ';' | ':' | '"' | '\'' | '.' | '!' | '?'))
        })
        .collect();
    let names_file = tokens.iter().any(|t| is_file_name(t));
    let names_function = tokens.iter().any(|t| {
        t.contains("()")
            || t.contains("::")
            || (t.len() > 2 && t.starts_with('`') && t.ends_with('`'))
    });
    let names_bug = ws.iter().any(|w| BUG.contains(&w.as_str()))
        || tokens.iter().any(|t| {
            t.len() > 1 && t.starts_with('#') && t[1..].bytes().all(|b| b.is_ascii_digit())
        });
    let add_to = ws.first().is_some_and(|w| w == "add") && ws.iter().skip(2).any(|w| w == "to");
    if names_file || names_function || names_bug || add_to {
        Breadth::Narrow
    } else {
        Breadth::Medium
    }
}

/// `src/main.rs`, `parser.py`, `Cargo.toml`: a path, or a name with a short alphabetic
/// extension (not a version such as `1.2`).
fn is_file_name(t: &str) -> bool {
    let t = t.trim_matches('`');
    if t.contains('/') && t.chars().any(char::is_alphanumeric) && !t.contains("://") {
        return true;
    }
    match t.rsplit_once('.') {
        Some((name, ext)) => {
            !name.is_empty()
                && (1..=5).contains(&ext.len())
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
                && ext.chars().any(|c| c.is_ascii_alphabetic())
                && name.chars().any(char::is_alphanumeric)
        }
        None => false,
    }
}

/// Whether the rounds are asked: broad always (even with `-y`), medium unless `-y`.
pub fn must_clarify(breadth: Breadth, auto: bool) -> bool {
    match breadth {
        Breadth::Broad => true,
        Breadth::Medium => !auto,
        Breadth::Narrow => false,
    }
}

/// The answers given so far, and the rounds still to ask (scope, constraints, done), their
/// scope suggestions pre-filled with the project's top-level folders.
pub fn rounds(
    breadth: Breadth,
    auto: bool,
    answers: &BTreeMap<String, String>,
    folders: &[String],
) -> (Clarification, Vec<Question>) {
    let answer = |id: &str| {
        answers
            .get(id)
            .map(|a| a.trim().to_string())
            .filter(|a| !a.is_empty())
    };
    let clarification = Clarification {
        scope: answer(question::CLARIFY_SCOPE),
        constraints: answer(question::CLARIFY_CONSTRAINTS),
        done: answer(question::CLARIFY_DONE),
    };
    if !must_clarify(breadth, auto) {
        return (clarification, Vec::new());
    }
    let even_with_auto = breadth == Breadth::Broad;
    let choice = |value: &str, description: &str| Choice {
        value: value.into(),
        label: value.into(),
        description: description.into(),
    };
    let mut questions = Vec::new();
    if clarification.scope.is_none() {
        let mut options: Vec<Choice> = folders
            .iter()
            .take(6)
            .map(|f| choice(&format!("{f}/ only"), "limit the work to this folder"))
            .collect();
        options.push(choice("the whole project", "no folder is out of scope"));
        questions.push(Question {
            id: question::CLARIFY_SCOPE.into(),
            text: "Which folders, files or layers are in scope, and what is explicitly out?".into(),
            options,
            free_text: true,
            even_with_auto,
        });
    }
    if clarification.constraints.is_none() {
        questions.push(Question {
            id: question::CLARIFY_CONSTRAINTS.into(),
            text: "Constraints: backward compatibility, a frozen public API, behaviour or performance budgets, a test bar?".into(),
            options: vec![
                choice("keep backward compatibility and the public API", "no breaking change"),
                choice("no constraint beyond the tests passing", "breaking changes allowed"),
            ],
            free_text: true,
            even_with_auto,
        });
    }
    if clarification.done.is_none() {
        questions.push(Question {
            id: question::CLARIFY_DONE.into(),
            text: "What observable result means done?".into(),
            options: vec![
                choice(
                    "all tests pass and behaviour is unchanged",
                    "a refactoring's bar",
                ),
                choice(
                    "all tests pass and the new behaviour has tests",
                    "a feature's bar",
                ),
            ],
            free_text: true,
            even_with_auto,
        });
    }
    (clarification, questions)
}
