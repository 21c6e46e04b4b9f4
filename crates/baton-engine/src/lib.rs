//! The engine: the prompt protocol, the run loop as a sans-IO state machine, and the async
//! driver that runs it against a model, the ToolHost and the store.
//!
//! Nothing here prints to a terminal.

pub mod agent;
pub mod bundled_demo;
pub mod call_ids;
pub mod composer;
pub mod context;
pub mod conversation;
pub mod driver;
mod durable;
mod error;
mod event;
pub mod external;
pub mod inspect;
pub mod machine;
pub mod model_choice;
pub mod router;
pub(crate) mod run_io;
pub mod runner;
pub mod spend;
pub mod task;
pub mod task_driver;
pub mod task_run;
pub mod widget_answer;

pub use composer::{Composer, Intent};
pub use context::{Budget, ContextEvent, TokenCounter};
pub use driver::{
    Driver, DurableFuture, DurablePoint, DurableStop, EngineError, EngineEvent, OnDurable, Outcome,
    RunReport,
};
pub use machine::{Action, ContextPolicy, DEFAULT_MAX_TURNS, Input, Machine, StateSnapshot};
pub use run_io::ANSWER_TRUNCATED;
