//! `baton serve`: a local web page and a JSON API over the same library functions the CLI
//! calls. Handlers hold no business logic: they parse a request, call `baton-engine`,
//! `baton-store`, `baton-epic` or `baton-lifecycle`, and render the answer.
//!
//! - [`auth`]: the token, the cookie, the `Host` check and the security headers.
//! - [`api`]: `/api/...`, the JSON shapes of the CLI's `--json`.
//! - [`pages`]: the embedded HTML pages (server-rendered, a little JS, works offline).
//! - [`bounded`]: the permit and deadline every handler's blocking call goes through.
//! - [`connections`]: accepting connections with a header deadline, a limit and a bounded stop.
//! - [`slots`]: which connection gives its slot up at the limit (the longest waiting for headers).
//! - [`state`]: the state shared by handlers; [`hosts`]: the `Host` values it answers to.
//! - [`server`]: binding, the router, and shutdown.
//! - [`drive`]: starting and answering runs in the background (`baton run`/`answer`).
//! - [`jobs`]: runs and epics driven in the background, and what the server remembers.
//! - [`demo`]: the demo runs' copies of the sample project and their records.

pub mod api;
pub mod auth;
pub mod bounded;
pub mod connections;
pub mod demo;
pub mod drive;
pub mod hosts;
pub mod jobs;
pub mod pages;
pub mod server;
pub mod slots;
pub mod state;
pub mod token;

pub use api::ApiError;
pub use server::{AppState, Bound, ServeError, ServeOptions, bind, router};
