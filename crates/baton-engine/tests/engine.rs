//! One test binary for the tests of this folder: each file below is a module, so the
//! suite links once instead of once per file (a binary per file filled CI's disk).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

mod support;

mod budget;
mod cancel;
mod carry_context;
mod compression;
mod cut_answer;
mod dev_workflow;
mod external;
mod flushes;
mod lying_usage;
mod on_durable;
mod post_completion;
mod prompt_cache;
mod router;
mod scripted_http;
mod seed_replay;
mod task_run;
mod widget_wait;
