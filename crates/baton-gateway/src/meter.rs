//! The budget's side of the gateway: a [`Meter`] admits each model request before it is sent
//! and is told what each one cost after.

use crate::wire::Wire;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A model request about to be sent (or replayed).
#[derive(Debug, Clone, PartialEq)]
pub struct Admission {
    pub wire: Wire,
    /// The request's path, query included.
    pub path: String,
    pub model: Option<String>,
    /// baton's own estimate of the request's prompt (see [`crate::count`]).
    pub prompt_tokens: u64,
    /// The cap on the answer, after the gateway set or lowered it; 0 when neither the request
    /// nor the gateway's configuration caps it.
    pub max_output_tokens: u64,
}

/// Why the meter refused a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Refusal {
    /// `BUDGET_EXCEEDED`.
    pub code: String,
    pub message: String,
    pub details: Value,
}

/// A model exchange that ended (answered, failed, or cut by a client that hung up).
#[derive(Debug, Clone, PartialEq)]
pub struct Settled {
    pub wire: Wire,
    pub path: String,
    pub model: Option<String>,
    /// The upstream's HTTP status (a non-2xx answer is usually not billed).
    pub status: u16,
    /// The upstream's usage fields (cache fields included), where it reported any; figures
    /// that cannot be counts are left out.
    pub reported: Option<baton_llm::Usage>,
    /// baton's own count of the prompt sent.
    pub counted_prompt: u64,
    /// baton's own count of the answer received (text, thinking, tool arguments).
    pub counted_completion: u64,
    /// From the request's arrival to the answer's last byte.
    pub millis: u64,
}

/// The run's budget, as the gateway sees it.
pub trait Meter: Send + Sync {
    /// Whether the request may be sent; a refusal stops it before the upstream sees it.
    fn admit(&self, a: &Admission) -> Result<(), Refusal>;
    /// What an admitted request cost.
    fn settle(&self, s: &Settled);
}
