//! The HTTP `ChatModel`: `POST {base_url}/chat/completions` with retries, timeouts,
//! streaming and cancellation.

use crate::config::LlmConfig;
use crate::error::LlmError;
use crate::model::{BoxFuture, CallOptions, ChatModel};
use crate::names::ToolNames;
use crate::types::{ChatRequest, ChatResponse, StreamEvent};
use crate::wire::{self, StreamAccumulator};
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use std::sync::Once;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const MAX_BACKOFF: Duration = Duration::from_secs(30);
const MAX_RETRY_AFTER: Duration = Duration::from_secs(120);

pub struct HttpChatModel {
    http: reqwest::Client,
    config: LlmConfig,
    model: String,
}

/// How one attempt failed.
enum Failure {
    /// The stream broke before any of the answer arrived: worth one plain (non-streamed) try.
    StreamBrokeEarly(LlmError),
    Error(LlmError),
}

impl From<LlmError> for Failure {
    fn from(e: LlmError) -> Failure {
        Failure::Error(e)
    }
}

fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Fails only if another provider was installed first, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

impl HttpChatModel {
    pub fn new(config: LlmConfig) -> Result<HttpChatModel, LlmError> {
        let model = config.require_model()?.to_string();
        install_crypto_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(config.timeout.min(Duration::from_secs(30)))
            .user_agent(concat!("baton/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| LlmError::Config(format!("cannot build the HTTP client: {e}")))?;
        Ok(HttpChatModel {
            http,
            config,
            model,
        })
    }

    pub fn config(&self) -> &LlmConfig {
        &self.config
    }

    fn url(&self) -> String {
        format!("{}/chat/completions", self.config.base_url)
    }

    async fn attempt(
        &self,
        request: &ChatRequest,
        names: &ToolNames,
        stream: bool,
        options: CallOptions<'_>,
    ) -> Result<ChatResponse, Failure> {
        let body = wire::request_body(&self.model, request, names, stream);
        let mut builder = self
            .http
            .post(self.url())
            .header("content-type", "application/json");
        if let Some(key) = &self.config.api_key {
            builder = builder.bearer_auth(key.expose());
        }
        if stream {
            builder = builder.header("accept", "text/event-stream");
        }
        let body = serde_json::to_vec(&body).map_err(|e| LlmError::BadResponse(e.to_string()))?;
        let timeout = self.config.timeout;
        let response = match tokio::time::timeout(timeout, builder.body(body).send()).await {
            Err(_) => return Err(LlmError::Timeout(timeout).into()),
            Ok(Err(e)) => return Err(transport_error(&e, timeout).into()),
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        if !status.is_success() {
            let retry_after = retry_after(response.headers());
            let bytes = tokio::time::timeout(timeout, response.bytes())
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
            let message = wire::error_message(&bytes);
            return Err(if status.as_u16() == 429 {
                LlmError::RateLimited {
                    message,
                    retry_after,
                }
            } else {
                LlmError::Http {
                    status: status.as_u16(),
                    message,
                }
            }
            .into());
        }
        let is_sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/event-stream"));
        if !(stream && is_sse) {
            // Some servers ignore `stream: true` and answer in one piece.
            let bytes = match tokio::time::timeout(timeout, response.bytes()).await {
                Err(_) => return Err(LlmError::Timeout(timeout).into()),
                Ok(Err(e)) => return Err(transport_error(&e, timeout).into()),
                Ok(Ok(b)) => b,
            };
            let parsed = wire::parse_response(&bytes, names)?;
            if let Some(text) = parsed.message.content.as_deref().filter(|t| !t.is_empty()) {
                options.emit(StreamEvent::TextDelta(text.to_string()));
            }
            return Ok(parsed);
        }
        let mut events = response.bytes_stream().eventsource();
        let mut acc = StreamAccumulator::default();
        loop {
            let next = match tokio::time::timeout(timeout, events.next()).await {
                Err(_) => {
                    let e = LlmError::Timeout(timeout);
                    return Err(if acc.has_content() {
                        Failure::Error(e)
                    } else {
                        Failure::StreamBrokeEarly(e)
                    });
                }
                Ok(n) => n,
            };
            match next {
                None => break,
                Some(Ok(event)) => {
                    let delta = acc.push(&event.data, names)?;
                    if let Some(text) = delta.text {
                        options.emit(StreamEvent::TextDelta(text));
                    }
                    for (index, name) in delta.tool_started {
                        options.emit(StreamEvent::ToolCallStarted { index, name });
                    }
                    if acc.done {
                        break;
                    }
                }
                Some(Err(e)) => {
                    let message = format!("{e}");
                    return Err(if acc.has_content() {
                        Failure::Error(LlmError::StreamInterrupted(message))
                    } else {
                        Failure::StreamBrokeEarly(LlmError::StreamInterrupted(message))
                    });
                }
            }
        }
        Ok(acc.finish(names)?)
    }
}

fn transport_error(e: &reqwest::Error, timeout: Duration) -> LlmError {
    if e.is_timeout() {
        LlmError::Timeout(timeout)
    } else if e.is_connect() {
        LlmError::Connect(without_url(e))
    } else {
        LlmError::StreamInterrupted(without_url(e))
    }
}

/// reqwest's messages include the URL; keep only the cause.
fn without_url(e: &reqwest::Error) -> String {
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    let mut parts = Vec::new();
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    if parts.is_empty() {
        "request failed".to_string()
    } else {
        parts.join(": ")
    }
}

/// `Retry-After` in seconds (HTTP dates are rare from model APIs and are ignored).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let v = headers.get("retry-after")?.to_str().ok()?.trim();
    let secs: f64 = v.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs).min(MAX_RETRY_AFTER))
}

/// Exponential backoff with ±25 % jitter; `Retry-After`, when given, wins.
fn backoff(base: Duration, attempt: u32, retry_after: Option<Duration>) -> Duration {
    if let Some(ra) = retry_after {
        return ra;
    }
    let exp = base
        .saturating_mul(1u32 << attempt.min(16))
        .min(MAX_BACKOFF);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let jitter = 0.75 + (nanos % 1000) as f64 / 2000.0;
    exp.mul_f64(jitter)
}

impl ChatModel for HttpChatModel {
    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
        options: CallOptions<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, LlmError>> {
        Box::pin(async move {
            let names = ToolNames::new(request.tools.iter().map(|t| t.name.as_str()));
            let mut stream = self.config.stream;
            let mut retries = 0u32;
            let never = tokio_util::sync::CancellationToken::new();
            let cancel = options.cancel.unwrap_or(&never);
            loop {
                let outcome = tokio::select! {
                    _ = cancel.cancelled() => return Err(LlmError::Cancelled),
                    r = self.attempt(request, &names, stream, options) => r,
                };
                let error = match outcome {
                    Ok(response) => return Ok(response),
                    Err(Failure::StreamBrokeEarly(e)) if stream => {
                        // Nothing was shown yet: the same request without streaming, once.
                        stream = false;
                        let _ = e;
                        continue;
                    }
                    Err(Failure::StreamBrokeEarly(e)) | Err(Failure::Error(e)) => e,
                };
                if !error.is_retryable() || retries >= self.config.max_retries {
                    return Err(error);
                }
                let ra = match &error {
                    LlmError::RateLimited { retry_after, .. } => *retry_after,
                    _ => None,
                };
                let wait = backoff(self.config.retry_base_delay, retries, ra);
                retries += 1;
                tokio::select! {
                    _ = cancel.cancelled() => return Err(LlmError::Cancelled),
                    _ = tokio::time::sleep(wait) => {}
                }
            }
        })
    }

    fn model_name(&self) -> &str {
        &self.model
    }
}
