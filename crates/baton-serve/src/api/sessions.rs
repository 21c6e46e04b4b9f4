//! `GET /api/sessions?project=…`: the lifecycle sessions of a project (`.workflow/.maestro/`),
//! newest first, each as `baton ralph session --json` reports it; a session whose
//! `status.json` cannot be used is listed with its error instead of hiding the others.

use super::blocking::blocking;
use super::error::ApiError;
use crate::state::AppState;
use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use baton_lifecycle::ralph::Context;
use baton_lifecycle::ralph::verbs::session;
use serde_json::{Value, json};
use std::path::PathBuf;

/// Sessions listed at most.
pub const MAX_SESSIONS: usize = 200;

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionsParams {
    pub project: PathBuf,
}

pub async fn list(
    State(state): State<AppState>,
    params: Result<Query<SessionsParams>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(params) = params.map_err(|e| {
        ApiError::bad_request("QUERY_INVALID", e.body_text())
            .hint("GET /api/sessions?project=<dir>")
    })?;
    blocking(state.blocking.clone(), move || {
        if !params.project.is_dir() {
            return Err(ApiError::not_found(
                "PROJECT_NOT_FOUND",
                format!("project {} is not a directory", params.project.display()),
            ));
        }
        let ctx = Context::from_env(&params.project, "baton ralph");
        let listing = session::list(&ctx, MAX_SESSIONS);
        let more = listing.more;
        let sessions: Vec<Value> = listing
            .sessions
            .into_iter()
            .map(|(id, summary)| match summary {
                Ok(summary) => summary,
                Err(e) => json!({
                    "ok": false,
                    "session_id": id,
                    "error": {"code": e.code(), "message": e.to_string()},
                }),
            })
            .collect();
        Ok(Json(json!({"sessions": sessions, "more": more})))
    })
    .await
}
