//! baton's lifecycle sessions. [`ralph`] is maestro's `ralph` lifecycle-session CLI
//! (`.workflow/.maestro/*/status.json`) with a real lock, durable writes, a revision counter and
//! the verbs maestro leaves to hand edits. [`session`] drives a session unattended: the model's
//! step verdicts and gate answers become ralph verbs.

pub mod ralph;
pub mod session;
