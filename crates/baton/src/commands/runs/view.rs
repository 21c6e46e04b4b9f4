//! What `runs show` and `runs log` print of a run, local or queued: the run's view and its
//! audit log records.

use crate::ui::table::pad;
use crate::ui::{cache_writes, thousands, visible, visible_line};
use baton_engine::inspect;
use baton_store::RunKind;
use serde_json::Value;
use std::io::Write;

/// Enough of a UUID v7 to be unique in practice (the first 8 digits are the time).
pub fn short_id(id: &str) -> &str {
    id.get(..13).unwrap_or(id)
}

/// `28,842 tokens (26,176 prompt, 71% cached; 2,666 completion), 10 calls, $0.0123;
/// requests share 81% of their bytes with the one before` (`71% cached, 2,100 written to
/// cache;` where the provider wrote to its cache).
fn usage_line(r: &baton_engine::spend::Recorded) -> String {
    let u = &r.usage;
    let mut line = format!(
        "{} tokens ({} prompt, {:.0}% cached{}; {} completion), {} calls",
        thousands(u.total_tokens),
        thousands(u.prompt_tokens),
        u.cached_share() * 100.0,
        cache_writes(u.cache_write_tokens),
        thousands(u.completion_tokens),
        r.calls
    );
    if let Some(cost) = u.cost_usd {
        line.push_str(&format!(", ${cost:.4}"));
    }
    if let Some(share) = r.cacheable_prefix_share() {
        line.push_str(&format!(
            "; requests share {:.0}% of their bytes with the one before",
            share * 100.0
        ));
    }
    line
}

/// What `runs show` prints of a run: `project` is the line's text (a local run's root, a
/// queued run's remote); `interrupted`: no process drives the run though it says running.
pub fn print_view(
    out: &mut impl Write,
    view: inspect::RunView,
    project: &str,
    interrupted: bool,
) -> std::io::Result<()> {
    // Every value of the view can be the model's or the project's text: the whole view is
    // shown with its escapes visible (single-line values have their line breaks shown too).
    let mut text = Vec::new();
    write_view(&mut text, view, project, interrupted)?;
    out.write_all(visible(&String::from_utf8_lossy(&text)).as_bytes())
}

fn write_view(
    out: &mut impl Write,
    view: inspect::RunView,
    project: &str,
    interrupted: bool,
) -> std::io::Result<()> {
    let inspect::RunView {
        run,
        state: frontmatter,
        progress,
        note,
        spending,
        ..
    } = view;
    writeln!(out, "run       {}", run.run_id)?;
    writeln!(out, "project   {project}")?;
    if let Some(wt) = &run.work_tree {
        // A story of a parallel epic: `@project` is its git worktree.
        writeln!(out, "worktree  {}", wt.display())?;
    }
    writeln!(out, "kind      {}", run.kind.as_str())?;
    if run.kind == RunKind::Task {
        writeln!(
            out,
            "task      {}   agent {}",
            run.workflow_ref, run.active_agent_id
        )?;
    } else {
        writeln!(
            out,
            "package   {} (sha256 {})",
            run.package_id,
            &run.package_sha256[..run.package_sha256.len().min(16)]
        )?;
        writeln!(
            out,
            "workflow  {}   agent {}",
            run.workflow_ref, run.active_agent_id
        )?;
    }
    if interrupted {
        let short = short_id(&run.run_id);
        writeln!(
            out,
            "phase     interrupted (no process drives it; `baton resume {short}` continues it)"
        )?;
    } else if let Some(reason) = &run.stop_reason {
        writeln!(out, "phase     {} ({reason})", run.phase.as_str())?;
    } else {
        writeln!(out, "phase     {}", run.phase.as_str())?;
    }
    // What `answer`, `resume` and `chat` go on with unless told otherwise.
    if let Some(m) = &run.model {
        let source = match (&m.base_url, &m.trace) {
            (_, Some(trace)) if m.replay => format!(" (replays {trace})"),
            (Some(url), _) => format!(" at {url}"),
            _ => String::new(),
        };
        writeln!(out, "model     {}{source}", m.name)?;
    }
    if run.kind != RunKind::Task {
        writeln!(out, "context   {}", run.context.as_str())?;
    }
    if let Some(f) = baton_store::next_step::failure(&run) {
        // The error a run stopped on, as a failing command prints one: code, message, hint.
        writeln!(out, "error     {}: {}", f.code, f.message)?;
        if let Some(hint) = &f.hint {
            writeln!(out, "hint      {hint}")?;
        }
    } else if let Some(w) = &run.waiting_for {
        writeln!(
            out,
            "waiting   {}",
            w.get("question")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| w.to_string())
        )?;
    }
    // An interrupted run's phase line already says how it goes on.
    if let Some(next) = baton_store::next_step::next_step(&run, false).filter(|_| !interrupted) {
        writeln!(out, "next      {next}")?;
    }
    writeln!(
        out,
        "created   {}   updated {}",
        run.created_at, run.last_updated_at
    )?;
    if spending.calls > 0 {
        writeln!(out, "usage     {}", usage_line(&spending))?;
    }
    if let Some(items) = progress.as_array() {
        writeln!(out, "\nprogress")?;
        for item in items {
            let mark = match item["status"].as_str() {
                Some("completed") => "[x]",
                Some("current") => "[>]",
                _ => "[ ]",
            };
            writeln!(
                out,
                "  {mark} {} {} {}",
                pad(item["nodeId"].as_str().unwrap_or(""), 32),
                pad(item["type"].as_str().unwrap_or(""), 9),
                visible_line(item["title"].as_str().unwrap_or(""))
            )?;
        }
    }
    if let Some(artifacts) = frontmatter
        .get("artifacts")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
    {
        writeln!(out, "\nartifacts")?;
        for a in artifacts {
            writeln!(out, "  {}", visible_line(a.as_str().unwrap_or("")))?;
        }
    }
    if let Some(vars) = frontmatter
        .get("variables")
        .and_then(Value::as_object)
        .filter(|v| !v.is_empty())
    {
        writeln!(out, "\nvariables")?;
        for (k, v) in vars {
            writeln!(
                out,
                "  {}: {}",
                visible_line(k),
                visible_line(
                    &v.as_str()
                        .map(str::to_owned)
                        .unwrap_or_else(|| v.to_string())
                )
            )?;
        }
    }
    if let Some(note) = note {
        writeln!(out, "\nnote: {note}")?;
    }
    Ok(())
}

/// Audit log records as `runs log` prints them: raw JSONL with `--json`, else a line each.
pub fn print_records(out: &mut impl Write, records: &[Value], as_json: bool) -> anyhow::Result<()> {
    for record in records {
        if as_json {
            writeln!(out, "{}", serde_json::to_string(record)?)?;
        } else {
            writeln!(out, "{}", pretty_record(record))?;
        }
    }
    out.flush()?;
    Ok(())
}

/// `12:00:01  tool.exec  fs.read  @project/x.md  ok  3ms  [step-01]`
fn pretty_record(r: &Value) -> String {
    let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
    let time = s("ts").get(11..19).unwrap_or(s("ts"));
    let mut line = format!("{time}  {:<12}", s("kind"));
    if !s("toolName").is_empty() {
        line.push_str(&format!(" {:<15}", s("toolName")));
    }
    if let Some(path) = r.pointer("/input/path").and_then(Value::as_str) {
        line.push_str(&format!(" {path}"));
    } else if let Some(command) = r.pointer("/input/command").and_then(Value::as_str) {
        // A coding-agent CLI's shell command (see `baton_executor::task::note`), on one line.
        let first = command.lines().next().unwrap_or_default();
        let cut: String = first.chars().take(80).collect();
        line.push_str(&format!(" `{cut}`"));
    }
    match r.pointer("/output/ok").and_then(Value::as_bool) {
        Some(true) => line.push_str("  ok"),
        Some(false) => {
            let code = r
                .pointer("/output/error/code")
                .and_then(Value::as_str)
                .unwrap_or("error");
            line.push_str(&format!("  {code}"));
        }
        None => {}
    }
    if let Some(ms) = r.get("durationMs").and_then(Value::as_u64) {
        line.push_str(&format!("  {ms}ms"));
    }
    if !s("nodeId").is_empty() {
        line.push_str(&format!("  [{}]", s("nodeId")));
    }
    if !s("message").is_empty() {
        line.push_str(&format!("  {}", s("message")));
    }
    // The path, tool name and message are the model's: one line, its escapes visible.
    visible_line(&line).into_owned()
}
