//! The embedded HTML pages. (Placeholder router until the pages land.)

use crate::server::AppState;
use axum::Router;

pub fn routes() -> Router<AppState> {
    Router::new()
}
