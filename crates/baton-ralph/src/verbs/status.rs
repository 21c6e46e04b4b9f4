//! `status`: the board of seed 003's A_SHOW_STATUS — every step with its icon (`✓` confirmed,
//! `▸` active, ` ` pending, `✗` failed, `—` skipped, `◆` a decision), the command scope and path
//! of execution steps, and the sub-goals.

use super::session::{goals, milestones, summary_json};
use crate::Context;
use crate::discovery::{self, Pick};
use crate::error::Result;
use crate::session::{Session, Step};
use crate::verbs::Output;
use serde_json::Value;

pub fn run(ctx: &Context, session: Option<&str>) -> Result<Output> {
    let s = discovery::find(ctx, session, Pick::Any)?.into_session()?;
    Ok(Output::new(summary_json(&s)).out(board(&s)))
}

fn icon(s: &Session, step: &Step) -> &'static str {
    match step.status() {
        "running" => "▸",
        "failed" => "✗",
        "skipped" => "—",
        _ if s.active_index() == Some(step.index()) => "▸",
        "completed" if step.confirmed() => "✓",
        _ => " ",
    }
}

pub fn board(s: &Session) -> String {
    let d = &s.doc;
    let total = s.len();
    let confirmed = s.all_steps().filter(|x| x.confirmed()).count();
    let source = d.get("source").and_then(Value::as_str).unwrap_or("ralph");
    let mut out = format!("Session:  {} [{source}]\n", s.id);
    out.push_str(&format!(
        "Status:   {} (revision {})\n",
        s.status(),
        s.revision()
    ));
    out.push_str(&format!(
        "Position: {}\n",
        d.get("lifecycle_position")
            .and_then(Value::as_str)
            .unwrap_or("—")
    ));
    let segments = milestones(s);
    if segments.len() > 1 {
        // `M1 ✓ → M2`: every milestone the session went through.
        let line: Vec<String> = segments
            .iter()
            .map(|m| {
                format!(
                    "{}{}",
                    m.id.as_deref().unwrap_or("?"),
                    if m.done { " ✓" } else { "" }
                )
            })
            .collect();
        out.push_str(&format!("Milestones: {}\n", line.join(" → ")));
    } else if let Some(current) = d
        .get("milestone")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
    {
        out.push_str(&format!("Milestone: {current}\n"));
    }
    out.push_str(&format!("Progress: {confirmed}/{total} confirmed\n"));
    let current = s.active_index().and_then(|a| s.step(a)).map(|st| {
        let holder = s
            .claim_on(st.index())
            .and_then(|c| c.owner.map(|o| format!(", claimed by {o}")))
            .unwrap_or_default();
        format!(
            "[{}/{total}] {} ({}{holder})",
            st.index(),
            st.label(),
            st.status()
        )
    });
    out.push_str(&format!(
        "Current:  {}\n\n",
        current.as_deref().unwrap_or("(none)")
    ));
    // Milestone headers when the session spans more than one.
    let headed = segments.len() > 1;
    for step in s.all_steps() {
        if headed && let Some(m) = segments.iter().find(|m| m.first == step.index()) {
            out.push_str(&format!(
                "  ── milestone {}{}\n",
                m.id.as_deref().unwrap_or("?"),
                if m.done { " ✓" } else { "" }
            ));
        }
        let mut line = format!("  [{}] {}. ", icon(s, &step), step.index());
        match step.decision() {
            Some(gate) => {
                line.push_str(&format!(
                    "◆ {gate} [decision] retry {}/{}",
                    step.retry_count(),
                    step.max_retries()
                ));
                if let Some(v) = step.str("verdict") {
                    line.push_str(&format!(" → {v}"));
                }
            }
            None => {
                line.push_str(step.skill());
                if !step.args().is_empty() {
                    line.push(' ');
                    line.push_str(step.args());
                }
                let scope = step.command_scope().unwrap_or("?");
                line.push_str(&format!(" [{scope}]"));
                if let Some(p) = step.command_path() {
                    line.push(' ');
                    line.push_str(p);
                }
            }
        }
        if step.status() == "completed" && !step.confirmed() {
            line.push_str(" (unconfirmed)");
        }
        out.push_str(&line);
        out.push('\n');
    }
    let goals = goals(s);
    if !goals.is_empty() {
        let done = goals.iter().filter(|g| g.status == "done").count();
        out.push_str(&format!(
            "\nSub-goals ({done}/{})  source: {}#/task_decomposition\n",
            goals.len(),
            s.status_path().display()
        ));
        for g in &goals {
            let met = g.status == "done";
            out.push_str(&format!(
                "  [{}] {}  done_when={}  evidence={}  confirmed={}{}\n",
                if met { "x" } else { " " },
                g.id,
                g.done_when,
                g.evidence,
                g.confirmed,
                if met { "" } else { "  ◀ unmet" }
            ));
        }
    }
    out
}
