//! `baton ralph`: a drop-in for maestro-flow's `maestro ralph` CLI (v0.4.18).
//!
//! Same session files (`.workflow/.maestro/{ralph,maestro}-*/status.json`: schema, field names
//! and order, unknown fields kept, 2-space JSON), same verbs, flags, outputs and exit codes —
//! and what maestro lacks: every read validated with a located error (E010), an exclusive lock
//! and a durable write for every change, a `revision` counter with compare-and-swap, claims
//! with an owner, and the verbs maestro leaves to hand edits of the JSON (`skip`, `pause`,
//! `resume`, `abandon`, `release`, `insert`, `decide`, `new`, `status`).
//!
//! Layout, bottom to top: [`session`] (the status document), [`schema`] validation,
//! [`discovery`] of sessions, [`store`] (lock, durable write, revision), [`manifest`] and
//! [`prompt`] (command files and `next`'s prompt), [`check`] (findings), [`chain`] (stage table
//! and fix-loop templates), [`gate`] and [`milestone_gate`] (a decision gate's rules on the
//! document, shared with baton-lifecycle's session loop), [`verbs`] (one module per verb
//! group).

pub mod anchor;
pub mod bundled_skills;
pub mod chain;
pub mod check;
pub mod claim;
pub mod context;
pub mod decisions;
pub mod discovery;
pub mod error;
pub mod finding;
pub mod gate;
pub mod handle;
pub mod lease;
pub mod manifest;
pub mod milestone_gate;
pub mod prompt;
pub mod schema;
pub mod session;
pub mod skill_config;
pub mod skills;
pub mod store;
#[cfg(test)]
pub(crate) mod testing;
pub mod time;
pub mod verbs;

pub use context::Context;
pub use error::{RalphError, exit};
pub use handle::{Handle, Target};
pub use verbs::Output;
