//! One test binary for the tests of this folder: each file below is a module, so the
//! suite links once instead of once per file (a binary per file filled CI's disk).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

mod anthropic_client;
mod caching_provider;
mod client_faults;
mod conformance;
mod hostile_server;
mod probe;
mod trace_replay;
