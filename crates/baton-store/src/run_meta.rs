//! One run's metadata (`RunMetadata`, the record of seed 001) and its own copy in
//! `runs/<runId>/run.json`, from which the project's index can always be rebuilt.

use crate::durable::replace;
use crate::home::StoreError;
use crate::state::StateDoc;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fs;
use std::path::Path;

/// Longest text kept in `waitingFor` (in characters). A model can ask a 20 MB question; the full
/// text stays in the run's logs (`engine.waiting` in `execution.jsonl`, and the conversation log).
pub const TEXT_LIMIT: usize = 2_000;
/// Largest `waitingFor` kept (serialized bytes), whatever its shape.
const WAITING_FOR_LIMIT: usize = 16 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    Idle,
    Running,
    WaitingUser,
    Completed,
    Failed,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Idle => "idle",
            Phase::Running => "running",
            Phase::WaitingUser => "waiting-user",
            Phase::Completed => "completed",
            Phase::Failed => "failed",
        }
    }
}

/// What a run executes. Absent in `run.json` and the index means a workflow run, so files
/// written before task runs existed, and the seed-001 index format, stay as they are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunKind {
    /// A workflow of a package, driven along its graph (seed 001).
    #[default]
    Workflow,
    /// A task run: one assembled prompt, no graph, ended by the model's finish call.
    Task,
}

impl RunKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Workflow => "workflow",
            RunKind::Task => "task",
        }
    }

    /// For `skip_serializing_if`: the default is never written.
    pub fn is_workflow(&self) -> bool {
        *self == RunKind::Workflow
    }
}

/// How much history a run's requests carry. Remembered with the run (`context` in
/// `run.json`, absent for the default `node`), so `answer`, `resume` and `chat` go on with the
/// policy the run was last driven with unless told otherwise.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ContextPolicy {
    /// The history restarts whenever the current node changes; state and artifacts carry the
    /// memory between nodes.
    #[default]
    Node,
    /// The history is carried across nodes, so every request begins with the whole previous
    /// one: the system layers stay those of the run's agent, and an agent that takes over at
    /// a node is introduced by an `AGENT_PERSONA` message. When a request would pass the
    /// carry limit (half the context window, at most 32,768 tokens) the history of the
    /// earlier nodes is left out in one step (a `CONTEXT_RESTART` note stands for it) and the
    /// requests extend each other again.
    Full,
}

impl ContextPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            ContextPolicy::Node => "node",
            ContextPolicy::Full => "full",
        }
    }

    /// For `skip_serializing_if`: the default is never written.
    pub fn is_node(&self) -> bool {
        *self == ContextPolicy::Node
    }
}

/// One entry of `runsIndex.json`, and the content of a run's `run.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunMetadata {
    pub run_id: String,
    #[serde(default, skip_serializing_if = "RunKind::is_workflow")]
    pub kind: RunKind,
    pub project_id: String,
    pub package_id: String,
    pub package_sha256: String,
    pub workflow_ref: String,
    pub active_agent_id: String,
    pub phase: Phase,
    pub created_at: String,
    pub last_updated_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_node_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<Value>,
    /// The model the run was last driven with (never a key): `answer`, `resume` and `chat`
    /// go on with it unless told otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelRecord>,
    /// The context policy the run was last driven with (absent: `node`, also for runs written
    /// before it was recorded).
    #[serde(default, skip_serializing_if = "ContextPolicy::is_node")]
    pub context: ContextPolicy,
    /// Why a failed run stopped, when it says more than the error: [`MODEL_UNREACHABLE`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// The tokens (and cost, where priced) of all the run's model calls, as of the end of its
    /// last invocation. The audit log's `engine.turn` lines are the record it sums.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<RunUsage>,
    /// The folder mounted as `@project` when it is not the project's root: a git worktree of
    /// the project (a story of a parallel epic, see [`crate::Store::project_in_work_tree`]).
    /// Set when the run is created; absent for every other run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_tree: Option<std::path::PathBuf>,
}

/// The stop reason of a run stopped before a model call that would have crossed a budget.
pub const BUDGET_EXCEEDED: &str = "budget-exceeded";

/// What a run's model calls used: `{promptTokens, cachedPromptTokens, cacheWriteTokens?,
/// completionTokens, reasoningTokens, totalTokens, costUsd?, modelCalls}`. `costUsd` only where every call had a
/// known price.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunUsage {
    pub prompt_tokens: u64,
    #[serde(default)]
    pub cached_prompt_tokens: u64,
    /// Prompt tokens the provider wrote to its cache (Anthropic), part of `prompt_tokens`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    pub completion_tokens: u64,
    #[serde(default)]
    pub reasoning_tokens: u64,
    pub total_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(default)]
    pub model_calls: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The stop reason of a run whose last invocation never reached the model (the endpoint
/// refused, did not resolve, or no connection could be made).
pub const MODEL_UNREACHABLE: &str = "model-unreachable";

/// What a run remembers of its model. Never a key; an endpoint with a user, password or
/// query in it is not remembered at all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelRecord {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The wire protocol of a live model (`openai`, `anthropic`); absent for a replay and for
    /// runs written before it was recorded (they spoke OpenAI's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// Answered by a recorded trace.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replay: bool,
    /// The replayed trace: a file path, or `bundled:<name>` for one inside baton.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

impl RunMetadata {
    /// The order of the index: creation time, then id (UUID v7, so also time).
    pub(crate) fn sort_key(&self) -> (&str, &str) {
        (&self.created_at, &self.run_id)
    }

    /// True when the two differ in more than `lastUpdatedAt`.
    pub(crate) fn same_content(&self, other: &RunMetadata) -> bool {
        let mut a = self.clone();
        a.last_updated_at.clone_from(&other.last_updated_at);
        a == *other
    }
}

/// Caps every text of `waitingFor` at [`TEXT_LIMIT`] characters (marking the value
/// `"truncated": true`), and the whole value at 16 KiB.
pub fn bound_waiting_for(value: &mut Option<Value>) {
    let Some(v) = value else { return };
    if truncate_strings(v) {
        match &mut *v {
            Value::Object(map) => {
                map.insert("truncated".into(), Value::Bool(true));
            }
            // Not an object: keep it as the question, marked.
            other => {
                let text = other.take();
                *other = serde_json::json!({"question": text, "truncated": true});
            }
        }
    }
    let size = serde_json::to_vec(v).map_or(usize::MAX, |b| b.len());
    if size > WAITING_FOR_LIMIT {
        // Many keys or a deep shape: keep the beginning of its text, as the question.
        let text = truncate_text(&v.to_string()).0;
        *v = serde_json::json!({"question": text, "truncated": true});
    }
}

fn truncate_strings(v: &mut Value) -> bool {
    match v {
        Value::String(s) => {
            let (t, cut) = truncate_text(s);
            if cut {
                *s = t;
            }
            cut
        }
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |cut, i| truncate_strings(i) | cut),
        Value::Object(map) => map
            .values_mut()
            .fold(false, |cut, i| truncate_strings(i) | cut),
        _ => false,
    }
}

/// The first [`TEXT_LIMIT`] characters and an ellipsis, or the text unchanged.
fn truncate_text(s: &str) -> (String, bool) {
    match s.char_indices().nth(TEXT_LIMIT) {
        Some((end, _)) => (format!("{}…", &s[..end]), true),
        None => (s.to_string(), false),
    }
}

/// Reads a `run.json`. `Ok(None)`: absent (a run made before run.json existed).
pub(crate) fn read_run_json(path: &Path) -> Result<Option<RunMetadata>, RunJsonError> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(RunJsonError::Io(StoreError::io("read", path)(e))),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| RunJsonError::Damaged(e.to_string()))
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum RunJsonError {
    #[error(transparent)]
    Io(StoreError),
    #[error("{0}")]
    Damaged(String),
}

pub(crate) fn encode(meta: &RunMetadata, path: &Path) -> Result<Vec<u8>, StoreError> {
    let mut bytes = serde_json::to_vec(meta).map_err(|e| StoreError::Io {
        action: "encode",
        path: path.to_path_buf(),
        source: std::io::Error::other(e),
    })?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Writes a `run.json` recovered for a run made before run.json existed: atomic (temp file and
/// rename) but not fsynced, because a rebuild may write thousands and the index keeps the same
/// record durably; a power cut can at worst leave it unreadable, and it is then recovered again.
pub(crate) fn write_recovered_run_json(path: &Path, meta: &RunMetadata) -> Result<(), StoreError> {
    replace(path, &encode(meta, path)?)
}

/// What a run's `state/workflow.md` says about it, for runs whose metadata is lost.
pub(crate) struct StateFacts {
    pub run_id: String,
    pub workflow_ref: String,
    pub active_agent_id: String,
    pub current_node_id: Option<String>,
    pub updated_at: Option<String>,
    pub complete: bool,
}

pub(crate) fn state_facts(state_file: &Path) -> Result<StateFacts, String> {
    let text = fs::read_to_string(state_file).map_err(|e| e.to_string())?;
    let doc = StateDoc::parse(&text).map_err(|e| e.to_string())?;
    let field = |k: &str| doc.get_str(k).unwrap_or_default().to_string();
    let run_id = field("runId");
    if run_id.is_empty() {
        return Err("the state has no runId".into());
    }
    Ok(StateFacts {
        run_id,
        workflow_ref: field("workflowRef"),
        active_agent_id: field("activeAgentId"),
        current_node_id: Some(doc.current_node_id().to_string()).filter(|n| !n.is_empty()),
        updated_at: doc.get_str("updatedAt").map(str::to_owned),
        complete: doc.workflow_status() == Some("complete"),
    })
}

/// The creation time a UUID v7 carries (milliseconds since the epoch, in its first 48 bits).
pub(crate) fn uuid_v7_time(run_id: &str) -> Option<String> {
    let id = uuid::Uuid::parse_str(run_id).ok()?;
    let (secs, _) = id.get_timestamp()?.to_unix();
    Some(crate::time::rfc3339(secs))
}

/// True for names `create_run` gives run directories (a UUID), so nothing else in `runs/` is
/// ever taken for a run or joined into a path from a query.
pub(crate) fn is_run_id(name: &str) -> bool {
    name.len() == 36 && uuid::Uuid::try_parse(name).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn long_texts_are_cut_on_a_char_boundary_and_marked() {
        let question = "é".repeat(TEXT_LIMIT + 10);
        let mut w = Some(json!({"question": question, "nodeId": "n1"}));
        bound_waiting_for(&mut w);
        let w = w.unwrap();
        let q = w["question"].as_str().unwrap();
        assert_eq!(q.chars().count(), TEXT_LIMIT + 1);
        assert!(q.ends_with('…'));
        assert_eq!(w["truncated"], true);
        assert_eq!(w["nodeId"], "n1");
    }

    #[test]
    fn short_values_are_untouched() {
        let mut w = Some(json!({"question": "which story?", "nodeId": "n1"}));
        let before = w.clone();
        bound_waiting_for(&mut w);
        assert_eq!(w, before);
    }

    #[test]
    fn many_small_texts_are_bounded_as_a_whole() {
        let items: Vec<Value> = (0..5_000).map(|i| json!(format!("item {i}"))).collect();
        let mut w = Some(json!({"choices": items}));
        bound_waiting_for(&mut w);
        let size = serde_json::to_vec(&w).unwrap().len();
        assert!(size < WAITING_FOR_LIMIT, "{size}");
        assert_eq!(w.unwrap()["truncated"], true);
    }

    fn workflow_run() -> RunMetadata {
        RunMetadata {
            run_id: "019a0b7e-5f00-7000-8000-000000000000".into(),
            kind: RunKind::Workflow,
            project_id: "p".into(),
            package_id: "pkg".into(),
            package_sha256: "0".repeat(64),
            workflow_ref: "wf".into(),
            active_agent_id: "sm".into(),
            phase: Phase::Idle,
            created_at: "2026-01-01T00:00:00Z".into(),
            last_updated_at: "2026-01-01T00:00:00Z".into(),
            current_node_id: None,
            waiting_for: None,
            model: None,
            context: ContextPolicy::Node,
            stop_reason: None,
            usage: None,
            work_tree: None,
        }
    }

    #[test]
    fn a_workflow_run_is_written_without_a_kind() {
        let v = serde_json::to_value(workflow_run()).unwrap();
        assert!(v.get("kind").is_none(), "{v}");
    }

    #[test]
    fn a_record_without_a_kind_is_a_workflow_run() {
        let mut v = serde_json::to_value(workflow_run()).unwrap();
        v.as_object_mut().unwrap().remove("kind");
        let back: RunMetadata = serde_json::from_value(v).unwrap();
        assert_eq!(back.kind, RunKind::Workflow);
        assert_eq!(back, workflow_run());
    }

    #[test]
    fn a_task_run_keeps_its_kind() {
        let task = RunMetadata {
            kind: RunKind::Task,
            ..workflow_run()
        };
        let v = serde_json::to_value(&task).unwrap();
        assert_eq!(v["kind"], "task");
        let back: RunMetadata = serde_json::from_value(v).unwrap();
        assert_eq!(back, task);
    }

    #[test]
    fn the_default_context_policy_is_not_written_and_old_runs_read_as_node() {
        let v = serde_json::to_value(workflow_run()).unwrap();
        assert!(v.get("context").is_none(), "{v}");
        let back: RunMetadata = serde_json::from_value(v).unwrap();
        assert_eq!(back.context, ContextPolicy::Node);
        let full = RunMetadata {
            context: ContextPolicy::Full,
            ..workflow_run()
        };
        let v = serde_json::to_value(&full).unwrap();
        assert_eq!(v["context"], "full");
        assert_eq!(serde_json::from_value::<RunMetadata>(v).unwrap(), full);
    }

    #[test]
    fn a_model_record_keeps_its_api_and_one_written_before_it_reads_without() {
        let old = json!({"name": "m", "baseUrl": "http://127.0.0.1:9/v1"});
        let back: ModelRecord = serde_json::from_value(old.clone()).unwrap();
        assert_eq!(back.api, None);
        assert_eq!(serde_json::to_value(&back).unwrap(), old);
        let anthropic = ModelRecord {
            api: Some("anthropic".into()),
            ..back
        };
        let v = serde_json::to_value(&anthropic).unwrap();
        assert_eq!(v["api"], "anthropic");
        assert_eq!(serde_json::from_value::<ModelRecord>(v).unwrap(), anthropic);
    }

    #[test]
    fn an_unknown_kind_is_refused() {
        let mut v = serde_json::to_value(workflow_run()).unwrap();
        v["kind"] = json!("cron");
        assert!(serde_json::from_value::<RunMetadata>(v).is_err());
    }

    #[test]
    fn run_ids_and_their_time() {
        let id = uuid::Uuid::now_v7().to_string();
        assert!(is_run_id(&id));
        assert!(!is_run_id("../etc"));
        assert!(!is_run_id(&format!(".{}", &id[1..])));
        let t = uuid_v7_time("019a0b7e-5f00-7000-8000-000000000000").unwrap();
        assert!(t.starts_with("2025-"), "{t}");
    }
}
