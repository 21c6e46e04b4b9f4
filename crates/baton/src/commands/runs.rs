use crate::cli::RunsCommand;
use crate::exit;
use crate::failure::Failure;
use crate::ui::color::{self, Paint, Stream};
use crate::ui::table::pad;
use crate::ui::table::{Cell, Column, Table};
use crate::ui::{visible, visible_line};
use baton_engine::inspect::{self, Listed, phase_text};
use baton_store::time::{now_secs, parse_rfc3339, short_age};
use baton_store::{Phase, Project, RunKind, RunMetadata, Store, StoreWarning};
use baton_store::{driver_lock, jsonl};
use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

pub fn run(cmd: RunsCommand) -> anyhow::Result<u8> {
    let as_json = match &cmd {
        RunsCommand::List { json, .. }
        | RunsCommand::Reindex { json, .. }
        | RunsCommand::Show { json, .. }
        | RunsCommand::Log { json, .. } => *json,
    };
    // A queued run: read from the queue's database, not this machine's store.
    match &cmd {
        RunsCommand::Show { run, json, db } if db.given() => {
            return Ok(super::runs_queued::show(db, run, *json));
        }
        RunsCommand::Log { run, json, db, .. } if db.given() => {
            return Ok(super::runs_queued::log(db, run, *json));
        }
        _ => {}
    }
    let store = Store::open_default()?;
    let result = match cmd {
        RunsCommand::List {
            project,
            json,
            limit,
            all,
        } => {
            // The table is for people: the newest 50. JSON is for programs: everything.
            let limit = match (limit, all || json) {
                (Some(n), _) => Some(n),
                (None, true) => None,
                (None, false) => Some(TABLE_LIMIT),
            };
            list(&store, project.as_deref(), json, limit)
        }
        RunsCommand::Reindex { project, json } => reindex(&store, project.as_deref(), json),
        RunsCommand::Show { run, json, .. } => show(&store, &run, json),
        RunsCommand::Log {
            run, json, follow, ..
        } => log(&store, &run, json, follow),
    };
    Ok(result.unwrap_or_else(|e| {
        // The reader went away (`baton runs show ID | head`): nothing left to say.
        if crate::failure::is_broken_pipe(&e) {
            exit::OK
        } else {
            Failure::from_anyhow(&e).report(as_json)
        }
    }))
}

/// Runs the table shows unless told otherwise.
const TABLE_LIMIT: usize = 50;

fn warn(warnings: &[StoreWarning]) {
    for w in warnings {
        eprintln!("warning[{}]: {}", w.code, visible(&w.to_string()));
    }
}

fn list(
    store: &Store,
    project: Option<&Path>,
    as_json: bool,
    limit: Option<usize>,
) -> anyhow::Result<u8> {
    // The rows borrow from whichever listing was read: no copy per run.
    let single: (Project, Vec<RunMetadata>);
    let all: baton_store::StoreListing;
    let (rows, more): (Vec<(&Project, &RunMetadata)>, bool) = match project {
        Some(root) => {
            let p = store.project(root)?;
            let found = p.runs(limit)?;
            warn(&found.warnings);
            single = (p, found.runs);
            let rows = single.1.iter().map(|r| (&single.0, r)).collect();
            (rows, found.more)
        }
        None => {
            all = store.runs(limit)?;
            warn(&all.warnings);
            (all.rows.iter().map(|(p, r)| (p, r)).collect(), all.more)
        }
    };
    let projects = rows
        .iter()
        .map(|(p, _)| p.id())
        .collect::<std::collections::HashSet<_>>()
        .len();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    if as_json {
        let runs: Vec<Listed> = rows
            .iter()
            .map(|(p, r)| Listed {
                run: r,
                interrupted: driver_lock::is_interrupted(p, r),
            })
            .collect();
        serde_json::to_writer_pretty(&mut out, &runs)?;
        writeln!(out)?;
        return Ok(exit::OK);
    }
    if rows.is_empty() {
        writeln!(out, "no runs yet")?;
        return Ok(exit::OK);
    }
    let now = now_secs();
    let show_project = project.is_none() && projects > 1;
    let mut columns = vec![
        Column::left("RUN", 13),
        Column::left("PHASE", 24),
        Column::left("KIND", 8),
        Column::left("WORKFLOW", 32),
        Column::left("NODE", 30),
        Column::right("AGE", 5),
    ];
    if show_project {
        columns.push(Column::left("PROJECT", usize::MAX));
    }
    let mut table = Table::new(&columns);
    for (p, r) in &rows {
        let age = parse_rfc3339(&r.created_at)
            .map(|t| short_age(now.saturating_sub(t)))
            .unwrap_or_default();
        let phase = phase_text(p, r);
        let paint = match r.phase {
            Phase::Completed => Paint::Good,
            Phase::Failed => Paint::Bad,
            Phase::WaitingUser => Paint::Warn,
            _ if phase != r.phase.as_str() => Paint::Warn,
            _ => Paint::Strong,
        };
        let mut row: Vec<Cell> = vec![
            Cell::painted(short_id(&r.run_id), Paint::Dim),
            Cell::painted(phase, paint),
            r.kind.as_str().into(),
            r.workflow_ref.as_str().into(),
            r.current_node_id.as_deref().unwrap_or("-").into(),
            age.into(),
        ];
        if show_project {
            row.push(p.root().display().to_string().into());
        }
        table.row(row);
    }
    out.write_all(table.render(color::enabled(Stream::Out)).as_bytes())?;
    out.flush()?;
    if more {
        eprintln!("(the {} newest runs; --all lists every run)", rows.len());
    }
    Ok(exit::OK)
}

fn reindex(store: &Store, project: Option<&Path>, as_json: bool) -> anyhow::Result<u8> {
    let projects = match project {
        Some(root) => vec![store.project(root)?],
        None => {
            let scan = store.projects()?;
            warn(&scan.warnings);
            scan.projects
        }
    };
    let mut reports = Vec::new();
    let mut code = exit::OK;
    for p in &projects {
        match p.reindex() {
            Ok((report, warnings)) => {
                warn(&warnings);
                if !as_json {
                    outln!(
                        "{}: {} run{} ({} from run.json, {} from the old index, {} from state files)",
                        p.root().display(),
                        report.runs,
                        if report.runs == 1 { "" } else { "s" },
                        report.from_run_json,
                        report.from_old_index,
                        report.from_state
                    );
                    for skipped in &report.skipped {
                        outln!("  skipped {skipped}");
                    }
                }
                reports.push(json!({
                    "projectRoot": p.root(),
                    "projectId": p.id(),
                    "runs": report.runs,
                    "fromRunJson": report.from_run_json,
                    "fromOldIndex": report.from_old_index,
                    "fromState": report.from_state,
                    "skipped": report.skipped,
                    "keptDamaged": report.kept_damaged,
                }));
            }
            Err(e) => {
                eprintln!("error[{}]: {}: {e}", e.code(), p.root().display());
                code = exit::FAILURE;
            }
        }
    }
    if as_json {
        super::print_json(&reports)?;
    }
    Ok(code)
}

/// Enough of a UUID v7 to be unique in practice (the first 8 digits are the time).
fn short_id(id: &str) -> &str {
    id.get(..13).unwrap_or(id)
}

/// `28,842 tokens (26,176 prompt, 71% cached; 2,666 completion), 10 calls, $0.0123;
/// requests share 81% of their bytes with the one before`.
pub(crate) fn usage_line(r: &baton_engine::spend::Recorded) -> String {
    let u = &r.usage;
    let mut line = format!(
        "{} tokens ({} prompt, {:.0}% cached; {} completion), {} calls",
        thousands(u.total_tokens),
        thousands(u.prompt_tokens),
        u.cached_share() * 100.0,
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

/// `1234567` as `1,234,567`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn show(store: &Store, query: &str, as_json: bool) -> anyhow::Result<u8> {
    let view = inspect::show(store, query)?;
    if as_json {
        super::print_json(&view.to_json())?;
        return Ok(exit::OK);
    }
    let project = view.project.root().display().to_string();
    let interrupted = driver_lock::is_interrupted(&view.project, &view.run);
    print_view(&mut std::io::stdout().lock(), view, &project, interrupted)?;
    Ok(exit::OK)
}

/// What `runs show` prints of a run: `project` is the line's text (a local run's root, a
/// queued run's remote); `interrupted`: no process drives the run though it says running.
pub(super) fn print_view(
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
    if let Some(w) = &run.waiting_for {
        writeln!(
            out,
            "waiting   {}",
            w.get("question")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| w.to_string())
        )?;
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

fn log(store: &Store, query: &str, as_json: bool, follow: bool) -> anyhow::Result<u8> {
    let (project, run) = store.find_run(query)?;
    let path = project.run_paths(&run.run_id).execution_log;
    let mut printed = 0usize;
    loop {
        let records = jsonl::read(&path)?.records;
        print_records(
            &mut std::io::stdout().lock(),
            &records[printed.min(records.len())..],
            as_json,
        )?;
        printed = printed.max(records.len());
        if !follow {
            return Ok(exit::OK);
        }
        // Done when nothing drives the run any more (it ended, waits, or its process died)
        // and every record is out.
        let phase = project.get_run(&run.run_id)?.phase;
        let live = driver_lock::is_driven(&project, &run.run_id);
        let ended = matches!(phase, Phase::Completed | Phase::Failed) || !live;
        if ended && jsonl::read(&path)?.records.len() == printed {
            return Ok(exit::OK);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Audit log records as `runs log` prints them: raw JSONL with `--json`, else a line each.
pub(super) fn print_records(
    out: &mut impl Write,
    records: &[Value],
    as_json: bool,
) -> anyhow::Result<()> {
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
