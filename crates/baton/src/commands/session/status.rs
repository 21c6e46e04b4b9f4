//! `baton session status`: ralph's board (the seed's icons, sub-goals) and read model, plus the
//! latest decisions from `decisions.ndjson`.

use super::args::{StatusArgs, Target};
use super::context::{context, print_warnings};
use super::errors::failure;
use super::text;
use crate::exit;
use baton_engine::model_choice;
use baton_lifecycle::ralph::decisions::{self, Recent};
use baton_lifecycle::ralph::discovery::{self, Pick};
use baton_lifecycle::ralph::session::Session;
use baton_lifecycle::ralph::verbs::{session::summary_json, status::board};
use baton_lifecycle::session::{budget, step_run};
use baton_store::driver_lock::{self, Holder};
use baton_store::{Phase, Store};
use serde_json::Value;
use std::path::{Path, PathBuf};

pub fn run(args: &StatusArgs) -> anyhow::Result<u8> {
    let ctx = context(&args.target.project);
    let loaded = discovery::find(&ctx, args.target.session.as_deref(), Pick::Any)
        .and_then(|l| l.into_session())
        .and_then(|s| decisions::read_last(&s.dir, args.decisions).map(|d| (s, d)));
    let (s, recent) = match loaded {
        Ok(x) => x,
        Err(e) => return Ok(failure(&e).report(args.json)),
    };
    let mut live = Live::of(&s, &ctx.project);
    live.stopped = stopped(&s, &live, &args.target);
    let usage = Store::open_default()
        .ok()
        .and_then(|store| store.project(&ctx.project).ok())
        .map(|project| budget::usage(&s, &project));
    if args.json {
        let mut v = json(&s, &recent);
        live.add_to(&mut v);
        if let Some(u) = &usage {
            add_usage(&mut v, u);
        }
        crate::ui::print_json(&v)?;
    } else {
        // Step titles, goals, questions and decisions are the project's and the model's text.
        out!("{}", crate::ui::visible(&text(&s, &recent, &live)));
        if let Some(u) = usage.filter(|u| !u.total.is_zero()) {
            outln!(
                "\nUsage: {} tokens ({:.0}% of the prompt cached{}){}",
                crate::ui::thousands(u.total.total_tokens),
                u.total.cached_share() * 100.0,
                crate::ui::cache_writes(u.total.cache_write_tokens),
                u.total
                    .cost_usd
                    .map(|c| format!(", ${c:.4}"))
                    .unwrap_or_default()
            );
        }
    }
    print_warnings(&ctx);
    Ok(exit::OK)
}

/// `usage {total, gates}` and each step's `usage` (its task runs, summed from their records).
fn add_usage(v: &mut Value, u: &budget::SessionUsage) {
    v["usage"] = serde_json::json!({"total": u.total, "gates": u.gates});
    let Some(steps) = v.get_mut("steps").and_then(Value::as_array_mut) else {
        return;
    };
    for (index, usage) in &u.steps {
        let Some(step) = steps
            .iter_mut()
            .find(|st| st.get("index").and_then(Value::as_u64) == Some(*index as u64))
        else {
            continue;
        };
        step["usage"] = serde_json::json!(usage);
    }
}

/// What status.json does not say: who drives the session now, and the question the claimed
/// step's run waits on. Best effort: what cannot be read is left out.
#[derive(Default)]
pub struct Live {
    driver: Option<Holder>,
    waiting: Option<(usize, String)>,
    /// Said `running`, yet no process drives it: what continues it.
    stopped: Option<Stopped>,
}

/// A session whose baton driver is gone (Ctrl-C, a kill, a crash) while status.json still
/// says `running`.
pub struct Stopped {
    /// The driver that left, when its note is still there.
    last: Option<Holder>,
    /// `baton session continue …`, with the recorded model's traces when it was replayed.
    resume: String,
}

/// Whether `s` is stopped: `running`, no live driver, and either a baton driver left its note
/// or the active step is claimed by baton's owner on this host. A step claimed by another
/// agent (maestro's `ralph` CLI) with no baton driver is that agent's, not stopped.
fn stopped(s: &Session, live: &Live, target: &Target) -> Option<Stopped> {
    // A step's run waiting on a question is not stopped: it waits for `session answer`.
    if s.status() != "running" || live.driver.is_some() || live.waiting.is_some() {
        return None;
    }
    let owner = super::setup::owner();
    let active = s.active_index();
    let ours = active.is_some_and(|i| step_run::current_claim(s, i, &owner).is_some());
    let last = driver_lock::last_holder(&s.dir);
    if !ours && last.is_none() {
        return None;
    }
    let mut resume = format!(
        "baton session continue --project {}",
        text::shell_word(&target.project.display().to_string())
    );
    if let Some(id) = &target.session {
        resume.push_str(&format!(" --session {}", text::shell_word(id)));
    }
    // A replayed session goes on replaying: its newest step run names its trace (stopped
    // between two steps, no step is claimed).
    if let Some(dir) = replayed_from(s) {
        resume.push_str(&format!(
            " --replay {}",
            text::shell_word(&dir.display().to_string())
        ));
    }
    Some(Stopped { last, resume })
}

/// The directory of the traces the session's newest step run was replayed from, if it was.
fn replayed_from(s: &Session) -> Option<PathBuf> {
    let store = Store::open_default().ok()?;
    let model = model_choice::newest_record(&store, &step_run::linked_run_ids(s))?;
    let trace = PathBuf::from(model.trace.filter(|_| model.replay)?);
    trace
        .is_file()
        .then(|| trace.parent().map(Path::to_path_buf))?
}

impl Live {
    pub fn of(s: &Session, project: &Path) -> Live {
        Live {
            driver: driver_lock::live_holder(&s.dir).ok().flatten(),
            waiting: waiting_question(s, project),
            stopped: None,
        }
    }

    fn text(&self) -> String {
        let mut out = String::new();
        if let Some(h) = &self.driver {
            out.push_str(&format!(
                "Driver:   pid {} ({}) since {}\n",
                h.pid,
                text::line(&h.command, 60),
                text::line(&h.since, 40)
            ));
        }
        if let Some((index, q)) = &self.waiting {
            out.push_str(&format!(
                "Waiting:  step {index} asks: {}\n",
                text::line(q, 300)
            ));
        }
        out
    }

    /// The board's `running` lines, said as they are when nobody drives the session.
    fn amend(&self, board: String, s: &Session) -> String {
        let Some(stopped) = &self.stopped else {
            return board;
        };
        let mut out = String::new();
        for line in board.lines() {
            if line.starts_with("Status:") {
                out.push_str(&format!(
                    "Status:   interrupted (revision {}); continue with `{}`\n",
                    s.revision(),
                    stopped.resume
                ));
            } else if line.starts_with("Current:") {
                out.push_str(&line.replace("(running, claimed by ", "(interrupted, claimed by "));
                out.push('\n');
            } else {
                out.push_str(line);
                out.push('\n');
            }
        }
        if let Some(h) = &stopped.last {
            out.push_str(&format!(
                "Stopped:  no process drives it; the last driver was pid {} ({}) since {}\n",
                h.pid,
                text::line(&h.command, 60),
                text::line(&h.since, 40)
            ));
        }
        out
    }

    fn add_to(&self, v: &mut Value) {
        v["interrupted"] = Value::Bool(self.stopped.is_some());
        v["continue_with"] = self
            .stopped
            .as_ref()
            .map_or(Value::Null, |st| Value::from(st.resume.clone()));
        v["driver"] = self
            .driver
            .as_ref()
            .map_or(Value::Null, |h| serde_json::json!(h));
        v["waiting_question"] = self.waiting.as_ref().map_or(
            Value::Null,
            |(i, q)| serde_json::json!({"index": i, "question": q}),
        );
    }
}

/// The question the claimed step's task run waits on, if it waits.
fn waiting_question(s: &Session, project: &Path) -> Option<(usize, String)> {
    let index = s.active_index()?;
    let link = step_run::read_link(s, index, &super::setup::owner())?;
    let store = Store::open_default().ok()?;
    // The project is registered: the linked run lives in it.
    let run = store.project(project).ok()?.get_run(&link.run_id).ok()?;
    if run.phase != Phase::WaitingUser {
        return None;
    }
    let question = run.waiting_for.as_ref()?.get("question")?.as_str()?;
    Some((index, question.to_string()))
}

/// ralph's read model with the decisions added.
pub fn json(s: &Session, recent: &Recent) -> Value {
    let mut v = summary_json(s);
    v["decisions"] = Value::from(recent.records.clone());
    v["decisions_truncated"] = Value::from(recent.truncated);
    v["decisions_skipped_lines"] = Value::from(recent.skipped);
    v
}

pub fn text(s: &Session, recent: &Recent, live: &Live) -> String {
    let mut out = live.amend(here_and_now(&board(s), s, live), s);
    let extra = live.text();
    if !extra.is_empty() {
        out.push('\n');
        out.push_str(&extra);
    }
    if recent.records.is_empty() && recent.skipped == 0 {
        return out;
    }
    let older = if recent.truncated { ", latest" } else { "" };
    out.push_str(&format!("\nDecisions ({}{older})\n", recent.records.len()));
    for d in &recent.records {
        out.push_str(&format!("  {}\n", decision_line(d)));
    }
    if recent.skipped > 0 {
        out.push_str(&format!(
            "  ({} damaged line(s) in decisions.ndjson not shown)\n",
            recent.skipped
        ));
    }
    out
}

/// ralph's board says what status.json says: `running` while a step's run waits on a
/// person, and the position the session was built at. `baton session status` says where the
/// session is now: waiting, and the stage of the current step (or done).
fn here_and_now(board: &str, s: &Session, live: &Live) -> String {
    let position = baton_lifecycle::session::position::now(s);
    let mut out = String::new();
    for line in board.lines() {
        if line.starts_with("Status:") && s.status() == "running" && live.waiting.is_some() {
            out.push_str(&format!(
                "Status:   waiting for an answer (revision {})\n",
                s.revision()
            ));
        } else if line.starts_with("Position:") {
            out.push_str(&format!("Position: {}\n", text::line(&position, 80)));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// `[4] post-verify → fix · confidence 80 (asked proceed) — reason`
pub fn decision_line(d: &Value) -> String {
    let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("?");
    let mut line = String::new();
    if let Some(i) = d.get("step_index").and_then(Value::as_u64) {
        line.push_str(&format!("[{i}] "));
    }
    line.push_str(&format!(
        "{} → {}",
        text::line(s("node_id"), 40),
        text::line(s("verdict"), 20)
    ));
    if let Some(c) = d.get("confidence_score").and_then(Value::as_u64) {
        line.push_str(&format!(" · confidence {c}"));
    }
    if let Some(asked) = d.get("requested_verdict").and_then(Value::as_str)
        && Some(asked) != d.get("verdict").and_then(Value::as_str)
    {
        line.push_str(&format!(" (asked {})", text::line(asked, 20)));
    }
    if let Some(summary) = d.get("summary").and_then(Value::as_str)
        && !summary.is_empty()
    {
        // One line per decision: a reason is shown up to its first line break.
        let first = text::line(summary.lines().next().unwrap_or(""), 160);
        line.push_str(&format!(" — {first}"));
    }
    line
}
