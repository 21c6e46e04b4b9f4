//! Anthropic's Messages API (`POST {base_url}/messages`): request bodies with prompt-cache
//! breakpoints, and decoding of answers, whole or streamed, into baton's provider-neutral
//! types. The HTTP side (retries, timeouts, caps) is the same client as for OpenAI's protocol.
//!
//! Thinking blocks (`thinking` with its signature, `redacted_thinking`) are kept on the
//! assistant message under [`THINKING_BLOCKS`] and sent back unchanged, as the API requires
//! for a tool loop with thinking on.

mod blocks;
pub mod request;
pub mod stream;

pub use blocks::{THINKING_BLOCKS, parse_response};
pub use request::{BodyOptions, MAX_BREAKPOINTS, request_body};
pub use stream::MessageStream;

/// The API version every request names (`anthropic-version`).
pub const VERSION: &str = "2023-06-01";
