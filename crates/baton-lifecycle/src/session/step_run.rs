//! What ties a session's execution step to its store-backed task run, and where its model
//! answers come from.
//!
//! - The link: `<session dir>/step-runs/<index>.json` = `{runId, owner, claimedAt}`, written
//!   atomically right after the run is created and before its first model call. It counts
//!   only while the step's current claim is the one it names (same owner, same `claimedAt`),
//!   so a link left by an earlier attempt of the same step is never followed. status.json is
//!   not touched: ralph's verbs and `ralph check` see the files they know. It is written with
//!   a rename but not fsynced: only baton reads it, a killed process leaves it whole, and after
//!   a power cut that lost it the claim finds its run as an orphan that never ran, or is
//!   released and taken again (the step is done by a new run).
//! - The models: a live model, or one recorded trace per model conversation
//!   (`step-<index>.<attempt>.trace.json` for a step run, `gate-<index>.<retry>.trace.json` for
//!   a gate), so each replays on its own and each is an ordinary baton trace. With a record
//!   directory, each is written there under the same name, invocation after invocation.

use baton_engine::runner;
use baton_llm::{ChatModel, ReplayModel, Trace, TraceRecorder};
use baton_ralph::error::{RalphError, Result};
use baton_ralph::session::Session;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The directory of links in a session's folder.
const LINKS_DIR: &str = "step-runs";
/// Largest link file read: it holds three short strings.
const MAX_LINK_BYTES: u64 = 4096;

/// Where a session's model answers come from.
#[derive(Clone, Copy)]
pub enum ModelSource<'a> {
    Live(&'a dyn ChatModel),
    /// A directory of traces recorded with a record directory.
    Replay(&'a Path),
}

/// A step's task run, as the session knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Link {
    pub run_id: String,
    pub owner: String,
    pub claimed_at: String,
}

fn link_path(session: &Session, index: usize) -> PathBuf {
    session.dir.join(LINKS_DIR).join(format!("{index}.json"))
}

/// The claim on step `index` as a link would name it, if `owner` holds it.
pub fn current_claim(session: &Session, index: usize, owner: &str) -> Option<(String, String)> {
    let claim = session.claim_on(index)?;
    let holder = claim.owner?;
    (holder == owner).then(|| (holder, claim.claimed_at.unwrap_or_default()))
}

/// Links step `index`'s current claim to `run_id` (atomically; see the module's note).
pub fn write_link(session: &Session, index: usize, link: &Link) -> Result<()> {
    let path = link_path(session, index);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(RalphError::io("create", dir))?;
    }
    let bytes = serde_json::to_vec(link)
        .map_err(|e| RalphError::usage("STEP_LINK_INVALID", e.to_string()))?;
    baton_store::durable::replace(&path, &bytes)?;
    Ok(())
}

/// The run linked to step `index`'s current claim by `owner`; `None` when there is none, or
/// the link names another claim (an earlier attempt) or cannot be read (then it is ignored
/// and a new run is started).
pub fn read_link(session: &Session, index: usize, owner: &str) -> Option<Link> {
    let (owner, claimed_at) = current_claim(session, index, owner)?;
    let path = link_path(session, index);
    let file = regular(&path)?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(file, MAX_LINK_BYTES), &mut text)
        .ok()?;
    let link: Link = serde_json::from_str(&text).ok()?;
    (link.owner == owner && link.claimed_at == claimed_at).then_some(link)
}

/// A link file opened without waiting on a FIFO, when it is a regular file.
fn regular(path: &std::path::Path) -> Option<std::fs::File> {
    let file = baton_autopilot::untrusted::open_nonblocking(path).ok()?;
    file.metadata().ok()?.is_file().then_some(file)
}

/// The run step `index` was last linked to, whatever its claim now (for usage sums).
pub fn any_link(session: &Session, index: usize) -> Option<String> {
    let file = regular(&link_path(session, index))?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(file, MAX_LINK_BYTES), &mut text)
        .ok()?;
    serde_json::from_str::<Link>(&text).ok().map(|l| l.run_id)
}

/// The runs the session's steps were linked to, whatever their claim now (what continues a
/// session asks the newest of them which model it used). At most 1000 links are read.
pub fn linked_run_ids(session: &Session) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(session.dir.join(LINKS_DIR)) else {
        return Vec::new();
    };
    entries
        .flatten()
        .take(1000)
        .filter_map(|e| {
            let file = regular(&e.path())?;
            let mut text = String::new();
            std::io::Read::read_to_string(
                &mut std::io::Read::take(file, MAX_LINK_BYTES),
                &mut text,
            )
            .ok()?;
            serde_json::from_str::<Link>(&text).ok().map(|l| l.run_id)
        })
        .collect()
}

/// The trace name of attempt `attempt` (1 or 2) of step `index`.
pub fn step_trace(index: usize, attempt: u32) -> String {
    format!("step-{index}.{attempt}.trace.json")
}

/// The trace name of gate `index` judged at retry `retry`.
pub fn gate_trace(index: usize, retry: u64) -> String {
    format!("gate-{index}.{retry}.trace.json")
}

/// The models of one conversation (a step run's invocation, or a gate's call).
pub struct Models {
    pub replay: Option<ReplayModel>,
    pub recorder: Option<Arc<Mutex<TraceRecorder>>>,
    /// Dialogues recorded by earlier invocations, kept in front of this one's.
    earlier: Vec<Value>,
    record_to: Option<PathBuf>,
}

impl Models {
    /// Loads trace `name` from the replay directory, and prepares its recording.
    pub fn open(source: ModelSource<'_>, record: Option<&Path>, name: &str) -> Result<Models> {
        let replay = match source {
            ModelSource::Live(_) => None,
            ModelSource::Replay(dir) => {
                let path = dir.join(name);
                if !path.is_file() {
                    return Err(RalphError::usage(
                        "SESSION_TRACE_MISSING",
                        format!(
                            "no recorded trace {name} in {}: record the session against a model \
                             first",
                            dir.display()
                        ),
                    ));
                }
                let trace =
                    Trace::load(&path).map_err(|e| RalphError::usage(e.code(), e.to_string()))?;
                // The step's run remembers its trace, so what continues it can replay it again.
                Some(ReplayModel::new(trace).with_source(path.display().to_string()))
            }
        };
        let record_to = record.map(|d| d.join(name));
        let earlier = record_to
            .as_deref()
            .map(runner::earlier_dialogues)
            .unwrap_or_default();
        let recorder = record_to
            .as_ref()
            .map(|_| Arc::new(Mutex::new(TraceRecorder::default())));
        Ok(Models {
            replay,
            recorder,
            earlier,
            record_to,
        })
    }

    /// The model to ask: the replay, else the live one.
    pub fn model<'m>(&'m self, source: ModelSource<'m>) -> Option<&'m dyn ChatModel> {
        match (&self.replay, source) {
            (Some(r), _) => Some(r),
            (None, ModelSource::Live(m)) => Some(m),
            (None, ModelSource::Replay(_)) => None,
        }
    }

    /// Writes the trace: earlier invocations' dialogues, then this one's.
    pub fn save(&self) -> Result<()> {
        let (Some(path), Some(rec)) = (&self.record_to, &self.recorder) else {
            return Ok(());
        };
        runner::save_trace_after(path, &self.earlier, rec)
            .map_err(|e| RalphError::failed(e.code(), e.to_string()))
    }
}
