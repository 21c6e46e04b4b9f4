//! Parallel stories each work in a git worktree of their own ([`worktree`]): made from the
//! epic's baseline commit, recorded durably so a restarted orchestrator finds them, checked with
//! the project's verify commands ([`verify`]) and merged back into the project one at a time
//! ([`merge`]). git always runs confined and with a configuration nothing in a tree can extend
//! ([`git`]). The epic autopilot decides when; this crate knows how.

pub mod error;
pub mod git;
pub mod merge;
pub mod publish;
pub mod verify;
pub mod worktree;
