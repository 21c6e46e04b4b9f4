//! BMAD 7's ticket tree as the epic's work source (experimental: the format is a draft upstream).
//! The tree is baton-bmad's ([`baton_bmad::tickets`]); here a walk over it is chosen ([`walk`]),
//! fed to the story loop with each ticket file as the story file ([`run`]), and shown
//! ([`board`]). A walk's epic id is `tickets:<folder>` (an initiative, or one of its epics).

pub mod board;
pub(crate) mod run;
pub(crate) mod walk;

pub use board::{TicketsBoard, status};
