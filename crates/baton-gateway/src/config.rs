//! What a gateway serves: the wire, where answers come from, the per-run token, the budget,
//! the record, and the bounds on what it reads and keeps.

use crate::meter::Meter;
use crate::wire::Wire;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Clone)]
pub struct GatewayConfig {
    pub wire: Wire,
    pub upstream: Upstream,
    /// The per-run token the CLI must present (`x-api-key`, or `Authorization: Bearer`).
    pub token: String,
    pub meter: Option<Arc<dyn Meter>>,
    /// Append-only JSONL of the exchanges (live mode only).
    pub record: Option<PathBuf>,
    /// The cap set on each model request (`max_tokens`, `max_output_tokens` or
    /// `max_completion_tokens`), lowering a larger one.
    pub max_output_tokens: Option<u64>,
}

/// Where answers come from.
#[derive(Clone)]
pub enum Upstream {
    /// The real API. `base_url` as the vendor writes it: `https://api.anthropic.com` (the
    /// request's `/v1/...` path is appended) or `https://api.openai.com/v1` (a base ending in
    /// `/v1` gets the path after its `/v1`).
    Live { base_url: String, api_key: String },
    /// The recorded exchanges of `record`, served in order; nothing leaves the machine.
    Replay { record: PathBuf },
}

// By hand: the key and the token never reach a log line.
impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Upstream::Live { base_url, .. } => f
                .debug_struct("Live")
                .field("base_url", base_url)
                .field("api_key", &"<hidden>")
                .finish(),
            Upstream::Replay { record } => {
                f.debug_struct("Replay").field("record", record).finish()
            }
        }
    }
}

impl std::fmt::Debug for GatewayConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayConfig")
            .field("wire", &self.wire)
            .field("upstream", &self.upstream)
            .field("token", &"<hidden>")
            .field("meter", &self.meter.as_ref().map(|_| "<meter>"))
            .field("record", &self.record)
            .field("max_output_tokens", &self.max_output_tokens)
            .finish()
    }
}

/// Bounds on what the gateway reads and keeps.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// A request body above this is refused with 413.
    pub max_request_body: usize,
    /// hyper's read buffer: a request head (line and headers) larger than this is refused
    /// with 431.
    pub max_request_head: usize,
    /// The most of one answer kept in the record (and read for its usage when it is not a
    /// stream); the client still gets all of it.
    pub max_recorded_response: usize,
    /// The longest server-sent event read for usage; a longer one is passed on unread.
    pub max_event: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_request_body: 32 * 1024 * 1024,
            max_request_head: 64 * 1024,
            max_recorded_response: 16 * 1024 * 1024,
            max_event: 4 * 1024 * 1024,
        }
    }
}
