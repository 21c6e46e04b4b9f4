//! What baton knows about BMAD, and nothing of runs or loops: where a project's BMAD
//! configuration says things are ([`bmad_config`], every generation's layers; [`layout`], the
//! implementation-artifacts folder), the `sprint-status.yaml` grammar with a reader and a
//! comment-keeping writer ([`sprint`], [`keys`]), where story and spec files are
//! ([`story_files`]), stories mode's spec folders ([`stories_mode`]), the implementation phases
//! BMAD defines ([`phase`]) and the installed method's skills and workflows, found and rendered
//! ([`method`]). The epic autopilot, `baton validate` and the web page build on it.

pub mod bmad_config;
pub mod error;
pub mod keys;
pub mod layout;
pub mod method;
pub mod phase;
pub mod pipeline;
pub mod sprint;
pub mod stories_mode;
pub mod story_files;
pub mod tickets;

pub use error::{BmadError, ErrorKind};
pub use phase::Phase;
