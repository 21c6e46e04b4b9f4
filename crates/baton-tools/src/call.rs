//! One tool call as the model made it, who makes it, and how a long call learns that the run
//! is stopping: what the host, the audit log and the MCP client all take.

use crate::policy::EffectivePolicy;
use std::sync::Arc;

/// One tool call from the model.
#[derive(Debug, Clone, Copy)]
pub struct ToolCall<'a> {
    pub id: &'a str,
    pub name: &'a str,
    /// The raw JSON arguments string, as the model sent it.
    pub arguments: &'a str,
}

/// Who is calling, for enforcement and the audit line.
#[derive(Debug, Clone, Copy)]
pub struct CallContext<'a> {
    pub agent_id: &'a str,
    pub node_id: &'a str,
    pub policy: &'a EffectivePolicy,
}

/// Tells a long tool call (a command) that the run is stopping.
pub type AbortFn = Arc<dyn Fn() -> bool + Send + Sync>;
