//! The API's error answer: `{"error": {"code", "message", "hint"}}` with an HTTP status.

use crate::bounded::BlockingError;
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use baton_engine::runner::RunnerError;
use baton_store::RunError;
use serde_json::json;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub hint: Option<String>,
    /// More for programs (the diagnostics of an invalid package).
    pub details: Option<Box<serde_json::Value>>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            hint: None,
            details: None,
        }
    }

    pub fn hint(mut self, hint: impl Into<String>) -> ApiError {
        self.hint = Some(hint.into());
        self
    }

    pub fn maybe_hint(mut self, hint: Option<String>) -> ApiError {
        self.hint = hint;
        self
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn not_found(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, code, message)
    }

    pub fn internal(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, code, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut error = json!({"code": self.code, "message": self.message, "hint": self.hint});
        if let Some(details) = self.details {
            error["details"] = *details;
        }
        let body = json!({ "error": error });
        (self.status, Json(body)).into_response()
    }
}

/// A blocking call the server gave up on: 503 `SERVE_BUSY`, 504 `SERVE_TIMEOUT`, 500.
impl From<&BlockingError> for ApiError {
    fn from(e: &BlockingError) -> ApiError {
        ApiError::new(e.status(), e.code(), e.to_string()).maybe_hint(e.hint().map(String::from))
    }
}

/// The status a store error answers with: an unknown run is 404, an ambiguous prefix 400, a
/// store that cannot be read 500.
impl From<&RunError> for ApiError {
    fn from(e: &RunError) -> ApiError {
        let status = match e {
            RunError::RunNotFound { .. } => StatusCode::NOT_FOUND,
            RunError::Store(_) | RunError::IndexInvalid { .. } | RunError::StateInit(_) => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
            _ => StatusCode::BAD_REQUEST,
        };
        ApiError::new(status, e.code(), e.to_string()).maybe_hint(e.hint())
    }
}

/// A run that is busy or cannot take the command is 409; a mistake in the request 400; a
/// failure while doing it 500.
impl From<&RunnerError> for ApiError {
    fn from(e: &RunnerError) -> ApiError {
        let status = match e {
            RunnerError::Run(run) => return ApiError::from(run),
            RunnerError::Busy(_) | RunnerError::Refused { .. } => StatusCode::CONFLICT,
            RunnerError::InvalidPackage(_) => StatusCode::UNPROCESSABLE_ENTITY,
            _ if e.is_usage() => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let mut error = ApiError::new(status, e.code(), e.to_string()).maybe_hint(e.hint());
        if let RunnerError::InvalidPackage(report) = e {
            error.details = serde_json::to_value(report.diagnostics.errors().collect::<Vec<_>>())
                .ok()
                .map(Box::new);
        }
        error
    }
}
