//! Argument types (clap) that several commands read. A command's own arguments live in its
//! module; `cli.rs` gathers them all into the command line.

pub mod budget;
pub mod demo;
pub mod model;
pub mod package;
pub mod project;
pub mod run;

pub use budget::BudgetArgs;
pub use model::{ApiArg, ContextArg, ModelArgs};
