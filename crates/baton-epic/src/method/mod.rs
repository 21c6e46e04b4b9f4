//! The project's BMAD method as the epic's phases use it: which installed skill or workflow a
//! phase runs (found and rendered by `baton_bmad::method`, re-exported here), how it is described
//! to the user ([`describe`]), the prompt a phase's run gets ([`prompt`]) and the snapshot that
//! tells when the method changed between runs ([`snapshot`]).

pub use baton_bmad::method::*;

pub mod describe;
pub mod prompt;
pub mod snapshot;
