//! The gateway end to end on loopback: a CLI's side (reqwest), the gateway, and a strict
//! played upstream per wire.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

mod bounds;
mod budget;
mod common;
mod forward;
mod replay;
mod usage;
