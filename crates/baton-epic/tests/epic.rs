//! One test binary for the tests of this folder: each file below is a module, so the
//! suite links once instead of once per file (a binary per file filled CI's disk).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

mod support;

mod bmad_generations;
mod epic_budget;
mod epic_git;
mod epic_hostile;
mod epic_inputs;
mod epic_loop;
mod epic_method;
mod epic_method_guard;
mod epic_parallel;
mod epic_parallel_figures;
mod epic_parallel_git;
mod epic_retrospective;
mod epic_stories_mode;
mod epic_traces;
mod epic_unrecognized;
mod epic_verify_sandbox;
