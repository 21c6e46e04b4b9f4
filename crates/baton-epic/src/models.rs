//! Which model answers a phase run: a live model, or one recorded trace per phase run
//! (`<dir>/<storyKey>.<phase>.<n>.trace.json`), so every phase of an epic replays on its own and
//! each trace is an ordinary baton trace. With a record directory, each phase run's
//! conversation is written there under the same name, invocation after invocation.

use super::error::{EpicError, Result};
use baton_bmad::phase::Phase;
use baton_llm::{ChatModel, ReplayModel, Trace, TraceRecorder};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Where phase runs get their answers.
pub enum ModelSource<'a> {
    Live(&'a dyn ChatModel),
    /// A directory of per-run traces.
    Replay(PathBuf),
}

/// The live model of a source, if it is one.
pub fn live_of<'a>(source: &ModelSource<'a>) -> Option<&'a dyn ChatModel> {
    match source {
        ModelSource::Live(m) => Some(*m),
        ModelSource::Replay(_) => None,
    }
}

/// The trace file name of a phase run.
pub fn trace_name(story_key: &str, phase: Phase, n: u32) -> String {
    format!("{story_key}.{phase}.{n}.trace.json")
}

/// What one phase run uses, kept across its invocations in this process.
pub struct RunModel {
    pub replay: Option<ReplayModel>,
    pub recorder: Option<Arc<Mutex<TraceRecorder>>>,
    /// Dialogues recorded by earlier processes for this run, kept in front of ours.
    earlier: Vec<Value>,
    record_to: Option<PathBuf>,
    /// Whether the replay cursor already stands where the run does.
    pub positioned: bool,
}

pub struct Models<'a> {
    source: ModelSource<'a>,
    record: Option<PathBuf>,
    runs: HashMap<String, RunModel>,
}

impl<'a> Models<'a> {
    pub fn new(source: ModelSource<'a>, record: Option<PathBuf>) -> Models<'a> {
        Models {
            source,
            record,
            runs: HashMap::new(),
        }
    }

    /// The same source and record folder, with no run of its own yet (a story of
    /// `--parallel` drives its phase runs with its own).
    pub fn sibling(&self) -> Models<'a> {
        let source = match &self.source {
            ModelSource::Live(m) => ModelSource::Live(*m),
            ModelSource::Replay(dir) => ModelSource::Replay(dir.clone()),
        };
        Models::new(source, self.record.clone())
    }

    /// The `--replay` folder, when answers come from recordings.
    pub fn replay_dir(&self) -> Option<&Path> {
        match &self.source {
            ModelSource::Replay(dir) => Some(dir),
            ModelSource::Live(_) => None,
        }
    }

    /// The `--record` folder.
    pub fn record_dir(&self) -> Option<&Path> {
        self.record.as_deref()
    }

    pub fn is_replay(&self) -> bool {
        matches!(self.source, ModelSource::Replay(_))
    }

    /// Checks the record directory before anything runs.
    pub fn check(&self) -> Result<()> {
        if let Some(dir) = &self.record
            && !dir.is_dir()
        {
            return Err(EpicError::usage(
                "RECORD_PATH_INVALID",
                format!("--record {} is not a directory", dir.display()),
            )
            .hint(
                "give --record an existing directory: each phase run writes its own trace there",
            ));
        }
        if let ModelSource::Replay(dir) = &self.source
            && !dir.is_dir()
        {
            return Err(EpicError::usage(
                "EPIC_TRACE_MISSING",
                format!(
                    "--replay {} is not a directory of phase traces",
                    dir.display()
                ),
            ));
        }
        Ok(())
    }

    /// The models of run `run_id` (`<story>.<phase>.<n>`), loaded on first use.
    pub fn for_run(
        &mut self,
        run_id: &str,
        story: &str,
        phase: Phase,
        n: u32,
    ) -> Result<&mut RunModel> {
        self.for_trace(run_id, trace_name(story, phase, n))
    }

    /// The models of run `run_id`, whose trace file is called `name` (a run that is no story's
    /// phase, like an epic's retrospective, names its own).
    pub fn for_trace(&mut self, run_id: &str, name: String) -> Result<&mut RunModel> {
        if !self.runs.contains_key(run_id) {
            let replay = match &self.source {
                ModelSource::Live(_) => None,
                ModelSource::Replay(dir) => {
                    let path = dir.join(&name);
                    if !path.is_file() {
                        return Err(EpicError::failure(
                            "EPIC_TRACE_MISSING",
                            format!("no recorded trace {name} in {}", dir.display()),
                        )
                        .hint("record the epic with --record DIR against a model first"));
                    }
                    let trace = Trace::load(&path)
                        .map_err(|e| EpicError::failure(e.code(), e.to_string()))?;
                    Some(ReplayModel::new(trace))
                }
            };
            let record_to = self.record.as_ref().map(|d| d.join(&name));
            let earlier = match &record_to {
                Some(p) => baton_engine::runner::earlier_dialogues(p),
                None => Vec::new(),
            };
            let recorder = record_to
                .as_ref()
                .map(|_| Arc::new(Mutex::new(TraceRecorder::default())));
            self.runs.insert(
                run_id.to_string(),
                RunModel {
                    replay,
                    recorder,
                    earlier,
                    record_to,
                    positioned: false,
                },
            );
        }
        self.runs
            .get_mut(run_id)
            .ok_or_else(|| EpicError::failure("EPIC_IO_FAILED", "model table lost a run"))
    }

    pub fn live(&self) -> Option<&'a dyn ChatModel> {
        match self.source {
            ModelSource::Live(m) => Some(m),
            ModelSource::Replay(_) => None,
        }
    }
}

impl RunModel {
    /// Puts the replay cursor where the run stands before an answer continues it (a resume
    /// does that itself), once in this process; whether it already stood there.
    pub fn position(&mut self, answering: bool, conversation_log: &Path) -> bool {
        if let (Some(r), true, false) = (&self.replay, answering, self.positioned)
            && let Ok(restored) = baton_engine::conversation::restore(conversation_log)
        {
            r.fast_forward(restored.complete_turns, restored.answers);
            r.skip_user_input();
        }
        std::mem::replace(&mut self.positioned, true)
    }

    /// The model an invocation talks to: the recorded one when replaying, else the live one.
    pub fn model<'m>(&'m self, live: Option<&'m dyn ChatModel>) -> Result<&'m dyn ChatModel> {
        match (&self.replay, live) {
            (Some(r), _) => Ok(r),
            (None, Some(l)) => Ok(l),
            (None, None) => Err(EpicError::failure(
                "EPIC_MODEL_MISSING",
                "no model to run the phase",
            )),
        }
    }

    /// Writes the run's trace: the earlier processes' dialogues, then this process's.
    pub fn save(&self) -> Result<()> {
        let (Some(path), Some(rec)) = (&self.record_to, &self.recorder) else {
            return Ok(());
        };
        baton_engine::runner::save_trace_after(path, &self.earlier, rec)
            .map_err(|e| EpicError::failure("EPIC_IO_FAILED", e.to_string()))
    }

    /// Records an answer given to the run outside the engine (it continues with it).
    pub fn record_answer(&self, answer: &str, node: Option<&str>) {
        if let Some(rec) = &self.recorder
            && let Ok(mut r) = rec.lock()
        {
            r.record_user_input(answer, &baton_engine::composer::user_input(answer, node));
        }
    }
}
