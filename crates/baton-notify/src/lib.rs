//! Webhooks: the events of an epic or a session (a question asked, a story done, the epic
//! paused…) sent to the endpoints of `[[notify.webhooks]]` in `baton.toml`, as JSON or in
//! Slack's incoming-webhook shape, signed with HMAC-SHA256 when a secret is configured.
//!
//! Delivery never blocks nor fails the run: a [`Notifier`] queues each event (bounded) for a
//! background thread per webhook, which tries it up to five times with backoff and appends each
//! outcome to a log in the store ([`log`]). On [`Notifier::finish`] (or drop), what is still
//! pending gets a short bounded grace period.

pub mod config;
pub mod deliver;
pub mod error;
pub mod event;
pub mod log;
pub mod notifier;
pub mod sample;
pub mod sign;
pub mod slack;

pub use config::{Format, NotifyConfig, Webhook};
pub use error::NotifyError;
pub use event::{Answer, Event, EventKind, QuestionInfo};
pub use notifier::Notifier;
