//! Starting and continuing runs: package install and pinning, run creation, the ToolHost, the
//! machine and the driver, put together. The CLI calls these and only presents the result.

use crate::composer::{Composer, Intent};
use crate::conversation::{self, ConversationLog, Restored};
use crate::driver::{Driver, EngineError, EngineEvent, Outcome, RunReport};
use crate::machine::{ContextPolicy, DEFAULT_MAX_TURNS, Machine};
use baton_llm::{ChatModel, RecordingModel, ReplayModel, TraceRecorder};
use baton_package::{Package, Report, ValidateOptions, validate_path};
use baton_store::{NewRun, Phase, Project, RunError, RunMetadata, Store};
use baton_tools::{RunBinding, SystemToolSettings, ToolHost};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::path::Path;
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
    #[error("{0}")]
    Usage(String),
    #[error("cannot open the run's files: {0}")]
    Io(String),
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
    pub context: ContextPolicy,
    pub autopilot: bool,
    pub max_turns: usize,
    pub on_event: Option<&'a (dyn Fn(EngineEvent) + Send + Sync)>,
    pub cancel: CancellationToken,
}

impl<'a> Settings<'a> {
    pub fn new(model: &'a dyn ChatModel) -> Settings<'a> {
        Settings {
            model,
            replay: None,
            inputs: VecDeque::new(),
            ask: None,
            record: None,
            context: ContextPolicy::Node,
            autopilot: true,
            max_turns: DEFAULT_MAX_TURNS,
            on_event: None,
            cancel: CancellationToken::new(),
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

/// Validates and installs the package, creates the run, and drives it.
pub async fn start(
    store: &Store,
    start: StartRun<'_>,
    settings: Settings<'_>,
) -> Result<Finished, RunnerError> {
    let report = validate_path(
        start.package,
        &ValidateOptions {
            workflow: start.workflow.map(str::to_owned),
            ..Default::default()
        },
    );
    let Some(package) = report.package.clone() else {
        return Err(RunnerError::InvalidPackage(Box::new(report)));
    };
    let installed = store
        .packages()
        .install(&package, &start.package.display().to_string())
        .map_err(RunError::from)?
        .package;
    let project = store.project(start.project)?;
    let workflow = package
        .resolve_workflow(start.workflow)
        .map_err(|d| RunError::Workflow {
            code: d.code.as_str(),
            message: d.message,
            hint: d.hint,
        })?;
    let agent = match start.agent {
        Some(a) => a.to_string(),
        None => default_agent(&package, &workflow.graph),
    };
    let run = project.create_run(NewRun {
        package: &package,
        installed: &installed,
        workflow_ref: start.workflow,
        agent_id: &agent,
    })?;
    drive(
        &project,
        &run,
        &package,
        &installed.path,
        Intent::Start,
        None,
        settings,
    )
    .await
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

/// Continues a run: `input` answers its question, or talks to it after completion; without
/// input the run resumes where it stood.
pub async fn continue_run(
    store: &Store,
    query: &str,
    input: Option<String>,
    settings: Settings<'_>,
) -> Result<Finished, RunnerError> {
    let (project, run) = store.find_run(query)?;
    let (package, installed) = project.pinned_package(store, &run)?;
    let intent = if input.is_some() {
        Intent::Continue
    } else {
        Intent::Resume
    };
    if input.is_none() && run.phase == Phase::Completed {
        return Err(RunnerError::Usage(
            "the run is complete; talk to it with `baton chat <RUN> <TEXT>`".into(),
        ));
    }
    drive(
        &project,
        &run,
        &package,
        &installed.path,
        intent,
        input,
        settings,
    )
    .await
}

#[allow(clippy::too_many_arguments)]
async fn drive(
    project: &Project,
    run: &RunMetadata,
    package: &Package,
    package_root: &Path,
    intent: Intent,
    input: Option<String>,
    mut settings: Settings<'_>,
) -> Result<Finished, RunnerError> {
    let workflow = package.workflow(&run.workflow_ref).ok_or_else(|| {
        RunnerError::Usage(format!(
            "workflow {} is not in the package",
            run.workflow_ref
        ))
    })?;
    let paths = project.run_paths(&run.run_id);
    let mut host = ToolHost::open(
        project.root(),
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
    let composer = Composer {
        package,
        workflow,
        system: SystemToolSettings::default(),
        autopilot: settings.autopilot,
    };
    let mut machine = Machine::new(
        composer,
        &run.active_agent_id,
        settings.context,
        settings.max_turns,
    );
    // Starting fresh needs no past, and a completed run talks in a fresh post-run window;
    // answering or resuming an open run puts its current window back.
    let restored = if intent == Intent::Start || run.phase == Phase::Completed {
        Restored::default()
    } else {
        conversation::restore(&paths.conversation_log)
            .map_err(|e| RunnerError::Io(e.to_string()))?
    };
    if intent == Intent::Resume {
        // A replayed run resumes where the recording stood: past the answers it already used.
        if let Some(r) = settings.replay {
            r.fast_forward(restored.complete_turns, restored.answers);
        }
    }
    let logged = restored.history.len() - restored.repaired;
    machine.restore(restored.history);
    let log = ConversationLog::open(&paths.conversation_log, &machine, logged)
        .map_err(|e| RunnerError::Io(e.to_string()))?;
    let replay = settings.replay;
    let mut inputs = std::mem::take(&mut settings.inputs);
    let mut ask = settings.ask.take();
    let mut answers = move |question: &str| -> Option<String> {
        if let Some(a) = inputs.pop_front() {
            return Some(a);
        }
        if let Some(a) = replay.and_then(ReplayModel::take_user_input) {
            return Some(a);
        }
        ask.as_mut().and_then(|f| f(question))
    };
    let recording;
    let model: &dyn ChatModel = match &settings.record {
        Some(rec) => {
            recording = RecordingModel::new(settings.model, rec.clone());
            &recording
        }
        None => settings.model,
    };
    let mut driver = Driver {
        machine,
        workflow,
        project,
        run_id: run.run_id.clone(),
        host: &mut host,
        model,
        recorder: settings.record.clone(),
        answers: &mut answers,
        on_event: settings.on_event,
        cancel: settings.cancel.clone(),
        conversation: Some(log),
        audit: baton_store::jsonl::JsonlWriter::open(&paths.execution_log).ok(),
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

/// Where `--record` writes: next to nothing else, atomically.
pub fn save_trace(path: &Path, recorder: &Arc<Mutex<TraceRecorder>>) -> Result<(), RunnerError> {
    let bytes = recorder
        .lock()
        .map(|r| r.to_bytes())
        .map_err(|_| RunnerError::Io("the trace recorder failed".into()))?;
    baton_store::durable::atomic_write(path, &bytes).map_err(|e| RunnerError::Io(e.to_string()))
}
