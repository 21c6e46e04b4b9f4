//! Why an MCP request failed, and the tool error code each failure is reported with.

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
