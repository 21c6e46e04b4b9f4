//! MCP servers as tools: `[mcp.servers.<id>]` of `baton.toml` started over stdio with `rmcp`
//! (the official SDK), lazily, once per run; their tools exposed as `mcp__<id>__<tool>`.
//!
//! A server is someone else's program: it can crash, hang, flood, lie about its tools. So the
//! client runs on its own thread with its own runtime, every request has a deadline, a server
//! that crashes or hangs is killed (its whole process group) and reported as a tool error, and
//! what it says is bounded (tool count, description and schema size, result size) before it
//! reaches a prompt.

mod convert;
mod hub;
mod names;

pub use convert::MAX_RESULT_BYTES;
pub use hub::{McpHub, McpTool};
pub use names::{PREFIX as NAME_PREFIX, split as split_name};

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// `[mcp]` of `baton.toml`: the servers and how long baton waits for them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpConfig {
    pub servers: BTreeMap<String, McpServerConfig>,
    /// One `tools/call`.
    pub call_timeout: Duration,
    /// Starting a server: spawn, `initialize` and listing its tools.
    pub start_timeout: Duration,
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            servers: BTreeMap::new(),
            call_timeout: Duration::from_secs(60),
            start_timeout: Duration::from_secs(30),
        }
    }
}

/// `[mcp.servers.<id>]`: a server started over stdio.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerConfig {
    pub command: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// Working directory (default: the project).
    pub cwd: Option<PathBuf>,
}

/// Why an MCP request failed. Messages name server ids and tool names, never host paths.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    #[error("MCP server '{0}' is not configured")]
    Unknown(String),
    #[error("MCP server '{server}' could not be started: {message}")]
    Start { server: String, message: String },
    #[error("MCP server '{server}' did not answer within {ms} ms; it was stopped")]
    Timeout { server: String, ms: u64 },
    #[error("MCP server '{server}' stopped while answering: {message}")]
    Crashed { server: String, message: String },
    #[error("MCP server '{server}': {message}")]
    Protocol { server: String, message: String },
    #[error("the call to MCP server '{0}' was abandoned because the run is stopping")]
    Aborted(String),
    #[error("the MCP client is shut down")]
    Stopped,
}

impl McpError {
    pub fn code(&self) -> &'static str {
        match self {
            McpError::Unknown(_) => "TOOL_NOT_AVAILABLE",
            McpError::Start { .. } => "MCP_SERVER_UNAVAILABLE",
            McpError::Timeout { .. } => "MCP_TIMEOUT",
            McpError::Crashed { .. } => "MCP_SERVER_CRASHED",
            McpError::Protocol { .. } => "MCP_PROTOCOL_ERROR",
            McpError::Aborted(_) => "EXEC_ABORTED",
            McpError::Stopped => "MCP_SERVER_UNAVAILABLE",
        }
    }
}
