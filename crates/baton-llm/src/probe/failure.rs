//! A probe's failed call as a verdict: what the error means for baton and what to do, naming
//! the endpoint, the setting that chose it and the key's variable, never the key.

use super::report::{Check, Verdict};
use crate::config::{Api, LlmConfig};
use crate::error::LlmError;

/// What to do about an endpoint that does not answer in time.
const SLOW_HINT: &str = "the endpoint is slow or overloaded (a local server may still be \
     loading the model): check again, or give each check longer (baton models check \
     --deadline-s 120)";

/// A check, and whether the checks after it are worth running.
pub(crate) struct Outcome {
    pub check: Check,
    /// The endpoint cannot be used at all (unreachable, no key, key refused): the remaining
    /// checks would fail the same way.
    pub stop: bool,
}

impl From<Check> for Outcome {
    fn from(check: Check) -> Outcome {
        Outcome { check, stop: false }
    }
}

/// The check `name` failed with `e` (already scrubbed of the key by the client).
pub(crate) fn from_error(name: &'static str, e: &LlmError, config: &LlmConfig) -> Outcome {
    let model = config.model.as_deref().unwrap_or_default();
    let endpoint = config.endpoint_shown();
    let (detail, hint, stop) = match e {
        LlmError::Connect(_) | LlmError::KeyMissing { .. } => {
            (e.to_string(), e.hint().unwrap_or_default(), true)
        }
        LlmError::Http {
            status: status @ (401 | 403),
            message,
        } => (
            format!("the endpoint refused the API key (HTTP {status}: {message})"),
            format!(
                "check {}: it must hold a key that {endpoint} accepts and that may use {model} \
                 (set api_key_env under [llm] to read the key from another variable)",
                config.api_key_env
            ),
            true,
        ),
        LlmError::Http {
            status: 404,
            message,
        } => (
            format!("the endpoint has no model {model} (HTTP 404: {message})"),
            list_models_hint(config),
            true,
        ),
        LlmError::RateLimited { .. } => (
            e.to_string(),
            "the endpoint is rate limiting this key: wait a minute and check again".into(),
            false,
        ),
        LlmError::Timeout(_) | LlmError::CallTimeout(_) => (e.to_string(), SLOW_HINT.into(), false),
        other => (
            other.to_string(),
            other.hint().unwrap_or_else(|| {
                "run the check again; if it fails the same way, the endpoint does not speak \
                 this API as baton does (see docs/models.md)"
                    .into()
            }),
            false,
        ),
    };
    Outcome {
        check: Check::new(name, Verdict::Fail, detail).hint(hint),
        stop,
    }
}

/// How to list the models the endpoint serves, with the key's variable (never the key).
pub(crate) fn list_models_hint(config: &LlmConfig) -> String {
    let endpoint = config.endpoint_shown();
    let var = &config.api_key_env;
    let headers = match config.api {
        Api::OpenAi => format!("-H \"Authorization: Bearer ${var}\""),
        Api::Anthropic => format!("-H \"x-api-key: ${var}\" -H \"anthropic-version: 2023-06-01\""),
    };
    format!(
        "list the models it serves (curl -s {endpoint}/models {headers}) and pass one with \
         --model; a base URL without its path (often /v1) answers 404 too"
    )
}

/// The check took longer than its deadline as a whole.
pub(crate) fn deadline_passed(name: &'static str, deadline: std::time::Duration) -> Outcome {
    Outcome {
        check: Check::new(
            name,
            Verdict::Fail,
            format!("no verdict within {}s", deadline.as_secs()),
        )
        .hint(SLOW_HINT),
        stop: false,
    }
}
