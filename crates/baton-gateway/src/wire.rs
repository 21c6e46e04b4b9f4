//! The model APIs the gateway speaks: which routes each has, the name of its output cap, and
//! the shape of its errors (a CLI reads an error only in its own API's shape).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The API a CLI speaks to the gateway (and the gateway to the upstream).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Wire {
    /// Anthropic Messages (Claude Code).
    AnthropicMessages,
    /// OpenAI Responses (Codex).
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    /// OpenAI chat completions (OpenCode, and any OpenAI-compatible API).
    ChatCompletions,
}

/// What a request asks of the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// A model call: admitted by the meter, settled, counted in [`crate::Gateway::exchanges`].
    Generate,
    /// Anthropic's token count: no model call, no budget.
    CountTokens,
    /// The model list (or one model).
    Models,
}

impl Wire {
    pub fn as_str(self) -> &'static str {
        match self {
            Wire::AnthropicMessages => "anthropic-messages",
            Wire::OpenAiResponses => "openai-responses",
            Wire::ChatCompletions => "chat-completions",
        }
    }

    /// The route of `method` on `path` (without its query); `None` for anything this API does
    /// not have, which the gateway answers with 404 and never forwards.
    pub fn route(self, method: &str, path: &str) -> Option<Route> {
        let generate = match self {
            Wire::AnthropicMessages => "/v1/messages",
            Wire::OpenAiResponses => "/v1/responses",
            Wire::ChatCompletions => "/v1/chat/completions",
        };
        match method {
            "POST" if path == generate => Some(Route::Generate),
            "POST" if self == Wire::AnthropicMessages && path == "/v1/messages/count_tokens" => {
                Some(Route::CountTokens)
            }
            "GET" if path == "/v1/models" => Some(Route::Models),
            // One model by id; an id holds no slash.
            "GET" => path
                .strip_prefix("/v1/models/")
                .filter(|id| !id.is_empty() && !id.contains('/'))
                .map(|_| Route::Models),
            _ => None,
        }
    }

    /// The request fields that cap the answer's length, the first the one set when none is.
    pub fn cap_fields(self) -> &'static [&'static str] {
        match self {
            Wire::AnthropicMessages => &["max_tokens"],
            Wire::OpenAiResponses => &["max_output_tokens"],
            // OpenAI's current name first; older clients and compatible APIs send `max_tokens`.
            Wire::ChatCompletions => &["max_completion_tokens", "max_tokens"],
        }
    }

    /// An error body in this API's shape. `kind` is Anthropic's error type; OpenAI's shape
    /// gets the matching type and code.
    pub fn error_body(self, status: u16, kind: ErrorKind, message: &str) -> Value {
        match self {
            Wire::AnthropicMessages => json!({
                "type": "error",
                "error": {"type": kind.anthropic(status), "message": message},
            }),
            Wire::OpenAiResponses | Wire::ChatCompletions => {
                let (kind_name, code) = kind.openai();
                json!({"error": {"message": message, "type": kind_name, "param": null, "code": code}})
            }
        }
    }
}

/// Why the gateway itself answers with an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Authentication,
    NotFound,
    TooLarge,
    InvalidRequest,
    /// The replay has no exchange for the request.
    Replay,
    /// The upstream could not be reached.
    Upstream,
}

impl ErrorKind {
    fn anthropic(self, _status: u16) -> &'static str {
        match self {
            ErrorKind::Authentication => "authentication_error",
            ErrorKind::NotFound => "not_found_error",
            ErrorKind::TooLarge => "request_too_large",
            ErrorKind::InvalidRequest => "invalid_request_error",
            ErrorKind::Replay | ErrorKind::Upstream => "api_error",
        }
    }

    fn openai(self) -> (&'static str, Value) {
        match self {
            ErrorKind::Authentication => ("invalid_request_error", json!("invalid_api_key")),
            ErrorKind::NotFound => ("invalid_request_error", json!("unknown_url")),
            ErrorKind::TooLarge => ("invalid_request_error", json!("request_too_large")),
            ErrorKind::InvalidRequest => ("invalid_request_error", Value::Null),
            ErrorKind::Replay | ErrorKind::Upstream => ("server_error", Value::Null),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_wire_has_its_routes_and_no_other() {
        let a = Wire::AnthropicMessages;
        assert_eq!(a.route("POST", "/v1/messages"), Some(Route::Generate));
        assert_eq!(
            a.route("POST", "/v1/messages/count_tokens"),
            Some(Route::CountTokens)
        );
        assert_eq!(a.route("GET", "/v1/models"), Some(Route::Models));
        assert_eq!(a.route("GET", "/v1/messages"), None);
        assert_eq!(a.route("POST", "/v1/responses"), None);
        assert_eq!(a.route("GET", "/v1/models/x/../../admin"), None);
        let r = Wire::OpenAiResponses;
        assert_eq!(r.route("POST", "/v1/responses"), Some(Route::Generate));
        assert_eq!(r.route("POST", "/v1/messages/count_tokens"), None);
        let c = Wire::ChatCompletions;
        assert_eq!(
            c.route("POST", "/v1/chat/completions"),
            Some(Route::Generate)
        );
        assert_eq!(c.route("GET", "/v1/models/gpt-x"), Some(Route::Models));
        assert_eq!(c.route("POST", "/v1/embeddings"), None);
    }

    #[test]
    fn wire_names_are_kebab_case() {
        for (w, name) in [
            (Wire::AnthropicMessages, "anthropic-messages"),
            (Wire::OpenAiResponses, "openai-responses"),
            (Wire::ChatCompletions, "chat-completions"),
        ] {
            assert_eq!(serde_json::to_value(w).unwrap(), json!(name));
            assert_eq!(w.as_str(), name);
        }
    }
}
