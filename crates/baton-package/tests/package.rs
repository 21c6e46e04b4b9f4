//! One test binary for the tests of this folder: each file below is a module, so the
//! suite links once instead of once per file (a binary per file filled CI's disk).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

mod broken_packages;
mod docs_required_fields;
mod fuzz_readers;
mod install_ids;
mod zip_packages;
