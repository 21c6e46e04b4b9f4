//! The ToolHost: what the model can do to files, and nothing more.
//!
//! Three mounts (`@project` read-write, `@pkg` read-only, `@state` read-write), file tools
//! (`fs.read`, `fs.list`, `fs.search`, `fs.write`, `fs.apply_patch`), `ui.ask_user` and
//! `workflow.rewind`; every write of the run state goes through the transition guard; every
//! call, refused or not, leaves one audit line. Results never contain a host path.

pub mod audit;
mod files;
pub mod host;
pub mod mounts;
pub mod policy;
mod read;
pub mod result;
pub mod search;
pub mod specs;
pub mod widgets;

pub use host::{CallContext, ConfirmationGate, RunBinding, ToolCall, ToolHost, ToolOutcome};
pub use mounts::Mounts;
pub use policy::{EffectivePolicy, SystemToolSettings};
pub use result::ToolError;
pub use specs::ToolSpec;
pub use widgets::Question;
