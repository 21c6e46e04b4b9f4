//! Lifecycle sessions: the list of a project's sessions, and one session as seed 003's board —
//! every step with its icon (`✓` confirmed, `▸` active, `✗` failed, `—` skipped, `◆` a
//! decision), the active step, the sub-goals and the decisions log. Input is ralph's stable
//! read model (`session --json`, [`summary_json`]) and `decisions.ndjson` records.
//!
//! [`summary_json`]: baton_lifecycle::ralph::verbs::session::summary_json

use super::html::{clip, esc, phase_badge, push_esc, query};
use super::shown_path::Roots;
use serde_json::Value;
use std::fmt::Write as _;

const TEXT_CHARS: usize = 2_000;

fn s<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Where a session stands now, as `baton session status` says it: `position` when the
/// handler put it in (from the loaded session), else from its status and where it was built.
fn position(v: &Value) -> String {
    match v.get("position").and_then(Value::as_str) {
        Some(p) => p.to_string(),
        None => baton_lifecycle::session::position::describe(
            s(v, "status"),
            s(v, "lifecycle_position"),
            None,
        ),
    }
}

fn n(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

/// The list of sessions of `project` (their summaries, newest first as given).
pub fn render_list(project: &str, sessions: &[Value], problems: &[String]) -> String {
    let mut out = String::with_capacity(4096);
    for p in problems {
        out.push_str("<p class=\"warning\" role=\"alert\">");
        push_esc(&mut out, p);
        out.push_str("</p>");
    }
    if sessions.is_empty() {
        out.push_str(
            "<p class=\"empty\" id=\"sessions-empty\">This project has no lifecycle session.</p>",
        );
        return out;
    }
    out.push_str(
        "<div class=\"table-wrap\"><table id=\"sessions-table\" data-testid=\"sessions-table\"><thead><tr>\
         <th scope=\"col\">Session</th><th scope=\"col\">Status</th><th scope=\"col\">Intent</th>\
         <th scope=\"col\">Position</th><th scope=\"col\">Progress</th></tr></thead><tbody>",
    );
    for v in sessions {
        let id = s(v, "session_id");
        let href = format!(
            "/sessions/{}{}",
            super::html::url_part(id),
            query(&[("project", project)])
        );
        out.push_str("<tr data-session-id=\"");
        push_esc(&mut out, id);
        let _ = write!(out, "\"><td><a class=\"mono\" href=\"{}\">", esc(&href));
        push_esc(&mut out, id);
        out.push_str("</a></td><td>");
        phase_badge(&mut out, s(v, "status"));
        out.push_str("</td><td>");
        push_esc(&mut out, &clip(s(v, "intent"), 160));
        out.push_str("</td><td>");
        push_esc(&mut out, &position(v));
        out.push_str("</td><td>");
        let p = v.get("progress").unwrap_or(&Value::Null);
        let _ = write!(
            out,
            "{}/{} confirmed",
            n(p, "confirmed").unwrap_or(0),
            n(p, "total").unwrap_or(0)
        );
        out.push_str("</td></tr>");
    }
    out.push_str("</tbody></table></div>");
    out
}

/// Links to a step's task runs (each attempt), where its conversation and tool calls are.
fn step_run_links(out: &mut String, runs: Option<&Vec<StepRun>>) {
    let Some(runs) = runs.filter(|r| !r.is_empty()) else {
        return;
    };
    out.push_str("<span class=\"step-runs\">");
    for r in runs {
        out.push_str("<a class=\"mono\" data-testid=\"step-run\" data-run-id=\"");
        push_esc(out, &r.run_id);
        out.push_str("\" href=\"/runs/");
        out.push_str(&esc(&super::html::url_part(&r.run_id)));
        out.push_str("\">run ");
        push_esc(out, r.run_id.get(..13).unwrap_or(&r.run_id));
        out.push_str("</a> ");
        phase_badge(out, &r.phase);
    }
    out.push_str("</span>");
}

/// Seed 003's icon of a step, and a class for its colour.
fn icon(step: &Value, active: Option<u64>) -> (&'static str, &'static str) {
    let status = s(step, "status");
    let is_active = active.is_some() && n(step, "index") == active;
    match status {
        "running" => ("▸", "active"),
        "failed" => ("✗", "failed"),
        "skipped" => ("—", "skipped"),
        _ if is_active => ("▸", "active"),
        "completed" if step.get("completion_confirmed").and_then(Value::as_bool) == Some(true) => {
            ("✓", "confirmed")
        }
        _ if s(step, "kind") == "decision" => ("◆", "decision"),
        _ => ("·", "pending"),
    }
}

/// A task run made for a session step (the step's attempts: the newest last).
pub struct StepRun {
    pub run_id: String,
    /// Its phase as people should read it (`interrupted` for a run no process drives).
    pub phase: String,
}

/// The task runs of a session's steps, by step index.
pub type StepRuns = std::collections::BTreeMap<u64, Vec<StepRun>>;

/// One session: `summary` is its read model, `decisions` the newest decision records (oldest
/// first), `older_decisions` whether earlier ones exist; command paths are shown from `roots`.
pub fn render(
    summary: &Value,
    decisions: &[Value],
    older_decisions: bool,
    roots: &Roots,
    step_runs: &StepRuns,
) -> String {
    let mut out = String::with_capacity(8192);
    let active = n(summary, "active_step_index");
    // A running session is followed: app.js reloads this block every few seconds.
    out.push_str("<div id=\"session\" data-live");
    if s(summary, "status") == "running" {
        out.push_str(" data-poll=\"3000\"");
    }
    out.push_str("><div class=\"heading\"><h1>Session <span class=\"mono\">");
    push_esc(&mut out, s(summary, "session_id"));
    out.push_str("</span></h1><div id=\"session-status\" data-testid=\"session-status\">");
    phase_badge(&mut out, s(summary, "status"));
    out.push_str("</div></div>");
    // What its step runs, gates and decomposition used, when any model was asked.
    if let Some(total) = summary.pointer("/usage/total") {
        let num = |k: &str| total.get(k).and_then(Value::as_u64).unwrap_or(0);
        let (prompt, cached) = (num("promptTokens"), num("cachedPromptTokens"));
        let written = num("cacheWriteTokens");
        let _ = write!(
            out,
            "<p class=\"muted\" id=\"session-usage\" data-testid=\"session-usage\">{} tokens, {:.0}% of the prompt cached",
            num("totalTokens"),
            if prompt == 0 {
                0.0
            } else {
                cached as f64 * 100.0 / prompt as f64
            }
        );
        if written > 0 {
            let _ = write!(out, ", {written} written to cache");
        }
        if let Some(c) = total.get("costUsd").and_then(Value::as_f64) {
            let _ = write!(out, ", ${c:.4}");
        }
        out.push_str("</p>");
    }
    out.push_str("<div class=\"run-grid\"><div>");
    out.push_str("<section class=\"card\" aria-labelledby=\"steps-title\"><h2 id=\"steps-title\">Steps</h2><ol class=\"steps\" id=\"steps\" data-testid=\"steps\">");
    let empty = Vec::new();
    let steps = summary
        .get("steps")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    // A session that moved on to a next milestone shows where each milestone's steps start.
    let milestones = summary
        .get("milestones")
        .and_then(Value::as_array)
        .filter(|m| m.len() > 1);
    for step in steps {
        if let Some(m) = milestones.and_then(|ms| {
            ms.iter()
                .find(|m| n(m, "first_step").is_some() && n(m, "first_step") == n(step, "index"))
        }) {
            out.push_str("<li class=\"milestone\" role=\"presentation\" data-milestone=\"");
            push_esc(&mut out, s(m, "id"));
            out.push_str("\"><strong>Milestone ");
            push_esc(
                &mut out,
                if s(m, "id").is_empty() {
                    "?"
                } else {
                    s(m, "id")
                },
            );
            out.push_str("</strong>");
            if m.get("done").and_then(Value::as_bool) == Some(true) {
                out.push_str(" <span class=\"muted\">✓ done</span>");
            }
            out.push_str("</li>");
        }
        let (mark, class) = icon(step, active);
        let is_active = active.is_some() && n(step, "index") == active;
        let _ = write!(
            out,
            "<li{} data-index=\"{}\" data-status=\"{}\"{}><span class=\"icon {class}\" aria-hidden=\"true\">{mark}</span><span class=\"n\">{}</span><span>",
            if is_active { " class=\"active\"" } else { "" },
            n(step, "index").unwrap_or(0),
            esc(s(step, "status")),
            if is_active {
                " aria-current=\"step\""
            } else {
                ""
            },
            n(step, "index").unwrap_or(0),
        );
        if s(step, "kind") == "decision" {
            // The ◆ is the step's icon.
            push_esc(&mut out, s(step, "decision"));
            let _ = write!(
                out,
                " <span class=\"muted\">decision, retry {}/{}</span>",
                n(step, "retry_count").unwrap_or(0),
                n(step, "max_retries").unwrap_or(0)
            );
            if let Some(v) = step.get("verdict").and_then(Value::as_str) {
                out.push_str(" → <strong>");
                push_esc(&mut out, v);
                out.push_str("</strong>");
            }
        } else {
            push_esc(&mut out, s(step, "skill"));
            if !s(step, "args").is_empty() {
                out.push_str(" <span class=\"mono\">");
                // A placeholder a later step fills is said in words, as `session start` does.
                let args = baton_lifecycle::session::late_bound::shown(s(step, "args"));
                push_esc(&mut out, &clip(&args, 200));
                out.push_str("</span>");
            }
            if !s(step, "command_path").is_empty() {
                out.push_str("<small class=\"path\">");
                push_esc(&mut out, &roots.shown(s(step, "command_path")));
                out.push_str("</small>");
            }
        }
        step_run_links(
            &mut out,
            step_runs.get(&n(step, "index").unwrap_or(u64::MAX)),
        );
        out.push_str("</span><span>");
        // The status in words as well: the icon alone says nothing to a screen reader.
        let status = s(step, "status");
        let unconfirmed = status == "completed"
            && step.get("completion_confirmed").and_then(Value::as_bool) != Some(true);
        phase_badge(&mut out, if unconfirmed { "unconfirmed" } else { status });
        out.push_str("</span></li>");
    }
    out.push_str("</ol></section>");
    decisions_card(&mut out, decisions, older_decisions);
    out.push_str("</div><div>");
    out.push_str("<section class=\"card\" aria-labelledby=\"session-facts\"><h2 id=\"session-facts\">Session</h2><dl class=\"facts\">");
    let progress = summary.get("progress").unwrap_or(&Value::Null);
    let text = |v: Option<&Value>| match v {
        None | Some(Value::Null) => "—".to_string(),
        Some(Value::String(x)) if x.is_empty() => "—".to_string(),
        Some(Value::String(x)) => x.clone(),
        Some(other) => other.to_string(),
    };
    let facts = [
        ("Intent", text(summary.get("intent"))),
        ("Position", position(summary)),
        ("Phase", text(summary.get("phase"))),
        ("Milestone", milestone_fact(summary)),
        ("Quality", text(summary.get("quality_mode"))),
        ("Planning", text(summary.get("planning_mode"))),
        (
            "Progress",
            format!(
                "{}/{} confirmed ({} completed)",
                n(progress, "confirmed").unwrap_or(0),
                n(progress, "total").unwrap_or(0),
                n(progress, "completed").unwrap_or(0)
            ),
        ),
        (
            "Active step",
            active.map_or("idle".into(), |a| a.to_string()),
        ),
        ("Revision", text(summary.get("revision"))),
    ];
    for (label, value) in facts {
        let _ = write!(out, "<dt>{label}</dt><dd>");
        push_esc(&mut out, &clip(&value, TEXT_CHARS));
        out.push_str("</dd>");
    }
    if let Some(claim) = summary.get("claim").filter(|c| c.is_object()) {
        out.push_str("<dt>Claimed by</dt><dd>");
        push_esc(&mut out, s(claim, "owner"));
        out.push_str(" <span class=\"muted\">since ");
        push_esc(&mut out, s(claim, "claimed_at"));
        out.push_str("</span></dd>");
    }
    out.push_str("</dl></section>");
    goals_card(&mut out, summary.get("sub_goals"));
    out.push_str("</div></div></div>");
    out
}

/// The session's milestone; when it moved on, every milestone it went through (`M1 ✓ → M2`).
fn milestone_fact(summary: &Value) -> String {
    let segments: Vec<String> = summary
        .get("milestones")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|m| {
            let id = m.get("id").and_then(Value::as_str).unwrap_or("?");
            let done = m.get("done").and_then(Value::as_bool) == Some(true);
            format!("{id}{}", if done { " ✓" } else { "" })
        })
        .collect();
    if segments.len() > 1 {
        return segments.join(" → ");
    }
    match summary.get("milestone") {
        Some(Value::String(m)) if !m.is_empty() => m.clone(),
        _ => "—".into(),
    }
}

fn goals_card(out: &mut String, goals: Option<&Value>) {
    out.push_str("<section class=\"card\" aria-labelledby=\"goals-title\"><h2 id=\"goals-title\">Sub-goals</h2>");
    let list = goals.and_then(Value::as_array).filter(|g| !g.is_empty());
    let Some(list) = list else {
        out.push_str("<p class=\"muted\">No decomposition.</p></section>");
        return;
    };
    let done = list.iter().filter(|g| s(g, "status") == "done").count();
    let _ = write!(
        out,
        "<p class=\"muted\">{done} of {} done</p><ul class=\"goals\" id=\"goals\">",
        list.len()
    );
    for g in list {
        let met = s(g, "status") == "done";
        out.push_str("<li>");
        out.push_str(if met { "☑ " } else { "☐ " });
        out.push_str("<strong>");
        push_esc(out, s(g, "id"));
        out.push_str("</strong> ");
        push_esc(out, &clip(s(g, "goal"), TEXT_CHARS));
        if !s(g, "done_when").is_empty() {
            out.push_str("<small>done when: ");
            push_esc(out, &clip(s(g, "done_when"), TEXT_CHARS));
            out.push_str("</small>");
        }
        if !s(g, "evidence").is_empty() {
            out.push_str("<small>evidence: ");
            push_esc(out, &clip(s(g, "evidence"), TEXT_CHARS));
            out.push_str("</small>");
        }
        out.push_str("</li>");
    }
    out.push_str("</ul></section>");
}

fn decisions_card(out: &mut String, decisions: &[Value], older: bool) {
    out.push_str("<section class=\"card\" aria-labelledby=\"decisions-title\"><h2 id=\"decisions-title\">Decisions</h2>");
    if decisions.is_empty() {
        out.push_str("<p class=\"muted\">No gate decided yet.</p></section>");
        return;
    }
    if older {
        out.push_str("<p class=\"muted\">Older decisions are in decisions.ndjson.</p>");
    }
    out.push_str("<ol class=\"decisions\" id=\"decisions\" data-testid=\"decisions\">");
    // Newest first: the last decision is what a person looks for.
    for d in decisions.iter().rev() {
        out.push_str("<li><strong>");
        push_esc(out, s(d, "node_id"));
        out.push_str("</strong> → ");
        phase_badge(out, s(d, "verdict"));
        if let Some(c) = d.get("confidence_score").filter(|c| !c.is_null()) {
            let _ = write!(
                out,
                " <span class=\"muted\">confidence {}</span>",
                esc(&c.to_string())
            );
        }
        if d.get("close_call").and_then(Value::as_bool) == Some(true) {
            out.push_str(" <span class=\"tag\">close call</span>");
        }
        let effect = s(d, "effect");
        if !effect.is_empty() {
            out.push_str(" <span class=\"tag\">");
            push_esc(out, effect);
            out.push_str("</span>");
        }
        out.push_str("<small>");
        push_esc(out, s(d, "timestamp"));
        if !s(d, "summary").is_empty() {
            out.push_str(" — ");
            push_esc(out, &clip(s(d, "summary"), TEXT_CHARS));
        }
        out.push_str("</small></li>");
    }
    out.push_str("</ol></section>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pages::run_parts::step_of;
    use serde_json::json;
    use std::path::Path;

    fn summary() -> Value {
        json!({
            "ok": true, "session_id": "S-1", "status": "running", "revision": 7,
            "intent": "ship <script>x</script>", "lifecycle_position": "build",
            "progress": {"completed": 2, "confirmed": 1, "total": 5},
            "active_step_index": 2,
            "claim": {"index": 2, "owner": "baton", "claimed_at": "2026-11-22T10:00:00Z"},
            "steps": [
                {"index": 0, "kind": "exec", "skill": "plan", "args": "", "status": "completed", "completion_confirmed": true, "command_path": "/h/.baton/bundled/ls-1/commands/plan.md"},
                {"index": 1, "kind": "exec", "skill": "build", "args": "--x '<y>'", "status": "completed", "completion_confirmed": false},
                {"index": 2, "kind": "exec", "skill": "test", "args": "{phase} --quick", "status": "pending"},
                {"index": 3, "kind": "decision", "decision": "post-verify", "status": "pending", "retry_count": 1, "max_retries": 3, "verdict": null},
                {"index": 4, "kind": "exec", "skill": "x", "status": "failed"}
            ],
            "sub_goals": [{"id": "G1", "goal": "login <works>", "status": "done", "done_when": "tests pass"},
                          {"id": "G2", "goal": "docs", "status": "open"}]
        })
    }

    #[test]
    fn steps_have_the_seed_icons_and_the_active_step_is_marked() {
        let decisions = vec![
            json!({"node_id": "quality-gate", "verdict": "PROCEED", "confidence_score": 0.9, "timestamp": "t1", "summary": "fine <b>", "effect": "proceed"}),
            json!({"node_id": "goal-audit", "verdict": "FIX", "close_call": true, "timestamp": "t2"}),
        ];
        let roots = Roots::new(None, Some(Path::new("/h/.baton")), Some(Path::new("/h")));
        let mut step_runs = StepRuns::new();
        step_runs.insert(
            1,
            vec![StepRun {
                run_id: "0196abcd-<r>".into(),
                phase: "completed".into(),
            }],
        );
        let html = render(&summary(), &decisions, true, &roots, &step_runs);
        assert!(html.contains(
            "data-testid=\"step-run\" data-run-id=\"0196abcd-&lt;r&gt;\" href=\"/runs/0196abcd-%3Cr%3E\">run 0196abcd-&lt;r&gt;</a>"
        ));
        assert_eq!(step_of("S-1/step-3-build"), Some(("S-1", 3, "build")));
        assert_eq!(step_of("S-1/step-x-build"), None);
        assert_eq!(step_of("create-story"), None);
        assert!(
            html.contains(
                "<small class=\"path\">$BATON_HOME/bundled/ls-1/commands/plan.md</small>"
            )
        );
        assert!(!html.contains("/h/"));
        assert!(!html.contains("<script") && !html.contains("<b>") && !html.contains("'<y>'"));
        assert!(html.contains("data-index=\"0\" data-status=\"completed\"><span class=\"icon confirmed\" aria-hidden=\"true\">✓"));
        assert!(html.contains("phase-unconfirmed"));
        assert!(html.contains("class=\"active\" data-index=\"2\" data-status=\"pending\" aria-current=\"step\"><span class=\"icon active\" aria-hidden=\"true\">▸"));
        assert!(html.contains("<span class=\"icon decision\" aria-hidden=\"true\">◆</span>"));
        assert!(html.contains("decision, retry 1/3"));
        assert!(html.contains("<span class=\"icon failed\" aria-hidden=\"true\">✗"));
        assert!(html.contains("1 of 2 done"));
        // A phase not known yet is said in words.
        assert!(
            html.contains("&lt;the phase the roadmap picks&gt; --quick"),
            "{html}"
        );
        assert!(html.contains("login &lt;works&gt;"));
        assert!(html.contains("Older decisions"));
        // Newest decision first.
        assert!(html.find("goal-audit").unwrap() < html.find("quality-gate").unwrap());
        assert!(html.contains("close call") && html.contains("fine &lt;b&gt;"));
        assert!(html.contains("1/5 confirmed (2 completed)"));
        assert!(html.starts_with("<div id=\"session\" data-live data-poll=\"3000\">"));
    }

    #[test]
    fn the_usage_says_cache_writes_only_when_there_are_some() {
        let roots = Roots::new(None, None, None);
        let mut one = summary();
        one["usage"] = json!({"total": {"promptTokens": 1000, "cachedPromptTokens": 750,
            "completionTokens": 200, "totalTokens": 1200}});
        let html = render(&one, &[], false, &roots, &StepRuns::new());
        assert!(
            html.contains(
                "data-testid=\"session-usage\">1200 tokens, 75% of the prompt cached</p>"
            ),
            "{html}"
        );
        one["usage"]["total"]["cacheWriteTokens"] = json!(150);
        let html = render(&one, &[], false, &roots, &StepRuns::new());
        assert!(
            html.contains(
                "data-testid=\"session-usage\">1200 tokens, 75% of the prompt cached, 150 written to cache</p>"
            ),
            "{html}"
        );
    }

    #[test]
    fn a_session_that_advanced_shows_its_milestones() {
        let mut one = summary();
        one["milestone"] = json!("M2");
        one["milestones"] = json!([
            {"id": "M1", "first_step": 0, "last_step": 1, "done": true},
            {"id": "M2", "first_step": 2, "last_step": 4, "done": false}
        ]);
        let roots = Roots::new(None, None, None);
        let html = render(&one, &[], false, &roots, &StepRuns::new());
        let m1 = html.find("data-milestone=\"M1\"").unwrap();
        let m2 = html.find("data-milestone=\"M2\"").unwrap();
        let step0 = html.find("data-index=\"0\"").unwrap();
        let step2 = html.find("data-index=\"2\"").unwrap();
        assert!(m1 < step0 && step0 < m2 && m2 < step2, "{html}");
        assert!(html.contains("<strong>Milestone M1</strong> <span class=\"muted\">✓ done</span>"));
        assert!(html.contains("<dd>M1 ✓ → M2</dd>"), "{html}");
        // One milestone: no headers.
        let mut single = summary();
        single["milestone"] = json!("M1");
        single["milestones"] =
            json!([{"id": "M1", "first_step": 0, "last_step": 4, "done": false}]);
        let html = render(&single, &[], false, &roots, &StepRuns::new());
        assert!(!html.contains("data-milestone"));
        assert!(html.contains("<dd>M1</dd>"));
    }

    #[test]
    fn the_list_links_each_session_with_its_project() {
        let html = render_list("/p q", &[summary()], &["damaged <file>".into()]);
        assert!(html.contains("href=\"/sessions/S-1?project=%2Fp%20q\""));
        assert!(html.contains("1/5 confirmed"));
        assert!(html.contains("damaged &lt;file&gt;"));
        assert!(render_list("/p", &[], &[]).contains("sessions-empty"));
    }
}
