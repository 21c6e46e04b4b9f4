//! baton's lifecycle sessions. [`session`] drives a session unattended (`baton session`): the
//! model's step verdicts and gate answers become ralph verbs, and the build phase (inference,
//! chain, decomposition) makes new sessions. [`ralph`] is crate baton-ralph, maestro's `ralph`
//! lifecycle-session CLI, under its old path, with `decide`'s milestone gate planned by the
//! session build rules.

pub mod ralph;
pub mod session;
