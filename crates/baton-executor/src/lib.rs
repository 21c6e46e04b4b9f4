//! Coding-agent CLIs as executors: baton is their harness. Each CLI has an [`adapter`] (its
//! command line, what its per-run home holds, how its event stream reads); the CLI runs confined,
//! with no network but baton's gateway, which holds the real key, the budget and the record.

pub mod adapter;
mod adapters;
pub mod check;
pub mod claude_code;
pub mod codex;
pub mod config;
pub mod find;
pub mod group;
pub mod kind;
pub mod opencode;
pub mod run;
pub mod task;
pub mod testing;

pub use adapter::{Adapter, Event, Invocation, Launch};
pub use config::{ExecutorConfig, read_executors};
pub use kind::{ExecutorKind, Wire};
pub use run::{ExecutorError, Job, Mode, Outcome, SandboxPaths, run};
