//! The `<session_anchor>` block maestro v0.5.36+ puts at the top of `next`'s prompt: the
//! session's intent, scope, boundary contract, the last completed steps' summaries, the
//! sub-goals, the step's own goal, the execution criteria and the caveats and deferred work
//! of earlier steps — read-only grounding against drift. Built as maestro's `buildSessionAnchor`
//! builds it (same sections, caps and wording), for sessions of protocol version "2".
//!
//! maestro cuts texts by UTF-16 code units (`s.slice(0, max)`); so does this, except that it
//! never splits a surrogate pair (maestro would leave half of one, which prints as U+FFFD).

use super::session::{Session, Step};
use serde_json::Value;

/// `s.length <= max ? s : s.slice(0, max) + '…'`, counted in UTF-16 code units.
fn truncate(s: &str, max: usize) -> String {
    let mut units = 0;
    for (i, c) in s.char_indices() {
        if units + c.len_utf16() > max {
            return format!("{}…", &s[..i]);
        }
        units += c.len_utf16();
    }
    s.to_string()
}

/// The first `n` items (each cut at 200), joined with `; `, and `(+k more)`.
fn cap_list(items: &[String], n: usize) -> String {
    let shown: Vec<String> = items.iter().take(n).map(|s| truncate(s, 200)).collect();
    let extra = if items.len() > n {
        format!(" (+{} more)", items.len() - n)
    } else {
        String::new()
    };
    format!("{}{extra}", shown.join("; "))
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// `x ?? '—'` for a JSON value as a template literal shows it.
fn or_dash(v: Option<&Value>, empty_too: bool) -> String {
    match v {
        None | Some(Value::Null) => "—".into(),
        Some(Value::String(s)) if empty_too && s.is_empty() => "—".into(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn text_of<'a>(step: &Step<'a>, key: &str) -> Option<&'a str> {
    step.str(key).filter(|s| !s.is_empty())
}

/// The anchor for `step` of `s`, or `None` when the session has no intent. `cli` spells the
/// completion commands (`maestro ralph`).
pub fn build(cli: &str, s: &Session, step: &Step) -> Option<String> {
    let intent = s.intent().trim();
    if intent.is_empty() {
        return None;
    }
    let d = &s.doc;
    let mut parts: Vec<String> = vec![format!("**Intent**: {}", truncate(intent, 1200))];
    let scope = match d.get("scope_verdict") {
        None | Some(Value::Null) => "unknown".to_string(),
        Some(v) => or_dash(Some(v), false),
    };
    parts.push(format!(
        "**Scope**: {scope} | Phase {} | Milestone: {}",
        or_dash(d.get("phase"), false),
        or_dash(d.get("milestone"), true)
    ));

    if let Some(bc) = d.get("boundary_contract").and_then(Value::as_object) {
        let (inside, outside, constraints) = (
            strings(bc.get("in_scope")),
            strings(bc.get("out_of_scope")),
            strings(bc.get("constraints")),
        );
        let done = bc
            .get("definition_of_done")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        if !inside.is_empty() || !outside.is_empty() || !constraints.is_empty() || done.is_some() {
            let mut lines = vec!["**Boundary Contract**:".to_string()];
            if !inside.is_empty() {
                lines.push(format!("- In scope: {}", cap_list(&inside, 8)));
            }
            if !outside.is_empty() {
                lines.push(format!("- Out of scope: {}", cap_list(&outside, 8)));
            }
            if !constraints.is_empty() {
                lines.push(format!("- Constraints: {}", cap_list(&constraints, 8)));
            }
            if let Some(done) = done {
                lines.push(format!("- Done when: {}", truncate(done, 300)));
            }
            parts.push(lines.join("\n"));
        }
    }

    let steps: Vec<Step> = s.all_steps().collect();
    let summarized: Vec<&Step> = steps
        .iter()
        .filter(|st| st.status() == "completed" && text_of(st, "completion_summary").is_some())
        .collect();
    if !summarized.is_empty() {
        let mut lines = vec!["**Execution Progress**:".to_string()];
        for st in summarized.iter().skip(summarized.len().saturating_sub(5)) {
            lines.push(format!(
                "- [{}] {} ({}): {}",
                st.index(),
                st.skill(),
                st.stage(),
                truncate(text_of(st, "completion_summary").unwrap_or_default(), 200)
            ));
            if let Some(c) = text_of(st, "completion_caveats") {
                lines.push(format!("  ⚠️ {}", truncate(c, 150)));
            }
        }
        let done = steps.iter().filter(|st| st.status() == "completed").count();
        let pending = steps.iter().filter(|st| st.status() == "pending").count();
        lines.push(format!("- Progress: {done} done, {pending} pending"));
        parts.push(lines.join("\n"));
    }

    let goals: Vec<&serde_json::Map<String, Value>> = d
        .get("task_decomposition")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_object).collect())
        .unwrap_or_default();
    let field = |g: &serde_json::Map<String, Value>, k: &str| {
        g.get(k).and_then(Value::as_str).unwrap_or("").to_string()
    };
    let active: Vec<_> = goals
        .iter()
        .filter(|g| g.get("status").and_then(Value::as_str) != Some("superseded"))
        .collect();
    if !active.is_empty() {
        let mut lines = vec!["**Goals Overview**:".to_string()];
        for g in &active {
            let icon = if g.get("status").and_then(Value::as_str) == Some("done") {
                '✓'
            } else {
                '○'
            };
            lines.push(format!(
                "- [{icon}] {}: {} — done_when: {}",
                field(g, "id"),
                truncate(&field(g, "goal"), 100),
                truncate(&field(g, "done_when"), 80)
            ));
        }
        if let Some(n) = d
            .get("goal_changelog")
            .and_then(Value::as_array)
            .map(Vec::len)
            .filter(|n| *n > 0)
        {
            lines.push(format!("- Course corrections: {n} applied"));
        }
        parts.push(lines.join("\n"));
    }

    if let Some(goal_ref) = step.str("goal_ref").filter(|g| !g.is_empty())
        && let Some(g) = goals
            .iter()
            .find(|g| g.get("id").and_then(Value::as_str) == Some(goal_ref))
    {
        let mut lines = vec![format!("**Current Goal** ({goal_ref}):")];
        lines.push(format!("- Goal: {}", truncate(&field(g, "goal"), 300)));
        let boundary = field(g, "boundary");
        if !boundary.is_empty() {
            lines.push(format!("- Boundary: {}", truncate(&boundary, 200)));
        }
        let done_when = field(g, "done_when");
        if !done_when.is_empty() {
            lines.push(format!("- Done when: {}", truncate(&done_when, 200)));
        }
        let origin = field(g, "origin");
        if !origin.is_empty() {
            lines.push(format!("- Origin: {origin}"));
        }
        parts.push(lines.join("\n"));
    }

    let criteria = strings(d.get("execution_criteria"));
    if !criteria.is_empty() {
        parts.push(format!(
            "**Execution Criteria**: {}",
            cap_list(&criteria, 5)
        ));
    }

    let caveats: Vec<String> = steps
        .iter()
        .filter(|st| st.status() == "completed")
        .filter_map(|st| text_of(st, "completion_caveats").map(str::to_owned))
        .collect();
    let deferred: Vec<String> = steps
        .iter()
        .filter(|st| st.status() == "completed")
        .flat_map(|st| strings(st.get("completion_deferred")))
        .collect();
    if !caveats.is_empty() || !deferred.is_empty() {
        let mut lines = vec!["**⚠️ Accumulated Signals**:".to_string()];
        if !caveats.is_empty() {
            let last = &caveats[caveats.len().saturating_sub(3)..];
            lines.push(format!("- Caveats: {}", last.join("; ")));
        }
        if !deferred.is_empty() {
            let last = &deferred[deferred.len().saturating_sub(5)..];
            lines.push(format!("- Deferred work: {}", last.join("; ")));
        }
        lines.push(
            "- **Before proceeding, verify these signals do not conflict with your current task.**"
                .into(),
        );
        parts.push(lines.join("\n"));
    }

    let id = s.str("session_id").unwrap_or(&s.id);
    Some(
        [
            "<session_anchor>".to_string(),
            format!("## Session Anchor — {id}"),
            String::new(),
            parts.join("\n\n"),
            String::new(),
            "<!-- session_anchor: read-only grounding. Honor Intent + Boundary Contract before acting.".into(),
            "     If your work would fall outside in_scope (or hit out_of_scope), stop and report via".into(),
            format!("     `{cli} complete <N> --session {id} --status BLOCKED --reason \"out_of_scope: ...\"` instead of proceeding."),
            "     If Accumulated Signals suggest prior work conflicts with your task, report via".into(),
            format!("     `{cli} complete <N> --session {id} --status BLOCKED --reason \"drift_conflict: ...\"` instead of proceeding. -->"),
            "</session_anchor>".into(),
        ]
        .join("\n"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_cut_by_utf16_units_without_splitting_a_pair() {
        assert_eq!(truncate("abcdef", 6), "abcdef");
        assert_eq!(truncate("abcdef", 4), "abcd…");
        // 😀 is two UTF-16 units: it does not fit in the third and fourth unit's place alone.
        assert_eq!(truncate("ab😀cd", 3), "ab…");
        assert_eq!(truncate("ab😀cd", 4), "ab😀…");
        assert_eq!(
            cap_list(&["a".into(), "b".into(), "c".into()], 2),
            "a; b (+1 more)"
        );
    }
}
