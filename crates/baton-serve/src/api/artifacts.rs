//! `GET /api/runs/{id}/artifacts/{*path}`: a file of a run, read through the same mounts the
//! tools use (`@project/…`, `@pkg/…`, `@state/…`): the path is parsed as the model's paths
//! are (no `..`, no absolute or encoded paths), then opened beneath the mount's directory
//! handle, so a symlink that leads outside fails in the kernel. Errors name the mount path,
//! never a host path. Always served as text or bytes, never as a page.

use super::blocking::blocking;
use super::error::ApiError;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use baton_store::RunKind;
use baton_tools::mounts::{self, Mount, Mounts};
use baton_tools::{ToolError, files};

/// The largest file shown.
pub const MAX_ARTIFACT: u64 = 4 * 1024 * 1024;

pub async fn artifact(
    State(state): State<AppState>,
    Path((id, path)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let bytes = blocking(state.blocking.clone(), move || read(&state, &id, &path)).await?;
    let content_type = if std::str::from_utf8(&bytes).is_ok() {
        "text/plain; charset=utf-8"
    } else {
        "application/octet-stream"
    };
    Ok((
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_DISPOSITION, "inline"),
        ],
        bytes,
    )
        .into_response())
}

fn read(state: &AppState, id: &str, raw: &str) -> Result<Vec<u8>, ApiError> {
    let (project, run) = state.store.find_run(id).map_err(|e| ApiError::from(&e))?;
    let path = mounts::parse(raw).map_err(|e| tool_error(&e))?;
    let paths = project.run_paths(&run.run_id);
    let pkg = if run.kind == RunKind::Task {
        if path.mount == Mount::Pkg {
            return Err(ApiError::not_found(
                "ENOENT",
                "a task run has no package: @pkg is empty",
            ));
        }
        // Never read: the request is not for @pkg.
        paths.state_dir.clone()
    } else {
        let (_, installed) = project
            .pinned_package(&state.store, &run)
            .map_err(|e| ApiError::from(&e))?;
        installed.path
    };
    // A run made in a git worktree of the project reads there; once the worktree is removed
    // (its story merged), its files are the project's.
    let mount = Some(project.mount_of(&run))
        .filter(|m| m.is_dir())
        .unwrap_or(project.root());
    let mounts = Mounts::open(mount, &pkg, &paths.state_dir).map_err(|e| {
        ApiError::internal(
            "MOUNT_UNAVAILABLE",
            format!("the run's directories cannot be opened: {}", e.kind()),
        )
    })?;
    files::read_all(&mounts, &path, MAX_ARTIFACT).map_err(|e| tool_error(&e))
}

fn tool_error(e: &ToolError) -> ApiError {
    let status = match e.code {
        "ENOENT" => StatusCode::NOT_FOUND,
        "E_READ_LIMIT" => StatusCode::PAYLOAD_TOO_LARGE,
        "EISDIR" => StatusCode::BAD_REQUEST,
        "E_SANDBOX_VIOLATION" => StatusCode::FORBIDDEN,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    ApiError::new(status, e.code, e.message.clone())
}
