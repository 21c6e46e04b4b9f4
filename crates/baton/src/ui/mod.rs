//! Terminal presentation shared by the commands: colour (decided once per process) and tables
//! whose columns hold with long values.

pub mod color;
pub mod json;
pub mod numbers;
pub mod stdout;
pub mod table;

/// Model and project text on a terminal: control characters and escape sequences shown as
/// visible escapes (`\x1b`), the same function the library crates' text views use.
pub use baton_store::terminal::{visible, visible_line};
pub use color::Paint;
pub use json::print_json;
pub use numbers::{cache_writes, thousands};
