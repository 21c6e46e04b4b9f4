//! Creating a task run (`kind: task`): one assembled prompt run without a graph, ended by the
//! model's finish call (a lifecycle session step). Its directory is a workflow run's without the
//! state file: `run.json`, `state/` (a scratch mount) and `state/logs/execution.jsonl`, created
//! and indexed the same way, so `baton runs` lists it and nothing is ever half created.

use crate::projects::Project;
use crate::run_error::RunError;
use crate::run_gc::{PENDING_AFTER, STALE_AFTER};
use crate::run_meta::{Phase, RunKind, RunMetadata, uuid_v7_time};
use crate::time::now_rfc3339;

/// Longest `taskRef` or agent id accepted (characters): they are shown in tables.
const NAME_LIMIT: usize = 200;

/// What a task run is for. There is no package: `packageId` and `packageSha256` stay empty.
#[derive(Debug, Clone, Copy)]
pub struct NewTaskRun<'a> {
    /// What the run executes, kept as its `workflowRef` (e.g. `session-7/step-3-execute`).
    pub task_ref: &'a str,
    /// Who runs it, kept as its `activeAgentId`.
    pub agent_id: &'a str,
}

impl Project {
    /// Creates a task run in phase `idle`, with no current node and no state file.
    pub fn create_task_run(&self, new: NewTaskRun<'_>) -> Result<RunMetadata, RunError> {
        self.place_task_run(new, None)
    }

    /// [`Project::create_task_run`] with the conversation log the run starts with (its
    /// prompt), written in the same staging directory: the run appears with it or not at all.
    pub fn create_task_run_with_log(
        &self,
        new: NewTaskRun<'_>,
        first_log: &[u8],
    ) -> Result<RunMetadata, RunError> {
        self.place_task_run(new, Some(first_log))
    }

    fn place_task_run(
        &self,
        new: NewTaskRun<'_>,
        first_log: Option<&[u8]>,
    ) -> Result<RunMetadata, RunError> {
        check_name("taskRef", new.task_ref)?;
        check_name("agentId", new.agent_id)?;
        self.clean_staging(STALE_AFTER, Some(PENDING_AFTER))?;
        let run_id = uuid::Uuid::now_v7().to_string();
        // The time the id carries, as for workflow runs.
        let now = uuid_v7_time(&run_id).unwrap_or_else(now_rfc3339);
        let meta = RunMetadata {
            run_id,
            kind: RunKind::Task,
            project_id: self.id().to_string(),
            package_id: String::new(),
            package_sha256: String::new(),
            workflow_ref: new.task_ref.to_string(),
            active_agent_id: new.agent_id.to_string(),
            phase: Phase::Idle,
            created_at: now.clone(),
            last_updated_at: now,
            current_node_id: None,
            waiting_for: None,
            model: None,
            context: crate::ContextPolicy::Node,
            stop_reason: None,
            usage: None,
            work_tree: self.work_tree.clone(),
        };
        self.place_new_run(&meta, None, first_log)?;
        Ok(meta)
    }
}

/// Not empty, not too long, no control character: both names end up in tables and logs.
fn check_name(field: &str, value: &str) -> Result<(), RunError> {
    let problem = if value.trim().is_empty() {
        Some("is empty")
    } else if value.chars().count() > NAME_LIMIT {
        Some("is longer than 200 characters")
    } else if value.chars().any(char::is_control) {
        Some("contains a control character")
    } else {
        None
    };
    match problem {
        None => Ok(()),
        Some(why) => Err(RunError::Workflow {
            code: "TASK_RUN_INVALID",
            message: format!("the task run's {field} {why}"),
            hint: Some("give a short one-line name, such as the session step id".into()),
        }),
    }
}
