//! The ToolHost: checks a model's tool call, runs it against the run's mounts, and audits it.

use crate::audit;
use crate::files::{atomic_write_grouped, kind, read_all};
use crate::mcp::{McpError, McpHub, McpTool};
use crate::mounts::{Mount, MountPath, Mounts, parse};
use crate::policy::EffectivePolicy;
use crate::read;
use crate::result::{ToolError, ok};
use crate::search::{self, SearchRequest};
use crate::specs::{self, FS_TOOLS, TERMINAL_TOOLS, ToolSpec};
use crate::terminal::{CONFIG_FILE, Terminal, TerminalRuntime};
use crate::widgets::{self, Question};
use baton_package::digest::sha256_hex;
use baton_package::graph::Graph;
use baton_store::jsonl::JsonlWriter;
use baton_store::time::now_rfc3339;
use baton_store::{GuardOptions, StateDoc, StateFile, StateFileError, StateWrite};
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

pub use crate::call::{AbortFn, CallContext, ToolCall};

/// The state file seen by the model.
const STATE_FILE: &str = "workflow.md";
/// Logs under `@state/logs/` are written by baton only.
const LOGS_DIR: &str = "logs";

#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    /// The JSON result sent back to the model.
    pub result: Value,
    /// Set by `ui.ask_user`: the run must wait for the user.
    pub question: Option<Question>,
    /// True when `@state/workflow.md` changed.
    pub state_changed: bool,
}

/// After completion, a state change needs a fresh user confirmation, and one confirmation
/// allows exactly one change. The engine arms and grants it; the host enforces it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ConfirmationGate {
    armed: bool,
    granted: bool,
}

impl ConfirmationGate {
    pub fn arm(&mut self, armed: bool) {
        self.armed = armed;
        if !armed {
            self.granted = false;
        }
    }

    pub fn grant(&mut self) {
        self.granted = true;
    }

    pub fn is_armed(&self) -> bool {
        self.armed
    }

    fn check(&self) -> Result<(), ToolError> {
        if self.armed && !self.granted {
            return Err(ToolError::new(
                "STATE_CHANGE_REQUIRES_CONFIRMATION",
                "The workflow is complete: changing @state/workflow.md needs the user's confirmation first. Ask with ui.ask_user (type: confirmation), then retry.",
            ));
        }
        Ok(())
    }

    fn consume(&mut self) {
        if self.armed {
            self.granted = false;
        }
    }
}

/// The run-specific things the host works with.
pub struct RunBinding {
    pub run_id: String,
    pub graph: Graph,
    pub state: StateFile,
    /// Project-relative directory whose new files are recorded as artifacts.
    pub artifacts_dir: String,
}

/// What the host needs beyond the mounts to start programs: set by whoever drives the run.
#[derive(Clone, Default)]
pub struct ToolRuntime {
    pub terminal: TerminalRuntime,
    /// The run's MCP client (servers of `baton.toml`); `None` = no MCP server.
    pub mcp: Option<Arc<McpHub>>,
    pub abort: Option<AbortFn>,
}

/// A workflow run's graph, guarded state file and artifacts directory; a task run has none.
struct Workflow {
    graph: Graph,
    state: StateFile,
    artifacts_dir: String,
}

/// A state tool called in a task run, which has no workflow state to change.
fn no_workflow_state() -> ToolError {
    ToolError::new(
        "E_NO_WORKFLOW_STATE",
        "This is a task run: it has no workflow state (@state/workflow.md) and no graph. Write your results under @project and finish with the finish tool.",
    )
}

pub struct ToolHost {
    mounts: Mounts,
    run_id: String,
    workflow: Option<Workflow>,
    audit: JsonlWriter,
    terminal: Terminal,
    mcp: Option<Arc<McpHub>>,
    abort: Option<AbortFn>,
    /// Set by a driver that makes a model turn's writes durable together (see
    /// [`ToolHost::set_flush_group`]).
    group: Option<baton_store::durable::Group>,
    pub gate: ConfirmationGate,
}

impl ToolHost {
    pub fn open(
        project: &Path,
        pkg: &Path,
        state_dir: &Path,
        audit_log: &Path,
        run: RunBinding,
    ) -> Result<ToolHost, std::io::Error> {
        let workflow = Workflow {
            graph: run.graph,
            state: run.state,
            artifacts_dir: run.artifacts_dir,
        };
        Self::open_with(
            project,
            pkg,
            state_dir,
            audit_log,
            run.run_id,
            Some(workflow),
        )
    }

    /// A host for a task run: the same mounts, tools and audit log, but no graph and no
    /// workflow state, so `@state/workflow.md` writes and `workflow.rewind` are refused
    /// (`E_NO_WORKFLOW_STATE`) and no write is recorded as an artifact.
    pub fn open_task(
        project: &Path,
        pkg: &Path,
        state_dir: &Path,
        audit_log: &Path,
        run_id: String,
    ) -> Result<ToolHost, std::io::Error> {
        Self::open_with(project, pkg, state_dir, audit_log, run_id, None)
    }

    fn open_with(
        project: &Path,
        pkg: &Path,
        state_dir: &Path,
        audit_log: &Path,
        run_id: String,
        workflow: Option<Workflow>,
    ) -> Result<ToolHost, std::io::Error> {
        let mounts = Mounts::open(project, pkg, state_dir)?;
        let audit = JsonlWriter::open(audit_log).map_err(std::io::Error::other)?;
        let mut terminal = Terminal::new(&run_id, project);
        terminal.set_runtime(TerminalRuntime {
            store_home: store_home_of(state_dir),
            ..TerminalRuntime::default()
        });
        Ok(ToolHost {
            mounts,
            run_id,
            workflow,
            audit,
            terminal,
            mcp: None,
            abort: None,
            group: None,
            gate: ConfirmationGate::default(),
        })
    }

    /// Makes the files the tools write, the state and the audit lines durable with `group`'s
    /// next flush (the driver's, before its next model call) instead of each on its own.
    pub fn set_flush_group(&mut self, group: baton_store::durable::Group) {
        if let Some(wf) = self.workflow.as_mut() {
            wf.state = wf.state.clone().grouped(group.clone());
        }
        self.group = Some(group);
    }

    /// The group the host's writes join, if a driver set one.
    pub fn flush_group(&self) -> Option<&baton_store::durable::Group> {
        self.group.as_ref()
    }

    /// Sets where commands may not look, how a stop is noticed, and test overrides. The
    /// store stays denied even when the runtime does not name it.
    pub fn set_runtime(&mut self, runtime: ToolRuntime) {
        let mut terminal = runtime.terminal;
        if terminal.store_home.is_none() {
            terminal.store_home = self.terminal.runtime().store_home.clone();
        }
        self.terminal.set_runtime(terminal);
        self.mcp = runtime.mcp;
        self.abort = runtime.abort;
    }

    /// The MCP tools `policy` lets the model see: those of the allowed, configured servers
    /// (each started on first need). A server that does not start offers no tool.
    pub fn mcp_tools(&self, policy: &EffectivePolicy) -> Vec<McpTool> {
        let Some(hub) = &self.mcp else {
            return Vec::new();
        };
        if !policy.mcp_enabled {
            return Vec::new();
        }
        hub.servers()
            .iter()
            .filter(|s| policy.mcp_allowed_servers.contains(s))
            .filter_map(|s| hub.tools(s).ok())
            .flatten()
            .collect()
    }

    /// `mcp__<server>__<tool>`: the policy, then the server's own list, then the call.
    fn mcp_call(
        &self,
        name: &str,
        args: &Value,
        policy: &EffectivePolicy,
    ) -> Result<Value, ToolError> {
        let unavailable = |why: String| {
            ToolError::new(
                "TOOL_NOT_AVAILABLE",
                format!("tool '{name}' is not available: {why}"),
            )
        };
        let Some((server, _)) = crate::mcp::split_name(name) else {
            return Err(unavailable("not an MCP tool name".into()));
        };
        if !policy.mcp_enabled {
            return Err(unavailable("MCP is disabled for this agent".into()));
        }
        if !policy.mcp_allowed_servers.iter().any(|s| s == server) {
            return Err(unavailable(format!(
                "server '{server}' is not allowed for this agent"
            )));
        }
        let Some(hub) = &self.mcp else {
            return Err(unavailable("no MCP server is configured".into()));
        };
        let mcp_error = |e: McpError| ToolError::new(e.code(), e.to_string());
        let tools = hub.tools(server).map_err(mcp_error)?;
        let Some(tool) = tools.iter().find(|t| t.name == name) else {
            return Err(
                unavailable(format!("server '{server}' has no such tool")).with_details(
                    json!({"available": tools.iter().map(|t| &t.name).collect::<Vec<_>>()}),
                ),
            );
        };
        let arguments = args.as_object().cloned().unwrap_or_default();
        match hub
            .call(server, &tool.original, arguments, self.abort.as_ref())
            .map_err(mcp_error)?
        {
            Ok(fields) => Ok(ok(fields)),
            Err(message) => Err(ToolError::new("MCP_TOOL_ERROR", message)),
        }
    }

    /// The workflow's graph; `None` for a task run.
    pub fn graph(&self) -> Option<&Graph> {
        self.workflow.as_ref().map(|w| &w.graph)
    }

    /// Tools the model may call under `policy`: the file tools when fs is enabled, and always
    /// `ui.ask_user` and `workflow.rewind`.
    pub fn visible_tools(policy: &EffectivePolicy) -> Vec<&'static ToolSpec> {
        let t = &policy.terminal;
        specs::all()
            .iter()
            .filter(|s| policy.fs_enabled || !FS_TOOLS.contains(&s.name))
            .filter(|s| t.enabled || !TERMINAL_TOOLS.contains(&s.name))
            .filter(|s| t.allow_shell_exec || s.name != "shell.exec")
            .collect()
    }

    /// Runs one call and writes its audit line, whatever the outcome.
    pub fn execute(&mut self, call: ToolCall<'_>, ctx: CallContext<'_>) -> ToolOutcome {
        let started = Instant::now();
        let parsed: Result<Value, ToolError> =
            serde_json::from_str::<Value>(if call.arguments.trim().is_empty() {
                "{}"
            } else {
                call.arguments
            })
            .map_err(|e| {
                ToolError::new(
                    "TOOL_ARGS_INVALID_JSON",
                    format!("the arguments of {} are not valid JSON: {e}", call.name),
                )
            })
            .and_then(|v| {
                if v.is_object() {
                    Ok(v)
                } else {
                    Err(ToolError::new(
                        "TOOL_ARGS_INVALID_JSON",
                        format!("the arguments of {} must be a JSON object", call.name),
                    ))
                }
            });
        let input = parsed
            .as_ref()
            .cloned()
            .unwrap_or_else(|_| json!({"raw": audit::truncate(call.arguments, 200)}));
        let mut question = None;
        let mut state_changed = false;
        let result = parsed.and_then(|args| {
            self.dispatch(call.name, &args, ctx, &mut question, &mut state_changed)
        });
        let result = result.unwrap_or_else(|e| e.to_json());
        let line = audit::line(
            &now_rfc3339(),
            &self.run_id,
            call,
            ctx,
            &input,
            &result,
            started.elapsed(),
        );
        // An audit failure must not turn a done write into a reported failure; the engine
        // checks the log's health separately.
        let durable = state_changed && self.group.is_none();
        let _ = self.audit.append(&line, durable);
        if let Some(group) = &self.group {
            group.add_path(self.audit.path());
        }
        ToolOutcome {
            result,
            question,
            state_changed,
        }
    }

    fn dispatch(
        &mut self,
        name: &str,
        args: &Value,
        ctx: CallContext<'_>,
        question: &mut Option<Question>,
        state_changed: &mut bool,
    ) -> Result<Value, ToolError> {
        if name.starts_with(crate::mcp::NAME_PREFIX) {
            return self.mcp_call(name, args, ctx.policy);
        }
        let visible = Self::visible_tools(ctx.policy)
            .iter()
            .any(|s| s.name == name);
        if !visible {
            let known: Vec<&str> = Self::visible_tools(ctx.policy)
                .iter()
                .map(|s| s.name)
                .collect();
            return Err(ToolError::new(
                "TOOL_NOT_AVAILABLE",
                format!("tool '{name}' is not available"),
            )
            .with_details(json!({"available": known})));
        }
        specs::check_args(name, args).map_err(|problems| {
            ToolError::invalid_args(format!("invalid arguments for {name}: {}", problems[0]))
                .with_details(json!({"problems": problems}))
        })?;
        let path = || -> Result<MountPath, ToolError> {
            parse(args.get("path").and_then(Value::as_str).unwrap_or(""))
        };
        match name {
            "fs.read" => read::read(
                &self.mounts,
                &path()?,
                args.get("startLine").and_then(Value::as_u64),
                args.get("endLine").and_then(Value::as_u64),
                ctx.policy.max_read_bytes,
            ),
            "fs.list" => read::list(&self.mounts, &path()?),
            "fs.search" => self.search(args),
            "fs.write" => self.write(args, ctx, state_changed),
            "fs.apply_patch" => self.apply_patch(args, ctx, state_changed),
            "ui.ask_user" => {
                let q = widgets::validate(args)?;
                let result = ok(
                    json!({"widgetId": q.widget_id, "status": "waiting-user", "message": "The question is shown to the user; wait for the answer."}),
                );
                *question = Some(q);
                Ok(result)
            }
            "workflow.rewind" => self.rewind(args, state_changed),
            "terminal.run" | "shell.exec" => {
                let abort = self.abort.clone();
                self.terminal.run(
                    &self.mounts,
                    args,
                    ctx.policy,
                    name == "shell.exec",
                    abort.as_deref(),
                )
            }
            _ => Err(ToolError::new(
                "TOOL_NOT_AVAILABLE",
                format!("tool '{name}' is not available"),
            )),
        }
    }

    fn search(&self, args: &Value) -> Result<Value, ToolError> {
        let pattern = args
            .get("pattern")
            .or_else(|| args.get("query"))
            .and_then(Value::as_str);
        let Some(pattern) = pattern else {
            return Err(ToolError::invalid_args(
                "fs.search needs a pattern (or query)",
            ));
        };
        let globs: Vec<String> = args
            .get("globs")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let (root, rel_globs) = match args.get("path").and_then(Value::as_str) {
            Some(p) => {
                let root = parse(p)?;
                let rel: Vec<String> = globs
                    .iter()
                    .map(|g| {
                        g.split_once('/')
                            .map(|(_, r)| r.to_string())
                            .unwrap_or_else(|| g.clone())
                    })
                    .collect();
                (root, rel)
            }
            None if !globs.is_empty() => search::root_from_globs(&globs)?,
            None => (
                MountPath {
                    mount: Mount::Project,
                    rel: String::new(),
                },
                Vec::new(),
            ),
        };
        let count = |k: &str, d: u64| args.get(k).and_then(Value::as_u64).unwrap_or(d) as usize;
        search::search(
            &self.mounts,
            &SearchRequest {
                root,
                pattern: pattern.to_string(),
                globs: rel_globs,
                before: count("before", 1),
                after: count("after", 1),
                max_matches: count("maxMatches", 50),
            },
        )
    }

    fn is_state_file(path: &MountPath) -> bool {
        path.mount == Mount::State && path.rel == STATE_FILE
    }

    /// [`Self::writable`] for `path` and for where it leads through links in the project.
    fn writable_through_links(
        &self,
        path: &MountPath,
        policy: &EffectivePolicy,
    ) -> Result<(), ToolError> {
        Self::writable(path, policy)?;
        if let Some(real) = self.mounts.real_project_path(path) {
            Self::writable(&real, policy).map_err(|e| {
                let mut err = ToolError::sandbox(format!(
                    "Path not allowed: {} leads through a link to {}: {}",
                    path.display(),
                    real.display(),
                    e.message
                ));
                err.details = e.details;
                err
            })?;
        }
        Ok(())
    }

    fn writable(path: &MountPath, policy: &EffectivePolicy) -> Result<(), ToolError> {
        if path.mount == Mount::Project && !policy.allow_git_writes && path.is_in_git_dir() {
            return Err(ToolError::sandbox(format!(
                "Path not allowed: {} is inside a .git directory; a file written there (a hook, the config) would run or act outside this workflow. Reading it is allowed",
                path.display()
            ))
            .with_details(json!({"reason": "git_dir"})));
        }
        if path.mount == Mount::Project && path.is_in_session_files() {
            return Err(ToolError::sandbox(format!(
                "Path not allowed: {} holds lifecycle sessions' own files (status.json, decisions); baton writes them from your session.complete and verdicts. Reading them is allowed",
                path.display()
            ))
            .with_details(json!({"reason": "session_files"})));
        }
        if path.mount == Mount::Project && path.is_bmad_config() {
            return Err(ToolError::sandbox(format!(
                "Path not allowed: {} is BMAD's configuration; it locates the orchestrator's files (sprint status, the epic's state), so only the user edits it. Reading it is allowed",
                path.display()
            ))
            .with_details(json!({"reason": "bmad_config"})));
        }
        if path.mount == Mount::Project && path.is_protected(&policy.protected) {
            return Err(ToolError::sandbox(format!(
                "Path not allowed: {} is protected for this run (the operator's files, such as the project's BMAD method: its skills, workflows, configuration and customization); reading it is allowed",
                path.display()
            ))
            .with_details(json!({"reason": "protected"})));
        }
        if path.mount == Mount::Project && path.rel.eq_ignore_ascii_case(CONFIG_FILE) {
            return Err(ToolError::sandbox(format!(
                "Path not allowed: {} is baton's configuration (it sets what the tools may do); only the user edits it",
                path.display()
            ))
            .with_details(json!({"reason": "config"})));
        }
        if !path.mount.writable() {
            return Err(ToolError::sandbox(format!(
                "Path not allowed: {} is read-only (@pkg is the package)",
                path.display()
            )));
        }
        if path.mount == Mount::State && (path.rel == LOGS_DIR || path.rel.starts_with("logs/")) {
            return Err(ToolError::sandbox(format!(
                "Path not allowed: {} is written by baton only",
                path.display()
            )));
        }
        if path.rel.is_empty() {
            return Err(ToolError::new(
                "EISDIR",
                format!("Is a directory: {}", path.display()),
            ));
        }
        Ok(())
    }

    fn state_write_result(path: &MountPath, w: &StateWrite) -> Value {
        let mut out = json!({
            "path": path.display(),
            "sha256Before": w.before_sha256,
            "sha256After": w.after_sha256,
            "bytesWritten": w.bytes_written,
            "stateFrontmatterAfter": w.doc.to_value(),
        });
        if let Some(summary) = &w.summary {
            out["changes"] = json!(summary);
        }
        ok(out)
    }

    fn state_error(e: StateFileError) -> ToolError {
        match e {
            StateFileError::Refused(s) => s.into(),
            StateFileError::Store(s) => ToolError::new(
                "E_INTERNAL",
                format!("the state could not be written: {}", scrub(&s.to_string())),
            ),
        }
    }

    fn write(
        &mut self,
        args: &Value,
        ctx: CallContext<'_>,
        state_changed: &mut bool,
    ) -> Result<Value, ToolError> {
        let path = parse(args["path"].as_str().unwrap_or(""))?;
        self.writable_through_links(&path, ctx.policy)?;
        let content = args["content"].as_str().unwrap_or("");
        let append = args.get("mode").and_then(Value::as_str) == Some("append");
        let if_match = args.get("ifMatchSha256").and_then(Value::as_str);
        let max = ctx.policy.max_write_bytes;
        if Self::is_state_file(&path) {
            let Some(wf) = &self.workflow else {
                return Err(no_workflow_state());
            };
            self.gate.check()?;
            let text = if append {
                let current = wf.state.read().map_err(Self::state_error)?;
                format!("{}{content}", current.text)
            } else {
                content.to_string()
            };
            check_write_limit(&path, text.len(), max)?;
            let written = wf
                .state
                .replace(&wf.graph, &text, if_match, GuardOptions::default())
                .map_err(Self::state_error)?;
            self.gate.consume();
            *state_changed = true;
            return Ok(Self::state_write_result(&path, &written));
        }
        let existing = existing_target(&self.mounts, &path)?;
        let existed = existing.is_some();
        let old = if existed && (append || if_match.is_some()) {
            Some(read_all(
                &self.mounts,
                &path,
                max.max(ctx.policy.max_read_bytes) * 4,
            )?)
        } else {
            None
        };
        if let Some(expected) = if_match {
            let actual = old.as_deref().map(sha256_hex);
            if actual
                .as_deref()
                .is_none_or(|a| !a.eq_ignore_ascii_case(expected))
            {
                return Err(ToolError::new(
                    "E_PRECONDITION_FAILED",
                    format!(
                        "{} changed since it was read (ifMatchSha256 does not match)",
                        path.display()
                    ),
                )
                .with_details(json!({"expected": expected, "actual": actual})));
            }
        }
        let mut bytes = if append {
            old.unwrap_or_default()
        } else {
            Vec::new()
        };
        bytes.extend_from_slice(content.as_bytes());
        check_write_limit(&path, bytes.len(), max)?;
        atomic_write_grouped(&self.mounts, &path, &bytes, self.group.as_ref())?;
        let mut out = json!({"path": path.display(), "bytesWritten": content.len(), "sha256After": sha256_hex(&bytes)});
        if !existed && let Some(wf) = self.workflow.as_ref().filter(|w| w.is_artifact(&path)) {
            let update = json!({"artifacts": {"append": [path.rel]}});
            // Recording is bookkeeping of the write the user asked for, not a state decision:
            // it bypasses the confirmation gate but not the guard.
            match wf
                .state
                .patch(&wf.graph, &update, None, GuardOptions::default())
            {
                Ok(w) => {
                    if w.summary
                        .as_ref()
                        .is_some_and(|s| !s.artifacts_appended.is_empty())
                    {
                        out["artifactRecorded"] = json!(path.rel);
                        *state_changed = true;
                    }
                }
                Err(e) => {
                    let _ = self.mounts.dir(path.mount).remove_file(path.rel_path());
                    let err = Self::state_error(e);
                    return Err(ToolError::new(
                        err.code,
                        format!(
                            "{} was not kept: recording it in the state failed: {}",
                            path.display(),
                            err.message
                        ),
                    ));
                }
            }
        }
        Ok(ok(out))
    }

    fn apply_patch(
        &mut self,
        args: &Value,
        ctx: CallContext<'_>,
        state_changed: &mut bool,
    ) -> Result<Value, ToolError> {
        let path = parse(args["path"].as_str().unwrap_or(""))?;
        self.writable_through_links(&path, ctx.policy)?;
        // Flat (`{path, operation, update}`) and nested (`{path, patch: {...}}`) forms.
        let mut p: Map<String, Value> = args.as_object().cloned().unwrap_or_default();
        if let Some(Value::Object(nested)) = p.remove("patch") {
            p.extend(nested);
        }
        let operation = match p.get("operation").and_then(Value::as_str) {
            Some(op) => op.to_string(),
            None if p.contains_key("update") => "updateFrontmatter".into(),
            None if p.contains_key("find") => "replaceText".into(),
            None if p.contains_key("diff") => "unifiedDiff".into(),
            None => {
                return Err(ToolError::invalid_args(
                    "fs.apply_patch needs an operation: updateFrontmatter, replaceText or unifiedDiff",
                ));
            }
        };
        let if_match = p.get("ifMatchSha256").and_then(Value::as_str);
        if Self::is_state_file(&path) {
            let Some(wf) = &self.workflow else {
                return Err(no_workflow_state());
            };
            self.gate.check()?;
            let written = if operation == "updateFrontmatter" {
                let update = p
                    .get("update")
                    .ok_or_else(|| ToolError::invalid_args("updateFrontmatter needs 'update'"))?;
                wf.state
                    .patch(&wf.graph, update, if_match, GuardOptions::default())
            } else {
                let current = wf.state.read().map_err(Self::state_error)?;
                let text = edit_text(&operation, &current.text, &p, &path)?;
                check_write_limit(&path, text.len(), ctx.policy.max_write_bytes)?;
                wf.state
                    .replace(&wf.graph, &text, if_match, GuardOptions::default())
            }
            .map_err(Self::state_error)?;
            self.gate.consume();
            *state_changed = true;
            return Ok(Self::state_write_result(&path, &written));
        }
        if existing_target(&self.mounts, &path)?.is_none() {
            return Err(ToolError::new(
                "ENOENT",
                format!("File not found: {}", path.display()),
            ));
        }
        let old = read_all(
            &self.mounts,
            &path,
            ctx.policy.max_write_bytes.max(ctx.policy.max_read_bytes) * 4,
        )?;
        let before = sha256_hex(&old);
        if let Some(expected) = if_match
            && !expected.eq_ignore_ascii_case(&before)
        {
            return Err(ToolError::new(
                "E_PRECONDITION_FAILED",
                format!(
                    "{} changed since it was read (ifMatchSha256 does not match)",
                    path.display()
                ),
            ));
        }
        let old_text = String::from_utf8(old).map_err(|_| {
            ToolError::new(
                "E_BINARY_FILE",
                format!("{} is not a text file", path.display()),
            )
        })?;
        let new_text = if operation == "updateFrontmatter" {
            let update = p
                .get("update")
                .ok_or_else(|| ToolError::invalid_args("updateFrontmatter needs 'update'"))?;
            let mut doc = StateDoc::parse(&old_text).map_err(ToolError::from)?;
            doc.apply_update(update).map_err(ToolError::from)?;
            doc.render().map_err(ToolError::from)?
        } else {
            edit_text(&operation, &old_text, &p, &path)?
        };
        check_write_limit(&path, new_text.len(), ctx.policy.max_write_bytes)?;
        atomic_write_grouped(
            &self.mounts,
            &path,
            new_text.as_bytes(),
            self.group.as_ref(),
        )?;
        Ok(ok(json!({
            "path": path.display(),
            "sha256Before": before,
            "sha256After": sha256_hex(new_text.as_bytes()),
            "bytesWritten": new_text.len(),
        })))
    }

    fn rewind(&mut self, args: &Value, state_changed: &mut bool) -> Result<Value, ToolError> {
        if args.get("confirmed").and_then(Value::as_bool) != Some(true) {
            return Err(ToolError::new(
                "E_CONFIRMATION_REQUIRED",
                "workflow.rewind discards completed steps: ask the user with ui.ask_user (type: confirmation) and call it again with confirmed: true",
            ));
        }
        let Some(wf) = &self.workflow else {
            return Err(no_workflow_state());
        };
        self.gate.check()?;
        let to = args["toNodeId"].as_str().unwrap_or("");
        let reason = args["reason"].as_str().unwrap_or("");
        let current = wf.state.read().map_err(Self::state_error)?;
        let steps: Vec<String> = current
            .doc
            .steps_completed()
            .into_iter()
            .map(str::to_owned)
            .collect();
        let Some(index) = steps.iter().position(|s| s == to) else {
            return Err(ToolError::new(
                "E_INVALID_TRANSITION",
                format!(
                    "'{to}' is not a completed step; a rewind goes back to a node in stepsCompleted"
                ),
            )
            .with_details(json!({"stepsCompleted": steps})));
        };
        let from = current.doc.effective_node_id(&wf.graph).to_string();
        let removed: Vec<String> = steps[index..].to_vec();
        let mut doc = current.doc.clone();
        let fields = doc.fields_mut();
        fields.insert("stepsCompleted".into(), json!(steps[..index]));
        fields.insert("currentNodeId".into(), json!(to));
        if let Some(Value::Object(vars)) = fields.get_mut("variables") {
            vars.shift_remove("workflowStatus");
        }
        let now = now_rfc3339();
        doc.apply_update(&json!({
            "decisionLog": {"append": [{"from": from, "to": to, "label": "rewind", "reason": reason, "decidedAt": now}]},
            "updatedAt": {"set": now},
        }))
        .map_err(ToolError::from)?;
        let text = doc.render().map_err(ToolError::from)?;
        let written = wf
            .state
            .replace(
                &wf.graph,
                &text,
                Some(&current.sha256),
                GuardOptions { rewind: true },
            )
            .map_err(Self::state_error)?;
        self.gate.consume();
        *state_changed = true;
        Ok(ok(json!({
            "currentNodeId": to,
            "stepsCompleted": steps[..index],
            "removedSteps": removed,
            "sha256After": written.after_sha256,
        })))
    }
}

impl Workflow {
    fn is_artifact(&self, path: &MountPath) -> bool {
        let dir = self.artifacts_dir.trim_matches('/');
        path.mount == Mount::Project && path.rel.starts_with(&format!("{dir}/"))
    }
}

/// What a write would replace: nothing, or a regular file. Directories, special files and
/// symlinks (wherever they point) are refused: replacing a link would surprise, following one
/// could leave the mount.
fn existing_target(
    mounts: &Mounts,
    path: &MountPath,
) -> Result<Option<cap_std::fs::Metadata>, ToolError> {
    let Some(meta) = kind(mounts, path)? else {
        return Ok(None);
    };
    if meta.is_dir() {
        return Err(ToolError::new(
            "EISDIR",
            format!("Is a directory: {}", path.display()),
        ));
    }
    if meta.file_type().is_symlink() {
        return Err(ToolError::sandbox(format!(
            "Path not allowed: {} is a symbolic link",
            path.display()
        )));
    }
    if !meta.is_file() {
        return Err(ToolError::sandbox(format!(
            "Path not allowed: {} is not a regular file",
            path.display()
        )));
    }
    Ok(Some(meta))
}

fn check_write_limit(path: &MountPath, len: usize, max: u64) -> Result<(), ToolError> {
    if len as u64 > max {
        return Err(ToolError::new(
            "E_WRITE_LIMIT",
            format!(
                "writing {len} bytes to {} is over the limit of {max}",
                path.display()
            ),
        )
        .with_details(json!({"bytes": len, "maxWriteBytes": max})));
    }
    Ok(())
}

/// `replaceText` and `unifiedDiff` on a text.
fn edit_text(
    operation: &str,
    old: &str,
    p: &Map<String, Value>,
    path: &MountPath,
) -> Result<String, ToolError> {
    match operation {
        "replaceText" => {
            let find = p
                .get("find")
                .and_then(Value::as_str)
                .filter(|f| !f.is_empty())
                .ok_or_else(|| ToolError::invalid_args("replaceText needs a non-empty 'find'"))?;
            let replace = p.get("replace").and_then(Value::as_str).unwrap_or("");
            let found = old.matches(find).count();
            let expected = p.get("count").and_then(Value::as_u64);
            match (found, expected) {
                (0, _) => Err(ToolError::new(
                    "E_PATCH_FAILED",
                    format!("the text to find does not occur in {}", path.display()),
                )),
                (n, Some(c)) if n as u64 != c => Err(ToolError::new(
                    "E_PATCH_FAILED",
                    format!("the text occurs {n} times in {}, not {c}", path.display()),
                )),
                (n, None) if n > 1 => Err(ToolError::new(
                    "E_PATCH_FAILED",
                    format!(
                        "the text occurs {n} times in {}; pass count: {n} to replace them all, or make 'find' unique",
                        path.display()
                    ),
                )),
                _ => Ok(old.replace(find, replace)),
            }
        }
        "unifiedDiff" => {
            let diff = p
                .get("diff")
                .and_then(Value::as_str)
                .ok_or_else(|| ToolError::invalid_args("unifiedDiff needs 'diff'"))?;
            let patch = diffy::Patch::from_str(diff)
                .map_err(|e| ToolError::invalid_args(format!("the diff cannot be parsed: {e}")))?;
            diffy::apply(old, &patch).map_err(|e| {
                ToolError::new(
                    "E_PATCH_FAILED",
                    format!("the diff does not apply to {}: {e}", path.display()),
                )
            })
        }
        "updateFrontmatter" => Err(ToolError::invalid_args("updateFrontmatter needs 'update'")),
        other => Err(ToolError::invalid_args(format!(
            "unknown operation '{other}'; use updateFrontmatter, replaceText or unifiedDiff"
        ))),
    }
}

/// `$BATON_HOME` from a run's state directory (`<home>/projects/<id>/runs/<run>/state`).
fn store_home_of(state_dir: &Path) -> Option<PathBuf> {
    let projects = state_dir.ancestors().nth(4)?;
    if projects.file_name()? != "projects" {
        return None;
    }
    projects.parent().map(Path::to_path_buf)
}

/// Store errors carry host paths; the model must never see them.
fn scrub(message: &str) -> String {
    message
        .split_whitespace()
        .map(|w| if w.starts_with('/') { "<store>" } else { w })
        .collect::<Vec<_>>()
        .join(" ")
}
