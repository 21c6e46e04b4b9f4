//! baton's orchestrators. Part 1 is [`ralph`]: maestro's `ralph` lifecycle-session CLI
//! (`.workflow/.maestro/*/status.json`) with a real lock, durable writes, a revision counter and
//! the verbs maestro leaves to hand edits.

pub mod ralph;
