//! What a story unit carries for its worker, and what a worker records at each checkpoint.
//! Anyone with the database can write both: a worker validates a payload, an orchestrator a
//! checkpoint, before using them.

use baton_bmad::keys;
use baton_worktree::worktree::check_name;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// A payload no worker can run.
pub const QUEUE_PAYLOAD_INVALID: &str = "QUEUE_PAYLOAD_INVALID";
/// Largest file a payload or a checkpoint carries.
pub const MAX_FILE_BYTES: usize = 256 * 1024;

/// The model a story's phases run with: by name and endpoint; the worker's environment gives
/// the key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StoryModel {
    pub name: Option<String>,
    pub base_url: Option<String>,
    /// The endpoint's wire protocol, `openai` or `anthropic` (absent: the worker's
    /// configuration chooses; left out when absent so older workers still read the payload).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
}

/// A story unit's payload.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StoryPayload {
    /// `epic-1`
    pub epic_id: String,
    /// The story key.
    pub story: String,
    /// The orchestrator's session (its units are found by it).
    pub session: String,
    /// The project's folder inside its repository ("" for the root), with `/`.
    #[serde(default)]
    pub project_subdir: String,
    /// The artifacts folder (where `sprint-status.yaml` is), relative to the project.
    pub artifacts: String,
    #[serde(default)]
    pub model: StoryModel,
    /// Files of the artifacts folder the story starts with, by name: the orchestrator's
    /// `sprint-status.yaml` and the story's agent-state file.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Go on from this earlier unit's last checkpoint (its progress files): a story retried or
    /// sent back to dev.
    #[serde(default)]
    pub from_unit: Option<i64>,
    /// Back to dev with this text (the merge onto the epic's branch conflicted or failed a
    /// check).
    #[serde(default)]
    pub back_to_dev: Option<String>,
    /// Packages installed in the orchestrator's store that phases run, pinned into the
    /// database by content (sha256): the worker installs them before the story starts.
    #[serde(default)]
    pub packages: Vec<String>,
    /// The epic's pipeline (the worker runs the same phases as the orchestrator); absent from
    /// older orchestrators: the worker takes the project's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<crate::pipeline::Recorded>,
}

/// The names a payload or a checkpoint may carry for `story`.
pub fn carried(story: &str) -> [String; 4] {
    [
        baton_bmad::sprint::FILE_NAME.to_string(),
        baton_epic_state::run_state::FILE_NAME.to_string(),
        crate::progress::FILE_NAME.to_string(),
        format!("{story}{}", baton_epic_state::agent_state::SUFFIX),
    ]
}

fn check_files(story: &str, files: &BTreeMap<String, String>, what: &str) -> Result<(), String> {
    let allowed = carried(story);
    for (name, text) in files {
        if !allowed.contains(name) {
            return Err(format!("{what}: file {name:?} is not one a story carries"));
        }
        if text.len() > MAX_FILE_BYTES {
            return Err(format!(
                "{what}: file {name} is {} bytes, more than {MAX_FILE_BYTES}",
                text.len()
            ));
        }
    }
    Ok(())
}

/// "" or `a/b`: no absolute path, no `.` or `..`, no empty part.
fn relative_folder(path: &str) -> bool {
    !path.starts_with('/')
        && !path
            .split('/')
            .any(|part| part == ".." || part == "." || (part.is_empty() && !path.is_empty()))
}

impl StoryPayload {
    /// Reads a unit's payload, or says what is wrong with it.
    pub fn from_value(value: &Value) -> Result<StoryPayload, String> {
        let p: StoryPayload =
            serde_json::from_value(value.clone()).map_err(|e| format!("payload: {e}"))?;
        if keys::parse_epic_id(&p.epic_id).is_none() {
            return Err(format!("payload: epicId {:?} is not an epic id", p.epic_id));
        }
        check_name("story", &p.story).map_err(|e| format!("payload: {}", e.message))?;
        if !p
            .story
            .starts_with(&format!("{}-", p.epic_id.trim_start_matches("epic-")))
        {
            return Err(format!(
                "payload: story {} is not of {}",
                p.story, p.epic_id
            ));
        }
        if let Some(api) = p.model.api.as_deref() {
            api.parse::<baton_llm::config::Api>()
                .map_err(|e| format!("payload: model.api: {e}"))?;
        }
        if p.session.is_empty() || p.session.len() > 100 {
            return Err("payload: session must be 1 to 100 characters".into());
        }
        if !relative_folder(&p.project_subdir) {
            return Err(format!(
                "payload: projectSubdir {:?} must be a relative folder inside the repository",
                p.project_subdir
            ));
        }
        if p.artifacts.is_empty() || !relative_folder(&p.artifacts) {
            return Err(format!(
                "payload: artifacts {:?} must be a relative folder inside the project",
                p.artifacts
            ));
        }
        check_files(&p.story, &p.files, "payload")?;
        if p.packages.len() > 10
            || p.packages
                .iter()
                .any(|h| h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err("payload: packages must be at most 10 sha256 digests".into());
        }
        Ok(p)
    }

    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// What a waiting story unit carries: the question (its text under `question`, as every
/// waiting unit shows it), its id and context, and the story's agent-state file (which the
/// orchestrator copies where `baton epic answer` finds it).
pub fn question_body(
    story: &str,
    q: &baton_epic_state::agent_state::Question,
    agent_state: Option<&str>,
) -> Value {
    serde_json::json!({
        "story": story,
        "question": q.question,
        "questionId": q.id,
        "context": q.context,
        "agentState": agent_state,
    })
}

/// The question a waiting story unit carries, if it reads as one.
pub fn question_from_body(v: &Value) -> Option<baton_epic_state::agent_state::Question> {
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let id = text("questionId").filter(|i| !i.is_empty() && i.len() <= 100)?;
    let question: String = text("question")?.chars().take(4000).collect();
    Some(baton_epic_state::agent_state::Question {
        id,
        question,
        context: text("context").map(|c| c.chars().take(4000).collect()),
        answer: None,
    })
}

/// An answer sent to a waiting story unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoryAnswer {
    /// The orchestrator's agent-state file of the story, the answer in it (`baton epic
    /// answer`).
    AgentState(String),
    /// The answer alone (`baton answer <UNIT> --db`, the queue page): it answers the pending
    /// question.
    Text(String),
}

impl StoryAnswer {
    /// An `answer` write's body, if it reads as one.
    pub fn from_body(v: &Value) -> Option<StoryAnswer> {
        if let Some(a) = v.get("agentState").and_then(Value::as_str) {
            return Some(StoryAnswer::AgentState(a.to_string()));
        }
        match v {
            Value::String(t) => Some(StoryAnswer::Text(t.clone())),
            _ => v
                .get("text")
                .and_then(Value::as_str)
                .map(|t| StoryAnswer::Text(t.to_string())),
        }
    }
}

/// What a worker records after each phase of a story (a `story-checkpoint` write).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoryCheckpoint {
    /// The worktree's commit, pushed to `reference`.
    pub commit: String,
    pub reference: String,
    /// The story's progress files in the artifacts folder, by name.
    pub files: BTreeMap<String, String>,
    /// The story's status in the worktree's `sprint-status.yaml`.
    #[serde(default)]
    pub status: Option<String>,
    /// The phase the story stands at (`None`: approved).
    #[serde(default)]
    pub phase: Option<String>,
}

impl StoryCheckpoint {
    /// Reads a checkpoint write of `story`, or says what is wrong with it.
    pub fn from_value(story: &str, value: &Value) -> Result<StoryCheckpoint, String> {
        let c: StoryCheckpoint =
            serde_json::from_value(value.clone()).map_err(|e| format!("checkpoint: {e}"))?;
        if !(c.commit.len() == 40 || c.commit.len() == 64)
            || !c.commit.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return Err(format!(
                "checkpoint: commit {:?} is not a git commit id",
                c.commit
            ));
        }
        check_files(story, &c.files, "checkpoint")?;
        Ok(c)
    }

    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn the_api_travels_and_is_left_out_when_absent() {
        let mut p = StoryPayload {
            epic_id: "epic-1".into(),
            story: "1-2-login".into(),
            session: "s1".into(),
            artifacts: "_bmad-output/implementation-artifacts".into(),
            ..Default::default()
        };
        // Absent: not in the payload, which a worker without the field still reads.
        assert!(p.to_value()["model"].get("api").is_none());
        p.model.api = Some("anthropic".into());
        assert_eq!(p.to_value()["model"]["api"], "anthropic");
        assert_eq!(StoryPayload::from_value(&p.to_value()).unwrap(), p);
        let mut bad = p.to_value();
        bad["model"]["api"] = json!("gemini");
        assert!(
            StoryPayload::from_value(&bad)
                .unwrap_err()
                .contains("model.api")
        );
    }

    #[test]
    fn a_payload_goes_round_and_bad_ones_are_named() {
        let mut p = StoryPayload {
            epic_id: "epic-1".into(),
            story: "1-2-login".into(),
            session: "s1".into(),
            artifacts: "_bmad-output/implementation-artifacts".into(),
            ..Default::default()
        };
        p.files.insert(
            "sprint-status.yaml".into(),
            "development_status: {}\n".into(),
        );
        assert_eq!(StoryPayload::from_value(&p.to_value()).unwrap(), p);
        let mut bad = p.to_value();
        bad["files"] = json!({"../../etc/passwd": "x"});
        assert!(
            StoryPayload::from_value(&bad)
                .unwrap_err()
                .contains("passwd")
        );
        let mut bad = p.to_value();
        bad["story"] = json!("2-1-other");
        assert!(StoryPayload::from_value(&bad).is_err());
        let mut bad = p.to_value();
        bad["story"] = json!("1-1-../x");
        assert!(StoryPayload::from_value(&bad).is_err());
        let mut bad = p.to_value();
        bad["projectSubdir"] = json!("../up");
        assert!(StoryPayload::from_value(&bad).is_err());
        let mut bad = p.to_value();
        bad["packages"] = json!(["../x"]);
        assert!(StoryPayload::from_value(&bad).is_err());
        let mut bad = p.to_value();
        bad["artifacts"] = json!("/etc");
        assert!(StoryPayload::from_value(&bad).is_err());
        let mut bad = p.to_value();
        bad["shell"] = json!("rm -rf /");
        assert!(StoryPayload::from_value(&bad).is_err());
    }

    #[test]
    fn a_question_goes_round_and_answers_read_both_ways() {
        let q = baton_epic_state::agent_state::Question {
            id: "q1".into(),
            question: "Which port?".into(),
            context: Some("asked at dev".into()),
            answer: None,
        };
        let body = question_body("1-2-login", &q, Some("{}"));
        assert_eq!(body["question"], "Which port?");
        assert_eq!(question_from_body(&body), Some(q));
        assert_eq!(question_from_body(&json!({"question": "no id"})), None);
        assert_eq!(
            StoryAnswer::from_body(&json!({"agentState": "{}"})),
            Some(StoryAnswer::AgentState("{}".into()))
        );
        assert_eq!(
            StoryAnswer::from_body(&json!({"text": "8080"})),
            Some(StoryAnswer::Text("8080".into()))
        );
        assert_eq!(StoryAnswer::from_body(&json!({"other": 1})), None);
    }

    #[test]
    fn a_checkpoint_carries_only_the_story_files() {
        let c = StoryCheckpoint {
            commit: "a".repeat(40),
            reference: "refs/baton/stories/1/1".into(),
            ..Default::default()
        };
        assert_eq!(
            StoryCheckpoint::from_value("1-2-login", &c.to_value()).unwrap(),
            c
        );
        let mut bad = c.to_value();
        bad["files"] = json!({"1-3-other.agent-state.json": "{}"});
        assert!(StoryCheckpoint::from_value("1-2-login", &bad).is_err());
        let mut bad = c.to_value();
        bad["commit"] = json!("HEAD");
        assert!(StoryCheckpoint::from_value("1-2-login", &bad).is_err());
    }
}
