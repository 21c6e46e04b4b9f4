//! `/api/...`: the JSON shapes of the CLI's `--json`, over the same library calls. Errors are
//! `{"error": {"code", "message", "hint"}}` with the HTTP status that fits.

mod artifacts;
mod blocking;
mod epic;
mod error;
mod events;
pub mod queue;
mod runs;
mod sessions;

pub use error::ApiError;
pub use events::{CHUNK, MAX_LINE, QUEUE};

use crate::state::AppState;
use axum::Router;
use axum::routing::{any, get, post};

/// Every API route. Unknown `/api/...` paths answer a JSON 404.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/runs", get(runs::list).post(runs::start))
        .route("/api/runs/{id}", get(runs::show))
        .route("/api/runs/{id}/events", get(events::events))
        .route("/api/runs/{id}/answer", post(runs::answer))
        .route("/api/runs/{id}/artifacts/{*path}", get(artifacts::artifact))
        .route("/api/epic", get(epic::board))
        .route("/api/epic/answer", post(epic::answer))
        .route("/api/sessions", get(sessions::list))
        .route("/api/queue", get(queue::status))
        .route("/api/queue/units/{id}/answer", post(queue::answer))
        .route("/api", any(unknown))
        .route("/api/{*rest}", any(unknown))
}

async fn unknown() -> ApiError {
    ApiError::not_found("API_NOT_FOUND", "no such API endpoint")
        .hint("see docs/serve.md for the endpoints")
}
