//! The epic's errors are baton-bmad's: a stable code, a message that names the file and field at
//! fault, and a hint, whether a BMAD file or a phase failed.

pub use baton_bmad::error::{BmadError as EpicError, ErrorKind, Result};
