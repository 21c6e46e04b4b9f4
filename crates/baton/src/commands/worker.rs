//! `baton worker --db URL`: claims queued runs and runs them (the work is `baton_worker::run`).

use crate::exit;
use crate::failure::Failure;
use baton_store::Store;
use baton_worker::{WorkerEvent, WorkerOptions};
use clap::Args;
use std::sync::Arc;
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// SIGTERM or SIGINT stops the worker gracefully (no new claims, units in flight handed back
/// at their next checkpoint); a second one quits at once (their leases then expire).
async fn stop_on_signals(stop: CancellationToken) {
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    eprintln!(
        "stopping: no new units; units in flight are handed back to the queue at their next checkpoint (a second signal quits at once)"
    );
    stop.cancel();
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    std::process::exit(i32::from(exit::STOPPED));
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub db: crate::queue_db::DbArgs,
    /// Units run at once.
    #[arg(long, default_value = "1", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub concurrency: u32,
    /// Lease length in seconds; the worker renews it every third of it.
    #[arg(long = "lease-s", value_name = "S", default_value = "30", value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub lease_s: u64,
    /// The queues to take work from, in order.
    #[arg(long, value_delimiter = ',', default_value = "default")]
    pub queues: Vec<String>,
    /// Exit (0) once no unit is ready, instead of waiting for more.
    #[arg(long)]
    pub exit_when_idle: bool,
    /// Keep each unit's folder (worktree, package, scratch store) under
    /// $BATON_HOME/worker/units/ once the unit is left, to look into it.
    #[arg(long)]
    pub keep_units: bool,
    /// Seconds before a unit whose failure may pass (model or git remote unreachable, HTTP
    /// 5xx or 429, the database connection lost) is tried again; the wait doubles with each
    /// failure in a row, up to 5 minutes.
    #[arg(long = "retry-base-s", value_name = "S", default_value = "5", value_parser = parse_retry_base)]
    pub retry_base_s: f64,
    /// The model every unit runs with, over the one it was submitted with (and over a trace
    /// it would replay). The key comes from this worker's environment.
    #[arg(long)]
    pub model: Option<String>,
    /// The OpenAI-compatible endpoint every unit runs with, over the unit's (and over a trace
    /// it would replay).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// The endpoint's wire protocol, over the unit's (and over a trace it would replay).
    #[arg(long, value_enum)]
    pub api: Option<crate::args::ApiArg>,
}

/// Seconds, from 0.1 to 300.
fn parse_retry_base(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if (0.1..=300.0).contains(&v) => Ok(v),
        _ => Err(format!("expected seconds from 0.1 to 300, got {text:?}")),
    }
}

pub fn run(args: WorkerArgs) -> anyhow::Result<u8> {
    let config = match crate::queue_db::db_config(
        args.db.db.as_deref(),
        args.db.db_env.as_deref(),
        "--db URL",
    ) {
        Ok(c) => c,
        Err(e) => return Ok(crate::queue_db::failure(&e).report(false)),
    };
    let store = Store::open_default()?;
    let host = baton_lifecycle::ralph::claim::hostname();
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let options = WorkerOptions {
        config,
        worker: format!("{host}:{}:{:04x}", std::process::id(), nonce & 0xffff),
        host,
        home: store.home().to_path_buf(),
        concurrency: args.concurrency,
        lease: Duration::from_secs(args.lease_s),
        queues: args.queues.clone(),
        exit_when_idle: args.exit_when_idle,
        stop: CancellationToken::new(),
        keep_units: args.keep_units,
        retry_base: Duration::from_secs_f64(args.retry_base_s),
        model: baton_worker::ModelOverride {
            name: args.model.clone(),
            base_url: args.base_url.clone(),
            api: crate::args::ApiArg::api(args.api).map(|a| a.as_str().to_string()),
        },
    };
    // An event can quote a unit's outcome (a model's message): its escapes are shown.
    let events: baton_worker::Events =
        Arc::new(|e: &WorkerEvent| eprintln!("{}", crate::ui::visible(&e.to_string())));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.concurrency as usize + 1)
        .enable_all()
        .build()?;
    let stop = options.stop.clone();
    let result = runtime.block_on(async {
        let signals = tokio::spawn(stop_on_signals(stop));
        let result = baton_worker::run(options, events).await;
        signals.abort();
        result
    });
    match result {
        Ok(()) => Ok(exit::OK),
        Err(e) if e.is_lease_lost() => {
            // Other slots may be inside a git command: leave at once, writing nothing more.
            eprintln!(
                "error[{}]: {}",
                e.code(),
                crate::ui::visible(&e.to_string())
            );
            std::process::exit(i32::from(exit::FAILURE));
        }
        Err(e) => Ok(Failure::new(e.code(), e.to_string(), exit::FAILURE)
            .hint(e.hint())
            .report(false)),
    }
}
