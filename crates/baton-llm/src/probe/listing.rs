//! The model's context window, when the provider lists it: `GET {base_url}/models/{id}`, else
//! the model's entry in `GET {base_url}/models`, with the chat client's key header. Read
//! fields: OpenRouter's, Together's and Fireworks' `context_length`, vLLM's `max_model_len`,
//! Groq's `context_window`, Mistral's `max_context_length`, Anthropic's `max_input_tokens`.

use super::failure::Outcome;
use super::prober::{CONTEXT, Probe};
use super::report::{Check, Verdict};
use crate::body::read_capped;
use crate::config::{Api, known_context_tokens};
use reqwest::Url;
use serde_json::Value;

/// A listing of every model a router serves runs to a few megabytes.
const LISTING_MAX_BYTES: usize = 16 * 1024 * 1024;

/// Fields that hold the window, on the model's object (the first found wins).
const FIELDS: &[&str] = &[
    "context_length",
    "max_model_len",
    "context_window",
    "max_context_length",
    "max_input_tokens",
    "input_token_limit",
    "inputTokenLimit",
];
/// Objects inside the model's object that may hold one of them.
const NESTED: &[&str] = &["top_provider", "metadata"];

/// No model has a window outside these (a figure beyond them is not a window).
const PLAUSIBLE: std::ops::RangeInclusive<u64> = 1_024..=100_000_000;

pub(crate) async fn check(probe: &Probe) -> Outcome {
    let model = probe.model_name().to_string();
    let listed = match listed_window(probe, &model).await {
        Ok(found) => found,
        Err(why) => return unknown(probe, &why).into(),
    };
    let Some((listed, field)) = listed else {
        return unknown(
            probe,
            "the endpoint does not list this model's context window",
        )
        .into();
    };
    compare(probe, listed, field).into()
}

/// The window and the field it was read from: `Ok(None)` when the listing has none, `Err`
/// with why when there is no listing.
async fn listed_window(probe: &Probe, model: &str) -> Result<Option<(u64, String)>, String> {
    let base = probe.config.base_url.as_str();
    let mut one = Url::parse(&format!("{base}/models")).map_err(|e| e.to_string())?;
    if let Ok(mut segments) = one.path_segments_mut() {
        // A model id may hold slashes (`vendor/model`): each part is a path segment.
        segments.extend(model.split('/'));
    }
    if let Ok(v) = get_json(probe, one).await
        && let Some(found) = find(&v, model)
    {
        return Ok(Some(found));
    }
    let mut all = Url::parse(&format!("{base}/models")).map_err(|e| e.to_string())?;
    if probe.config.api == Api::Anthropic {
        // Paginated, 20 a page by default.
        all.set_query(Some("limit=1000"));
    }
    let v = get_json(probe, all).await?;
    Ok(find(&v, model))
}

/// One GET with the key header the chat client sends; the JSON body, or why not.
async fn get_json(probe: &Probe, url: Url) -> Result<Value, String> {
    let http = reqwest::Client::builder()
        .connect_timeout(probe.config.timeout)
        .user_agent(concat!("baton/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| e.to_string())?;
    let mut builder = http.get(url).header("accept", "application/json");
    if let Some(key) = &probe.config.api_key {
        builder = match probe.config.api {
            Api::OpenAi => builder.bearer_auth(key.expose()),
            Api::Anthropic => builder
                .header("x-api-key", key.expose())
                .header("anthropic-version", "2023-06-01"),
        };
    }
    let deadline = probe.options.deadline;
    let mut response = match tokio::time::timeout(deadline, builder.send()).await {
        Err(_) => {
            return Err(format!(
                "the model listing did not answer within {}s",
                deadline.as_secs()
            ));
        }
        Ok(Err(e)) => {
            return Err(format!(
                "the model listing could not be read ({})",
                cause(&e)
            ));
        }
        Ok(Ok(r)) => r,
    };
    let status = response.status();
    if !status.is_success() {
        return Err(format!(
            "the model listing answered HTTP {}",
            status.as_u16()
        ));
    }
    let bytes = read_capped(&mut response, LISTING_MAX_BYTES, deadline)
        .await
        .map_err(|_| "the model listing could not be read whole".to_string())?;
    serde_json::from_slice(&bytes).map_err(|_| "the model listing is not JSON".to_string())
}

/// reqwest's message without its URL (which may carry a secret in its query).
fn cause(e: &reqwest::Error) -> String {
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    let mut last = String::from("request failed");
    while let Some(s) = source {
        last = s.to_string();
        source = s.source();
    }
    last
}

/// The window of `model` in a listing: the object itself (`/models/{id}`), or its entry in a
/// list (`data`, or a bare array).
fn find(v: &Value, model: &str) -> Option<(u64, String)> {
    let is_model = |e: &Value| {
        ["id", "name"].iter().any(|k| {
            e.get(k)
                .and_then(Value::as_str)
                .is_some_and(|id| id == model || id.strip_prefix("models/") == Some(model))
        })
    };
    if v.get("id").is_none_or(|_| is_model(v))
        && let Some(found) = window_of(v)
    {
        return Some(found);
    }
    let list = v.get("data").or(Some(v)).and_then(Value::as_array)?;
    list.iter().find(|e| is_model(e)).and_then(window_of)
}

fn window_of(entry: &Value) -> Option<(u64, String)> {
    let read = |o: &Value, prefix: &str| {
        FIELDS.iter().find_map(|f| {
            let n = o.get(f)?;
            let n = n.as_u64().or_else(|| n.as_str()?.trim().parse().ok())?;
            PLAUSIBLE.contains(&n).then(|| (n, format!("{prefix}{f}")))
        })
    };
    read(entry, "").or_else(|| {
        NESTED.iter().find_map(|k| {
            entry
                .get(k)
                .filter(|o| o.is_object())
                .and_then(|o| read(o, &format!("{k}.")))
        })
    })
}

/// What baton assumes for this model, and from which setting.
fn assumed(probe: &Probe) -> (u64, &'static str) {
    let c = &probe.config;
    let model = probe.model_name();
    if c.model_context_tokens.contains_key(model) || c.context_tokens.is_some() {
        (c.context_tokens(), "context_tokens in the configuration")
    } else if known_context_tokens(model).is_some() {
        (c.context_tokens(), "baton's table of known models")
    } else {
        (c.context_tokens(), "baton's default")
    }
}

fn setting(probe: &Probe, tokens: impl std::fmt::Display) -> String {
    format!(
        "context_tokens = {tokens} under [models.\"{}\"] in baton.toml",
        probe.model_name()
    )
}

fn unknown(probe: &Probe, why: &str) -> Check {
    let (tokens, from) = assumed(probe);
    Check::new(
        CONTEXT,
        Verdict::Skipped,
        format!("{why}; baton assumes {tokens} tokens ({from})"),
    )
    .hint(format!(
        "if that is not the model's window, set {}",
        setting(probe, "<its window>")
    ))
    .figure("assumedContextTokens", tokens)
}

fn compare(probe: &Probe, listed: u64, field: String) -> Check {
    let (tokens, from) = assumed(probe);
    let check = Check::new(CONTEXT, Verdict::Pass, "")
        .figure("contextTokens", listed)
        .figure("field", field)
        .figure("assumedContextTokens", tokens);
    if tokens > listed {
        return Check {
            verdict: Verdict::Warn,
            detail: format!(
                "the provider lists {listed} tokens, less than the {tokens} baton assumes \
                 ({from}): long runs would be refused for too long a prompt"
            ),
            hint: Some(format!("set {}", setting(probe, listed))),
            ..check
        };
    }
    let hint = (tokens < listed).then(|| {
        format!(
            "baton compresses a run's history past 80 % of {tokens}; to use the whole window, set {}",
            setting(probe, listed)
        )
    });
    Check {
        detail: format!("the provider lists {listed} tokens; baton assumes {tokens} ({from})"),
        hint,
        ..check
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_providers_field_is_read() {
        let cases = [
            // OpenRouter's list entry: its own figure before the top provider's.
            (
                json!({"data": [{"id": "m", "context_length": 200_000, "top_provider": {"context_length": 100_000}}]}),
                Some((200_000, "context_length")),
            ),
            (
                json!({"data": [{"id": "m", "top_provider": {"context_length": 100_000}}]}),
                Some((100_000, "top_provider.context_length")),
            ),
            (
                json!({"id": "m", "max_model_len": 32_768}),
                Some((32_768, "max_model_len")),
            ),
            (
                json!({"id": "m", "context_window": 131_072}),
                Some((131_072, "context_window")),
            ),
            (
                json!({"id": "m", "max_context_length": 128_000}),
                Some((128_000, "max_context_length")),
            ),
            // Anthropic's model object.
            (
                json!({"id": "m", "type": "model", "max_input_tokens": 200_000, "max_tokens": 64_000}),
                Some((200_000, "max_input_tokens")),
            ),
            (
                json!({"models": [], "data": [{"name": "models/m", "inputTokenLimit": 1_048_576}]}),
                Some((1_048_576, "inputTokenLimit")),
            ),
            (
                json!([{"id": "m", "metadata": {"context_length": "65536"}}]),
                Some((65_536, "metadata.context_length")),
            ),
            // Another model's page, an implausible figure, no figure: nothing.
            (json!({"id": "other", "context_length": 8_192}), None),
            (json!({"id": "m", "context_length": 7}), None),
            (
                json!({"object": "list", "data": [{"id": "m", "owned_by": "me"}]}),
                None,
            ),
        ];
        for (listing, want) in cases {
            let got = find(&listing, "m");
            assert_eq!(
                got.as_ref().map(|(n, f)| (*n, f.as_str())),
                want,
                "{listing}"
            );
        }
    }
}
