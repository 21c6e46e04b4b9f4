//! baton's orchestrators. Part 1 is [`ralph`]: maestro's `ralph` lifecycle-session CLI
//! (`.workflow/.maestro/*/status.json`) with a real lock, durable writes, a revision counter and
//! the verbs maestro leaves to hand edits. The [`epic`] autopilot drives BMAD's implementation
//! phase story after story (seed 004's files), each phase an ordinary baton run. Part 2 of
//! lifecycle sessions, [`session`], turns the model's step verdicts and gate answers into
//! ralph verbs.

pub mod bundle;
pub mod epic;
mod json_kind;
pub mod ralph;
pub mod session;
pub mod untrusted;
