//! The ToolHost: what the model can do to files and programs, and nothing more.
//!
//! Three mounts (`@project` read-write, `@pkg` read-only, `@state` read-write), file tools
//! (`fs.read`, `fs.list`, `fs.search`, `fs.write`, `fs.apply_patch`), `ui.ask_user`,
//! `workflow.rewind`, commands in a sandbox (`terminal.run`, `shell.exec`) and MCP servers'
//! tools (`mcp__<server>__<tool>`); every write of the run state goes through the transition
//! guard; every call, refused or not, leaves one audit line. Results never contain a host
//! path.

pub mod audit;
mod call;
pub mod config;
pub mod files;
pub mod host;
pub mod mcp;
pub mod mounts;
pub mod policy;
mod read;
pub mod result;
pub mod search;
pub mod specs;
pub mod terminal;
pub mod widgets;

pub use config::ToolsConfig;
pub use host::{
    AbortFn, CallContext, ConfirmationGate, RunBinding, ToolCall, ToolHost, ToolOutcome,
    ToolRuntime,
};
pub use mcp::{McpConfig, McpError, McpHub, McpServerConfig, McpTool};
pub use mounts::Mounts;
pub use policy::{EffectivePolicy, SystemToolSettings, TerminalSettings};
pub use result::ToolError;
pub use specs::ToolSpec;
pub use terminal::TerminalRuntime;
pub use widgets::Question;
