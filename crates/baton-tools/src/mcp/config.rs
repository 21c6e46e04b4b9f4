//! `[mcp]` of `baton.toml`: which servers to start and how long to wait for them.

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
