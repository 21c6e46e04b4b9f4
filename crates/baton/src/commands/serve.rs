//! `baton serve`: the local web page and JSON API (`baton_serve`). Binds, prints the URL with
//! its token on stdout's first line (or `{url, token, port}` with `--json`), and answers until
//! Ctrl-C or SIGTERM; then background runs stop between steps and stay resumable.

use crate::exit;
use crate::failure::Failure;
use baton_serve::{ServeError, ServeOptions};
use baton_store::Store;
use clap::Args;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Port to listen on (0: any free port).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Address to listen on. Anything but a loopback address is reachable from other machines
    /// (the token is still required).
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    pub bind: IpAddr,
    /// Open the page in the default browser.
    #[arg(long)]
    pub open: bool,
    /// Print `{"url", "token", "port"}` as the first line instead of the URL.
    #[arg(long)]
    pub json: bool,
    /// The work queue's database, e.g. postgresql://USER@HOST:5432/DBNAME: the page shows the
    /// queue (/queue, /api/queue). Leave the password out: it comes from PGPASSWORD or
    /// ~/.pgpass.
    #[arg(long, value_name = "URL")]
    pub db: Option<String>,
    /// The name of an environment variable holding the queue's database URL.
    #[arg(long, value_name = "NAME", conflicts_with = "db")]
    pub db_env: Option<String>,
}

fn failure(e: &ServeError) -> Failure {
    Failure::new(e.code(), e.to_string(), exit::FAILURE).hint(e.hint())
}

pub fn run(args: ServeArgs) -> anyhow::Result<u8> {
    let queue = match (&args.db, &args.db_env) {
        (None, None) => None,
        (url, env) => {
            match crate::queue_db::db_config(url.as_deref(), env.as_deref(), "--db URL") {
                Ok(c) => Some(c),
                Err(e) => return Ok(crate::queue_db::failure(&e).report(args.json)),
            }
        }
    };
    let store = Store::open_default()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let options = ServeOptions {
        bind: args.bind,
        port: args.port,
        store,
        queue,
    };
    let bound = match runtime.block_on(baton_serve::bind(options)) {
        Ok(b) => b,
        Err(e) => return Ok(failure(&e).report(args.json)),
    };
    let url = bound.url();
    {
        let mut out = std::io::stdout().lock();
        if args.json {
            let line = serde_json::json!({
                "url": url,
                "token": bound.token(),
                "port": bound.addr().port(),
            });
            writeln!(out, "{line}")?;
        } else {
            writeln!(out, "{url}")?;
        }
        out.flush()?;
    }
    if !args.bind.is_loopback() {
        eprintln!(
            "warning: baton serve listens on {} — other machines can reach it; the token is still required, and traffic is not encrypted",
            bound.addr()
        );
    }
    if args.open {
        open_browser(&url);
    }
    let stop = CancellationToken::new();
    let _signals = crate::signals::watch_server(&runtime, stop.clone());
    let jobs = bound.state().jobs.clone();
    let served = runtime.block_on(bound.serve(async move {
        stop.cancelled().await;
        // Said only when there is something to wait for.
        match jobs.len() {
            0 => {}
            1 => eprintln!("1 run in progress stops after its current step…"),
            n => eprintln!("{n} runs in progress stop after their current step…"),
        }
    }));
    // A blocking read that never returns (a FIFO in a project) must not keep the process
    // alive: runs had their bounded wait in `serve`; what is left is abandoned.
    runtime.shutdown_timeout(RUNTIME_GRACE);
    match served {
        Ok(()) => Ok(exit::OK),
        Err(e) => Ok(failure(&e).report(args.json)),
    }
}

/// How long the runtime waits for blocking threads still busy once the server stopped.
const RUNTIME_GRACE: Duration = Duration::from_secs(1);

/// Opens the URL with the desktop's opener; a missing opener is only a warning.
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let spawned = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(e) = spawned {
        eprintln!("warning: cannot start {opener} to open the page ({e}); open the URL above");
    }
}
