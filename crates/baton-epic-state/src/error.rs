//! The epic's errors (baton-bmad's): a stable code, a message naming what is at fault, a hint.

pub use baton_bmad::error::{BmadError as EpicError, ErrorKind, Result};
