//! Stories mode in the epic: the spec folders and story lists baton-bmad reads (re-exported
//! here), walked by the loop ([`run`]) and shown on the board ([`board`]).

pub use baton_bmad::stories_mode::*;

pub mod board;
pub(crate) mod run;
pub(crate) mod walk;

pub use board::{StoriesBoard, StoryDetail, status};
