//! Starting and continuing *task runs* (`kind: task`): one assembled prompt, no graph, ended
//! by the model's finish call (a lifecycle session step). The run lives in the store like a
//! workflow run — run directory, `driver.lock` held for the invocation, conversation log,
//! audit lines, phases, usage — and records and replays with the same traces.
//!
//! The caller says what the task is ([`TaskDef`]: rules, finish tool, validator) on every
//! invocation; the prompt is given once, at creation, and lives in the conversation log.

use crate::call_ids::UniqueCallIds;
use crate::conversation::{self, ConversationLog};
use crate::runner::{RunnerError, Settings};
use crate::task::{TaskMachine, TaskSpec, Validate};
use crate::task_driver::{TaskDriver, TaskReport, TaskStep};
use baton_llm::{Message, ToolDef};
use baton_store::driver_lock::{self, DriverLock};
use baton_store::{NewTaskRun, Phase, Project, RunKind, RunMetadata};
use baton_tools::{EffectivePolicy, ToolHost};

/// The tool a task run's model never sees: it has no workflow to rewind.
const HIDDEN_TOOLS: [&str; 1] = ["workflow.rewind"];

/// The run directory's empty stand-in for `@pkg`.
const EMPTY_PKG: &str = "no-package";

/// The folder a task run's model sees as `@pkg` (read-only to the model): empty unless the
/// caller puts files there (the rendered skill of an epic phase) before driving the run.
pub fn package_dir(project: &Project, run_id: &str) -> std::path::PathBuf {
    project.run_paths(run_id).dir.join(EMPTY_PKG)
}

/// What a task run is, apart from its prompt.
pub struct TaskDef {
    /// System layers (the task's rules); the tool policy's layer is added after them.
    pub system: Vec<Message>,
    pub finish: ToolDef,
    pub validate: Validate,
}

/// What an invocation does with a task run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskContinuation {
    /// A new run's first invocation.
    Start,
    /// Go on where the run stood (after a stop, a kill or a failure). A run whose log holds
    /// an accepted finish call ends at once with that verdict, without a model call.
    Resume,
    /// Answer the question the run waits on.
    Answer(String),
}

/// A task run this process drives: its driver lock is held until this is dropped.
pub struct ClaimedTask {
    project: Project,
    run: RunMetadata,
    continuation: TaskContinuation,
    _lock: DriverLock,
}

impl ClaimedTask {
    pub fn run(&self) -> &RunMetadata {
        &self.run
    }

    pub fn project(&self) -> &Project {
        &self.project
    }

    pub fn continuation(&self) -> &TaskContinuation {
        &self.continuation
    }
}

/// A task run and what the last invocation did.
#[derive(Debug, Clone)]
pub struct TaskFinished {
    pub run: RunMetadata,
    pub report: TaskReport,
}

/// The command named in a `RUN_BUSY` message.
const COMMAND: &str = "baton session";

/// Creates a task run in `project` with `prompt` as its first message and takes its lock.
/// Nothing is asked of a model: the caller may link the run id durably before driving it.
pub fn create_task(
    project: &Project,
    new: NewTaskRun<'_>,
    prompt: &str,
) -> Result<ClaimedTask, RunnerError> {
    // The prompt is in the log the run is created with, so the run never exists without it
    // and is continuable from its log alone whenever it is killed.
    let first = conversation::first_log(&[Message::user(prompt)]);
    let run = project.create_task_run_with_log(new, &first)?;
    let paths = project.run_paths(&run.run_id);
    let lock = driver_lock::acquire(&paths.dir, &run.run_id, COMMAND)?;
    Ok(ClaimedTask {
        project: project.clone(),
        run,
        continuation: TaskContinuation::Start,
        _lock: lock,
    })
}

fn io(e: impl std::fmt::Display) -> RunnerError {
    RunnerError::Io(e.to_string())
}

fn refused(code: &'static str, message: String, hint: &str) -> RunnerError {
    RunnerError::Refused {
        code,
        message,
        hint: Some(hint.to_string()),
    }
}

/// Takes task run `run_id` of `project` for `continuation`: the lock first (`RUN_BUSY` for a
/// second driver), then the checks that need no model.
pub fn claim_task(
    project: &Project,
    run_id: &str,
    continuation: TaskContinuation,
) -> Result<ClaimedTask, RunnerError> {
    let lock = driver_lock::acquire(&project.run_paths(run_id).dir, run_id, COMMAND)?;
    // Read under the lock: the previous driver may have just moved it on.
    let run = project.get_run(run_id)?;
    let id = run.run_id.get(..13).unwrap_or(&run.run_id).to_string();
    if run.kind != RunKind::Task {
        return Err(refused(
            "RUN_KIND_UNSUPPORTED",
            format!("run {id} is a workflow run, not a task run"),
            "drive it with `baton resume`",
        ));
    }
    match (&continuation, run.phase) {
        (TaskContinuation::Answer(_), Phase::WaitingUser) => {}
        (TaskContinuation::Answer(_), phase) => {
            return Err(refused(
                "RUN_NOT_WAITING",
                format!(
                    "task run {id} is not waiting for an answer (phase: {})",
                    phase.as_str()
                ),
                "continue the session instead",
            ));
        }
        (TaskContinuation::Start, _) => {
            return Err(refused(
                "RUN_ALREADY_STARTED",
                format!("task run {id} exists already; it can only be continued"),
                "continue it, or create a new task run",
            ));
        }
        (TaskContinuation::Resume, _) => {}
    }
    Ok(ClaimedTask {
        project: project.clone(),
        run,
        continuation,
        _lock: lock,
    })
}

/// The tools a task run's model sees under `policy`: the host's, without workflow tools.
pub fn tool_defs(policy: &EffectivePolicy) -> Vec<ToolDef> {
    ToolHost::visible_tools(policy)
        .into_iter()
        .filter(|s| !HIDDEN_TOOLS.contains(&s.name))
        .map(|s| ToolDef {
            name: s.name.to_string(),
            description: s.description.to_string(),
            parameters: s.parameters.clone(),
        })
        .collect()
}

/// Drives a claimed task run until its finish call is accepted, it fails, it is stopped or
/// it waits for a person. `settings.context`, `autopilot` and `budget` do not apply (a task
/// run's history is never compressed); `settings.tools` is the policy (`[tools.*]`, `[mcp]`),
/// applied as it is: no agent narrows it.
pub async fn drive_task(
    claimed: ClaimedTask,
    def: TaskDef,
    mut settings: Settings<'_>,
) -> Result<TaskFinished, RunnerError> {
    let ClaimedTask {
        project,
        run,
        continuation,
        _lock,
    } = claimed;
    crate::runner::check_budgets(&settings)?;
    let paths = project.run_paths(&run.run_id);
    // No agent narrows a task run: the project's tool settings apply as they are (a step
    // told to run the checks gets `terminal.run` when `baton.toml` enables it).
    let policy = EffectivePolicy::without_agent(
        &settings.tools.system,
        settings.tools.mcp.servers.keys().cloned(),
    );
    // A task run has no package: `@pkg` is an empty directory of its own.
    let pkg = paths.dir.join(EMPTY_PKG);
    std::fs::create_dir_all(&pkg).map_err(io)?;
    let mut host = ToolHost::open_task(
        project.mount_of(&run),
        &pkg,
        &paths.state_dir,
        &paths.execution_log,
        run.run_id.clone(),
    )
    .map_err(io)?;
    host.set_runtime(crate::runner::tool_runtime(
        &settings,
        project.mount_of(&run),
    ));
    let mut system = def.system;
    system.push(Message::system(policy.prompt_text()));
    let spec = TaskSpec {
        system,
        prompt: String::new(),
        tools: tool_defs(&policy),
        finish: def.finish,
        validate: def.validate,
    };
    let mut machine = TaskMachine::new(spec, settings.max_turns);
    let restored = conversation::restore(&paths.conversation_log).map_err(io)?;
    if restored.history.is_empty() {
        // Created but killed before its prompt was logged: there is nothing to continue.
        return Err(refused(
            "TASK_PROMPT_MISSING",
            format!(
                "task run {} has no prompt in its conversation log: it never started",
                run.run_id
            ),
            "start a new task run for the same task",
        ));
    }
    if continuation != TaskContinuation::Start
        && let Some(r) = settings.replay
    {
        // A replayed run goes on where the recording stood: past the answers already used.
        r.fast_forward(restored.complete_turns, restored.answers);
    }
    let logged = restored.history.len() - restored.repaired;
    machine.restore(restored.history);
    let log = ConversationLog::open_plain(&paths.conversation_log, logged).map_err(io)?;
    let first = match continuation {
        TaskContinuation::Answer(text) => {
            // The recording's answer at this point was given live instead.
            if let Some(r) = settings.replay {
                r.skip_user_input();
            }
            TaskStep::Answer(text)
        }
        _ => TaskStep::Begin,
    };
    let mut ask = settings.ask.take();
    let mut answers =
        crate::runner::unattended_answers(std::mem::take(&mut settings.inputs), settings.replay);
    // Ids are made unique before the answer is recorded, so a trace pairs calls and results.
    let unique = UniqueCallIds::new(settings.model, restored.call_ids);
    let model = crate::runner::recorded(&unique, settings.record.clone(), settings.checkpoint);
    let mut driver = TaskDriver {
        machine,
        project: &project,
        run_id: run.run_id.clone(),
        agent_id: run.active_agent_id.clone(),
        host: &mut host,
        policy,
        model: &*model,
        recorder: settings.record.clone(),
        answers: &mut answers,
        ask: match ask.as_mut() {
            Some(f) => Some(&mut **f),
            None => None,
        },
        on_event: settings.on_event,
        cancel: settings.cancel.clone(),
        conversation: log,
        audit: baton_store::jsonl::JsonlWriter::open(&paths.execution_log).ok(),
        meter: crate::spend::Meter::open(
            &run.run_id,
            &paths.execution_log,
            settings.model,
            std::mem::take(&mut settings.caps),
        ),
    };
    let report = driver.drive(first).await?;
    let run = project.get_run(&run.run_id)?;
    Ok(TaskFinished { run, report })
}
