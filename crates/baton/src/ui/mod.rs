//! Terminal presentation shared by the commands: colour (decided once per process) and tables
//! whose columns hold with long values.

pub mod color;
pub mod stdout;
pub mod table;

pub use color::Paint;
