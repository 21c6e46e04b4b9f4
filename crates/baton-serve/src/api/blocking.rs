//! The API handlers' blocking calls: store and file work on a blocking thread, under the
//! server's permit and deadline, its failure answered as an [`ApiError`].

use super::error::ApiError;
use crate::bounded::Bounded;

/// Runs store and file work on a blocking thread, under the server's permit and deadline.
pub(super) async fn blocking<T, F>(bound: Bounded, work: F) -> Result<T, ApiError>
where
    F: FnOnce() -> Result<T, ApiError> + Send + 'static,
    T: Send + 'static,
{
    bound
        .run(work)
        .await
        .unwrap_or_else(|e| Err(ApiError::from(&e)))
}
