//! baton's model gateway: a per-run loopback HTTP server a coding-agent CLI (Claude Code,
//! Codex, OpenCode) uses as its model API.
//!
//! The CLI presents a per-run token; the gateway forwards to the real upstream with the
//! operator's key (which the CLI never holds), streams each answer back as it arrives and
//! unchanged, asks the run's [`Meter`] before each model request (a refused request never
//! reaches the upstream), reads the usage each answer reports, and appends every exchange to
//! a record that [`Upstream::Replay`] serves again with no network.

pub mod auth;
pub mod config;
pub mod count;
pub mod error;
pub mod exchange;
pub mod meter;
pub mod record;
pub mod request;
pub mod scrub;
pub mod server;
pub mod tap;
pub mod upstream;
pub mod wire;

pub use auth::new_token;
pub use config::{GatewayConfig, Limits, Upstream};
pub use error::GatewayError;
pub use meter::{Admission, Meter, Refusal, Settled};
pub use record::Exchange;
pub use server::Gateway;
pub use wire::Wire;
