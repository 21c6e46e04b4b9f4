//! A story unit on a worker: the ordinary story loop (see [`crate::story`]) in the worktree the
//! worker checked out, as local parallel mode runs it in a story's worktree. The story's
//! progress files come from the unit's last checkpoint (a worker taking over), an earlier
//! unit's (a story retried or sent back to dev), or the payload (a fresh start); after every
//! step that goes on, the worker's [`StepHook`] checkpoints the story.

use super::StepHook;
use super::payload::{StoryAnswer, StoryPayload, carried};
use crate::config::AutopilotConfig;
use crate::ctx::Ctx;
use crate::error::{EpicError, Result};
use crate::events::EpicEvent;
use crate::models::{ModelSource, Models};
use crate::outcome::EpicOutcome;
use crate::pipeline::Pipeline;
use crate::progress::now;
use crate::progress::{FailureDetail, Instruction, Progress, StoryProgress, Target};
use crate::{lock, specs};
use baton_autopilot::untrusted::limit;
use baton_bmad::keys;
use baton_bmad::layout::{self, Layout};
use baton_bmad::sprint::{self, SprintStatus};
use baton_epic_state::agent_state::{AgentState, Question};
use baton_epic_state::run_state::{self, RunEpicState};
use baton_llm::ChatModel;
use baton_store::Store;
use std::collections::BTreeMap;
use std::path::Path;
use tokio_util::sync::CancellationToken;

/// Where a story unit starts.
#[derive(Debug, Clone)]
pub enum Start {
    /// From the payload's files: the orchestrator's `sprint-status.yaml`, a fresh progress.
    Fresh,
    /// From the unit's own last checkpoint, exactly (a worker taking over, an answer).
    Continue(BTreeMap<String, String>),
    /// From an earlier unit's last checkpoint (a story retried, or sent back to dev).
    From(BTreeMap<String, String>),
}

/// One story unit to run.
pub struct StoryJob<'a> {
    /// The unit's scratch store (its phase runs).
    pub store: &'a Store,
    /// The worker's home: its `config.toml` gives tools and budgets.
    pub home: &'a Path,
    /// The project in the worktree.
    pub project: &'a Path,
    pub payload: &'a StoryPayload,
    pub model: &'a dyn ChatModel,
    pub start: Start,
    /// The answer given since the story's question, if any.
    pub answered: Option<StoryAnswer>,
    pub hook: &'a (dyn StepHook + Send + Sync),
    pub cancel: CancellationToken,
    pub on_event: Option<&'a (dyn Fn(EpicEvent) + Send + Sync)>,
}

/// How a story unit ended.
#[derive(Debug, Clone, PartialEq)]
pub enum StoryEnd {
    /// The code review approved it.
    Approved,
    /// A question waits for a person.
    Waiting(Question),
    /// It paused on a failure.
    Failed(FailureDetail),
    /// Stopped before its end (cancelled).
    Stopped,
}

/// The story's files of the artifacts folder in `project`, its status in the worktree's
/// `sprint-status.yaml`, and the phase it stands at.
#[derive(Debug, Clone, Default)]
pub struct StoryFilesNow {
    pub files: BTreeMap<String, String>,
    pub status: Option<String>,
    pub phase: Option<String>,
}

/// Reads what a checkpoint of `story` carries (`artifacts`: the folder, relative to
/// `project`).
pub fn story_files(project: &Path, artifacts: &str, story: &str) -> Result<StoryFilesNow> {
    let layout = layout::resolve(project, Some(artifacts))?;
    let mut files = BTreeMap::new();
    for name in carried(story) {
        if let Some(bytes) = layout.dir.read(&name, limit::STATUS)? {
            let text = String::from_utf8(bytes).map_err(|_| {
                EpicError::failure(
                    "EPIC_FILE_INVALID",
                    format!("{} is not UTF-8 text", layout.rel_file(&name)),
                )
            })?;
            files.insert(name, text);
        }
    }
    let status = SprintStatus::load(
        &layout.file(sprint::FILE_NAME),
        &layout.rel_file(sprint::FILE_NAME),
    )
    .ok()
    .and_then(|s| s.get(story).map(|e| e.normalized().to_string()));
    let phase = Progress::load(&layout.dir, &layout.rel)
        .ok()
        .flatten()
        .and_then(|p| p.story.map(|s| s.phase.as_str().to_string()));
    Ok(StoryFilesNow {
        files,
        status,
        phase,
    })
}

/// Puts the story's files in place for `start`.
fn place_files(layout: &Layout, payload: &StoryPayload, start: &Start) -> Result<()> {
    let key = &payload.story;
    for name in [
        lock::STOP_FILE,
        crate::parallel::FILE_NAME,
        super::state::FILE_NAME,
    ] {
        layout.dir.remove(name)?;
    }
    match start {
        Start::Fresh => {
            for name in carried(key) {
                match payload.files.get(&name) {
                    Some(text) => layout.dir.write(&name, text.as_bytes())?,
                    None => layout.dir.remove(&name)?,
                }
            }
            Progress::new(
                &payload.epic_id,
                Target::Story {
                    story_key: key.clone(),
                },
            )
            .save(&layout.dir)?;
        }
        Start::Continue(files) | Start::From(files) => {
            for name in carried(key) {
                match files.get(&name) {
                    Some(text) => layout.dir.write(&name, text.as_bytes())?,
                    None => layout.dir.remove(&name)?,
                }
            }
            if matches!(start, Start::From(_)) {
                // The orchestrator's statuses of now, and its copy of the story's questions.
                let agent = format!("{key}{}", baton_epic_state::agent_state::SUFFIX);
                for name in [sprint::FILE_NAME, agent.as_str()] {
                    if let Some(text) = payload.files.get(name) {
                        layout.dir.write(name, text.as_bytes())?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Runs the story's phases until it is approved, asks, fails or is stopped.
pub async fn run_story(job: StoryJob<'_>) -> Result<StoryEnd> {
    let payload = job.payload;
    let key = payload.story.clone();
    let epic = keys::parse_epic_id(&payload.epic_id).ok_or_else(|| {
        EpicError::usage(
            "QUEUE_PAYLOAD_INVALID",
            format!("{:?} is not an epic id", payload.epic_id),
        )
    })?;
    let mut config = AutopilotConfig::load(job.project)?;
    // The story's commit is made when the orchestrator merges it.
    config.git.commit = false;
    // The orchestrator's artifacts folder, wherever BMAD's configuration put it.
    let dir = job.project.join(&payload.artifacts);
    std::fs::create_dir_all(&dir).map_err(EpicError::io("create", &dir))?;
    config.implementation_artifacts = Some(payload.artifacts.clone());
    let pipeline = match &payload.pipeline {
        Some(recorded) => Pipeline::from_record(recorded).map_err(|e| {
            EpicError::usage(
                "QUEUE_PAYLOAD_INVALID",
                format!("payload: pipeline: {}", e.message),
            )
        })?,
        None => Pipeline::for_project(&config, job.project)?,
    };
    let layout = layout::resolve(job.project, Some(&payload.artifacts))?;
    place_files(&layout, payload, &job.start)?;
    match &job.answered {
        Some(StoryAnswer::AgentState(text)) => {
            let name = format!("{key}{}", baton_epic_state::agent_state::SUFFIX);
            layout.dir.write(&name, text.as_bytes())?;
        }
        Some(StoryAnswer::Text(text)) => {
            if let Some(mut agent) = AgentState::load(&layout.dir, &layout.rel, &key)?
                && let Some(id) = agent.pending().map(|q| q.id.clone())
            {
                agent.answer(&id, text);
                agent.save(&layout.dir)?;
            }
        }
        None => {}
    }
    let target = Target::Story {
        story_key: key.clone(),
    };
    let mut progress = Progress::load(&layout.dir, &layout.rel)?
        .unwrap_or_else(|| Progress::new(&payload.epic_id, target.clone()));
    progress.target = target;
    progress.failure = None;
    if let Some(sp) = progress.story.as_mut() {
        // The phase in flight ran in another worker's store: it starts again.
        sp.run = None;
    }
    if let (Start::From(_), Some(output)) = (&job.start, &payload.back_to_dev) {
        progress.completed.retain(|k| k != &key);
        let mut sp = StoryProgress::new(&key, pipeline.rework());
        sp.instruction = Some(Instruction::Verify {
            output: output.clone(),
        });
        progress.story = Some(sp);
    }
    progress.save(&layout.dir)?;
    let state = RunEpicState::load(&layout.dir, &layout.rel_file(run_state::FILE_NAME))?
        .unwrap_or_else(|| RunEpicState::new(&payload.epic_id, &now()));
    let specs = specs::resolve(&config, job.project, job.store, &pipeline)?;
    let mut tools = baton_tools::ToolsConfig::load(Some(job.home), Some(job.project))
        .map_err(|e| EpicError::usage(e.code(), e.to_string()).hint(e.hint()))?;
    crate::method_consent::protect(&mut tools, &layout.rel, &specs);
    let budget = baton_engine::spend::BudgetConfig::load(Some(job.home), Some(job.project))
        .map_err(|m| EpicError::usage(baton_engine::spend::BUDGET_CONFIG_INVALID, m))?;
    let project = job
        .store
        .project(job.project)
        .map_err(|e| EpicError::failure(e.code(), e.to_string()))?;
    let mut ctx = Ctx {
        store: job.store,
        project,
        layout,
        pipeline,
        config,
        specs,
        tools,
        models: Models::new(ModelSource::Live(job.model), None),
        ask: None,
        on_event: job.on_event,
        cancel: job.cancel,
        budget,
        // The unit's payload carries no policy: each run's own (`node` for a new one).
        context: None,
        epic,
        state,
        progress,
        completed_now: Vec::new(),
        phases_run: 0,
        stories: None,
        on_step: Some(job.hook),
    };
    let outcome = ctx.run_loop().await?;
    Ok(match outcome {
        EpicOutcome::Done { .. } if ctx.progress.completed.iter().any(|k| k == &key) => {
            StoryEnd::Approved
        }
        EpicOutcome::Done { .. } => StoryEnd::Failed(FailureDetail {
            phase: ctx.pipeline.first(),
            story_key: key.clone(),
            code: "EPIC_STORY_NOT_RUN".into(),
            message: format!("story {key} is not one the loop runs (its status says so)"),
            run_id: None,
        }),
        EpicOutcome::Waiting { question, .. } => StoryEnd::Waiting(question),
        EpicOutcome::Paused { failure } => StoryEnd::Failed(failure),
        EpicOutcome::Budget {
            phase,
            run_id,
            message,
            ..
        } => StoryEnd::Failed(FailureDetail {
            phase,
            story_key: key.clone(),
            code: baton_engine::spend::BUDGET_EXCEEDED.into(),
            message,
            run_id,
        }),
        EpicOutcome::Stopped | EpicOutcome::Interrupted | EpicOutcome::Planned { .. } => {
            StoryEnd::Stopped
        }
    })
}
