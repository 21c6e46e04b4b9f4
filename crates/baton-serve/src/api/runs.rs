//! `/api/runs`: the list, one run, start, answer. Each handler is a call to the library on a
//! blocking thread (the store reads files).

use super::blocking::blocking;
use super::error::ApiError;
use crate::drive::{self, AnswerBody, StartBody};
use crate::state::AppState;
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use baton_engine::inspect::{self, ListError, ListQuery};
use serde_json::Value;
use std::path::PathBuf;

/// Runs per page when no `limit` is given (the table's size in `baton runs list`).
const DEFAULT_LIMIT: usize = 50;

#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    pub project: Option<PathBuf>,
    pub phase: Option<String>,
    pub workflow: Option<String>,
    pub limit: Option<usize>,
    pub cursor: Option<String>,
}

/// `GET /api/runs?project&phase&workflow&limit&cursor` →
/// `{runs: [<as runs list --json>], nextCursor, warnings}`.
pub async fn list(
    State(state): State<AppState>,
    params: Result<Query<ListParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(params) =
        params.map_err(|e| ApiError::bad_request("QUERY_INVALID", e.body_text()))?;
    blocking(state.blocking.clone(), move || {
        let query = ListQuery {
            project: params.project.as_deref(),
            phase: params.phase.as_deref().filter(|p| !p.is_empty()),
            workflow: params.workflow.as_deref().filter(|w| !w.is_empty()),
            limit: params.limit.unwrap_or(DEFAULT_LIMIT),
            cursor: params.cursor.as_deref().filter(|c| !c.is_empty()),
        };
        match inspect::list(&state.store, &query) {
            Ok(page) => Ok(Json(page.to_json())),
            Err(ListError::Run(e)) => Err(ApiError::from(&e)),
            Err(e @ ListError::BadQuery(_)) => Err(ApiError::bad_request(e.code(), e.to_string())),
        }
    })
    .await
}

/// `GET /api/runs/{id}` → what `baton runs show --json` prints, plus `invocation`: how the
/// last invocation this server drove ended (absent when it drove none).
pub async fn show(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    blocking(state.blocking.clone(), move || {
        let view = inspect::show(&state.store, &id).map_err(|e| ApiError::from(&e))?;
        let mut json = view.to_json();
        if let Some(outcome) = state.jobs.outcome_of(&view.run.run_id) {
            json["invocation"] = outcome;
        }
        Ok(Json(json))
    })
    .await
}

/// `POST /api/runs` → 202 `{runId, projectRoot, phase}`; the run goes on in the background.
pub async fn start(
    State(state): State<AppState>,
    body: Result<Json<StartBody>, JsonRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let Json(body) = body.map_err(rejected)?;
    blocking(state.blocking.clone(), move || {
        drive::start(&state, body).map(|v| (StatusCode::ACCEPTED, Json(v)))
    })
    .await
}

/// `POST /api/runs/{id}/answer` → 202 `{runId, projectRoot, phase}`; the run goes on in the
/// background.
pub async fn answer(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Json<AnswerBody>, JsonRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let Json(body) = body.map_err(rejected)?;
    blocking(state.blocking.clone(), move || {
        drive::answer(&state, &id, body).map(|v| (StatusCode::ACCEPTED, Json(v)))
    })
    .await
}

/// A body that is not the JSON asked for.
pub(crate) fn rejected(e: JsonRejection) -> ApiError {
    ApiError::new(e.status(), "BODY_INVALID", e.body_text())
        .hint("send a JSON object with Content-Type: application/json (see docs/serve.md)")
}
