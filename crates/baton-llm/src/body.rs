//! Reading a response body with a size cap: a server that answers forever (an endless stream
//! of chunks, an endless JSON body, an endless error page) is cut at `max_response_bytes`
//! instead of filling memory.

use crate::error::LlmError;
use futures_util::{Stream, StreamExt};
use std::time::Duration;

/// The answer went past the cap; the message names the setting to raise.
pub fn too_big(cap: usize) -> LlmError {
    LlmError::BadResponse(format!(
        "the answer is larger than {cap} bytes (max_response_bytes under [llm]); it was cut off"
    ))
}

/// Why a capped body stream stopped.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("the answer is larger than the cap")]
    TooBig,
    #[error("{0}")]
    Transport(reqwest::Error),
}

/// The body as a stream of chunks that fails with `TooBig` once more than `cap` bytes came.
pub fn capped_stream(
    response: reqwest::Response,
    cap: usize,
) -> impl Stream<Item = Result<impl AsRef<[u8]>, BodyError>> {
    let mut received = 0usize;
    response.bytes_stream().map(move |chunk| {
        let chunk = chunk.map_err(BodyError::Transport)?;
        received = received.saturating_add(chunk.len());
        if received > cap {
            Err(BodyError::TooBig)
        } else {
            Ok(chunk)
        }
    })
}

/// How reading a whole body failed.
pub enum ReadError {
    TooBig,
    Timeout,
    Transport(reqwest::Error),
}

/// Reads the whole body, chunk by chunk, each chunk within `timeout`, at most `cap` bytes.
pub async fn read_capped(
    response: &mut reqwest::Response,
    cap: usize,
    timeout: Duration,
) -> Result<Vec<u8>, ReadError> {
    if response
        .content_length()
        .is_some_and(|n| n > u64::try_from(cap).unwrap_or(u64::MAX))
    {
        return Err(ReadError::TooBig);
    }
    let mut body = Vec::new();
    loop {
        match tokio::time::timeout(timeout, response.chunk()).await {
            Err(_) => return Err(ReadError::Timeout),
            Ok(Err(e)) => return Err(ReadError::Transport(e)),
            Ok(Ok(None)) => return Ok(body),
            Ok(Ok(Some(chunk))) => {
                if body.len().saturating_add(chunk.len()) > cap {
                    return Err(ReadError::TooBig);
                }
                body.extend_from_slice(&chunk);
            }
        }
    }
}
