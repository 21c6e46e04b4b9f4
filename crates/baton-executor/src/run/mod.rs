//! The runner: one launch of a coding-agent CLI behind a per-run gateway, inside baton's
//! sandbox, its event stream recorded and its process group never outliving the run.
//!
//! A run's folder holds `home/` (the CLI's `HOME`, `TMPDIR` = `home/tmp`), `transcript.jsonl`
//! (one [`Event`] a line, appended), `stderr.log` (bounded) and, live, `exchanges.jsonl` (the
//! gateway's record, which [`Mode::Replay`] serves again). Answering a question, or resuming
//! after a kill, is a new run in the same folder with `resume` set: the CLI finds its session
//! in the same home.

mod home;
mod lines;
mod outcome;
mod paths;

pub use outcome::Outcome;

use crate::group::GroupGuard;
use crate::{Adapter, Event, Invocation};
use baton_gateway::{Gateway, GatewayConfig, Meter, Upstream};
use baton_sandbox::{Confinement, PrivateNetwork, SandboxSpec};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use tokio::io::BufReader;

/// Where the model's answers come from.
#[derive(Clone)]
pub enum Mode {
    /// The real API at `upstream`, with the operator's key (which only the gateway holds).
    Live { upstream: String, api_key: String },
    /// A live run's `exchanges.jsonl`, served again; nothing leaves the machine.
    Replay { record: PathBuf },
}

impl std::fmt::Debug for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mode::Live { upstream, .. } => f
                .debug_struct("Live")
                .field("upstream", upstream)
                .field("api_key", &"<hidden>")
                .finish(),
            Mode::Replay { record } => f.debug_struct("Replay").field("record", record).finish(),
        }
    }
}

/// What the sandbox lets the CLI touch besides its workdir and its home.
#[derive(Debug, Clone, Default)]
pub struct SandboxPaths {
    /// More directories it may write.
    pub writable: Vec<PathBuf>,
    /// Paths it may not read (the operator's home, baton's store, secrets).
    pub read_denied: Vec<PathBuf>,
    /// Holes in those (the folder the CLI is installed in); see [`SandboxPaths::operator`].
    pub read_allowed: Vec<PathBuf>,
    /// Existing paths beneath the writable ones that stay read-only (the project's
    /// configuration, BMAD's method, `.git`).
    pub read_only: Vec<PathBuf>,
    /// Where this system cannot confine the CLI to the gateway (no private network: not
    /// root), run it anyway with the layers it has and the gateway on the host's loopback;
    /// when false such a system refuses the run (`SANDBOX_UNAVAILABLE`).
    pub allow_unconfined: bool,
}

/// One launch of a CLI.
pub struct Job<'a> {
    pub adapter: &'a dyn Adapter,
    /// The CLI's program (see [`crate::find::locate`]).
    pub program: &'a Path,
    /// Where it works: the story's worktree or the project.
    pub workdir: &'a Path,
    /// The run's folder (made if missing).
    pub run_dir: &'a Path,
    pub model: &'a str,
    pub prompt: &'a str,
    /// The CLI's session to continue (its question answered, or a resume after a kill).
    pub resume: Option<&'a str>,
    /// `[executors.<name>] args`.
    pub extra_args: &'a [String],
    pub mode: Mode,
    /// The run's budget, asked before each model request.
    pub meter: Option<Arc<dyn Meter>>,
    /// The cap set on each model request's answer.
    pub max_output_tokens: Option<u64>,
    pub sandbox: SandboxPaths,
}

#[derive(Debug, thiserror::Error)]
pub enum ExecutorError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Sandbox(#[from] baton_sandbox::SandboxError),
    #[error(transparent)]
    Gateway(#[from] baton_gateway::GatewayError),
    #[error("{program}: the CLI could not be started: {source}")]
    Spawn {
        program: PathBuf,
        source: std::io::Error,
    },
    #[error("the {adapter} adapter has no wire API")]
    NoWire { adapter: String },
}

impl ExecutorError {
    pub fn code(&self) -> &'static str {
        match self {
            ExecutorError::Io { .. } => "EXECUTOR_RUN_FAILED",
            ExecutorError::Sandbox(e) => e.code(),
            ExecutorError::Gateway(e) => e.code(),
            ExecutorError::Spawn { .. } => "EXECUTOR_SPAWN_FAILED",
            ExecutorError::NoWire { .. } => "EXECUTOR_UNKNOWN",
        }
    }

    pub fn hint(&self) -> String {
        match self {
            ExecutorError::Io { .. } => {
                "check the permissions and free space of the run's folder".into()
            }
            ExecutorError::Sandbox(e) => e.hint().into(),
            ExecutorError::Gateway(e) => e.hint().into(),
            ExecutorError::Spawn { .. } => {
                "run `baton executors check NAME`; set [executors.<name>] command to the CLI's path"
                    .into()
            }
            ExecutorError::NoWire { .. } => "choose claude-code, codex or opencode".into(),
        }
    }
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ExecutorError {
    let what = what.into();
    move |source| ExecutorError::Io { what, source }
}

/// How long output still in the CLI's pipes is read after it ended.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

/// Where the gateway listens and how the CLI is confined.
struct Network {
    private: Option<PrivateNetwork>,
    listener: std::net::TcpListener,
}

fn network(sandbox: &SandboxPaths) -> Result<Network, ExecutorError> {
    match PrivateNetwork::new() {
        Ok(private) => {
            let listener = private
                .bind_loopback()
                .map_err(io("binding the gateway in the run's network"))?;
            Ok(Network {
                private: Some(private),
                listener,
            })
        }
        Err(_) if sandbox.allow_unconfined => Ok(Network {
            private: None,
            listener: std::net::TcpListener::bind(("127.0.0.1", 0))
                .map_err(io("binding the gateway on 127.0.0.1"))?,
        }),
        Err(e) => Err(e.into()),
    }
}

/// Runs the CLI of `job` to its end (or its budget's refusal), giving each event to
/// `on_event` as it comes. Dropping the future kills the CLI's process group.
pub async fn run(
    job: Job<'_>,
    on_event: &mut (dyn FnMut(&Event) + Send),
) -> Result<Outcome, ExecutorError> {
    let wire = job
        .adapter
        .kind()
        .wire()
        .ok_or_else(|| ExecutorError::NoWire {
            adapter: job.adapter.kind().to_string(),
        })?;
    std::fs::create_dir_all(job.run_dir).map_err(io("making the run's folder"))?;
    let home = job.run_dir.join("home");
    let token = baton_gateway::new_token().map_err(|e| ExecutorError::Io {
        what: "making the run's token".into(),
        source: std::io::Error::other(e.to_string()),
    })?;

    let net = network(&job.sandbox)?;
    let (upstream, record) = match &job.mode {
        Mode::Live { upstream, api_key } => (
            Upstream::Live {
                base_url: upstream.clone(),
                api_key: api_key.clone(),
            },
            Some(job.run_dir.join("exchanges.jsonl")),
        ),
        Mode::Replay { record } => (
            Upstream::Replay {
                record: record.clone(),
            },
            None,
        ),
    };
    let gateway = Gateway::start(
        net.listener,
        GatewayConfig {
            wire,
            upstream,
            token: token.clone(),
            meter: job.meter.clone(),
            record,
            max_output_tokens: job.max_output_tokens,
        },
    )
    .await?;
    let gateway_url = gateway.base_url();

    let launch = job.adapter.launch(&Invocation {
        program: job.program,
        workdir: job.workdir,
        home: &home,
        gateway: &gateway_url,
        token: &token,
        model: job.model,
        prompt: job.prompt,
        resume: job.resume,
        extra_args: job.extra_args,
    });
    let tmp = home::prepare(&home, &launch.files).map_err(io("seeding the CLI's home"))?;
    // A CLI of this run's folder still running (baton was killed mid-run) would be a second
    // one working on the same files and session.
    let leftovers = crate::group::kill_leftovers(&home);

    let mut cmd = std::process::Command::new(&launch.program);
    cmd.args(&launch.args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("TMPDIR", &tmp)
        .env(
            "LANG",
            std::env::var_os("LANG").unwrap_or_else(|| "C.UTF-8".into()),
        )
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    crate::group::die_with_parent(&mut cmd);
    let mut transcript = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(job.run_dir.join("transcript.jsonl"))
        .map_err(io("opening the transcript"))?;
    let stderr_log = job.run_dir.join("stderr.log");
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&stderr_log)
        .map_err(io("opening the CLI's stderr log"))?;
    let confinement = confine(&mut cmd, &job, &home, net.private.as_ref())?;
    let mut cmd = tokio::process::Command::from(cmd);
    cmd.kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|source| ExecutorError::Spawn {
        program: launch.program.clone(),
        source,
    })?;
    let Some(pid) = child.id() else {
        return Err(ExecutorError::Spawn {
            program: launch.program,
            source: std::io::Error::other("the CLI ended before it could be watched"),
        });
    };
    // From here on, however the run ends, the CLI's whole group dies with it.
    let group = GroupGuard::new(pid);

    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(ExecutorError::Spawn {
            program: launch.program,
            source: std::io::Error::other("the CLI's output pipes are missing"),
        });
    };
    let stderr_task =
        tokio::spawn(async move { lines::capture(stderr, &stderr_log, lines::MAX_STDERR).await });
    let mut refusal = gateway.refusal();
    let mut outcome = Outcome {
        confinement,
        leftovers_killed: leftovers,
        ..Outcome::default()
    };
    let mut tracker = outcome::Tracker::default();
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    let mut read_total: u64 = 0;
    let mut stdout_open = true;
    let mut status = None;
    // Once the CLI has ended, what is still in its pipe is read until this deadline (a
    // process that escaped its group could hold the pipe open forever).
    let mut drain_until = None;
    loop {
        if !stdout_open && status.is_some() {
            break;
        }
        tokio::select! {
            changed = refusal.changed(), if outcome.budget.is_none() => {
                if changed.is_ok() && let Some(r) = refusal.borrow_and_update().clone() {
                    // Claude Code retries for minutes: the refused request ends the CLI now.
                    group.kill();
                    outcome.budget = Some(r);
                }
            }
            next = lines::next_line(&mut reader, &mut line, lines::MAX_LINE), if stdout_open => {
                match next.map_err(io("reading the CLI's output"))? {
                    lines::Line::Eof => stdout_open = false,
                    lines::Line::TooLong => outcome.skipped_lines += 1,
                    lines::Line::Read => {
                        read_total += line.len() as u64 + 1;
                        if read_total > lines::MAX_STDOUT {
                            outcome.skipped_lines += 1;
                            continue;
                        }
                        let text = String::from_utf8_lossy(&line);
                        for event in job.adapter.parse_line(&text) {
                            append(&mut transcript, &event)?;
                            tracker.see(&event);
                            outcome.events += 1;
                            on_event(&event);
                        }
                    }
                }
            }
            ended = child.wait(), if status.is_none() => {
                status = Some(ended.map_err(io("waiting for the CLI"))?);
                // Whatever the CLI left running (a shell's background job, holding the
                // pipe) ends with it.
                group.kill();
                drain_until = Some(tokio::time::Instant::now() + DRAIN);
            }
            () = tokio::time::sleep_until(drain_until.unwrap_or_else(tokio::time::Instant::now)),
                if drain_until.is_some() && stdout_open => {
                stdout_open = false;
            }
        }
    }
    let Some(status) = status else {
        return Err(ExecutorError::Io {
            what: "waiting for the CLI".into(),
            source: std::io::Error::other("the CLI's end was not seen"),
        });
    };
    // Returned means over: nothing of the CLI runs any more (SIGKILL is delivered
    // asynchronously; the wait blocks, so not on the runtime's threads).
    let _ = tokio::task::spawn_blocking(move || group.kill_and_wait(DRAIN)).await;
    if outcome.budget.is_none() {
        outcome.budget = refusal.borrow().clone();
    }
    let mut stderr_task = stderr_task;
    if tokio::time::timeout(DRAIN, &mut stderr_task).await.is_err() {
        // A process outside the group holds the pipe: the log stops here.
        stderr_task.abort();
    }
    outcome.exit_code = status.code();
    outcome.exchanges = gateway.exchanges();
    gateway.shutdown().await;
    outcome.question = tracker.question();
    outcome.session = tracker.session;
    outcome.result = tracker.result;
    Ok(outcome)
}

fn append(transcript: &mut std::fs::File, event: &Event) -> Result<(), ExecutorError> {
    let mut line = serde_json::to_vec(event).map_err(|e| ExecutorError::Io {
        what: "writing the transcript".into(),
        source: std::io::Error::other(e),
    })?;
    line.push(b'\n');
    transcript
        .write_all(&line)
        .map_err(io("writing the transcript"))
}

/// Confines `cmd`: writes in the workdir, the home and the extra writable paths only; the
/// denied paths unreadable; no network but the run's private one, where the gateway listens.
/// Where that cannot be (and the job allows it), with the layers this system has; with none,
/// it still gets a process group of its own.
fn confine(
    cmd: &mut std::process::Command,
    job: &Job<'_>,
    home: &Path,
    private: Option<&PrivateNetwork>,
) -> Result<Vec<(String, String)>, ExecutorError> {
    let mut writable = vec![job.workdir.to_path_buf(), home.to_path_buf()];
    writable.extend(job.sandbox.writable.iter().cloned());
    // Where the run's folder lies beneath a writable one (a run folder in the project), the
    // CLI must still not rewrite its own transcript or the record a replay trusts.
    let mut read_only: Vec<PathBuf> = ["transcript.jsonl", "exchanges.jsonl", "stderr.log"]
        .map(|f| job.run_dir.join(f))
        .into_iter()
        .filter(|p| p.exists())
        .collect();
    read_only.extend(job.sandbox.read_only.iter().cloned());
    let spec = SandboxSpec {
        writable,
        read_only,
        read_denied: job.sandbox.read_denied.clone(),
        // The CLI's own install (beneath a denied home when installed per user): without it
        // the CLI cannot even start.
        read_allowed: job.sandbox.read_allowed.clone(),
        // Without the run's private network (only when running unconfined is allowed) the
        // gateway is on the host's loopback: the CLI keeps the host's network and gets the
        // other layers this system has.
        network: private.is_none(),
        // Claude Code listens on a socket in its TMPDIR (beneath its writable home).
        unix_sockets: true,
        join_network: private.map(PrivateNetwork::namespace),
        enforce: !job.sandbox.allow_unconfined,
        // Every field named (no `..default()`): a field added to the spec is a decision here,
        // never a silent default — the CLI's install hole was once lost that way.
        limits: baton_sandbox::Limits::default(),
    };
    let confinement = match Confinement::prepare(&spec, baton_sandbox::capabilities()) {
        Ok(c) => c,
        Err(_) if job.sandbox.allow_unconfined => {
            use std::os::unix::process::CommandExt;
            cmd.current_dir(job.workdir).process_group(0);
            return Ok(Vec::new());
        }
        Err(e) => return Err(e.into()),
    };
    let applied = confinement
        .applied()
        .iter()
        .map(|(layer, how)| (layer.as_str().to_string(), how.clone()))
        .collect();
    let workdir = std::fs::File::open(job.workdir).map_err(io("opening the workdir"))?;
    confinement.install(cmd, Some(workdir.into()));
    Ok(applied)
}
