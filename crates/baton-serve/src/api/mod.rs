//! `/api/...`: the JSON shapes of the CLI's `--json`, over the same library calls.

mod error;

pub use error::ApiError;

use crate::server::AppState;
use axum::Router;

/// Every API route. Unknown `/api/...` paths answer a JSON 404.
pub fn routes() -> Router<AppState> {
    Router::new().route("/api/{*rest}", axum::routing::any(unknown))
}

async fn unknown() -> ApiError {
    ApiError::not_found("API_NOT_FOUND", "no such API endpoint")
        .hint("see docs/serve.md for the endpoints")
}
