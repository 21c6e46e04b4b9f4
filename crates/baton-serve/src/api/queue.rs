//! `/api/queue`: the work queue's status, as `baton queue status --json` prints it (the same
//! library call), and answering a unit that waits for a person (as `baton answer UNIT --db`),
//! when the server was started with `--db`. The database is reached under the server's permit
//! and deadline like every other handler's work: a database that does not answer gives an
//! error with its code, never a stuck server.

use super::error::ApiError;
use crate::state::AppState;
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use baton_queue::{DbConfig, QueueError, Status};
use baton_worker::WorkerError;
use baton_worker::answers::{QUEUE_ANSWER_INVALID, QUEUE_UNIT_NOT_WAITING};
use serde_json::Value;

/// Rows per list when no `limit` is given (as `baton queue status`).
pub const DEFAULT_LIMIT: i64 = 50;
/// The most rows per list a request may ask for.
pub const MAX_LIMIT: i64 = 500;

#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusParams {
    pub limit: Option<i64>,
}

/// The server's queue, or why there is none.
pub fn configured(state: &AppState) -> Result<DbConfig, ApiError> {
    state.queue.clone().ok_or_else(|| {
        ApiError::not_found(
            "QUEUE_NOT_CONFIGURED",
            "this server was started without a work queue",
        )
        .hint("start it with `baton serve --db URL` (or --db-env NAME) to show the queue")
    })
}

/// The queue's status under the server's bound: `Err` with the code of the database's error,
/// or `SERVE_BUSY` / `SERVE_TIMEOUT`.
pub async fn read_status(state: &AppState, limit: i64) -> Result<Status, ApiError> {
    let config = configured(state)?;
    let limit = limit.clamp(0, MAX_LIMIT);
    state
        .blocking
        .run_async(async move { Status::read(&config, limit).await })
        .await
        .map_err(|e| ApiError::from(&e))?
        .map_err(|e| ApiError::from(&e))
}

/// `GET /api/queue?limit=N` → what `baton queue status --json` prints.
pub async fn status(
    State(state): State<AppState>,
    params: Result<Query<StatusParams>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(params) =
        params.map_err(|e| ApiError::bad_request("QUERY_INVALID", e.body_text()))?;
    let status = read_status(&state, params.limit.unwrap_or(DEFAULT_LIMIT)).await?;
    serde_json::to_value(&status)
        .map(Json)
        .map_err(|e| ApiError::internal("SERVE_FAILED", e.to_string()))
}

/// The answer to a waiting unit's question.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnswerBody {
    pub text: String,
}

/// `POST /api/queue/units/{id}/answer` `{"text"}` → 202 `{unit, runId, database, state}`: the
/// answer is stored with the unit, which goes back to the queue; the next worker goes on with
/// it. A unit that does not wait is 409 `QUEUE_UNIT_NOT_WAITING`, an unusable answer 400
/// `QUEUE_ANSWER_INVALID`, an unknown unit 404 `QUEUE_UNIT_NOT_FOUND`.
pub async fn answer(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Json<AnswerBody>, JsonRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let Json(body) = body.map_err(super::runs::rejected)?;
    let unit: i64 = id.parse().map_err(|_| {
        ApiError::bad_request("QUEUE_INVALID_INPUT", format!("{id:?} is not a unit's id"))
            .hint("`GET /api/queue` lists the units waiting for a person")
    })?;
    let config = configured(&state)?;
    let receipt = state
        .blocking
        .run_async(async move { baton_worker::answer_unit(&config, unit, &body.text).await })
        .await
        .map_err(|e| ApiError::from(&e))?
        .map_err(|e| worker_error(&e))?;
    let v = serde_json::to_value(&receipt)
        .map_err(|e| ApiError::internal("SERVE_FAILED", e.to_string()))?;
    Ok((StatusCode::ACCEPTED, Json(v)))
}

fn worker_error(e: &WorkerError) -> ApiError {
    let status = match e {
        WorkerError::Queue(q) => return ApiError::from(q),
        _ if e.code() == QUEUE_UNIT_NOT_WAITING => StatusCode::CONFLICT,
        _ if e.code() == QUEUE_ANSWER_INVALID => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    ApiError::new(status, e.code(), e.to_string()).maybe_hint(e.hint())
}

/// The HTTP status of a queue error: a database that cannot be reached or used is 503, an
/// unknown unit 404, a unit in the wrong state 409, a bad request 400.
pub fn http_status(e: &QueueError) -> StatusCode {
    match e {
        QueueError::Unreachable { .. }
        | QueueError::AuthFailed { .. }
        | QueueError::Tls { .. }
        | QueueError::DatabaseMissing { .. }
        | QueueError::SchemaMissing { .. }
        | QueueError::SchemaNewer { .. }
        | QueueError::SchemaOutdated { .. } => StatusCode::SERVICE_UNAVAILABLE,
        QueueError::UnitNotFound { .. } => StatusCode::NOT_FOUND,
        QueueError::UnitFinished { .. } | QueueError::UnitState { .. } => StatusCode::CONFLICT,
        QueueError::InvalidInput(_) | QueueError::UrlInvalid { .. } => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<&QueueError> for ApiError {
    fn from(e: &QueueError) -> ApiError {
        ApiError::new(http_status(e), e.code(), e.to_string()).maybe_hint(e.hint())
    }
}
