//! The live upstream: its URLs, and the headers a request takes there and an answer brings
//! back (the CLI's credentials out, the operator's in, hop-by-hop headers dropped).

use crate::error::GatewayError;
use crate::wire::Wire;
use hyper::HeaderMap;
use hyper::header::{HeaderName, HeaderValue};
use std::collections::BTreeMap;
use std::sync::Once;
use std::time::Duration;

/// Headers never passed on, in either direction: hop-by-hop ones, lengths (the body is
/// re-framed), credentials and cookies of either side, and `accept-encoding` (a compressed
/// answer could not be read for its usage).
const DROPPED: &[&str] = &[
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "accept-encoding",
    "authorization",
    "x-api-key",
    "api-key",
    "cookie",
    "set-cookie",
    // Which organisation or project a key bills is the operator's choice, not the CLI's.
    "openai-organization",
    "openai-project",
];

/// The request headers kept in the record: the API's own, never a credential.
const RECORDED_REQUEST: &[&str] = &[
    "anthropic-version",
    "anthropic-beta",
    "content-type",
    "accept",
    "openai-beta",
];

/// The answer headers kept in the record.
const RECORDED_RESPONSE: &[&str] = &["content-type", "request-id", "x-request-id", "retry-after"];

/// The Messages API version sent when the CLI names none.
const ANTHROPIC_VERSION: &str = "2023-06-01";

fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Fails only if another provider was installed first, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The HTTP client for the upstream: no redirects (one would carry the key elsewhere), no
/// overall deadline (an answer may stream for many minutes), a bound on silence.
pub fn client() -> Result<reqwest::Client, GatewayError> {
    install_crypto_provider();
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(30))
        .read_timeout(Duration::from_secs(600))
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("baton-gateway/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| GatewayError::Client(e.to_string()))
}

/// Checks a live upstream's base URL.
pub fn check_base(base_url: &str) -> Result<(), GatewayError> {
    let ok = ["http://", "https://"]
        .iter()
        .any(|s| base_url.starts_with(s) && base_url.len() > s.len());
    if ok {
        Ok(())
    } else {
        Err(GatewayError::Config(format!(
            "the upstream base URL {base_url:?} is not an http(s) URL"
        )))
    }
}

/// The upstream URL of a request for `path_and_query` (which starts with `/v1/`).
pub fn url(base_url: &str, path_and_query: &str) -> String {
    let base = base_url.trim_end_matches('/');
    match base.strip_suffix("/v1") {
        // `https://api.openai.com/v1` + `/responses`.
        Some(_) => format!(
            "{base}{}",
            path_and_query.strip_prefix("/v1").unwrap_or(path_and_query)
        ),
        None => format!("{base}{path_and_query}"),
    }
}

fn dropped(name: &str) -> bool {
    DROPPED.contains(&name)
}

/// The headers sent upstream: the CLI's, less what [`DROPPED`] names, plus the operator's key
/// in the wire's own header.
pub fn request_headers(wire: Wire, from_cli: &HeaderMap, api_key: &str) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in from_cli {
        if !dropped(name.as_str()) {
            out.append(name.clone(), value.clone());
        }
    }
    let key = HeaderValue::from_str(api_key).ok().map(|mut v| {
        v.set_sensitive(true);
        v
    });
    match wire {
        Wire::AnthropicMessages => {
            if let Some(key) = key {
                out.insert(HeaderName::from_static("x-api-key"), key);
            }
            if !out.contains_key("anthropic-version") {
                out.insert(
                    HeaderName::from_static("anthropic-version"),
                    HeaderValue::from_static(ANTHROPIC_VERSION),
                );
            }
        }
        Wire::OpenAiResponses | Wire::ChatCompletions => {
            if let Ok(mut bearer) = HeaderValue::from_str(&format!("Bearer {api_key}")) {
                bearer.set_sensitive(true);
                out.insert(hyper::header::AUTHORIZATION, bearer);
            }
        }
    }
    out
}

/// The headers the CLI gets back: the upstream's, less what [`DROPPED`] names.
pub fn response_headers(from_upstream: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in from_upstream {
        if !dropped(name.as_str()) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

fn chosen(headers: &HeaderMap, names: &[&str]) -> BTreeMap<String, String> {
    names
        .iter()
        .filter_map(|n| {
            let values: Vec<&str> = headers
                .get_all(*n)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .collect();
            (!values.is_empty()).then(|| ((*n).to_string(), values.join(", ")))
        })
        .collect()
}

/// The request headers kept in the record.
pub fn recorded_request(headers: &HeaderMap) -> BTreeMap<String, String> {
    chosen(headers, RECORDED_REQUEST)
}

/// The answer headers kept in the record.
pub fn recorded_response(headers: &HeaderMap) -> BTreeMap<String, String> {
    chosen(headers, RECORDED_RESPONSE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_follow_the_vendors_base_conventions() {
        assert_eq!(
            url("https://api.anthropic.com", "/v1/messages?beta=true"),
            "https://api.anthropic.com/v1/messages?beta=true"
        );
        assert_eq!(
            url("https://api.openai.com/v1/", "/v1/responses"),
            "https://api.openai.com/v1/responses"
        );
        assert_eq!(
            url("http://127.0.0.1:9/v1", "/v1/chat/completions"),
            "http://127.0.0.1:9/v1/chat/completions"
        );
        assert!(check_base("ftp://x").is_err() && check_base("https://").is_err());
    }

    #[test]
    fn the_clis_credentials_are_swapped_for_the_operators() {
        let mut cli = HeaderMap::new();
        cli.insert("x-api-key", HeaderValue::from_static("run-token"));
        cli.insert(
            "authorization",
            HeaderValue::from_static("Bearer run-token"),
        );
        cli.insert("anthropic-beta", HeaderValue::from_static("b1"));
        cli.insert("accept-encoding", HeaderValue::from_static("gzip"));
        cli.insert("x-stainless-lang", HeaderValue::from_static("js"));
        let a = request_headers(Wire::AnthropicMessages, &cli, "sk-op");
        assert_eq!(a["x-api-key"], "sk-op");
        assert!(a.get("authorization").is_none() && a.get("accept-encoding").is_none());
        assert_eq!(a["anthropic-beta"], "b1");
        assert_eq!(a["anthropic-version"], ANTHROPIC_VERSION);
        assert_eq!(a["x-stainless-lang"], "js");
        let o = request_headers(Wire::OpenAiResponses, &cli, "sk-op");
        assert_eq!(o["authorization"], "Bearer sk-op");
        assert!(o.get("x-api-key").is_none() && o.get("anthropic-version").is_none());
        let recorded = recorded_request(&a);
        assert!(!format!("{recorded:?}").contains("sk-op"));
    }
}
