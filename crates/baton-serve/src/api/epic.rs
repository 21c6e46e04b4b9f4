//! `/api/epic`: the board of `baton epic status --json`, and answering a story's question
//! (`baton epic answer`), which resumes the epic in the background.

use super::blocking::blocking;
use super::error::ApiError;
use super::runs::rejected;
use crate::state::AppState;
use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use baton_engine::model_choice::{self, Orchestrated, Requested};
use baton_epic::{Command, EpicError, EpicSettings, ModelSource};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoardParams {
    pub project: PathBuf,
    /// Only this epic (`epic-N` or `N`).
    pub epic: Option<String>,
}

/// `GET /api/epic?project=…[&epic=…]` → the board of `baton epic status --json` (with
/// `parallel`, the stories in flight and why the others wait, for a parallel epic), plus
/// `invocation`: how the last answer this server drove ended (absent when none).
pub async fn board(
    State(state): State<AppState>,
    params: Result<Query<BoardParams>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(params) = params.map_err(|e| {
        ApiError::bad_request("QUERY_INVALID", e.body_text()).hint("GET /api/epic?project=<dir>")
    })?;
    blocking(state.blocking.clone(), move || {
        let board = baton_epic::status_board(&state.store, &params.project, params.epic.as_deref())
            .map_err(|e| epic_error(&e))?;
        let mut json = serde_json::to_value(&board)
            .map_err(|e| ApiError::internal("EPIC_BOARD_FAILED", e.to_string()))?;
        if let Some(outcome) = state.jobs.outcome_of(&key(&params.project)) {
            json["invocation"] = outcome;
        }
        Ok(Json(json))
    })
    .await
}

#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnswerBody {
    pub project: PathBuf,
    /// The story whose question is answered.
    pub story: String,
    pub text: String,
    /// The question id (default: the first one waiting).
    pub question: Option<String>,
    /// Model name for the phases that follow.
    pub model: Option<String>,
    /// The endpoint's wire protocol, `openai` or `anthropic` (default: the one the epic's
    /// newest phase run was started with).
    pub api: Option<String>,
    /// A directory of per-run traces to replay instead of a model.
    pub replay: Option<PathBuf>,
}

/// `POST /api/epic/answer` → 202 `{accepted: true}`; the answer is recorded and the epic goes
/// on in the background, as `baton epic answer` does.
pub async fn answer(
    State(state): State<AppState>,
    body: Result<Json<AnswerBody>, JsonRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let Json(body) = body.map_err(rejected)?;
    blocking(state.blocking.clone(), move || start_answer(&state, body)).await
}

fn start_answer(state: &AppState, body: AnswerBody) -> Result<(StatusCode, Json<Value>), ApiError> {
    // Refused here, not in the background, when another orchestrator holds the project.
    let board = baton_epic::status(&body.project, None).map_err(|e| epic_error(&e))?;
    if board.live {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "EPIC_BUSY",
            "a `baton epic` process is running on this project",
        )
        .hint("answer when it pauses, or stop it with `baton epic stop`"));
    }
    // What the epic's newest phase run remembers (its model and endpoint, or its traces),
    // unless the body says otherwise: what `baton epic answer` does.
    let requested = Requested {
        model: body.model.clone(),
        base_url: None,
        api: crate::drive::api_field(body.api.as_deref())?,
        replay: body.replay.clone(),
    };
    let runs: Vec<String> = board
        .epics
        .iter()
        .flat_map(|e| &e.stories)
        .flat_map(|s| &s.runs)
        .map(|r| r.run_id.clone())
        .collect();
    let recorded = model_choice::newest_record(&state.store, &runs);
    let env = |k: &str| std::env::var(k).ok();
    let chosen = model_choice::for_orchestration(
        &requested,
        recorded.as_ref(),
        state.store.home(),
        &body.project,
        &env,
    )
    .map_err(|e| {
        let general = e.configuration.then(|| {
            "pass model (and set OPENAI_API_KEY / OPENAI_BASE_URL where baton serve runs), or replay: a directory of traces".to_string()
        });
        ApiError::bad_request(e.code, e.message).maybe_hint(e.hint.or(general))
    })?;
    let store = state.store.clone();
    let jobs = state.jobs.clone();
    let cancel = state.shutdown.child_token();
    let key = key(&body.project);
    let project = body.project.clone();
    state.jobs.spawn(move |runtime| {
        let source = match &chosen {
            Orchestrated::Live(m) => ModelSource::Live(m.as_dyn()),
            Orchestrated::Traces(dir) => ModelSource::Replay(dir.clone()),
        };
        let settings = EpicSettings {
            source,
            record: None,
            ask: None,
            on_event: None,
            cancel,
            dry_run: false,
            budget: Default::default(),
        };
        let command = Command::Answer {
            story: body.story,
            question: body.question,
            text: body.text,
        };
        let outcome =
            match runtime.block_on(baton_epic::execute(&store, &project, command, settings)) {
                Ok(report) => baton_epic::report::to_json(&report),
                Err(e) => json!({"error": {"code": e.code, "message": e.message, "hint": e.hint}}),
            };
        jobs.remember_outcome(&key, outcome);
    });
    Ok((StatusCode::ACCEPTED, Json(json!({"accepted": true}))))
}

/// Where the outcome of a project's epic answer is remembered.
fn key(project: &Path) -> String {
    let root = std::fs::canonicalize(project).unwrap_or_else(|_| project.to_path_buf());
    format!("epic:{}", root.display())
}

fn epic_error(e: &EpicError) -> ApiError {
    let status = if e.code == "PROJECT_NOT_FOUND" {
        StatusCode::NOT_FOUND
    } else if e.is_usage() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    ApiError::new(status, e.code, e.message.clone()).maybe_hint(e.hint.clone())
}
