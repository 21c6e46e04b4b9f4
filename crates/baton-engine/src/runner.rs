//! Starting and continuing runs: package install and pinning, run creation, the ToolHost, the
//! machine and the driver, put together. The CLI calls these and only presents the result.

use crate::call_ids::UniqueCallIds;
use crate::composer::{Composer, Intent};
use crate::conversation::{self, ConversationLog, Restored};
use crate::driver::{Driver, EngineError, EngineEvent, Outcome, RunReport};
use crate::machine::{ContextPolicy, DEFAULT_MAX_TURNS, Machine};
use baton_llm::{ChatModel, RecordingModel, ReplayModel, TraceRecorder};
use baton_package::{Package, Report, ValidateOptions, validate_path};
use baton_store::driver_lock::{self, DriverLock, DriverLockError};
use baton_store::{NewRun, Phase, Project, RunError, RunKind, RunMetadata, Store};
use baton_tools::{McpHub, RunBinding, ToolHost, ToolRuntime, ToolsConfig};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    #[error("the package is invalid")]
    InvalidPackage(Box<Report>),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Busy(#[from] DriverLockError),
    /// The run exists but cannot take this command (not waiting, not complete, damaged state…).
    #[error("{message}")]
    Refused {
        code: &'static str,
        message: String,
        hint: Option<String>,
    },
    #[error("{0}")]
    Usage(String),
    #[error("cannot open the run's files: {0}")]
    Io(String),
}

impl RunnerError {
    pub fn code(&self) -> &'static str {
        match self {
            RunnerError::InvalidPackage(_) => "PACKAGE_INVALID",
            RunnerError::Run(e) => e.code(),
            RunnerError::Engine(EngineError::Stopped(stop)) => stop.code,
            RunnerError::Engine(_) => "ENGINE_STATE_UNREADABLE",
            RunnerError::Busy(e) => e.code(),
            RunnerError::Refused { code, .. } => code,
            RunnerError::Usage(_) => "USAGE",
            RunnerError::Io(_) => "STORE_IO_FAILED",
        }
    }

    pub fn hint(&self) -> Option<String> {
        match self {
            RunnerError::Run(e) => e.hint(),
            RunnerError::Busy(e) => e.hint(),
            RunnerError::Refused { hint, .. } => hint.clone(),
            _ => None,
        }
    }

    /// A mistake in what was asked (exit code 2), as opposed to a failure while doing it.
    pub fn is_usage(&self) -> bool {
        match self {
            RunnerError::InvalidPackage(_) | RunnerError::Usage(_) => true,
            RunnerError::Refused { code, .. } => *code != "STATE_INVALID",
            RunnerError::Run(e) => !matches!(e, RunError::Store(_)),
            _ => false,
        }
    }
}

fn refused(code: &'static str, message: String, hint: &str) -> RunnerError {
    RunnerError::Refused {
        code,
        message,
        hint: Some(hint.to_string()),
    }
}

/// Asks a person a question; `None` when no answer comes.
pub type AskFn<'a> = &'a mut (dyn FnMut(&str) -> Option<String> + Send);

/// How the engine runs, whatever starts it.
pub struct Settings<'a> {
    pub model: &'a dyn ChatModel,
    /// When replaying, the recorded user inputs answer the questions.
    pub replay: Option<&'a ReplayModel>,
    /// Answers given in advance (`--input`), used in order.
    pub inputs: VecDeque<String>,
    /// Asks a person (interactive terminals); `None` stops the run at the first question.
    pub ask: Option<AskFn<'a>>,
    pub record: Option<Arc<Mutex<TraceRecorder>>>,
    /// The context policy; `None`: the one the run remembers (`node` for a new run). A policy
    /// given here wins and is remembered for the run's next invocations.
    pub context: Option<ContextPolicy>,
    pub autopilot: bool,
    pub max_turns: usize,
    pub on_event: Option<&'a (dyn Fn(EngineEvent) + Send + Sync)>,
    pub cancel: CancellationToken,
    /// Tool settings of `baton.toml` (`[tools.*]`, `[mcp]`): the ceiling of every agent's
    /// policy and the MCP servers. Default: file tools only.
    pub tools: ToolsConfig,
    /// The context budget (`None`: requests are never compressed nor refused for size).
    pub budget: Option<crate::context::Budget>,
    /// With `record`: called after each recorded model call (see [`Checkpoint`]).
    pub checkpoint: Option<Checkpoint<'a>>,
    /// Hard budgets (tokens, USD): no model call is made that could cross one.
    pub caps: Vec<crate::spend::Cap>,
    /// Told at every durable point of the run, after the driver's flush (a queue worker's
    /// checkpoint, see [`crate::OnDurable`]); its error stops the invocation with
    /// [`RunnerError::Engine`] holding [`EngineError::Stopped`].
    pub on_durable: Option<&'a dyn crate::OnDurable>,
}

impl<'a> Settings<'a> {
    pub fn new(model: &'a dyn ChatModel) -> Settings<'a> {
        Settings {
            model,
            replay: None,
            inputs: VecDeque::new(),
            ask: None,
            record: None,
            context: None,
            autopilot: true,
            max_turns: DEFAULT_MAX_TURNS,
            on_event: None,
            cancel: CancellationToken::new(),
            tools: ToolsConfig::default(),
            budget: Some(crate::context::Budget::default()),
            checkpoint: None,
            caps: Vec::new(),
            on_durable: None,
        }
    }
}

/// A run and what the last invocation did.
#[derive(Debug, Clone)]
pub struct Finished {
    pub run: RunMetadata,
    pub report: RunReport,
    pub state: Value,
}

impl Finished {
    /// `{runId, phase, currentNodeId, stepsCompleted, artifacts, waitingFor, usage, error, …}`
    pub fn to_json(&self) -> Value {
        let error = match &self.report.outcome {
            Outcome::Failed { code, message } => json!({"code": code, "message": message}),
            _ => Value::Null,
        };
        json!({
            "runId": self.run.run_id,
            "phase": self.run.phase.as_str(),
            "currentNodeId": self.run.current_node_id,
            "stepsCompleted": self.state.get("stepsCompleted").cloned().unwrap_or(json!([])),
            "artifacts": self.state.get("artifacts").cloned().unwrap_or(json!([])),
            "waitingFor": self.run.waiting_for,
            "usage": self.report.usage,
            "runUsage": self.run.usage,
            "modelCalls": self.report.model_calls,
            "toolCalls": self.report.tool_calls,
            "error": error,
        })
    }
}

pub struct StartRun<'a> {
    pub package: &'a Path,
    pub project: &'a Path,
    pub workflow: Option<&'a str>,
    pub agent: Option<&'a str>,
}

impl<'a> StartRun<'a> {
    /// The package's default workflow with its default agent.
    pub fn new(package: &'a Path, project: &'a Path) -> StartRun<'a> {
        StartRun {
            package,
            project,
            workflow: None,
            agent: None,
        }
    }
}

/// Validates and installs the package, creates the run, and drives it.
pub async fn start(
    store: &Store,
    start: StartRun<'_>,
    settings: Settings<'_>,
) -> Result<Finished, RunnerError> {
    let claimed = create(store, start, &serde_json::Map::new())?;
    drive(&claimed, settings).await
}

/// The run's package, validated, with the workflow it names.
fn validated_package(start: &StartRun<'_>) -> Result<Package, RunnerError> {
    let report = validate_path(
        start.package,
        &ValidateOptions {
            workflow: start.workflow.map(str::to_owned),
            ..Default::default()
        },
    );
    let Some(package) = report.package else {
        return Err(RunnerError::InvalidPackage(Box::new(report)));
    };
    selected_workflow(&package, start.workflow)?;
    Ok(package)
}

fn selected_workflow<'p>(
    package: &'p Package,
    workflow_ref: Option<&str>,
) -> Result<&'p baton_package::Workflow, RunError> {
    package
        .resolve_workflow(workflow_ref)
        .map_err(|d| RunError::Workflow {
            code: d.code.as_str(),
            message: d.message,
            hint: d.hint,
        })
}

/// What [`create`] checks that needs no model and writes nothing: the package, the workflow
/// it names, and the project directory. `baton run` calls it before it looks for a model, so
/// a wrong path is said first.
pub fn check_start(start: &StartRun<'_>) -> Result<(), RunnerError> {
    validated_package(start)?;
    if !start.project.is_dir() {
        let reason = if start.project.exists() {
            "not a directory"
        } else {
            "no such directory"
        };
        return Err(RunError::ProjectRootInvalid {
            path: start.project.to_path_buf(),
            reason: reason.into(),
        }
        .into());
    }
    Ok(())
}

/// Validates and installs the package and creates the run with `variables` in its state
/// (`baton run --var`), without driving it: the caller learns the run id (and may record it)
/// before the first model call, then drives it with [`continue_claimed`].
pub fn create(
    store: &Store,
    start: StartRun<'_>,
    variables: &serde_json::Map<String, Value>,
) -> Result<Claimed, RunnerError> {
    let package = validated_package(&start)?;
    let project = store.project(start.project)?;
    create_validated(store, project, package, start, variables)
}

/// [`create`] in `project` as it is opened: a project seen from one of its git worktrees
/// ([`Store::project_in_work_tree`]) gets the run, which mounts the worktree as `@project`.
/// `start.project` is not looked at.
pub fn create_in(
    store: &Store,
    project: Project,
    start: StartRun<'_>,
    variables: &serde_json::Map<String, Value>,
) -> Result<Claimed, RunnerError> {
    let package = validated_package(&start)?;
    create_validated(store, project, package, start, variables)
}

fn create_validated(
    store: &Store,
    project: Project,
    package: Package,
    start: StartRun<'_>,
    variables: &serde_json::Map<String, Value>,
) -> Result<Claimed, RunnerError> {
    let installed = store
        .packages()
        .install(&package, &start.package.display().to_string())
        .map_err(RunError::from)?
        .package;
    let workflow = selected_workflow(&package, start.workflow)?;
    let agent = match start.agent {
        Some(a) => a.to_string(),
        None => default_agent(&package, &workflow.graph),
    };
    let run = project.create_run_with_variables(
        NewRun {
            package: &package,
            installed: &installed,
            workflow_ref: start.workflow,
            agent_id: &agent,
        },
        variables,
    )?;
    let lock = driver_lock::acquire(
        &project.run_paths(&run.run_id).dir,
        &run.run_id,
        "baton run",
    )?;
    Ok(Claimed {
        project,
        run,
        package,
        package_root: installed.path,
        continuation: Continuation::Start,
        _lock: lock,
    })
}

/// The entry node's agent, else the first agent of the package.
fn default_agent(package: &Package, graph: &baton_package::Graph) -> String {
    graph
        .node(graph.entry_node_id())
        .and_then(|n| n.agent_id.clone())
        .filter(|a| package.agent(a).is_some())
        .or_else(|| package.agents().first().map(|a| a.id.clone()))
        .unwrap_or_default()
}

/// What an invocation does with a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Continuation {
    /// A new run's first invocation.
    Start,
    /// Go on where the run stood (after a failure, a stop or a kill).
    Resume,
    /// Answer the question the run waits on.
    Answer(String),
    /// Talk to a completed run (post-completion profile).
    Chat(String),
}

impl Continuation {
    fn command(&self) -> &'static str {
        match self {
            Continuation::Start => "baton run",
            Continuation::Resume => "baton resume",
            Continuation::Answer(_) => "baton answer",
            Continuation::Chat(_) => "baton chat",
        }
    }
}

/// A run this process may drive: found, checked, its package loaded, and its driver lock held
/// until this is dropped.
pub struct Claimed {
    project: Project,
    run: RunMetadata,
    package: Package,
    package_root: PathBuf,
    continuation: Continuation,
    _lock: DriverLock,
}

impl Claimed {
    pub fn run(&self) -> &RunMetadata {
        &self.run
    }

    pub fn project_root(&self) -> &Path {
        self.project.root()
    }

    /// Moves a replay of the run's own trace to where the run stands: past the model answers
    /// and the user inputs it used. An answer or a chat also passes over the recorded input
    /// that comes next (the person gives their own); a resume is positioned by the driver.
    pub(crate) fn position_replay(&self, replay: &ReplayModel) {
        if matches!(
            self.continuation,
            Continuation::Resume | Continuation::Start
        ) {
            return;
        }
        let log = self.project.run_paths(&self.run.run_id).conversation_log;
        if let Ok(restored) = conversation::restore(&log) {
            replay.fast_forward(restored.complete_turns, restored.answers);
        }
        replay.skip_user_input();
    }
}

/// Finds a run and takes it for `continuation`: the run lock first (a second driver gets
/// `RUN_BUSY`), then the checks that need no model — so an unknown, busy or finished run is
/// reported before any model configuration is looked at.
pub fn claim(
    store: &Store,
    query: &str,
    continuation: Continuation,
) -> Result<Claimed, RunnerError> {
    let (project, found) = store.find_run(query)?;
    let lock = driver_lock::acquire(
        &project.run_paths(&found.run_id).dir,
        &found.run_id,
        continuation.command(),
    )?;
    // Read again under the lock: the previous driver may have just moved it on.
    let run = project.get_run(&found.run_id)?;
    if run.kind == RunKind::Task {
        return Err(refused(
            "RUN_KIND_UNSUPPORTED",
            format!(
                "run {} is a task run of a lifecycle session; `baton {}` drives workflow runs only",
                short(&run.run_id),
                continuation.command().trim_start_matches("baton ")
            ),
            "task runs are driven by their session",
        ));
    }
    check_phase(&run, &continuation)?;
    check_work_tree(&run)?;
    let (package, installed) = project.pinned_package(store, &run)?;
    let workflow = package.workflow(&run.workflow_ref).ok_or_else(|| {
        refused(
            "STATE_INVALID",
            format!(
                "workflow {} of run {} is not in its package",
                run.workflow_ref, run.run_id
            ),
            "start a new run",
        )
    })?;
    check_state(&project, &run, &workflow.graph)?;
    Ok(Claimed {
        project,
        run,
        package,
        package_root: installed.path,
        continuation,
        _lock: lock,
    })
}

fn short(id: &str) -> &str {
    id.get(..13).unwrap_or(id)
}

fn check_phase(run: &RunMetadata, continuation: &Continuation) -> Result<(), RunnerError> {
    let id = short(&run.run_id);
    let phase = run.phase.as_str();
    match (continuation, run.phase) {
        (Continuation::Resume, Phase::Completed) => Err(refused(
            "RUN_COMPLETE",
            format!("run {id} is complete; there is nothing to resume"),
            &format!("talk to it with `baton chat {id} <TEXT>`"),
        )),
        (Continuation::Answer(_), Phase::WaitingUser) => Ok(()),
        (Continuation::Answer(_), Phase::Completed) => Err(refused(
            "RUN_NOT_WAITING",
            format!("run {id} is complete and waits for no answer"),
            &format!("talk to it with `baton chat {id} <TEXT>`"),
        )),
        (Continuation::Answer(_), _) => Err(refused(
            "RUN_NOT_WAITING",
            format!("run {id} is not waiting for an answer (phase: {phase})"),
            &format!("continue it with `baton resume {id}`"),
        )),
        (Continuation::Chat(_), Phase::Completed) => Ok(()),
        (Continuation::Chat(_), Phase::WaitingUser) => Err(refused(
            "RUN_NOT_COMPLETE",
            format!("run {id} is not complete: it waits for an answer"),
            &format!("answer it with `baton answer {id} <TEXT>`"),
        )),
        (Continuation::Chat(_), _) => Err(refused(
            "RUN_NOT_COMPLETE",
            format!("run {id} is not complete (phase: {phase}); chat is for completed runs"),
            &format!("continue it with `baton resume {id}`"),
        )),
        _ => Ok(()),
    }
}

/// A run made in a git worktree of the project (a story of a parallel epic) works there; once
/// the story is merged its worktree is removed, and nothing is left to mount as `@project`.
fn check_work_tree(run: &RunMetadata) -> Result<(), RunnerError> {
    match &run.work_tree {
        Some(tree) if !tree.is_dir() => Err(refused(
            "RUN_WORK_TREE_GONE",
            format!(
                "run {} worked in a git worktree of the project that was removed (its story \
                 was merged, or the worktree deleted); nothing is left to work in",
                short(&run.run_id)
            ),
            &format!(
                "its changes are on the project's branch; read the run with `baton runs log {}`, \
                 or start a new run in the project",
                short(&run.run_id)
            ),
        )),
        _ => Ok(()),
    }
}

/// A state the model could not work from is refused here, not sent to the model.
fn check_state(
    project: &Project,
    run: &RunMetadata,
    graph: &baton_package::Graph,
) -> Result<(), RunnerError> {
    let hint = "the state file was changed outside baton; restore it, or rewind the run";
    let read = project.state_file(&run.run_id).read().map_err(|e| {
        refused(
            "STATE_INVALID",
            format!(
                "the state of run {} cannot be read: {e}",
                short(&run.run_id)
            ),
            hint,
        )
    })?;
    let current = read.doc.current_node_id();
    if !current.is_empty() && graph.node(current).is_none() {
        let nodes: Vec<&str> = graph.nodes().iter().map(|n| n.id.as_str()).collect();
        return Err(refused(
            "STATE_INVALID",
            format!(
                "the state of run {} names currentNodeId '{current}', which is not a node of workflow {} (nodes: {})",
                short(&run.run_id),
                run.workflow_ref,
                nodes.join(", ")
            ),
            hint,
        ));
    }
    Ok(())
}

/// Drives a claimed run.
pub async fn continue_claimed(
    claimed: Claimed,
    settings: Settings<'_>,
) -> Result<Finished, RunnerError> {
    drive(&claimed, settings).await
}

/// [`claim`] then [`continue_claimed`].
pub async fn continue_run(
    store: &Store,
    query: &str,
    continuation: Continuation,
    settings: Settings<'_>,
) -> Result<Finished, RunnerError> {
    let claimed = claim(store, query, continuation)?;
    continue_claimed(claimed, settings).await
}

/// Checks, before a model is paid, that `--record` can write its trace: the directory exists
/// and takes a new file, and the path is not a directory.
pub fn check_trace_destination(path: &Path) -> Result<(), RunnerError> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let bad = |why: String| {
        refused(
            "RECORD_PATH_INVALID",
            format!("cannot record the trace to {}: {why}", path.display()),
            "give --record a file path in an existing, writable directory",
        )
    };
    if path.is_dir() {
        return Err(bad("it is a directory".into()));
    }
    if !dir.is_dir() {
        return Err(bad(format!("{} is not a directory", dir.display())));
    }
    let probe = baton_store::durable::temp_sibling(path);
    std::fs::File::create(&probe)
        .map_err(|e| bad(format!("the directory is not writable ({})", e.kind())))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

async fn drive(claimed: &Claimed, mut settings: Settings<'_>) -> Result<Finished, RunnerError> {
    let Claimed {
        project,
        run,
        package,
        package_root,
        continuation,
        ..
    } = claimed;
    let (intent, input) = match continuation {
        Continuation::Start => (Intent::Start, None),
        Continuation::Resume => (Intent::Resume, None),
        Continuation::Answer(text) => (
            Intent::Continue,
            Some(crate::widget_answer::complete(
                text,
                run.waiting_for.as_ref(),
            )),
        ),
        Continuation::Chat(text) => (Intent::Continue, Some(text.clone())),
    };
    let workflow = package.workflow(&run.workflow_ref).ok_or_else(|| {
        RunnerError::Usage(format!(
            "workflow {} is not in the package",
            run.workflow_ref
        ))
    })?;
    check_budgets(&settings)?;
    let paths = project.run_paths(&run.run_id);
    // `@project`: the project's root, or the git worktree the run was created in.
    let mut host = ToolHost::open(
        project.mount_of(run),
        package_root,
        &paths.state_dir,
        &paths.execution_log,
        RunBinding {
            run_id: run.run_id.clone(),
            graph: workflow.graph.clone(),
            state: project.state_file(&run.run_id),
            artifacts_dir: "artifacts".into(),
        },
    )
    .map_err(|e| RunnerError::Io(e.to_string()))?;
    host.set_runtime(tool_runtime(&settings, project.mount_of(run)));
    let composer = Composer {
        package,
        workflow,
        system: settings.tools.system.clone(),
        autopilot: settings.autopilot,
    };
    // What the invocation asked for, else what the run remembers; recorded when it starts.
    let policy = settings.context.unwrap_or(run.context);
    let mut machine = Machine::new(composer, &run.active_agent_id, policy, settings.max_turns)
        .with_budget(
            settings.budget,
            crate::context::TokenCounter::for_model(settings.model.model_name()),
        );
    // Starting fresh needs no past, and a completed run talks in a fresh post-run window;
    // answering or resuming an open run puts its current window back. Either way the ids the
    // run already used stay taken.
    let mut restored = conversation::restore(&paths.conversation_log)
        .map_err(|e| RunnerError::Io(e.to_string()))?;
    if intent == Intent::Start || run.phase == Phase::Completed {
        restored = Restored {
            call_ids: restored.call_ids,
            ..Restored::default()
        };
    }
    if intent == Intent::Resume {
        // A replayed run resumes where the recording stood: past the answers it already used.
        if let Some(r) = settings.replay {
            r.fast_forward(restored.complete_turns, restored.answers);
        }
    }
    let logged = restored.history.len() - restored.repaired;
    let call_ids = restored.call_ids;
    machine.restore(restored.history);
    if let Some((view, covers)) = restored.compaction {
        machine.restore_compaction(view, covers);
    }
    let log = ConversationLog::open(&paths.conversation_log, &machine, logged)
        .map_err(|e| RunnerError::Io(e.to_string()))?;
    let mut person = settings.ask.take();
    let has_person = person.is_some();
    let mut ask = move |question: &str| person.as_mut().and_then(|f| f(question));
    let mut answers = unattended_answers(std::mem::take(&mut settings.inputs), settings.replay);
    // Ids are made unique before the answer is recorded, so a trace pairs calls and results.
    let unique = UniqueCallIds::new(settings.model, call_ids);
    let model = recorded(&unique, settings.record.clone(), settings.checkpoint);
    let meter = crate::spend::Meter::open(
        &run.run_id,
        &paths.execution_log,
        settings.model,
        std::mem::take(&mut settings.caps),
    );
    let meter = match policy {
        ContextPolicy::Node => meter,
        ContextPolicy::Full => meter.key_per_run(),
    };
    let mut driver = Driver {
        machine,
        workflow,
        project,
        run_id: run.run_id.clone(),
        host: &mut host,
        model: &*model,
        recorder: settings.record.clone(),
        answers: &mut answers,
        ask: if has_person { Some(&mut ask) } else { None },
        on_event: settings.on_event,
        cancel: settings.cancel.clone(),
        conversation: Some(log),
        audit: baton_store::jsonl::JsonlWriter::open(&paths.execution_log).ok(),
        meter,
        on_durable: settings.on_durable,
    };
    let report = driver.drive(intent, input).await?;
    let run = project.get_run(&run.run_id)?;
    let state = project
        .state_file(&run.run_id)
        .read()
        .map(|r| r.doc.to_value())
        .unwrap_or(Value::Null);
    Ok(Finished { run, report, state })
}

/// A USD budget for a model without a price is refused before anything is sent.
pub fn check_budgets(settings: &Settings<'_>) -> Result<(), RunnerError> {
    let name = settings.model.price_name();
    crate::spend::check_price(&settings.caps, settings.model.price(), name).map_err(|stop| {
        RunnerError::Refused {
            code: stop.code,
            message: stop.message,
            hint: Some(crate::spend::price_hint(name)),
        }
    })
}

/// Answers that need no person: those given in advance (`--input`), in order, each in place of
/// the recorded answer it meets, then the recording's when replaying.
pub(crate) fn unattended_answers<'s>(
    mut inputs: VecDeque<String>,
    replay: Option<&'s ReplayModel>,
) -> impl FnMut(&str) -> Option<String> + Send + 's {
    move |_question: &str| {
        if let Some(a) = inputs.pop_front() {
            // The person answered in the recording's place: the replay passes over its answer.
            if let Some(r) = replay {
                r.skip_user_input();
            }
            return Some(a);
        }
        replay.and_then(ReplayModel::take_user_input)
    }
}

/// What the ToolHost needs to run commands and MCP servers for this invocation: the MCP
/// client (servers start on first use and stop with the host), and the stop signal, so a
/// command in flight ends with `EXEC_ABORTED` when the run is stopped.
pub(crate) fn tool_runtime(settings: &Settings<'_>, project_root: &Path) -> ToolRuntime {
    let cancel = settings.cancel.clone();
    ToolRuntime {
        mcp: (!settings.tools.mcp.servers.is_empty())
            .then(|| McpHub::new(settings.tools.mcp.clone(), project_root)),
        abort: Some(Arc::new(move || cancel.is_cancelled())),
        ..ToolRuntime::default()
    }
}

/// Where `--record` writes: next to nothing else, atomically.
pub fn save_trace(path: &Path, recorder: &Arc<Mutex<TraceRecorder>>) -> Result<(), RunnerError> {
    save_trace_after(path, &[], recorder)
}

/// The dialogues a trace file already holds (recorded by an earlier invocation of the same
/// run); none when it is missing or unreadable.
pub fn earlier_dialogues(path: &Path) -> Vec<Value> {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|v| v.get("dialogues").and_then(Value::as_array).cloned())
        .unwrap_or_default()
}

/// Writes `recorder`'s trace to `path` atomically, `earlier` dialogues first: a run recorded
/// over several invocations keeps one trace.
pub fn save_trace_after(
    path: &Path,
    earlier: &[Value],
    recorder: &Arc<Mutex<TraceRecorder>>,
) -> Result<(), RunnerError> {
    let mut value = recorder
        .lock()
        .map(|r| r.to_value())
        .map_err(|_| RunnerError::Io("the trace recorder failed".into()))?;
    if !earlier.is_empty()
        && let Some(Value::Array(ours)) = value.get_mut("dialogues")
    {
        let mut all = earlier.to_vec();
        all.append(ours);
        *ours = all;
    }
    let mut bytes =
        serde_json::to_vec_pretty(&value).map_err(|e| RunnerError::Io(e.to_string()))?;
    bytes.push(b'\n');
    baton_store::durable::atomic_write(path, &bytes).map_err(|e| RunnerError::Io(e.to_string()))
}

/// Called after each recorded model call, before its answer is logged (a caller saving the
/// trace there keeps it a superset of the conversation log, whenever the process dies).
pub type Checkpoint<'a> = &'a (dyn Fn() + Send + Sync);

/// `model`, recording every call it answers when `record` is set, then calling `checkpoint`.
pub fn recorded<'m>(
    model: &'m dyn ChatModel,
    record: Option<Arc<Mutex<TraceRecorder>>>,
    checkpoint: Option<Checkpoint<'m>>,
) -> Box<dyn ChatModel + 'm> {
    match (record, checkpoint) {
        (Some(rec), Some(after)) => Box::new(Checkpointed {
            inner: RecordingModel::new(model, rec),
            after,
        }),
        (Some(rec), None) => Box::new(RecordingModel::new(model, rec)),
        (None, _) => Box::new(model),
    }
}

struct Checkpointed<'m> {
    inner: RecordingModel<&'m dyn ChatModel>,
    after: Checkpoint<'m>,
}

impl ChatModel for Checkpointed<'_> {
    fn chat<'a>(
        &'a self,
        request: &'a baton_llm::ChatRequest,
        options: baton_llm::CallOptions<'a>,
    ) -> baton_llm::BoxFuture<'a, Result<baton_llm::ChatResponse, baton_llm::LlmError>> {
        Box::pin(async move {
            let response = self.inner.chat(request, options).await?;
            (self.after)();
            Ok(response)
        })
    }

    fn model_name(&self) -> &str {
        self.inner.model_name()
    }

    fn identity(&self) -> baton_llm::ModelIdentity {
        self.inner.identity()
    }

    fn max_completion_tokens(&self) -> u32 {
        self.inner.max_completion_tokens()
    }

    fn price(&self) -> Option<baton_llm::Price> {
        self.inner.price()
    }

    fn context_tokens(&self) -> Option<u64> {
        self.inner.context_tokens()
    }
}
