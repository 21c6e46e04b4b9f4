//! The context budget: how many tokens a request may carry, token estimates, and compression
//! that keeps a long tool loop or chat under the budget without ever breaking the tool
//! protocol. Everything here is pure (no I/O, clock or randomness); the summary model call is
//! an action the driver performs.

mod budget;
pub mod elide;
mod event;
pub mod groups;
pub mod offload;
pub mod plan;
pub mod summary;
pub mod tokens;
pub mod window;

pub use budget::{Budget, CARRY_MAX_TOKENS, CONTEXT_STILL_TOO_LARGE, DEFAULT_CONTEXT_TOKENS};
pub use event::ContextEvent;
pub use plan::{Compaction, Mode, Pending, Plan, Report};
pub use tokens::{Encoding, TokenCounter};
pub use window::{Prepared, Window};
