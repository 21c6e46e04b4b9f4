//! Errors of model calls, with stable codes.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    #[error("the model did not answer within {0:?}")]
    Timeout(Duration),
    #[error(
        "the model call took longer than {0:?} in all, retries included (raise max_call_s under [llm] if the model is that slow)"
    )]
    CallTimeout(Duration),
    #[error("the model endpoint answered HTTP {status}: {message}{}", key_note(*status))]
    Http { status: u16, message: String },
    #[error("the model endpoint is rate limiting (HTTP 429): {message}")]
    RateLimited {
        message: String,
        retry_after: Option<Duration>,
    },
    #[error("cannot reach the model endpoint {0}")]
    Connect(String),
    #[error(
        "no API key for the model endpoint {endpoint} (set by {setting}): {variable} is not set"
    )]
    KeyMissing {
        /// The environment variable the key is read from.
        variable: String,
        endpoint: String,
        setting: String,
    },
    #[error("the model's answer cannot be understood: {0}")]
    BadResponse(String),
    #[error("the stream broke after the model had started answering: {0}")]
    StreamInterrupted(String),
    #[error("the call was cancelled")]
    Cancelled,
    #[error("model configuration: {0}")]
    Config(String),
    #[error("the recorded trace has no more model answers (served {served})")]
    ReplayExhausted { served: usize },
    #[error("the run diverged from the recorded trace at {dialogue}: {reason}")]
    ReplayMismatch { dialogue: String, reason: String },
    #[error("cannot load the trace: {0}")]
    TraceInvalid(String),
}

/// What a 401 or 403 says about the key (the provider's own text rarely names it).
fn key_note(status: u16) -> &'static str {
    match status {
        401 | 403 => " (the endpoint refused the API key)",
        _ => "",
    }
}

impl LlmError {
    pub fn code(&self) -> &'static str {
        match self {
            LlmError::Timeout(_) | LlmError::CallTimeout(_) => "LLM_TIMEOUT",
            LlmError::Http { .. } => "LLM_HTTP_ERROR",
            LlmError::RateLimited { .. } => "LLM_RATE_LIMITED",
            LlmError::Connect(_) => "LLM_CONNECT_ERROR",
            LlmError::BadResponse(_) | LlmError::StreamInterrupted(_) => "LLM_BAD_RESPONSE",
            LlmError::Cancelled => "LLM_CANCELLED",
            LlmError::Config(_) => "LLM_CONFIG_INVALID",
            LlmError::KeyMissing { .. } => "LLM_KEY_MISSING",
            LlmError::ReplayExhausted { .. } => "REPLAY_EXHAUSTED",
            LlmError::ReplayMismatch { .. } => "REPLAY_MISMATCH",
            LlmError::TraceInvalid(_) => "TRACE_INVALID",
        }
    }

    /// What to do about it, for the errors a person can fix.
    pub fn hint(&self) -> Option<String> {
        match self {
            LlmError::KeyMissing { variable, .. } => Some(format!(
                "export {variable}=<your key> (any value for a server that needs none), or point OPENAI_BASE_URL at a model on this machine"
            )),
            LlmError::Connect(_) => Some(
                "start the model server, or fix the endpoint: --base-url, OPENAI_BASE_URL or base_url under [llm] in baton.toml".into(),
            ),
            LlmError::Http {
                status: 401 | 403, ..
            } => Some(
                "the endpoint refused the API key: check that the key (OPENAI_API_KEY, ANTHROPIC_API_KEY with api = \"anthropic\", or the variable api_key_env names under [llm]) is one this endpoint accepts and may use this model".into(),
            ),
            _ => None,
        }
    }

    /// True when the model was never reached (nothing was sent to it): the endpoint refused,
    /// its name did not resolve, or no connection could be made.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, LlmError::Connect(_) | LlmError::KeyMissing { .. })
    }

    /// Worth another attempt: the request had no effect and may succeed later.
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::Timeout(_)
            | LlmError::Connect(_)
            | LlmError::RateLimited { .. }
            | LlmError::StreamInterrupted(_) => true,
            LlmError::Http { status, .. } => matches!(status, 408 | 409 | 500..=599),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_key_gets_a_hint_about_the_key() {
        for status in [401, 403] {
            let e = LlmError::Http {
                status,
                message: "Unauthorized".into(),
            };
            assert_eq!(e.code(), "LLM_HTTP_ERROR");
            assert!(e.hint().is_some_and(|h| h.contains("API key")), "{status}");
            assert!(
                e.to_string()
                    .ends_with("(the endpoint refused the API key)")
            );
        }
        let other = LlmError::Http {
            status: 400,
            message: "bad".into(),
        };
        assert_eq!(other.hint(), None);
    }
}
