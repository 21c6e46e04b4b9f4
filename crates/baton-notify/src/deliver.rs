//! One event to one webhook: the body in the webhook's format, its headers, up to
//! [`TRIES`] tries with doubling backoff, each try logged.

use crate::config::{Format, Webhook};
use crate::event::Event;
use crate::log::{self, Entry, Outcome};
use crate::sign;
use std::path::Path;
use std::sync::Once;
use std::time::{Duration, Instant};

pub const TRIES: u32 = 5;
pub const EVENT_HEADER: &str = "X-Baton-Event";
pub const DELIVERY_HEADER: &str = "X-Baton-Delivery";

/// The bytes sent to `webhook` for `event` (signed as they are).
pub fn body(event: &Event, webhook: &Webhook, public_url: Option<&str>) -> Vec<u8> {
    let value = match webhook.format {
        Format::Json => event.json(webhook, public_url),
        Format::Slack => crate::slack::body(event, webhook, public_url),
    };
    value.to_string().into_bytes()
}

fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Fails only if another provider was installed first, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The client every delivery of a thread uses; no redirect is followed (a signed body goes
/// to the configured endpoint only).
pub fn client() -> Result<reqwest::Client, String> {
    install_crypto_provider();
    reqwest::Client::builder()
        .user_agent(concat!("baton/", env!("CARGO_PKG_VERSION")))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {}", e.without_url()))
}

/// One try: the HTTP status (2xx), or the status and error of a failed try.
async fn attempt(
    client: &reqwest::Client,
    webhook: &Webhook,
    event: &Event,
    id: &str,
    body: &[u8],
) -> Result<u16, (Option<u16>, String)> {
    let mut req = client
        .post(&webhook.url)
        .timeout(webhook.timeout)
        .header("Content-Type", "application/json")
        .header(EVENT_HEADER, event.kind.as_str())
        .header(DELIVERY_HEADER, id)
        .body(body.to_vec());
    if let Some(secret) = &webhook.secret {
        req = req.header(sign::HEADER, sign::signature(secret.bytes(), body));
    }
    match req.send().await {
        Ok(r) if r.status().is_success() => Ok(r.status().as_u16()),
        Ok(r) => Err((Some(r.status().as_u16()), format!("HTTP {}", r.status()))),
        // The error's URL is left out: it may hold the webhook's token.
        Err(e) if e.is_timeout() => Err((None, format!("no answer within {:?}", webhook.timeout))),
        Err(e) => Err((None, chain(e.without_url()))),
    }
}

/// An error with its causes (`error sending request: … Connection refused`).
fn chain(e: reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        let s = c.to_string();
        if !text.contains(&s) {
            text.push_str(": ");
            text.push_str(&s);
        }
        cause = c.source();
    }
    text
}

/// Tries `event` on `webhook` up to `tries` times, waiting `backoff`, then twice as long…
/// between tries; logs each try in the store at `home`. Returns the last entry.
pub async fn deliver(
    client: &reqwest::Client,
    home: &Path,
    webhook: &Webhook,
    public_url: Option<&str>,
    event: &Event,
    tries: u32,
) -> Entry {
    let id = event.delivery_id();
    let body = body(event, webhook, public_url);
    let mut wait = webhook.backoff;
    let mut n = 1;
    loop {
        let started = Instant::now();
        let result = attempt(client, webhook, event, &id, &body).await;
        let last = n >= tries;
        let (outcome, status, error) = match result {
            Ok(s) => (Outcome::Delivered, Some(s), None),
            Err((s, e)) if last => (Outcome::Failed, s, Some(e)),
            Err((s, e)) => (Outcome::Retry, s, Some(e)),
        };
        let entry = Entry {
            at: crate::event::now_rfc3339(),
            delivery: id.clone(),
            event: event.kind.as_str().to_string(),
            project: event.project.clone(),
            webhook: webhook.label(),
            attempt: n,
            outcome,
            status,
            error,
            millis: started.elapsed().as_millis() as u64,
        };
        // The log is best effort: a full disk never stops a delivery nor the run.
        let _ = log::append(home, &entry);
        if outcome != Outcome::Retry {
            return entry;
        }
        tokio::time::sleep(wait).await;
        wait = wait.saturating_mul(2).min(Duration::from_secs(300));
        n += 1;
    }
}
