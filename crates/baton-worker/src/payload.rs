//! What a queued run carries for its worker: the run's options, never a key or a host path.
//! Submitters write it, workers read it back through the same type; anyone with the database
//! can write a payload, so a worker validates it before using it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A queued workflow run's options.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunPayload {
    /// The pinned package's name (shown; the package itself is pinned by content).
    pub package: String,
    pub workflow: Option<String>,
    pub agent: Option<String>,
    #[serde(default)]
    pub inputs: Vec<String>,
    #[serde(default = "autopilot_default")]
    pub autopilot: bool,
    /// `--var K=V`, as text.
    #[serde(default)]
    pub vars: Map<String, Value>,
    /// The project's folder inside its repository ("" for the root), with `/`.
    #[serde(default)]
    pub project_subdir: String,
    #[serde(default)]
    pub model: ModelPayload,
    #[serde(default)]
    pub budget: BudgetPayload,
    /// A recorded trace the run replays instead of asking a model (`--replay`), pinned by
    /// content in the database; left out when absent so older workers still read the payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplayPayload>,
}

/// The trace a replayed run answers from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplayPayload {
    /// The sha256 of the trace's bytes, as stored in the database.
    pub sha256: String,
    /// Its file name as submitted (shown; no path).
    pub name: String,
}

/// Where the submitter's base URL came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BaseUrlFrom {
    /// `--base-url` of `baton run --queue`.
    Flag,
    /// `OPENAI_BASE_URL` of the submitting machine.
    Env,
}

fn autopilot_default() -> bool {
    true
}

/// The model by name and endpoint; the worker's own environment gives the key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelPayload {
    pub name: Option<String>,
    pub base_url: Option<String>,
    /// Which setting of the submitter gave `base_url`, so an error names the real one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url_from: Option<BaseUrlFrom>,
    /// The endpoint's wire protocol, `openai` or `anthropic` (absent: the worker's
    /// configuration chooses; left out when absent so older workers still read the payload).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// `node` or `full`.
    pub context: Option<String>,
    pub context_tokens: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetPayload {
    pub tokens: Option<u64>,
    pub usd: Option<f64>,
}

/// A payload no worker can run.
pub const QUEUE_PAYLOAD_INVALID: &str = "QUEUE_PAYLOAD_INVALID";

impl RunPayload {
    /// Reads a unit's payload, or says what is wrong with it.
    pub fn from_value(value: &Value) -> Result<RunPayload, String> {
        let payload: RunPayload =
            serde_json::from_value(value.clone()).map_err(|e| format!("payload: {e}"))?;
        if let Some(c) = payload.model.context.as_deref()
            && c != "node"
            && c != "full"
        {
            return Err(format!(
                "payload: model.context is {c:?}, expected \"node\" or \"full\""
            ));
        }
        if let Some(api) = payload.model.api.as_deref() {
            api.parse::<baton_llm::config::Api>()
                .map_err(|e| format!("payload: model.api: {e}"))?;
        }
        if let Some(r) = &payload.replay
            && (r.sha256.len() != 64 || !r.sha256.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(format!(
                "payload: replay.sha256 {:?} is not a sha256",
                r.sha256
            ));
        }
        let subdir = &payload.project_subdir;
        if subdir.starts_with('/')
            || subdir
                .split('/')
                .any(|part| part == ".." || part == "." || (part.is_empty() && !subdir.is_empty()))
        {
            return Err(format!(
                "payload: projectSubdir {subdir:?} must be a relative folder inside the repository"
            ));
        }
        Ok(payload)
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
    fn a_payload_goes_round_and_bad_ones_are_named() {
        let p = RunPayload {
            package: "demo".into(),
            workflow: Some("w".into()),
            project_subdir: "app".into(),
            ..Default::default()
        };
        assert_eq!(RunPayload::from_value(&p.to_value()).unwrap(), p);
        let escape = json!({"package": "demo", "projectSubdir": "../../etc"});
        assert!(
            RunPayload::from_value(&escape)
                .unwrap_err()
                .contains("projectSubdir")
        );
        let absolute = json!({"package": "demo", "projectSubdir": "/etc"});
        assert!(RunPayload::from_value(&absolute).is_err());
        let unknown = json!({"package": "demo", "shell": "rm -rf /"});
        assert!(
            RunPayload::from_value(&unknown)
                .unwrap_err()
                .contains("shell")
        );
        let api = json!({"package": "demo", "model": {"api": "gemini"}});
        assert!(
            RunPayload::from_value(&api)
                .unwrap_err()
                .contains("model.api")
        );
        let anthropic = RunPayload {
            model: ModelPayload {
                api: Some("anthropic".into()),
                ..Default::default()
            },
            ..p.clone()
        };
        assert_eq!(
            RunPayload::from_value(&anthropic.to_value()).unwrap(),
            anthropic
        );
        assert!(p.to_value()["model"].get("api").is_none());
        let replayed = RunPayload {
            replay: Some(ReplayPayload {
                sha256: "a".repeat(64),
                name: "run.trace.json".into(),
            }),
            model: ModelPayload {
                base_url: Some("http://127.0.0.1:9/v1".into()),
                base_url_from: Some(BaseUrlFrom::Env),
                ..Default::default()
            },
            ..p.clone()
        };
        let v = replayed.to_value();
        assert_eq!(v["model"]["baseUrlFrom"], "env");
        assert_eq!(RunPayload::from_value(&v).unwrap(), replayed);
        assert!(p.to_value().get("replay").is_none());
        let bad = json!({"package": "demo", "replay": {"sha256": "../x", "name": "t"}});
        assert!(
            RunPayload::from_value(&bad)
                .unwrap_err()
                .contains("replay.sha256")
        );
        let context = json!({"package": "demo", "model": {"context": "all"}});
        assert!(
            RunPayload::from_value(&context)
                .unwrap_err()
                .contains("context")
        );
    }
}
