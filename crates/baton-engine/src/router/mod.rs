//! The command router of an agent session (agent-first entry): what a line typed to an agent
//! means — show the menu, start a workflow, run a script or a prompt, resume, dismiss, ask
//! which item was meant, or just chat. Pure: it reads the package, never the disk.

mod command;
pub mod menu;
mod refs;
mod resolve;

pub use command::{
    ActionRef, Candidate, Confidence, DataRef, ExecRef, Kind, ResolvedCommand, RouteError,
    WorkflowRef,
};
pub use menu::{Menu, MenuItem, Surface, Target};
pub use resolve::resolve;
