//! `.run-epic-state.json`, exactly as seed 004 defines it: `epicId`, `currentStoryKey`,
//! `startedAt`, `status` (`running` | `paused`), optional `lastFailure {phase, storyKey, at}`,
//! `lastSteps[] {step, storyKey, phase, completedAt}` and `lastStoryCompleted`; baton adds
//! `storiesFolder`, the spec folder of an epic run in stories mode (`baton epic run --stories`),
//! so `baton epic resume` goes on in that mode, and `contextPolicy` (`node` | `full`), the
//! `--context` the epic was last run with, so its phase runs keep it on resume. Written only by
//! the orchestrator, durably;
//! fields it does not know are kept.

use super::error::{EpicError, Result};
use super::jsonfile::{self, Fields};
use baton_autopilot::untrusted::{count, limit};
use baton_bmad::layout::{ArtifactFile, Artifacts};
use serde_json::{Map, Value, json};

pub const FILE_NAME: &str = ".run-epic-state.json";
const CODE: &str = "RUN_EPIC_STATE_INVALID";
/// The trace is bounded: the oldest steps go first.
const MAX_LAST_STEPS: usize = 100;
const PHASES: [&str; 6] = [
    "create-story",
    "validate",
    "dev",
    "build",
    "revision",
    "code-review",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub phase: String,
    pub story_key: String,
    pub at: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub step: String,
    pub story_key: String,
    pub phase: String,
    pub completed_at: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunEpicState {
    pub epic_id: String,
    pub current_story_key: Option<String>,
    pub started_at: String,
    pub running: bool,
    pub last_failure: Option<Failure>,
    pub last_steps: Vec<Step>,
    pub last_story_completed: Option<String>,
    /// The spec folder (project-relative) of a stories-mode epic; `None` in sprint mode.
    pub stories_folder: Option<String>,
    /// `--context` as the epic was last run with it (`None`: never given).
    pub context: Option<baton_engine::ContextPolicy>,
    /// Fields this version does not know, written back as they were.
    pub other: Map<String, Value>,
}

impl RunEpicState {
    pub fn new(epic_id: &str, now: &str) -> RunEpicState {
        RunEpicState {
            epic_id: epic_id.to_string(),
            current_story_key: None,
            started_at: now.to_string(),
            running: true,
            last_failure: None,
            last_steps: Vec::new(),
            last_story_completed: None,
            stories_folder: None,
            context: None,
            other: Map::new(),
        }
    }

    pub fn path(dir: &Artifacts) -> ArtifactFile {
        dir.file(FILE_NAME)
    }

    /// Reads and checks the file; `None` when there is none.
    pub fn load(dir: &Artifacts, shown: &str) -> Result<Option<RunEpicState>> {
        let file = RunEpicState::path(dir);
        let Some(map) = jsonfile::read_object(&file, shown, CODE, limit::SMALL_JSON)? else {
            return Ok(None);
        };
        let f = Fields::top(&map, shown, CODE);
        let epic_id = f.string("epicId")?.to_string();
        let current_story_key = f.opt_string("currentStoryKey")?.map(str::to_owned);
        let started_at = f.string("startedAt")?.to_string();
        let running = f.one_of("status", &["running", "paused"])? == "running";
        let last_failure = match f.opt_object("lastFailure")? {
            None => None,
            Some(lf) => Some(Failure {
                phase: lf.string("phase")?.to_string(),
                story_key: lf.string("storyKey")?.to_string(),
                at: lf.string("at")?.to_string(),
            }),
        };
        let mut last_steps = Vec::new();
        let steps = f.array("lastSteps", false)?;
        if steps.len() > count::STEPS {
            return Err(EpicError::invalid_file(
                CODE,
                shown,
                Some("/lastSteps"),
                format!(
                    "has {} steps; at most {} are read",
                    steps.len(),
                    count::STEPS
                ),
            ));
        }
        for (at, item) in steps {
            let s = f.item(at, item)?;
            last_steps.push(Step {
                step: s.string("step")?.to_string(),
                story_key: s.string("storyKey")?.to_string(),
                phase: s.one_of("phase", &PHASES)?.to_string(),
                completed_at: s.string("completedAt")?.to_string(),
            });
        }
        let last_story_completed = f.opt_string("lastStoryCompleted")?.map(str::to_owned);
        let stories_folder = f.opt_string("storiesFolder")?.map(str::to_owned);
        let context = match f.opt_one_of("contextPolicy", &["node", "full"])? {
            Some("full") => Some(baton_engine::ContextPolicy::Full),
            Some(_) => Some(baton_engine::ContextPolicy::Node),
            None => None,
        };
        let known = [
            "epicId",
            "currentStoryKey",
            "startedAt",
            "status",
            "lastFailure",
            "lastSteps",
            "lastStoryCompleted",
            "storiesFolder",
            "contextPolicy",
        ];
        let other = map
            .iter()
            .filter(|(k, _)| !known.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Ok(Some(RunEpicState {
            epic_id,
            current_story_key,
            started_at,
            running,
            last_failure,
            last_steps,
            last_story_completed,
            stories_folder,
            context,
            other,
        }))
    }

    pub fn to_json(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("epicId".into(), json!(self.epic_id));
        m.insert("currentStoryKey".into(), json!(self.current_story_key));
        m.insert("startedAt".into(), json!(self.started_at));
        m.insert(
            "status".into(),
            json!(if self.running { "running" } else { "paused" }),
        );
        if let Some(f) = &self.last_failure {
            m.insert(
                "lastFailure".into(),
                json!({"phase": f.phase, "storyKey": f.story_key, "at": f.at}),
            );
        }
        let steps: Vec<Value> = self
            .last_steps
            .iter()
            .map(|s| {
                json!({"step": s.step, "storyKey": s.story_key, "phase": s.phase, "completedAt": s.completed_at})
            })
            .collect();
        m.insert("lastSteps".into(), Value::Array(steps));
        if let Some(k) = &self.last_story_completed {
            m.insert("lastStoryCompleted".into(), json!(k));
        }
        if let Some(f) = &self.stories_folder {
            m.insert("storiesFolder".into(), json!(f));
        }
        if let Some(c) = self.context {
            m.insert("contextPolicy".into(), json!(c.as_str()));
        }
        for (k, v) in &self.other {
            m.insert(k.clone(), v.clone());
        }
        m
    }

    pub fn save(&self, dir: &Artifacts) -> Result<()> {
        jsonfile::write_object(&RunEpicState::path(dir), &self.to_json())
    }

    /// Records a finished phase. A phase repeated without another in between is the same
    /// completion processed again after a crash, and is recorded once.
    pub fn push_step(&mut self, story_key: &str, phase: &str, now: &str) {
        if self
            .last_steps
            .last()
            .is_some_and(|s| s.story_key == story_key && s.phase == phase)
        {
            return;
        }
        self.last_steps.push(Step {
            step: phase.to_string(),
            story_key: story_key.to_string(),
            phase: phase.to_string(),
            completed_at: now.to_string(),
        });
        let extra = self.last_steps.len().saturating_sub(MAX_LAST_STEPS);
        self.last_steps.drain(..extra);
    }
}
