//! `baton demo queue`: the PostgreSQL work queue tried on one machine, offline. A throwaway
//! cluster in a temporary folder, the sample project pushed to a bare remote beside it, three
//! replayed runs of the bundled create-story example submitted (as `baton run … --queue URL
//! --replay TRACE` submits them), two `baton worker` processes; the first is killed while it
//! holds a unit and the other takes that unit over; the queue's status; then everything stopped
//! and removed — also on Ctrl-C or an error.
//!
//! To kill the first worker at a known point of its unit, the demo holds the unit's row locked
//! from the claim on: the worker runs the first model turn, pushes its checkpoint commit, and
//! waits on the lock to record it — then it is killed. Its lease runs out (2 s) and the other
//! worker's sweep gives the unit back to the queue, where it is claimed again at the next
//! epoch.

use crate::args::demo::DemoQueueArgs;
use crate::exit;
use crate::failure::Failure;
use baton_engine::bundled_demo::{PACKAGE, PROJECT, TRACE};
use baton_queue::local::LocalCluster;
use baton_queue::{DEFAULT_QUEUE, DbConfig, Queue, Status, UnitState, UrlSource};
use baton_worker::RunPayload;
use baton_worker::submit as submission;
use serde_json::{Value, json};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Runs submitted.
const UNITS: usize = 3;
/// The workers' lease: short, so the killed worker's unit is taken over within seconds.
const LEASE_S: &str = "2";
/// How long any one wait of the demo may take before it gives up.
const DEADLINE: Duration = Duration::from_secs(120);
const POLL: Duration = Duration::from_millis(20);

/// A worker process, killed (with its git children) when dropped.
struct Worker {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Worker {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn signal(&self, signal: baton_sandbox::Signal) {
        // Its own process group (spawned so): the worker and the git it runs.
        baton_sandbox::kill_group(self.pid(), signal);
    }

    /// Whether it has exited, with its status.
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if self.exited().is_none() {
            self.signal(baton_sandbox::Signal::Kill);
            let _ = self.child.wait();
        }
    }
}

/// What the demo prints as it goes (stderr; nothing with `--json`).
struct Say {
    quiet: bool,
    started: Instant,
}

impl Say {
    fn line(&self, text: &str) {
        if !self.quiet {
            eprintln!("[{:>5.1}s] {text}", self.started.elapsed().as_secs_f64());
        }
    }
}

fn failure(code: &'static str, message: impl Into<String>) -> Failure {
    Failure::new(code, message.into(), exit::FAILURE)
}

fn queue_failure(e: &baton_queue::QueueError) -> Failure {
    crate::queue_db::failure(e)
}

pub fn run(args: DemoQueueArgs) -> anyhow::Result<u8> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let json_out = args.json;
    let result = runtime.block_on(async {
        let (Ok(mut term), Ok(mut int)) = (
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()),
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()),
        ) else {
            return Err(failure("IO_ERROR", "cannot watch for Ctrl-C"));
        };
        // Dropping the demo's future on a signal drops its workers, cluster and folder: they
        // are killed, stopped and removed on the way out.
        tokio::select! {
            r = demo(&args) => r.map(Some),
            _ = term.recv() => Ok(None),
            _ = int.recv() => Ok(None),
        }
    });
    match result {
        Ok(Some(())) => Ok(exit::OK),
        Ok(None) => {
            eprintln!("stopped: the workers, the database and the demo's folder are removed");
            Ok(exit::STOPPED)
        }
        Err(f) => Ok(f.report(json_out)),
    }
}

async fn demo(args: &DemoQueueArgs) -> Result<(), Failure> {
    let say = Say {
        quiet: args.json,
        started: Instant::now(),
    };
    let mut cluster = LocalCluster::start()
        .map_err(|e| Failure::new(e.code, e.message.clone(), exit::FAILURE).hint(e.hint.clone()))?;
    say.line(&format!(
        "a throwaway PostgreSQL {} in {} (from {})",
        cluster.version(),
        cluster.dir().display(),
        cluster.bin().display()
    ));
    let url = cluster.url();
    let config = DbConfig::from_url(&url, UrlSource::Given).map_err(|e| queue_failure(&e))?;
    let report = baton_queue::init(&config)
        .await
        .map_err(|e| queue_failure(&e))?;
    say.line(&format!(
        "queue ready (schema version {}): baton queue init --db {}",
        report.version, report.database
    ));
    let work = tempfile::Builder::new()
        .prefix("baton-demo-queue-")
        .tempdir()
        .map_err(|e| failure("IO_ERROR", format!("a temporary folder: {e}")))?;
    let project = sample_project(work.path())?;
    say.line("the sample project committed and pushed to a bare remote beside it");
    let units = submit(work.path(), &project, &config).await?;
    say.line(&format!(
        "{UNITS} replayed runs submitted: units {} (as `baton run create-story-micro --queue URL --replay TRACE`)",
        units
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    ));

    let watch = Queue::open(&config).await.map_err(|e| queue_failure(&e))?;
    let holder = Queue::open(&config).await.map_err(|e| queue_failure(&e))?;
    let first_unit = units[0];
    let mut a = spawn_worker(work.path(), "worker-a", &url)?;
    let a_id = wait_for_claim(&watch, first_unit, &mut a).await?;
    // From the claim on, the unit's fenced writes wait: the worker is caught mid-unit.
    holder
        .hold_unit(first_unit)
        .await
        .map_err(|e| queue_failure(&e))?;
    say.line(&format!("worker A ({a_id}) claimed unit {first_unit}"));
    let mut b = spawn_worker(work.path(), "worker-b", &url)?;
    say.line("worker B started");
    let w = &watch;
    wait_until(
        &mut [&mut a, &mut b],
        "worker A to reach its first checkpoint",
        move || async move { w.fenced_writes_waiting().await.map(|n| n > 0) },
    )
    .await?;
    a.signal(baton_sandbox::Signal::Kill);
    let _ = a.child.wait();
    holder.release_hold().await.map_err(|e| queue_failure(&e))?;
    say.line(&format!(
        "worker A killed (SIGKILL) in the middle of unit {first_unit}: its checkpoint committed, not recorded; its lease runs out in {LEASE_S}s"
    ));
    let a_ref = a_id.as_str();
    wait_until(
        &mut [&mut b],
        "worker B to take the unit over",
        move || async move {
            let u = w.unit(first_unit).await?;
            Ok(u.state == UnitState::Leased && u.owner.as_deref() != Some(a_ref))
        },
    )
    .await?;
    let unit = watch
        .unit(first_unit)
        .await
        .map_err(|e| queue_failure(&e))?;
    let b_id = unit.owner.clone().unwrap_or_default();
    say.line(&format!(
        "worker B ({b_id}) took unit {first_unit} over at epoch {}",
        unit.epoch
    ));
    let all = units.as_slice();
    wait_until(&mut [&mut b], "every unit to be done", move || async move {
        for id in all {
            let u = w.unit(*id).await?;
            if u.state == UnitState::Failed {
                return Err(baton_queue::QueueError::InvalidInput(format!(
                    "unit {id} failed: {}",
                    u.outcome.unwrap_or_default()
                )));
            }
            if u.state != UnitState::Done {
                return Ok(false);
            }
        }
        Ok(true)
    })
    .await?;
    say.line(&format!("all {UNITS} units done"));
    // Stopped as systemd or Kubernetes stop a worker: it leaves cleanly, and says so.
    b.signal(baton_sandbox::Signal::Term);
    let stopped = b.child.wait();
    say.line(&format!(
        "worker B stopped (SIGTERM, exit {})",
        stopped.ok().and_then(|s| s.code()).unwrap_or(-1)
    ));
    let status = watch.status(50).await.map_err(|e| queue_failure(&e))?;
    let results = results(&watch, &units).await?;
    let refs = remote_refs(&work.path().join("remote.git"));
    if args.json {
        let doc = json!({
            "database": status.database,
            "units": results,
            "killed": {"worker": a_id, "unit": first_unit},
            "takenOverBy": b_id,
            "remoteRefs": refs,
            "status": status,
            "next": next_commands(),
            "elapsedS": (say.started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
        });
        crate::ui::print_json(&doc).map_err(|e| failure("IO_ERROR", e.to_string()))?;
    } else {
        print_summary(&status, &results, &refs, [("A", &a_id), ("B", &b_id)]);
    }
    drop(watch);
    drop(holder);
    cluster.stop();
    say.line("the database, the workers' homes and the sample project removed");
    Ok(())
}

/// The sample project as a git repository with a bare remote holding its commit.
fn sample_project(work: &Path) -> Result<PathBuf, Failure> {
    let project = work.join("project");
    let remote = work.join("remote.git");
    baton_engine::bundled_demo::write_files(&project, PROJECT)
        .map_err(|e| failure("IO_ERROR", format!("the sample project: {e}")))?;
    let git = |dir: &Path, args: &[&str]| -> Result<(), Failure> {
        let out = Command::new("git")
            .current_dir(dir)
            .args([
                "-c",
                "user.name=baton demo",
                "-c",
                "user.email=demo@baton.invalid",
                "-c",
                "commit.gpgsign=false",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| failure("DEMO_GIT_FAILED", format!("cannot run git: {e}")))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(failure(
                "DEMO_GIT_FAILED",
                format!(
                    "git {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            )
            .hint(Some("baton needs git on PATH for the queue".into())))
        }
    };
    git(work, &["init", "-q", "--bare", "remote.git"])?;
    git(&project, &["init", "-q"])?;
    git(&project, &["add", "-A"])?;
    git(&project, &["commit", "-q", "-m", "the sample project"])?;
    let remote_text = remote.display().to_string();
    git(&project, &["remote", "add", "origin", &remote_text])?;
    git(&project, &["push", "-q", "origin", "HEAD:refs/heads/main"])?;
    Ok(project)
}

/// Submits the replayed runs, as `baton run … --queue URL --replay TRACE` does.
async fn submit(work: &Path, project: &Path, config: &DbConfig) -> Result<Vec<i64>, Failure> {
    let package_dir = work.join("create-story-micro");
    baton_engine::bundled_demo::write_files(&package_dir, PACKAGE)
        .map_err(|e| failure("IO_ERROR", format!("the package: {e}")))?;
    let trace_path = work.join("create-story-micro.trace.json");
    std::fs::write(&trace_path, TRACE)
        .map_err(|e| failure("IO_ERROR", format!("the trace: {e}")))?;
    let submit_failure =
        |e: submission::SubmitError| Failure::new(e.code, e.message, exit::FAILURE).hint(e.hint);
    let source = submission::project_source(project).map_err(submit_failure)?;
    let package = submission::pack_package(&package_dir, None).map_err(submit_failure)?;
    let trace = submission::read_trace(&trace_path).map_err(submit_failure)?;
    let payload = RunPayload {
        package: package.name.clone(),
        autopilot: true,
        ..RunPayload::default()
    };
    let mut units = Vec::new();
    for _ in 0..UNITS {
        let submitted = submission::submit_run(
            config,
            DEFAULT_QUEUE,
            &package,
            Some(&trace),
            &source,
            &payload,
        )
        .await
        .map_err(|e| queue_failure(&e))?;
        units.push(submitted.unit);
    }
    Ok(units)
}

/// `baton worker` in a process group of its own, with a home of its own under the demo's
/// folder (as a second machine would have), its output in a log file there.
fn spawn_worker(work: &Path, name: &'static str, url: &str) -> Result<Worker, Failure> {
    let exe = std::env::current_exe()
        .map_err(|e| failure("IO_ERROR", format!("this program's path: {e}")))?;
    let home = work.join(name);
    let log = work.join(format!("{name}.log"));
    std::fs::create_dir_all(&home).map_err(|e| failure("IO_ERROR", e.to_string()))?;
    let out = std::fs::File::create(&log).map_err(|e| failure("IO_ERROR", e.to_string()))?;
    let err = out
        .try_clone()
        .map_err(|e| failure("IO_ERROR", e.to_string()))?;
    let child = Command::new(exe)
        .args(["worker", "--db", url, "--lease-s", LEASE_S])
        .args(["--retry-base-s", "0.5"])
        .env("BATON_HOME", &home)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|e| failure("IO_ERROR", format!("cannot start `baton worker`: {e}")))?;
    Ok(Worker { name, child, log })
}

/// Waits until `worker` holds `unit`; returns the worker's id in the queue.
async fn wait_for_claim(watch: &Queue, unit: i64, worker: &mut Worker) -> Result<String, Failure> {
    let pid = format!(":{}:", worker.pid());
    let mine = pid.as_str();
    wait_until(
        &mut [worker],
        "worker A to claim the first unit",
        move || async move {
            let u = watch.unit(unit).await?;
            Ok(u.state == UnitState::Leased && u.owner.is_some_and(|o| o.contains(mine)))
        },
    )
    .await?;
    let u = watch.unit(unit).await.map_err(|e| queue_failure(&e))?;
    Ok(u.owner.unwrap_or_default())
}

/// Polls `done` until it says yes, failing with the workers' last output when one of them
/// exits meanwhile or the deadline passes.
async fn wait_until<F, Fut>(
    workers: &mut [&mut Worker],
    what: &str,
    mut done: F,
) -> Result<(), Failure>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool, baton_queue::QueueError>>,
{
    let deadline = Instant::now() + DEADLINE;
    loop {
        match done().await {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => {
                return Err(
                    failure("DEMO_FAILED", format!("while waiting for {what}: {e}"))
                        .hint(Some(logs(workers))),
                );
            }
        }
        for w in workers.iter_mut() {
            if let Some(status) = w.exited() {
                return Err(failure(
                    "DEMO_FAILED",
                    format!("{} exited ({status}) while waiting for {what}", w.name),
                )
                .hint(Some(logs(workers))));
            }
        }
        if Instant::now() > deadline {
            return Err(failure(
                "DEMO_FAILED",
                format!("gave up waiting for {what} after {}s", DEADLINE.as_secs()),
            )
            .hint(Some(logs(workers))));
        }
        tokio::time::sleep(POLL).await;
    }
}

fn logs(workers: &[&mut Worker]) -> String {
    workers
        .iter()
        .map(|w| format!("{}'s last output:\n{}", w.name, w.log_tail()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Each unit's outcome: who finished it, at which epoch, on which branch.
async fn results(watch: &Queue, units: &[i64]) -> Result<Vec<Value>, Failure> {
    let mut out = Vec::new();
    for id in units {
        let u = watch.unit(*id).await.map_err(|e| queue_failure(&e))?;
        let text = |k: &str| {
            u.outcome
                .as_ref()
                .and_then(|o| o.get(k))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        out.push(json!({
            "unit": u.id,
            "state": u.state,
            "worker": u.owner,
            "epoch": u.epoch,
            "attempts": u.attempts,
            "branch": text("branch"),
            "commit": text("commit"),
            "runId": text("runId"),
        }));
    }
    Ok(out)
}

/// The refs the units left on the remote (the killed attempt's checkpoint ref is gone).
fn remote_refs(remote: &Path) -> Vec<String> {
    Command::new("git")
        .arg("-C")
        .arg(remote)
        .args([
            "for-each-ref",
            "--format=%(refname)",
            "refs/baton/",
            "refs/heads/baton/",
        ])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn next_commands() -> Vec<&'static str> {
    vec![
        "baton queue init --db postgresql://USER@HOST:5432/DBNAME",
        "baton run PACKAGE --project . --queue postgresql://USER@HOST:5432/DBNAME --replay TRACE",
        "baton worker --db postgresql://USER@HOST:5432/DBNAME",
        "baton queue status --db postgresql://USER@HOST:5432/DBNAME",
    ]
}

fn print_summary(status: &Status, results: &[Value], refs: &[String], names: [(&str, &str); 2]) {
    let who = |id: &str| {
        names
            .iter()
            .find(|(_, n)| *n == id)
            .map_or_else(|| id.to_string(), |(name, _)| format!("worker {name}"))
    };
    outln!();
    for r in results {
        let commit = r["commit"].as_str().unwrap_or("");
        outln!(
            "unit {} {} by {} at epoch {} ({} claim(s)): branch {} at {}",
            r["unit"],
            r["state"].as_str().unwrap_or(""),
            who(r["worker"].as_str().unwrap_or("?")),
            r["epoch"],
            r["attempts"],
            r["branch"].as_str().unwrap_or(""),
            &commit[..12.min(commit.len())]
        );
    }
    outln!(
        "refs on the remote: {} ({}); the killed attempt's checkpoint ref was removed by the \
         attempt that took over",
        refs.len(),
        refs.join(", ")
    );
    outln!();
    outln!("$ baton queue status --db '{}'", status.database);
    super::queue::print_status(status);
    outln!(
        "(worker A, {}, was killed: it could not say so, and its last heartbeat grows old; \
         worker B, {}, stopped cleanly)",
        names[0].1,
        names[1].1
    );
    outln!();
    outln!("Next, with a PostgreSQL of your own (docs/scale-out.md):");
    for c in next_commands() {
        outln!("  {c}");
    }
}
