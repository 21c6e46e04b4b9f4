//! MCP servers as tools: `[mcp.servers.<id>]` of `baton.toml` started over stdio with `rmcp`
//! (the official SDK), lazily, once per run; their tools exposed as `mcp__<id>__<tool>`.
//!
//! A server is someone else's program: it can crash, hang, flood, lie about its tools. So the
//! client runs on its own thread with its own runtime, every request has a deadline, a server
//! that crashes or hangs is killed (its whole process group) and reported as a tool error, and
//! what it says is bounded (tool count, description and schema size, result size) before it
//! reaches a prompt.

mod config;
mod convert;
mod error;
mod hub;
mod names;

pub use config::{McpConfig, McpServerConfig};
pub use convert::MAX_RESULT_BYTES;
pub use error::McpError;
pub use hub::{McpHub, McpTool};
pub use names::{PREFIX as NAME_PREFIX, split as split_name};
