//! The MCP client of one run: a thread with its own small tokio runtime that owns the server
//! connections. Callers (the synchronous ToolHost) send it jobs and wait for the answer with
//! a deadline, so no server can hold a run longer than its timeouts.

use super::config::{McpConfig, McpServerConfig};
use super::convert::{self, MAX_TOOLS};
use super::error::McpError;
use super::names;
use crate::call::AbortFn;
use baton_sandbox::{Signal, kill_group};
use rmcp::model::{CallToolRequestParams, PaginatedRequestParams};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceError, ServiceExt};
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// Pages of `tools/list` read at most (a server could page forever).
const MAX_PAGES: usize = 16;
/// A server that failed to start this many times is not tried again in this run.
const MAX_STARTS: u32 = 3;
/// How often a waiting caller looks at the abort flag.
const POLL: Duration = Duration::from_millis(50);
/// Variables of baton's environment a server sees (never an API key), beside its `env`.
const SERVER_ENV: [&str; 3] = ["PATH", "HOME", "LANG"];

/// One tool of a server, as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// `mcp__<server>__<tool>`.
    pub name: String,
    /// The server's own name for it.
    pub original: String,
    pub description: String,
    pub parameters: Value,
}

type Reply<T> = mpsc::Sender<Result<T, McpError>>;

enum Job {
    Tools {
        server: String,
        reply: Reply<Vec<McpTool>>,
    },
    Call {
        server: String,
        tool: String,
        arguments: Map<String, Value>,
        reply: Reply<Value>,
    },
}

pub struct McpHub {
    config: McpConfig,
    project: PathBuf,
    worker: Mutex<Option<Worker>>,
}

struct Worker {
    jobs: UnboundedSender<Job>,
    thread: JoinHandle<()>,
}

impl McpHub {
    /// Nothing starts until a server is first needed.
    pub fn new(config: McpConfig, project: &Path) -> Arc<McpHub> {
        Arc::new(McpHub {
            config,
            project: project.to_path_buf(),
            worker: Mutex::new(None),
        })
    }

    pub fn config(&self) -> &McpConfig {
        &self.config
    }

    /// Configured server ids, sorted.
    pub fn servers(&self) -> Vec<String> {
        self.config.servers.keys().cloned().collect()
    }

    /// The tools of `server`, starting it if needed.
    pub fn tools(&self, server: &str) -> Result<Vec<McpTool>, McpError> {
        if !self.config.servers.contains_key(server) {
            return Err(McpError::Unknown(server.to_string()));
        }
        let wait = self.config.start_timeout + Duration::from_secs(2);
        self.request(server, wait, None, |reply| Job::Tools {
            server: server.to_string(),
            reply,
        })
    }

    /// Calls `tool` (the server's own name) of `server`; the answer is `{content, …}`.
    pub fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Map<String, Value>,
        abort: Option<&AbortFn>,
    ) -> Result<Result<Value, String>, McpError> {
        if !self.config.servers.contains_key(server) {
            return Err(McpError::Unknown(server.to_string()));
        }
        let wait = self.config.start_timeout + self.config.call_timeout + Duration::from_secs(2);
        let raw = self.request(server, wait, abort, |reply| Job::Call {
            server: server.to_string(),
            tool: tool.to_string(),
            arguments,
            reply,
        })?;
        let mut out = convert::result(&raw);
        let pairs = self.scrub_pairs();
        match &mut out {
            Ok(v) => convert::scrub(v, &pairs),
            Err(message) => {
                let mut v = Value::String(std::mem::take(message));
                convert::scrub(&mut v, &pairs);
                *message = v.as_str().unwrap_or_default().to_string();
            }
        }
        Ok(out)
    }

    /// Stops every server now (also done when the hub is dropped).
    pub fn shutdown(&self) {
        let worker = self.worker.lock().ok().and_then(|mut w| w.take());
        if let Some(w) = worker {
            drop(w.jobs);
            let _ = w.thread.join();
        }
    }

    fn scrub_pairs(&self) -> Vec<(String, &'static str)> {
        let mut pairs = vec![(self.project.display().to_string(), "@project")];
        if let Ok(real) = self.project.canonicalize() {
            pairs.push((real.display().to_string(), "@project"));
        }
        pairs.sort_by_key(|p| std::cmp::Reverse(p.0.len()));
        pairs
    }

    fn request<T>(
        &self,
        server: &str,
        wait: Duration,
        abort: Option<&AbortFn>,
        job: impl FnOnce(Reply<T>) -> Job,
    ) -> Result<T, McpError> {
        let (tx, rx) = mpsc::channel();
        self.send(job(tx))?;
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left.min(POLL)) {
                Ok(answer) => return answer,
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(McpError::Stopped),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if abort.is_some_and(|f| f()) {
                        return Err(McpError::Aborted(server.to_string()));
                    }
                    if left.is_zero() {
                        // The worker's own deadlines should have answered first; it is stuck,
                        // so it is replaced (its servers die with its runtime).
                        self.shutdown_detached();
                        return Err(McpError::Timeout {
                            server: server.to_string(),
                            ms: wait.as_millis() as u64,
                        });
                    }
                }
            }
        }
    }

    fn send(&self, job: Job) -> Result<(), McpError> {
        let mut guard = self.worker.lock().map_err(|_| McpError::Stopped)?;
        if guard.is_none() {
            *guard = Some(self.spawn_worker()?);
        }
        let worker = guard.as_ref().ok_or(McpError::Stopped)?;
        worker.jobs.send(job).map_err(|_| McpError::Stopped)
    }

    fn shutdown_detached(&self) {
        if let Ok(mut w) = self.worker.lock() {
            // Dropping the sender ends the worker's loop once it is free again.
            w.take();
        }
    }

    fn spawn_worker(&self) -> Result<Worker, McpError> {
        let (jobs, rx) = unbounded_channel();
        let config = self.config.clone();
        let project = self.project.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| McpError::Start {
                server: "*".into(),
                message: format!("no runtime for the MCP client ({})", e.kind()),
            })?;
        let thread = std::thread::Builder::new()
            .name("baton-mcp".into())
            .spawn(move || runtime.block_on(serve(rx, config, project)))
            .map_err(|e| McpError::Start {
                server: "*".into(),
                message: format!("no thread for the MCP client ({})", e.kind()),
            })?;
        Ok(Worker { jobs, thread })
    }
}

impl Drop for McpHub {
    fn drop(&mut self) {
        self.shutdown();
    }
}

struct Connection {
    service: RunningService<RoleClient, ()>,
    pgid: Option<u32>,
    tools: Vec<McpTool>,
}

impl Connection {
    async fn close(self) {
        if let Some(pgid) = self.pgid {
            kill_group(pgid, Signal::Kill);
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), self.service.cancel()).await;
    }
}

enum Slot {
    Up(Connection),
    Down { message: String, starts: u32 },
}

async fn serve(mut jobs: UnboundedReceiver<Job>, config: McpConfig, project: PathBuf) {
    let mut slots: HashMap<String, Slot> = HashMap::new();
    while let Some(job) = jobs.recv().await {
        match job {
            Job::Tools { server, reply } => {
                // Listing happens every turn: a server that failed to start is not tried
                // again for it (a call still tries, up to MAX_STARTS).
                let answer = match slots.get(&server) {
                    Some(Slot::Down { message, starts }) if *starts > 0 => Err(McpError::Start {
                        server: server.clone(),
                        message: message.clone(),
                    }),
                    _ => ensure(&mut slots, &server, &config, &project)
                        .await
                        .map(|c| c.tools.clone()),
                };
                let _ = reply.send(answer);
            }
            Job::Call {
                server,
                tool,
                arguments,
                reply,
            } => {
                let answer = call(&mut slots, &server, &tool, arguments, &config, &project).await;
                let _ = reply.send(answer);
            }
        }
    }
    for (_, slot) in slots.drain() {
        if let Slot::Up(c) = slot {
            c.close().await;
        }
    }
}

async fn call(
    slots: &mut HashMap<String, Slot>,
    server: &str,
    tool: &str,
    arguments: Map<String, Value>,
    config: &McpConfig,
    project: &Path,
) -> Result<Value, McpError> {
    let conn = ensure(slots, server, config, project).await?;
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
    let outcome = tokio::time::timeout(config.call_timeout, conn.service.call_tool(params)).await;
    let failure = match outcome {
        Ok(Ok(result)) => {
            return serde_json::to_value(result).map_err(|e| McpError::Protocol {
                server: server.to_string(),
                message: format!("unreadable result: {e}"),
            });
        }
        // The server answered with a JSON-RPC error: it is alive, the call failed.
        Ok(Err(ServiceError::McpError(e))) => {
            return Err(McpError::Protocol {
                server: server.to_string(),
                message: e.message.to_string(),
            });
        }
        Ok(Err(e)) => McpError::Crashed {
            server: server.to_string(),
            message: e.to_string(),
        },
        Err(_) => McpError::Timeout {
            server: server.to_string(),
            ms: config.call_timeout.as_millis() as u64,
        },
    };
    // Crashed or hung: stop it; the next use starts it again.
    if let Some(Slot::Up(c)) = slots.remove(server) {
        c.close().await;
    }
    slots.insert(
        server.to_string(),
        Slot::Down {
            message: failure.to_string(),
            starts: 0,
        },
    );
    Err(failure)
}

/// The server's connection, started now if it is not up.
async fn ensure<'a>(
    slots: &'a mut HashMap<String, Slot>,
    server: &str,
    config: &McpConfig,
    project: &Path,
) -> Result<&'a Connection, McpError> {
    let starts = match slots.get(server) {
        Some(Slot::Up(_)) => 0,
        Some(Slot::Down { message, starts }) if *starts >= MAX_STARTS => {
            return Err(McpError::Start {
                server: server.to_string(),
                message: format!("gave up after {starts} attempts: {message}"),
            });
        }
        Some(Slot::Down { starts, .. }) => *starts,
        None => 0,
    };
    if !matches!(slots.get(server), Some(Slot::Up(_))) {
        let cfg = config
            .servers
            .get(server)
            .ok_or_else(|| McpError::Unknown(server.to_string()))?;
        match start(server, cfg, project, config.start_timeout).await {
            Ok(conn) => {
                slots.insert(server.to_string(), Slot::Up(conn));
            }
            Err(e) => {
                slots.insert(
                    server.to_string(),
                    Slot::Down {
                        message: e.to_string(),
                        starts: starts + 1,
                    },
                );
                return Err(e);
            }
        }
    }
    match slots.get(server) {
        Some(Slot::Up(c)) => Ok(c),
        _ => Err(McpError::Stopped),
    }
}

async fn start(
    server: &str,
    cfg: &McpServerConfig,
    project: &Path,
    timeout: Duration,
) -> Result<Connection, McpError> {
    let fail = |message: String| McpError::Start {
        server: server.to_string(),
        message,
    };
    let mut std_cmd = std::process::Command::new(&cfg.command);
    // Descriptors baton inherited without close-on-exec stay with baton.
    baton_sandbox::close_inherited_fds(&mut std_cmd);
    let mut cmd = tokio::process::Command::from(std_cmd);
    cmd.args(&cfg.args)
        .env_clear()
        .envs(
            SERVER_ENV
                .iter()
                .filter_map(|k| Some((*k, std::env::var_os(k)?))),
        )
        .envs(&cfg.env)
        .current_dir(cfg.cwd.as_deref().unwrap_or(project))
        // Its own process group, so a server and whatever it starts can be killed together.
        .process_group(0)
        .kill_on_drop(true);
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| fail(format!("{} cannot be started ({})", cfg.command, e.kind())))?;
    let pgid = transport.id();
    let handshake = async {
        let service = ().serve(transport).await.map_err(|e| format!("no MCP handshake: {e}"))?;
        let tools = list_tools(&service, server).await?;
        Ok::<_, String>((service, tools))
    };
    match tokio::time::timeout(timeout, handshake).await {
        Ok(Ok((service, tools))) => Ok(Connection {
            service,
            pgid,
            tools,
        }),
        Ok(Err(message)) => {
            if let Some(p) = pgid {
                kill_group(p, Signal::Kill);
            }
            Err(fail(message))
        }
        Err(_) => {
            if let Some(p) = pgid {
                kill_group(p, Signal::Kill);
            }
            Err(fail(format!("no answer within {} ms", timeout.as_millis())))
        }
    }
}

async fn list_tools(
    service: &RunningService<RoleClient, ()>,
    server: &str,
) -> Result<Vec<McpTool>, String> {
    let mut raw = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let page = service
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        raw.extend(page.tools);
        cursor = page.next_cursor;
        if cursor.is_none() || raw.len() >= MAX_TOOLS {
            break;
        }
    }
    let mut taken = HashSet::new();
    let mut tools = Vec::new();
    for t in raw.into_iter().take(MAX_TOOLS) {
        let Some(parameters) = convert::schema(&t.input_schema) else {
            continue;
        };
        let Some(name) = names::exposed(server, &t.name, &taken) else {
            continue;
        };
        taken.insert(name.clone());
        tools.push(McpTool {
            name,
            original: t.name.to_string(),
            description: convert::description(t.description.as_deref()),
            parameters,
        });
    }
    Ok(tools)
}
