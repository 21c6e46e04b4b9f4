//! baton's own record of where the loop stands, beside the seed's files:
//! `.baton-epic-progress.json`. The seed's `.run-epic-state.json` says which story runs; this
//! says which phase, which review cycle and attempt, and which baton run does the phase — written
//! before the run is created and again once its id is known, so a killed orchestrator resumes
//! that run instead of starting a second one.

use super::error::{EpicError, Result};
use baton_autopilot::untrusted::limit;
use baton_bmad::layout::{ArtifactFile, Artifacts};
use baton_bmad::phase::Phase;
use serde::{Deserialize, Serialize};

pub const FILE_NAME: &str = ".baton-epic-progress.json";

/// The time a record is stamped with (RFC 3339).
pub(crate) fn now() -> String {
    baton_store::time::now_rfc3339()
}

/// Now, in milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
const VERSION: u32 = 1;

/// What the loop was asked to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "mode")]
pub enum Target {
    /// Every story of the epic, at most `max_stories` of them.
    Epic { max_stories: Option<u32> },
    /// One story (`baton epic story`).
    Story { story_key: String },
}

/// Why the developer runs again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Instruction {
    /// The code review asked for changes.
    Review { summary: String },
    /// A verify command failed.
    Verify { output: String },
}

/// A phase run being created or driven.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InFlight {
    /// The run's ordinal among this story's runs of this phase (names its trace).
    pub n: u32,
    /// Unknown only between "about to create" and "created".
    pub run_id: Option<String>,
    /// When creation began; a run created for it is not older.
    pub since: String,
    /// The same, in milliseconds since the Unix epoch (run ids carry their creation time to the
    /// millisecond).
    #[serde(default)]
    pub since_ms: u64,
    /// The agent-state question this run waits on, once it asked.
    pub question: Option<String>,
    /// For an installed BMAD method: the story's files as they were before the run (`None`:
    /// not looked at yet), so what the run wrote is told apart from what was there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub marks: Option<Vec<Mark>>,
    /// The value the run wrote for its story in `sprint-status.yaml` (the write itself is
    /// undone; the loop applies the status with its own writer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sprint_wrote: Option<String>,
}

/// A file and a digest of its bytes (`None`: it did not exist).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Mark {
    pub path: String,
    pub sha256: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoryProgress {
    pub key: String,
    /// The phase to run (or being run).
    pub phase: Phase,
    /// 1 for the first review, +1 per `changes-requested`.
    pub review_cycle: u32,
    /// 1, then 2 for the one retry of a failed phase.
    pub attempt: u32,
    /// Verify failures sent back to the developer since the last review.
    pub verify_failures: u32,
    pub instruction: Option<Instruction>,
    /// `git rev-parse HEAD` before the first dev run, with `[autopilot.git] commit`.
    pub baseline: Option<String>,
    pub run: Option<InFlight>,
}

impl StoryProgress {
    pub fn new(key: &str, phase: Phase) -> StoryProgress {
        StoryProgress {
            key: key.to_string(),
            phase,
            review_cycle: 1,
            attempt: 1,
            verify_failures: 0,
            instruction: None,
            baseline: None,
            run: None,
        }
    }

    /// Moves to `phase` with a fresh attempt.
    pub fn go(&mut self, phase: Phase) {
        self.phase = phase;
        self.attempt = 1;
        self.run = None;
    }
}

/// A phase run the loop created (kept for the board and for naming traces).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    pub story_key: String,
    pub phase: Phase,
    pub n: u32,
    pub run_id: String,
    pub review_cycle: u32,
    /// `completed`, `waiting`, `failed`, or empty while it runs.
    pub result: String,
    /// For an installed BMAD skill or workflow: which one, and how it was rendered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
}

/// Why the loop paused on a failure (the seed's `lastFailure` has only phase, story and time).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FailureDetail {
    pub phase: Phase,
    pub story_key: String,
    pub code: String,
    pub message: String,
    pub run_id: Option<String>,
}

/// An epic's retrospective as the progress record keeps it (see `retrospective`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetroProgress {
    /// `epic-N-retrospective`.
    pub key: String,
    /// The document the request names (a file name in the implementation artifacts), chosen
    /// once so a resumed or repeated run is told the same one.
    pub document: String,
    /// The run being driven (its `marks`: the document before the first run).
    pub run: Option<InFlight>,
    /// Every run made, oldest first.
    pub runs: Vec<RetroRun>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetroRun {
    pub n: u32,
    pub run_id: String,
    /// `completed`, `missing` (ended without its document), `failed`, or empty while it runs.
    pub result: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Progress {
    pub version: u32,
    pub epic_id: String,
    pub target: Target,
    /// Stories finished under this target (counts against `max_stories`).
    pub completed: Vec<String>,
    pub story: Option<StoryProgress>,
    pub runs: Vec<RunRecord>,
    pub failure: Option<FailureDetail>,
    /// `[autopilot] retrospective`: the epic's retrospective runs (see `retrospective`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrospective: Option<RetroProgress>,
}

pub fn path(dir: &Artifacts) -> ArtifactFile {
    dir.file(FILE_NAME)
}

impl Progress {
    pub fn new(epic_id: &str, target: Target) -> Progress {
        Progress {
            version: VERSION,
            epic_id: epic_id.to_string(),
            target,
            completed: Vec::new(),
            story: None,
            runs: Vec::new(),
            failure: None,
            retrospective: None,
        }
    }

    pub fn load(dir: &Artifacts, shown_dir: &str) -> Result<Option<Progress>> {
        let Some(bytes) = path(dir).read(limit::STATUS)? else {
            return Ok(None);
        };
        let progress: Progress = serde_json::from_slice(&bytes).map_err(|e| {
            EpicError::invalid_file(
                "EPIC_PROGRESS_INVALID",
                &format!("{shown_dir}/{FILE_NAME}"),
                None,
                e,
            )
            .hint("this file is baton's own; remove it to restart the current story from its sprint status (runs already made are kept in the store)")
        })?;
        if progress.version != VERSION {
            return Err(EpicError::invalid_file(
                "EPIC_PROGRESS_INVALID",
                &format!("{shown_dir}/{FILE_NAME}"),
                Some("/version"),
                format!("is {}, this baton reads {VERSION}", progress.version),
            ));
        }
        Ok(Some(progress))
    }

    pub fn save(&self, dir: &Artifacts) -> Result<()> {
        let mut bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| EpicError::failure("EPIC_IO_FAILED", e.to_string()))?;
        bytes.push(b'\n');
        path(dir).write(&bytes)
    }

    /// The ordinal of the next run of `phase` for `story`.
    pub fn next_n(&self, story: &str, phase: Phase) -> u32 {
        let made = self
            .runs
            .iter()
            .filter(|r| r.story_key == story && r.phase == phase)
            .count();
        u32::try_from(made).unwrap_or(u32::MAX - 1) + 1
    }

    pub fn record_run(&mut self, record: RunRecord) {
        if !self.runs.iter().any(|r| r.run_id == record.run_id) {
            self.runs.push(record);
        }
    }

    pub fn set_result(&mut self, run_id: &str, result: &str) {
        if let Some(r) = self.runs.iter_mut().find(|r| r.run_id == run_id) {
            r.result = result.to_string();
        }
    }
}
