//! `session`: maestro's summary of a session (the same lines), plus its revision and the
//! owner of the active claim.

use super::check::js_text;
use crate::Context;
use crate::check::{self, Scope};
use crate::discovery::{self, Pick};
use crate::error::Result;
use crate::session::Session;
use crate::verbs::Output;
use serde_json::{Value, json};

/// maestro shows a status.json whatever its schema says, as long as it parses; so does this,
/// with the problems listed below the summary (`check` has them too). A file that is not JSON
/// at all has nothing to show: E010.
pub fn run(ctx: &Context, session: Option<&str>) -> Result<Output> {
    let loaded = discovery::find(ctx, session, Pick::Any)?;
    if loaded.issues.is_empty() || !loaded.raw.as_ref().is_some_and(Value::is_object) {
        let s = loaded.into_session()?;
        return Ok(Output::new(summary_json(&s)).out(text(&s)));
    }
    let findings = check::check(
        ctx,
        loaded.raw.as_ref().and_then(Value::as_object),
        &loaded.issues,
        Scope::All,
    );
    let Some(Value::Object(doc)) = loaded.raw else {
        return Err(crate::error::RalphError::NoSession);
    };
    let s = Session {
        id: loaded.id,
        dir: loaded.dir,
        doc,
    };
    let mut out = text(&s);
    let (errors, warnings) = check::counts(&findings);
    out.push_str(&format!(
        "\n  findings: {errors} error(s), {warnings} warning(s)\n"
    ));
    for f in &findings {
        let mark = if f.level == check::Level::E {
            '✗'
        } else {
            '!'
        };
        out.push_str(&format!("    {mark} {}\n", f.line()));
    }
    let mut json = summary_json(&s);
    json["findings"] = serde_json::json!(findings);
    Ok(Output::new(json).out(out))
}

/// `x ?? '(n/a)'` / `x || '(n/a)'`
fn or_na(v: Option<&Value>, falsy_too: bool) -> String {
    match v {
        None | Some(Value::Null) => "(n/a)".into(),
        Some(Value::String(s)) if falsy_too && s.is_empty() => "(n/a)".into(),
        Some(v) => js_text(v),
    }
}

fn text(s: &Session) -> String {
    let d = &s.doc;
    let completed = s.all_steps().filter(|x| x.status() == "completed").count();
    let active = s.active_index();
    let mut out = String::new();
    let mut line = |k: &str, v: String| out.push_str(&format!("{:<19}{v}\n", format!("{k}:")));
    line("session", s.id.clone());
    line("status", s.status().to_string());
    line("lifecycle", or_na(d.get("lifecycle_position"), false));
    let new = if d.get("phase_is_new").and_then(Value::as_bool) == Some(true) {
        " (new)"
    } else {
        ""
    };
    line("phase", format!("{}{new}", or_na(d.get("phase"), false)));
    line("milestone", or_na(d.get("milestone"), true));
    line("quality_mode", or_na(d.get("quality_mode"), false));
    line("planning_mode", or_na(d.get("planning_mode"), false));
    line(
        "protocol_version",
        d.get("ralph_protocol_version")
            .filter(|v| !v.is_null())
            .map_or("0 (legacy)".into(), js_text),
    );
    line("progress", format!("{completed}/{}", s.len()));
    line(
        "active_step_index",
        active.map_or("(idle)".into(), |a| a.to_string()),
    );
    line("revision", s.revision().to_string());
    if let Some(step) = active.and_then(|a| s.step(a)) {
        out.push_str(&format!("\n  ▸ step {}: {}\n", step.index(), step.label()));
        out.push_str(&format!("    status:  {}\n", step.status()));
        if let Some(cp) = step.command_path() {
            out.push_str(&format!("    command: {cp}\n"));
        }
        if let Some(load) = step.get("load").and_then(Value::as_object)
            && let Some(at) = load.get("loaded_at").and_then(Value::as_str)
        {
            let n = |k: &str| load.get(k).and_then(Value::as_array).map_or(0, Vec::len);
            out.push_str(&format!(
                "    loaded:  {at} (req: {}, def: {})\n",
                n("required_files"),
                n("deferred_files")
            ));
        }
        if let Some(claim) = s.claim_on(step.index())
            && let Some(owner) = claim.owner
        {
            let since = claim.claimed_at.unwrap_or_default();
            out.push_str(&format!("    owner:   {owner} since {since}\n"));
        }
    }
    let goals = goals(s);
    if !goals.is_empty() {
        let done = goals.iter().filter(|g| g.status == "done").count();
        out.push_str(&format!("\n  sub-goals: {done}/{}\n", goals.len()));
        for g in &goals {
            let mark = if g.status == "done" { "[x]" } else { "[ ]" };
            out.push_str(&format!("    {mark} {}: {}\n", g.id, g.goal));
        }
    }
    out
}

pub struct Goal {
    pub id: String,
    pub goal: String,
    pub status: String,
    pub done_when: String,
    pub evidence: String,
    pub confirmed: bool,
}

pub fn goals(s: &Session) -> Vec<Goal> {
    let text = |g: &Value, k: &str| g.get(k).map_or(String::new(), js_text);
    s.doc
        .get("task_decomposition")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .map(|g| Goal {
                    id: text(g, "id"),
                    goal: text(g, "goal"),
                    status: text(g, "status"),
                    done_when: text(g, "done_when"),
                    evidence: text(g, "evidence"),
                    confirmed: g.get("completion_confirmed").and_then(Value::as_bool) == Some(true),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The steps of one milestone: from the session's start or the step after a `post-milestone`
/// gate, up to and including the next one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// The milestone: the one its closing gate recorded when it was settled, else (still
    /// open) the session's `milestone`; `None` when nothing says.
    pub id: Option<String>,
    pub first: usize,
    pub last: usize,
    /// Its `post-milestone` gate is completed.
    pub done: bool,
}

/// The session's milestones in chain order (one segment when it never advanced).
pub fn milestones(s: &Session) -> Vec<Segment> {
    let current = s.str("milestone").filter(|m| !m.is_empty());
    let mut out = Vec::new();
    let mut first = 0;
    let steps: Vec<_> = s.all_steps().collect();
    for st in &steps {
        if st.decision() != Some("post-milestone") {
            continue;
        }
        let done = st.status() == "completed";
        let recorded = st.str("milestone_id").filter(|m| !m.is_empty());
        out.push(Segment {
            id: recorded
                .or(if done { None } else { current })
                .map(str::to_owned),
            first,
            last: st.index(),
            done,
        });
        first = st.index() + 1;
    }
    if first < steps.len() || out.is_empty() {
        out.push(Segment {
            id: current.map(str::to_owned),
            first,
            last: steps.len().saturating_sub(1),
            done: false,
        });
    }
    out
}

/// A project's sessions as a list shows them (the web API and the sessions page).
#[derive(Debug)]
pub struct Listing {
    /// Newest first: each session's read model ([`summary_json`]), or why its status.json
    /// cannot be used — a damaged session is listed with its error, never hidden.
    pub sessions: Vec<(String, Result<Value>)>,
    /// More sessions exist than were listed.
    pub more: bool,
}

/// The newest `max` sessions of `ctx`'s project (a folder without a status.json is listed as
/// unusable: it is a session folder a crash or a person left).
pub fn list(ctx: &Context, max: usize) -> Listing {
    let found = discovery::candidates(&ctx.sessions_root());
    let more = found.len() > max;
    let sessions = found
        .into_iter()
        .take(max)
        .map(|(id, dir)| {
            let summary = discovery::load(&id, &dir)
                .into_session()
                .map(|s| summary_json(&s));
            (id, summary)
        })
        .collect();
    Listing { sessions, more }
}

/// The stable read model of a session (`session --json`, `status --json`).
pub fn summary_json(s: &Session) -> Value {
    let d = &s.doc;
    let steps: Vec<Value> = s
        .all_steps()
        .map(|st| {
            json!({
                "index": st.index(),
                "kind": if st.decision().is_some() { "decision" } else { "exec" },
                "skill": st.skill(),
                "args": st.args(),
                "decision": st.decision(),
                "stage": st.stage(),
                "status": st.status(),
                "completion_confirmed": st.confirmed(),
                "completion_status": st.get("completion_status").cloned().unwrap_or(Value::Null),
                "command_scope": st.command_scope(),
                "command_path": st.command_path(),
                "retry_count": st.retry_count(),
                "max_retries": st.max_retries(),
                "verdict": st.get("verdict").cloned().unwrap_or(Value::Null),
                "goal_ref": st.get("goal_ref").cloned().unwrap_or(Value::Null),
            })
        })
        .collect();
    let confirmed = s.all_steps().filter(|x| x.confirmed()).count();
    let completed = s.all_steps().filter(|x| x.status() == "completed").count();
    let claim = s
        .claim()
        .map(|c| json!({"index": c.index, "owner": c.owner, "claimed_at": c.claimed_at}));
    json!({
        "ok": true,
        "session_id": s.id,
        "source": d.get("source").cloned().unwrap_or(Value::Null),
        "status": s.status(),
        "revision": s.revision(),
        "intent": s.intent(),
        "lifecycle_position": d.get("lifecycle_position").cloned().unwrap_or(Value::Null),
        "phase": d.get("phase").cloned().unwrap_or(Value::Null),
        "milestone": d.get("milestone").cloned().unwrap_or(Value::Null),
        "quality_mode": d.get("quality_mode").cloned().unwrap_or(Value::Null),
        "planning_mode": d.get("planning_mode").cloned().unwrap_or(Value::Null),
        "protocol_version": d.get("ralph_protocol_version").cloned().unwrap_or(Value::Null),
        "progress": {"completed": completed, "confirmed": confirmed, "total": s.len()},
        "active_step_index": s.active_index(),
        "claim": claim,
        "steps": steps,
        "sub_goals": d.get("task_decomposition").cloned().unwrap_or(Value::Null),
        "milestones": milestones(s)
            .iter()
            .map(|m| json!({"id": m.id, "first_step": m.first, "last_step": m.last, "done": m.done}))
            .collect::<Vec<_>>(),
        "path": s.status_path(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing;

    #[test]
    fn a_listing_keeps_damaged_sessions_with_their_error_and_says_when_it_is_cut() {
        let tmp = tempfile::tempdir().unwrap();
        let ctx = testing::context(tmp.path());
        assert!(list(&ctx, 10).sessions.is_empty());
        let status = testing::new_session(&ctx, "goal-audit");
        let good = status
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap();
        let bad = ctx.sessions_root().join("ralph-damaged");
        std::fs::create_dir_all(&bad).unwrap();
        std::fs::write(bad.join("status.json"), "{not json").unwrap();
        std::fs::create_dir_all(ctx.sessions_root().join("unrelated")).unwrap();

        let all = list(&ctx, 10);
        assert!(!all.more);
        assert_eq!(all.sessions.len(), 2, "{all:?}");
        for (id, summary) in &all.sessions {
            match summary {
                Ok(v) => {
                    assert_eq!(id, good);
                    assert_eq!(v["session_id"], good);
                }
                Err(e) => {
                    assert_eq!(id, "ralph-damaged");
                    assert_eq!(e.code(), "E010");
                }
            }
        }
        let cut = list(&ctx, 1);
        assert!(cut.more);
        assert_eq!(cut.sessions.len(), 1);
    }
}
