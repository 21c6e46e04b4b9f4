//! `baton queue init|status|cancel`: the PostgreSQL work queue (baton-queue). Parsing and
//! presentation only. The database URL never appears with its password: every message and
//! every JSON document shows it redacted.

use crate::exit;
use crate::queue_db::{DbArgs, db_config, failure};
use crate::ui::Paint;
use crate::ui::color::{self, Stream};
use crate::ui::table::{Cell, Column, Table};
use baton_queue::{DbConfig, Queue, QueueError, UnitState};
use baton_store::time::short_age;
use clap::{Args, Subcommand};
use serde_json::json;

#[derive(Debug, Subcommand)]
pub enum QueueCommand {
    /// Create the queue's tables (schema `baton`) in a PostgreSQL database, or bring them up to
    /// this baton's version. Safe to run again.
    Init(InitArgs),
    /// What the queue holds: units per state and queue, leases with their worker, epoch and
    /// age, units waiting for a person or a retry, failed units and why, workers and their
    /// last heartbeat, workers that stopped.
    Status(StatusArgs),
    /// Cancel a unit that is queued, leased or waiting. A worker holding it gets LEASE_LOST
    /// on its next write and stops.
    Cancel(CancelArgs),
}

#[derive(Debug, Args)]
pub struct InitArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Print what was done as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// List at most N units and workers per list (the counts are always complete).
    #[arg(long, short = 'n', value_name = "N", default_value = "50")]
    pub limit: u32,
    /// Print the status as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CancelArgs {
    /// The unit's id (`baton queue status` lists them).
    pub id: i64,
    #[command(flatten)]
    pub db: DbArgs,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cmd: QueueCommand) -> anyhow::Result<u8> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (json, result) = match cmd {
        QueueCommand::Init(args) => (args.json, runtime.block_on(init(&args))),
        QueueCommand::Status(args) => (args.json, runtime.block_on(status(&args))),
        QueueCommand::Cancel(args) => (args.json, runtime.block_on(cancel(&args))),
    };
    match result {
        Ok(()) => Ok(exit::OK),
        Err(e) => Ok(failure(&e).report(json)),
    }
}

fn config(db: &DbArgs) -> Result<DbConfig, QueueError> {
    db_config(db.db.as_deref(), db.db_env.as_deref(), "--db URL")
}

async fn init(args: &InitArgs) -> Result<(), QueueError> {
    let config = config(&args.db)?;
    let report = baton_queue::init(&config).await?;
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
        return Ok(());
    }
    if report.applied.is_empty() {
        outln!(
            "queue in {} is up to date (schema version {})",
            report.database,
            report.version
        );
    } else {
        outln!(
            "queue ready in {} (schema version {}, was {})",
            report.database,
            report.version,
            report.from_version
        );
        for m in &report.applied {
            outln!("  applied {}: {}", m.version, m.name);
        }
    }
    Ok(())
}

async fn status(args: &StatusArgs) -> Result<(), QueueError> {
    let config = config(&args.db)?;
    let s = baton_queue::Status::read(&config, i64::from(args.limit)).await?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&s).unwrap_or_default());
        return Ok(());
    }
    print_status(&s);
    Ok(())
}

/// The status as `baton queue status` prints it (also `baton demo queue`'s).
pub fn print_status(s: &baton_queue::Status) {
    let colour = color::enabled(Stream::Out);
    let paint = |p: Paint, text: &str| p.when(colour, text);
    outln!(
        "{} {} (schema version {})",
        paint(Paint::Strong, "queue"),
        s.database,
        s.schema_version
    );
    let c = &s.counts;
    outln!(
        "units: {} queued, {} leased, {} waiting, {} done, {} failed, {} cancelled",
        c.queued,
        c.leased,
        c.waiting,
        c.done,
        c.failed,
        c.cancelled
    );
    if s.queues.len() > 1 {
        let mut t = Table::new(&[
            Column::left("QUEUE", 30),
            Column::right("QUEUED", 9),
            Column::right("LEASED", 9),
            Column::right("WAITING", 9),
            Column::right("DONE", 9),
            Column::right("FAILED", 9),
            Column::right("CANCELLED", 9),
        ]);
        for q in &s.queues {
            let mut row: Vec<Cell> = vec![q.queue.as_str().into()];
            row.extend(
                UnitState::ALL
                    .iter()
                    .map(|st| Cell::from(q.counts.get(*st).to_string())),
            );
            t.row(row);
        }
        outln!();
        out!("{}", t.render(colour));
    }
    if s.expired_unswept > 0 {
        outln!(
            "{}",
            paint(
                Paint::Warn,
                &format!(
                    "{} lease(s) expired and not yet taken back (a worker's sweep does that)",
                    s.expired_unswept
                )
            )
        );
    }
    if !s.leased.is_empty() {
        outln!();
        outln!("{}", paint(Paint::Strong, "leased"));
        let mut t = Table::new(&[
            Column::right("ID", 12),
            Column::left("KIND", 6),
            Column::left("QUEUE", 20),
            Column::left("OWNER", 40),
            Column::right("EPOCH", 6),
            Column::right("HELD", 6),
            Column::right("HEARTBEAT", 9),
            Column::left("EXPIRES IN", 12),
        ]);
        for l in &s.leased {
            let expires = if l.expires_in_s <= 0.0 {
                Cell::painted("expired", Paint::Warn)
            } else {
                Cell::from(format!("{:.0}s", l.expires_in_s.ceil()))
            };
            t.row(vec![
                l.id.to_string().into(),
                l.kind.as_str().into(),
                l.queue.as_str().into(),
                l.owner.as_str().into(),
                l.epoch.to_string().into(),
                age(l.lease_age_s).into(),
                format!("{} ago", age(l.heartbeat_age_s)).into(),
                expires,
            ]);
        }
        out!("{}", t.render(colour));
        if c.leased > s.leased.len() as i64 {
            outln!("(the {} longest-held; --limit shows more)", s.leased.len());
        }
    }
    if !s.waiting.is_empty() {
        outln!();
        outln!("{}", paint(Paint::Strong, "waiting for a person"));
        let mut t = Table::new(&[
            Column::right("ID", 12),
            Column::left("KIND", 6),
            Column::left("QUEUE", 20),
            Column::right("SINCE", 6),
            Column::left("QUESTION", 80),
        ]);
        for w in &s.waiting {
            let question = w.question_text().unwrap_or_default().replace('\n', " ");
            t.row(vec![
                w.id.to_string().into(),
                w.kind.as_str().into(),
                w.queue.as_str().into(),
                age(w.waiting_s).into(),
                question.into(),
            ]);
        }
        out!("{}", t.render(colour));
        outln!("(answer one with `baton answer ID --db URL TEXT`)");
    }
    if !s.retrying.is_empty() {
        outln!();
        outln!(
            "{}",
            paint(Paint::Strong, "to be tried again (a failure that may pass)")
        );
        let mut t = Table::new(&[
            Column::right("ID", 12),
            Column::left("KIND", 6),
            Column::left("QUEUE", 20),
            Column::right("ATTEMPTS", 8),
            Column::left("READY IN", 9),
            Column::left("LAST FAILURE", 80),
        ]);
        for r in &s.retrying {
            let text = |k: &str| r.reason.get(k).and_then(|v| v.as_str()).unwrap_or("");
            let ready = if r.ready_in_s <= 0.0 {
                "now".to_string()
            } else {
                format!("{:.0}s", r.ready_in_s.ceil())
            };
            t.row(vec![
                r.id.to_string().into(),
                r.kind.as_str().into(),
                r.queue.as_str().into(),
                r.attempts.to_string().into(),
                ready.into(),
                format!("{}: {}", text("code"), text("message"))
                    .replace('\n', " ")
                    .into(),
            ]);
        }
        out!("{}", t.render(colour));
    }
    if !s.failed.is_empty() {
        outln!();
        outln!("{}", paint(Paint::Strong, "failed"));
        let mut t = Table::new(&[
            Column::right("ID", 12),
            Column::left("KIND", 6),
            Column::left("QUEUE", 20),
            Column::right("ATTEMPTS", 8),
            Column::right("FAILED", 8),
            Column::left("WHY", 80),
        ]);
        for f in &s.failed {
            let why = match (&f.code, &f.message) {
                (Some(code), Some(message)) => format!("{code}: {message}"),
                (Some(code), None) => code.clone(),
                (None, Some(message)) => message.clone(),
                (None, None) => "(no reason recorded)".to_string(),
            };
            t.row(vec![
                f.id.to_string().into(),
                f.kind.as_str().into(),
                f.queue.as_str().into(),
                f.attempts.to_string().into(),
                format!("{} ago", age(f.failed_s)).into(),
                Cell::painted(why.replace('\n', " "), Paint::Warn),
            ]);
        }
        out!("{}", t.render(colour));
        if c.failed > s.failed.len() as i64 {
            outln!("(the {} most recent; --limit shows more)", s.failed.len());
        }
        outln!("(the whole of one: `baton runs show ID --db URL`)");
    }
    outln!();
    if s.workers.is_empty() {
        outln!("no worker is running");
    } else {
        outln!("{}", paint(Paint::Strong, "workers"));
        let mut t = Table::new(&[
            Column::left("WORKER", 40),
            Column::left("HOST", 30),
            Column::right("LEASES", 6),
            Column::left("LAST HEARTBEAT", 20),
        ]);
        for w in &s.workers {
            t.row(vec![
                w.id.as_str().into(),
                w.host.as_str().into(),
                w.leases.to_string().into(),
                format!("{} ago", age(w.last_heartbeat_age_s)).into(),
            ]);
        }
        out!("{}", t.render(colour));
    }
    if !s.stopped_workers.is_empty() {
        outln!();
        outln!("{}", paint(Paint::Strong, "stopped (last 24 hours)"));
        let mut t = Table::new(&[
            Column::left("WORKER", 40),
            Column::left("HOST", 30),
            Column::left("STOPPED", 26),
        ]);
        for w in &s.stopped_workers {
            t.row(vec![
                w.id.as_str().into(),
                w.host.as_str().into(),
                format!("{} ago ({})", age(w.stopped_s), w.stopped_at).into(),
            ]);
        }
        out!("{}", t.render(colour));
    }
}

async fn cancel(args: &CancelArgs) -> Result<(), QueueError> {
    let config = config(&args.db)?;
    let queue = Queue::open(&config).await?;
    let was = queue.cancel(args.id).await?;
    let unit = queue.unit(args.id).await?;
    if args.json {
        let body = json!({
            "id": args.id,
            "state": "cancelled",
            "previousState": was,
            "owner": if was == UnitState::Leased { unit.owner.clone() } else { None },
            "epoch": unit.epoch,
        });
        outln!(
            "{}",
            serde_json::to_string_pretty(&body).unwrap_or_default()
        );
        return Ok(());
    }
    match (was, unit.owner.as_deref()) {
        (UnitState::Leased, Some(owner)) => outln!(
            "cancelled unit {} (it was leased by {owner} at epoch {}: that worker gets LEASE_LOST \
             on its next write)",
            args.id,
            unit.epoch
        ),
        _ => outln!("cancelled unit {} (it was {})", args.id, was.as_str()),
    }
    Ok(())
}

/// Seconds as `12s`, `5m`, `3h`, `2d`.
fn age(seconds: f64) -> String {
    short_age(seconds.max(0.0) as u64)
}
