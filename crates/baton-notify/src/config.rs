//! `[[notify.webhooks]]` (and `[serve] public_url`) of the project's `baton.toml`:
//!
//! ```toml
//! [[notify.webhooks]]
//! url = "https://hooks.example.com/baton"
//! events = ["question", "epic.done"]   # default: every event
//! format = "json"                      # or "slack"
//! secret_env = "BATON_WEBHOOK_SECRET"  # the NAME of the variable holding the secret
//! include_path = false                 # true: the project's path on this machine is sent
//! timeout_ms = 10000                   # per try
//! backoff_ms = 1000                    # before the 2nd try, doubled for each next one
//!
//! [serve]
//! public_url = "https://baton.example.com"  # the answer links point at `baton serve` there
//! ```
//!
//! Every mistake is refused when the configuration is read, with a code, the webhook's place
//! (never its URL: a Slack URL is itself a secret) and a hint.

use crate::error::NotifyError;
use crate::event::EventKind;
use serde::Deserialize;
use std::path::Path;
use std::time::Duration;

pub const CONFIG_FILE: &str = "baton.toml";
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
pub const DEFAULT_BACKOFF_MS: u64 = 1_000;
const MAX_TIMEOUT_MS: u64 = 120_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Slack,
}

/// A secret's bytes; never shown.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl Secret {
    pub fn new(bytes: impl Into<Vec<u8>>) -> Secret {
        Secret(bytes.into())
    }

    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// 1-based place in `[[notify.webhooks]]`, to name it without its URL.
    pub index: usize,
    pub url: String,
    /// `None`: every event.
    pub events: Option<Vec<EventKind>>,
    pub format: Format,
    /// The variable's name (shown) and its value (never shown).
    pub secret_env: Option<String>,
    pub secret: Option<Secret>,
    pub include_path: bool,
    pub timeout: Duration,
    pub backoff: Duration,
}

impl Webhook {
    pub fn wants(&self, kind: EventKind) -> bool {
        self.events.as_ref().is_none_or(|e| e.contains(&kind))
    }

    /// How the log and the CLI name it: its place and its host (a URL's path or query may
    /// hold a token).
    pub fn label(&self) -> String {
        format!("#{} {}", self.index, host_of(&self.url))
    }
}

/// The scheme and host of a URL, nothing after.
pub fn host_of(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    // user:password@host: the credentials are not shown either.
    let host = host.rsplit('@').next().unwrap_or(host);
    format!("{scheme}://{host}")
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NotifyConfig {
    pub webhooks: Vec<Webhook>,
    /// `[serve] public_url`, without a trailing slash.
    pub public_url: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NotifyToml {
    #[serde(default)]
    webhooks: Vec<WebhookToml>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WebhookToml {
    url: String,
    events: Option<Vec<String>>,
    format: Option<String>,
    secret_env: Option<String>,
    #[serde(default)]
    include_path: bool,
    timeout_ms: Option<u64>,
    backoff_ms: Option<u64>,
}

impl NotifyConfig {
    /// The configuration of the project at `root` (none without `baton.toml` or `[notify]`);
    /// secrets are read from the environment.
    pub fn load(root: &Path) -> Result<NotifyConfig, NotifyError> {
        Self::load_with(root, &|name| std::env::var(name).ok())
    }

    /// [`Self::load`] with the environment given (tests).
    pub fn load_with(
        root: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<NotifyConfig, NotifyError> {
        let path = root.join(CONFIG_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => {
                return Err(NotifyError::config(
                    "NOTIFY_CONFIG_INVALID",
                    format!("{CONFIG_FILE} cannot be read: {e}"),
                    "check the file's permissions",
                ));
            }
        };
        Self::parse(&text, env)
    }

    /// The `[notify]` and `[serve]` tables of a `baton.toml` text.
    pub fn parse(
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<NotifyConfig, NotifyError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| {
            NotifyError::config(
                "NOTIFY_CONFIG_INVALID",
                format!("{CONFIG_FILE} is not valid TOML: {e}"),
                "fix the line named above",
            )
        })?;
        let public_url = match table.get("serve").and_then(|s| s.get("public_url")) {
            None => None,
            Some(v) => Some(public_url(v)?),
        };
        let Some(notify) = table.get("notify") else {
            return Ok(NotifyConfig {
                webhooks: Vec::new(),
                public_url,
            });
        };
        let parsed: NotifyToml = notify.clone().try_into().map_err(|e| {
            NotifyError::config(
                "NOTIFY_CONFIG_INVALID",
                format!("{CONFIG_FILE} [notify]: {e}"),
                "each [[notify.webhooks]] takes url, events, format, secret_env, include_path, timeout_ms, backoff_ms",
            )
        })?;
        let webhooks = parsed
            .webhooks
            .into_iter()
            .enumerate()
            .map(|(i, w)| webhook(i + 1, w, env))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(NotifyConfig {
            webhooks,
            public_url,
        })
    }
}

fn place(index: usize) -> String {
    format!("{CONFIG_FILE} [[notify.webhooks]] #{index}")
}

fn webhook(
    index: usize,
    w: WebhookToml,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Webhook, NotifyError> {
    let at = place(index);
    if !(w.url.starts_with("http://") || w.url.starts_with("https://"))
        || host_of(&w.url).ends_with("://")
    {
        return Err(NotifyError::config(
            "NOTIFY_URL_INVALID",
            format!("{at}: url is not an http:// or https:// URL"),
            "give the endpoint's full URL, e.g. https://hooks.slack.com/services/…",
        ));
    }
    let events = match w.events {
        None => None,
        Some(names) => Some(
            names
                .iter()
                .map(|n| {
                    EventKind::parse(n).ok_or_else(|| {
                        NotifyError::config(
                            "NOTIFY_EVENT_UNKNOWN",
                            format!("{at}: no event is named {n:?}"),
                            format!("events are: {}", EventKind::names().join(", ")),
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
    };
    let format = match w.format.as_deref() {
        None | Some("json") => Format::Json,
        Some("slack") => Format::Slack,
        Some(other) => {
            return Err(NotifyError::config(
                "NOTIFY_FORMAT_UNKNOWN",
                format!("{at}: format {other:?} is not json or slack"),
                "format = \"json\" (the default) or \"slack\"",
            ));
        }
    };
    let secret = match &w.secret_env {
        None => None,
        Some(name) => {
            let valid = !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit());
            if !valid {
                return Err(NotifyError::config(
                    "NOTIFY_SECRET_ENV_INVALID",
                    format!("{at}: secret_env {name:?} is not a variable name"),
                    "secret_env names the variable that holds the secret (e.g. BATON_WEBHOOK_SECRET), not the secret itself",
                ));
            }
            match env(name) {
                Some(v) if !v.is_empty() => Some(Secret::new(v.into_bytes())),
                _ => {
                    return Err(NotifyError::config(
                        "NOTIFY_SECRET_MISSING",
                        format!("{at}: the variable {name} (secret_env) is not set"),
                        format!(
                            "export {name}=<the secret the receiver checks>, or remove secret_env"
                        ),
                    ));
                }
            }
        }
    };
    let ms = |v: Option<u64>, default: u64, what: &str| -> Result<Duration, NotifyError> {
        let v = v.unwrap_or(default);
        if v == 0 || v > MAX_TIMEOUT_MS {
            return Err(NotifyError::config(
                "NOTIFY_CONFIG_INVALID",
                format!("{at}: {what} = {v} is out of range"),
                format!("{what} is in milliseconds, 1 to {MAX_TIMEOUT_MS}"),
            ));
        }
        Ok(Duration::from_millis(v))
    };
    Ok(Webhook {
        index,
        url: w.url,
        events,
        format,
        secret_env: w.secret_env,
        secret,
        include_path: w.include_path,
        timeout: ms(w.timeout_ms, DEFAULT_TIMEOUT_MS, "timeout_ms")?,
        backoff: ms(w.backoff_ms, DEFAULT_BACKOFF_MS, "backoff_ms")?,
    })
}

fn public_url(v: &toml::Value) -> Result<String, NotifyError> {
    let s = v.as_str().unwrap_or("");
    if !(s.starts_with("http://") || s.starts_with("https://")) {
        return Err(NotifyError::config(
            "SERVE_PUBLIC_URL_INVALID",
            format!("{CONFIG_FILE} [serve] public_url is not an http:// or https:// URL"),
            "give the address people open `baton serve` at, e.g. public_url = \"https://baton.example.com\"",
        ));
    }
    Ok(s.trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "HOOK_SECRET").then(|| "s3cret".to_string())
    }

    fn code(text: &str) -> (&'static str, String, String) {
        let e = NotifyConfig::parse(text, &env).unwrap_err();
        (e.code(), e.to_string(), e.hint())
    }

    #[test]
    fn a_full_webhook_is_read_with_defaults() {
        let c = NotifyConfig::parse(
            "[serve]\npublic_url = \"https://baton.example.com/\"\n\
             [[notify.webhooks]]\nurl = \"http://127.0.0.1:9/h\"\n\
             [[notify.webhooks]]\nurl = \"https://hooks.slack.com/services/T/B/X\"\nformat = \"slack\"\n\
             events = [\"question\", \"epic.done\"]\nsecret_env = \"HOOK_SECRET\"\ntimeout_ms = 500\n",
            &env,
        )
        .unwrap();
        assert_eq!(c.public_url.as_deref(), Some("https://baton.example.com"));
        assert_eq!(c.webhooks.len(), 2);
        let (a, b) = (&c.webhooks[0], &c.webhooks[1]);
        assert_eq!(a.format, Format::Json);
        assert!(a.wants(EventKind::SessionDone));
        assert_eq!(a.timeout, Duration::from_millis(DEFAULT_TIMEOUT_MS));
        assert_eq!(b.format, Format::Slack);
        assert!(b.wants(EventKind::Question) && !b.wants(EventKind::StoryDone));
        assert_eq!(b.secret.as_ref().unwrap().bytes(), b"s3cret");
        assert_eq!(b.timeout, Duration::from_millis(500));
        // The label never holds the URL's path (a Slack URL's token).
        assert_eq!(b.label(), "#2 https://hooks.slack.com");
        assert!(!format!("{b:?}").contains("s3cret"));
    }

    #[test]
    fn no_file_or_no_table_is_no_webhook() {
        let dir = tempfile::tempdir().unwrap();
        assert!(NotifyConfig::load(dir.path()).unwrap().webhooks.is_empty());
        let c = NotifyConfig::parse("[autopilot]\nmax_review_cycles = 2\n", &env).unwrap();
        assert!(c.webhooks.is_empty() && c.public_url.is_none());
    }

    #[test]
    fn mistakes_are_refused_with_their_place_code_and_hint() {
        let (c, m, h) = code(
            "[[notify.webhooks]]\nurl = \"http://a\"\n[[notify.webhooks]]\nurl = \"http://b\"\nevents = [\"story.merged\"]\n",
        );
        assert_eq!(c, "NOTIFY_EVENT_UNKNOWN");
        assert!(
            m.contains("[[notify.webhooks]] #2") && m.contains("story.merged"),
            "{m}"
        );
        assert!(h.contains("session.waiting"), "{h}");

        let (c, m, _) = code("[[notify.webhooks]]\nurl = \"ftp://x/secret-token\"\n");
        assert_eq!(c, "NOTIFY_URL_INVALID");
        assert!(!m.contains("secret-token"), "{m}");

        assert_eq!(
            code("[[notify.webhooks]]\nurl = \"http://a\"\nformat = \"teams\"\n").0,
            "NOTIFY_FORMAT_UNKNOWN"
        );
        let (c, m, h) =
            code("[[notify.webhooks]]\nurl = \"http://a\"\nsecret_env = \"UNSET_ONE\"\n");
        assert_eq!(c, "NOTIFY_SECRET_MISSING");
        assert!(
            m.contains("UNSET_ONE") && h.contains("export UNSET_ONE"),
            "{m} {h}"
        );
        assert_eq!(
            code("[[notify.webhooks]]\nurl = \"http://a\"\nsecret_env = \"abc def\"\n").0,
            "NOTIFY_SECRET_ENV_INVALID"
        );
        let (c, m, _) = code("[[notify.webhooks]]\nurl = \"http://a\"\nsceret_env = \"X\"\n");
        assert_eq!(c, "NOTIFY_CONFIG_INVALID");
        assert!(m.contains("sceret_env"), "{m}");
        assert_eq!(
            code("[[notify.webhooks]]\nurl = \"http://a\"\ntimeout_ms = 0\n").0,
            "NOTIFY_CONFIG_INVALID"
        );
        assert_eq!(
            code("[serve]\npublic_url = \"baton.example.com\"\n").0,
            "SERVE_PUBLIC_URL_INVALID"
        );
        assert_eq!(code("[notify\n").0, "NOTIFY_CONFIG_INVALID");
    }
}
