//! One test binary for the tests of this folder: each file below is a module, so the
//! suite links once instead of once per file (a binary per file filled CI's disk).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

#[path = "support/session_player.rs"]
mod session_player;
#[path = "support/session_world.rs"]
mod session_world;

mod bundled_skills;
mod ralph_invariants;
mod session_apply;
mod session_budget;
mod session_decompose;
mod session_demo;
mod session_flushes;
mod session_gate;
mod session_gate_review;
mod session_intervene;
mod session_milestones;
mod session_run;
mod session_scope;
mod session_start;
mod session_step_tools;
mod session_tick;
