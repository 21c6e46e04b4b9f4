//! `baton runs`: list, reindex, show and follow the runs of this machine's store; `show` and
//! `log` with `--db` read a queued run from the queue's database instead.

mod queued;
mod view;

use crate::exit;
use crate::failure::Failure;
use crate::ui::color::{self, Paint, Stream};
use crate::ui::table::{Cell, Column, Table};
use crate::ui::visible;
use baton_engine::inspect::{self, Listed, phase_text};
use baton_store::time::{now_secs, parse_rfc3339, short_age};
use baton_store::{Phase, Project, RunMetadata, Store, StoreWarning};
use baton_store::{driver_lock, jsonl};
use clap::Subcommand;
use queued::RunsDbArgs;
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;
use view::{print_records, print_view, short_id};

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// Runs, newest first (all projects, or one with --project).
    List {
        /// Only the runs of this project directory.
        #[arg(long, short = 'p')]
        project: Option<PathBuf>,
        /// Print a JSON array of run metadata (every run, unless --limit is given).
        #[arg(long)]
        json: bool,
        /// Show at most N runs (the table shows 50 by default).
        #[arg(long, short = 'n', value_name = "N", conflicts_with = "all")]
        limit: Option<usize>,
        /// Show every run.
        #[arg(long)]
        all: bool,
    },
    /// Rebuild the runs index from the run directories (all projects, or one with --project).
    Reindex {
        /// Only this project directory.
        #[arg(long, short = 'p')]
        project: Option<PathBuf>,
        /// Print a JSON report per project.
        #[arg(long)]
        json: bool,
    },
    /// One run: metadata, state frontmatter and progress per node. With --db: a queued unit
    /// and its run as its last checkpoint left it.
    Show {
        /// Run id, or a unique prefix of it; with --db or --db-env, the unit's id.
        run: String,
        /// Print the run as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        db: RunsDbArgs,
    },
    /// The run's audit log (one line per tool call and engine event). With --db: a queued
    /// unit's, as far as its last checkpoint.
    Log {
        /// Run id, or a unique prefix of it; with --db or --db-env, the unit's id.
        run: String,
        /// Print the raw JSONL records.
        #[arg(long)]
        json: bool,
        /// Keep printing new records until the run completes or fails.
        #[arg(long, short = 'f', conflicts_with_all = ["db", "db_env"])]
        follow: bool,
        #[command(flatten)]
        db: RunsDbArgs,
    },
}

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
            return Ok(queued::show(db, run, *json));
        }
        RunsCommand::Log { run, json, db, .. } if db.given() => {
            return Ok(queued::log(db, run, *json));
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
        crate::ui::print_json(&reports)?;
    }
    Ok(code)
}

fn show(store: &Store, query: &str, as_json: bool) -> anyhow::Result<u8> {
    let view = inspect::show(store, query)?;
    if as_json {
        crate::ui::print_json(&view.to_json())?;
        return Ok(exit::OK);
    }
    let project = view.project.root().display().to_string();
    let interrupted = driver_lock::is_interrupted(&view.project, &view.run);
    print_view(&mut std::io::stdout().lock(), view, &project, interrupted)?;
    Ok(exit::OK)
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
