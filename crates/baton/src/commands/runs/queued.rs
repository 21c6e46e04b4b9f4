//! `baton runs show|log <UNIT> --db URL`: a queued run read from the queue's database. The
//! unit and its run as its checkpoints left it come from `baton_worker::read_unit_run` (folded
//! into a scratch store); the run is printed by the same code as a local run's `runs show` and
//! `runs log`, its project shown as the unit's remote and base commit.

use crate::exit;
use crate::failure::Failure;
use crate::queue_db;
use baton_queue::{QueueError, UnitState};
use baton_store::jsonl;
use baton_worker::{RunPayload, UnitRun, WorkerError};
use clap::Args;
use serde_json::Value;
use std::io::Write;

/// A queued run: read it from the queue's database instead of this machine's store.
#[derive(Debug, Args)]
pub struct RunsDbArgs {
    /// The queue's database, e.g. postgresql://USER@HOST:5432/DBNAME; the run is then a unit
    /// id (`baton queue status` lists them). Leave the password out: it comes from PGPASSWORD
    /// or ~/.pgpass.
    #[arg(long, value_name = "URL")]
    pub db: Option<String>,
    /// The name of an environment variable holding the database URL.
    #[arg(long, value_name = "NAME", conflicts_with = "db")]
    pub db_env: Option<String>,
}

impl RunsDbArgs {
    pub fn given(&self) -> bool {
        self.db.is_some() || self.db_env.is_some()
    }
}

fn failure(e: &WorkerError) -> Failure {
    match e {
        WorkerError::Queue(q) => queue_db::failure(q),
        other => Failure::new(other.code(), other.to_string(), exit::FAILURE).hint(other.hint()),
    }
}

/// The unit and its run, or the failure to report.
fn read(db: &RunsDbArgs, id: &str) -> Result<UnitRun, Failure> {
    let unit: i64 = id.trim().parse().map_err(|_| {
        queue_db::failure(&QueueError::InvalidInput(format!(
            "with --db the run is a unit's id (a number), not {id:?}"
        )))
        .hint(Some(
            "`baton queue status --db URL` lists the units; without --db, `baton runs show` \
             reads this machine's runs"
                .into(),
        ))
    })?;
    let config = queue_db::db_config(db.db.as_deref(), db.db_env.as_deref(), "--db URL")
        .map_err(|e| queue_db::failure(&e))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::new("IO", e.to_string(), exit::FAILURE))?;
    runtime
        .block_on(baton_worker::read_unit_run(&config, unit))
        .map_err(|e| failure(&e))
}

/// Ends a command: `Ok` is done, an error is reported (a closed pipe says nothing).
fn finish(result: anyhow::Result<()>, as_json: bool) -> u8 {
    match result {
        Ok(()) => exit::OK,
        Err(e) if crate::failure::is_broken_pipe(&e) => exit::OK,
        Err(e) => Failure::from_anyhow(&e).report(as_json),
    }
}

pub fn show(db: &RunsDbArgs, id: &str, as_json: bool) -> u8 {
    let unit_run = match read(db, id) {
        Ok(u) => u,
        Err(f) => return f.report(as_json),
    };
    let result = if as_json {
        unit_run
            .to_json()
            .map_err(|e| anyhow::anyhow!(e))
            .and_then(|v| crate::ui::print_json(&v))
    } else {
        print_unit(&unit_run)
    };
    match result {
        Ok(()) => exit::OK,
        Err(e) => match e.downcast_ref::<WorkerError>() {
            Some(w) => failure(w).report(as_json),
            None => finish(Err(e), as_json),
        },
    }
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

/// The unit's lines, then the run as `runs show` prints a local one; the unit's outcome and
/// payload come from a worker and a model, so the whole text is shown with escapes visible.
fn print_unit(u: &UnitRun) -> anyhow::Result<()> {
    let mut text = Vec::new();
    write_unit(&mut text, u)?;
    let shown = crate::ui::visible(&String::from_utf8_lossy(&text)).into_owned();
    std::io::stdout().lock().write_all(shown.as_bytes())?;
    Ok(())
}

fn write_unit(out: &mut Vec<u8>, u: &UnitRun) -> anyhow::Result<()> {
    let unit = &u.unit;
    writeln!(
        out,
        "unit      {} ({} in queue {})",
        unit.id,
        unit.kind.as_str(),
        unit.queue
    )?;
    let mut state = format!(
        "state     {}   epoch {}   attempts {}",
        unit.state.as_str(),
        unit.epoch,
        unit.attempts
    );
    if let Some(owner) = &unit.owner {
        let who = if unit.state == UnitState::Leased {
            "worker"
        } else {
            "last worker"
        };
        state.push_str(&format!("   {who} {owner}"));
    }
    writeln!(out, "{state}")?;
    if let Some((branch, commit)) = u.result() {
        writeln!(out, "result    {branch} at {}", short(commit))?;
    }
    if unit.state != UnitState::Done
        && let Some(o) = &unit.outcome
    {
        let text = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or("");
        writeln!(out, "outcome   {}: {}", text("code"), text("message"))?;
    }
    writeln!(
        out,
        "submitted {}   updated {}",
        unit.created_at, unit.updated_at
    )?;
    let Some(run) = &u.run else {
        // Queued and never started: what was submitted, and that no run exists yet.
        writeln!(out, "project   {}", u.project_text())?;
        if let Ok(p) = RunPayload::from_value(&unit.payload) {
            let sha = unit.package_sha256.as_deref().unwrap_or("");
            writeln!(
                out,
                "package   {} (sha256 {})",
                p.package,
                &sha[..sha.len().min(16)]
            )?;
            if let Some(w) = &p.workflow {
                writeln!(out, "workflow  {w}")?;
            }
        }
        writeln!(
            out,
            "\nno run yet: no worker has checkpointed this unit (it is {})",
            unit.state.as_str()
        )?;
        return Ok(());
    };
    writeln!(out, "checkpoint {}", short(&run.commit))?;
    writeln!(out)?;
    let view = run.view()?;
    super::view::print_view(out, view, &u.project_text(), false)?;
    if let Some(note) = &run.package_note {
        writeln!(out, "note: {note}")?;
    }
    Ok(())
}

pub fn log(db: &RunsDbArgs, id: &str, as_json: bool) -> u8 {
    let unit_run = match read(db, id) {
        Ok(u) => u,
        Err(f) => return f.report(as_json),
    };
    let Some(run) = &unit_run.run else {
        eprintln!(
            "unit {} has no run yet: no worker has checkpointed it (it is {})",
            unit_run.unit.id,
            unit_run.unit.state.as_str()
        );
        return exit::OK;
    };
    let path = match run.execution_log() {
        Ok(p) => p,
        Err(e) => return failure(&e).report(as_json),
    };
    let result = jsonl::read(&path)
        .map_err(anyhow::Error::from)
        .and_then(|read| {
            super::view::print_records(&mut std::io::stdout().lock(), &read.records, as_json)
        });
    finish(result, as_json)
}
