//! What a step's tick is given and what it ends with, shared by baton's own loop
//! ([`super::tick`]) and a step a coding-agent CLI runs ([`super::cli_step`]).

use super::step_run::ModelSource;
use baton_engine::EngineEvent;
use baton_engine::machine::WaitReason;
use baton_engine::task_driver::TaskReport;
use baton_tools::ToolsConfig;
use std::path::Path;
use tokio_util::sync::CancellationToken;

use super::completion::Completion;
use baton_store::Project;

/// How the model and tools run a step.
pub struct StepSettings<'a> {
    /// Who claims the step (ralph's claim owner); a step claimed by someone else is theirs.
    pub owner: &'a str,
    /// The store project the step runs live in (the session's project).
    pub project: &'a Project,
    pub model: ModelSource<'a>,
    /// A directory where each step run's trace is recorded.
    pub record: Option<&'a Path>,
    /// The tool policy of the step runs (`[tools.*]`, `[mcp]` of `baton.toml`).
    pub tools: ToolsConfig,
    pub max_turns: usize,
    pub cancel: CancellationToken,
    pub on_event: Option<&'a (dyn Fn(EngineEvent) + Send + Sync)>,
    /// Hard budgets the step's run is driven under (the session's, see `budget`).
    pub caps: Vec<baton_engine::spend::Cap>,
    /// The price the caps' dollars are counted at (a step a CLI runs; baton's own loop asks
    /// its model).
    pub price: Option<baton_llm::Price>,
    /// A coding-agent CLI that runs the step instead of baton's loop ([`super::cli_step`]).
    pub executor: Option<&'a super::executor::StepExecutor>,
    /// baton's home (the store), which a CLI may not read.
    pub store_home: std::path::PathBuf,
}

#[derive(Debug, Clone, PartialEq)]
pub enum StepEnd {
    /// The verdict recorded in status.json.
    Recorded(Completion),
    /// The step stays claimed: the run waits for a person.
    Waiting {
        question: String,
        reason: WaitReason,
    },
    /// The step stays claimed: the run was stopped or its model failed (continue it).
    Interrupted { code: &'static str, message: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct StepTick {
    pub index: usize,
    /// The step's task run (`baton runs show <id>`).
    pub run_id: String,
    pub end: StepEnd,
    /// What this invocation of the run did (nothing, when a logged end was applied).
    pub report: TaskReport,
}
