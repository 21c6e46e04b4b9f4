//! The HTTP `ChatModel`: `POST {base_url}/chat/completions` (or Anthropic's
//! `POST {base_url}/messages`) with retries, timeouts, streaming and cancellation.

use crate::anthropic::{self, MessageStream};
use crate::body::{self, BodyError, ReadError};
use crate::config::{Api, LlmConfig};
use crate::error::LlmError;
use crate::model::{BoxFuture, CallOptions, ChatModel, ModelIdentity};
use crate::names::ToolNames;
use crate::scrub::Scrubber;
use crate::types::{ChatRequest, ChatResponse, Message, StreamEvent};
use crate::wire::{self, StreamAccumulator};
use eventsource_stream::{EventStreamError, Eventsource};
use futures_util::StreamExt;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::time::Instant;

/// The OpenAI-compatible client. Every error it returns is scrubbed of the API key and of
/// authorization values (see [`crate::scrub`]); it never returns an empty answer.
pub struct HttpChatModel {
    http: reqwest::Client,
    config: LlmConfig,
    model: String,
    scrubber: Scrubber,
    /// The endpoint answered once: from then on a refused connection is a restart worth
    /// waiting for, not a wrong address.
    reached: AtomicBool,
}

/// How one attempt failed.
enum Failure {
    /// The stream broke before any of the answer arrived: worth one plain (non-streamed) try.
    StreamBrokeEarly(LlmError),
    /// The connection was refused or the host name did not resolve: a wrong or stopped
    /// endpoint, reported at once unless it answered before.
    Unreachable(LlmError),
    /// An error status, with the wait the server asked for (`Retry-After`).
    Status {
        error: LlmError,
        retry_after: Option<Duration>,
    },
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
    /// Refuses a configuration without a model name, or without a key for an endpoint that
    /// is not on this machine, before any request.
    pub fn new(config: LlmConfig) -> Result<HttpChatModel, LlmError> {
        let model = config.require_model()?.to_string();
        config.check_key()?;
        let scrubber = Scrubber::new(config.api_key.as_ref().map(|k| k.expose()));
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
            scrubber,
            reached: AtomicBool::new(false),
        })
    }

    pub fn config(&self) -> &LlmConfig {
        &self.config
    }

    fn url(&self) -> String {
        match self.config.api {
            Api::OpenAi => format!("{}/chat/completions", self.config.base_url),
            Api::Anthropic => format!("{}/messages", self.config.base_url),
        }
    }

    /// The body of one attempt, in the configured API's shape.
    fn body(&self, request: &ChatRequest, names: &ToolNames, stream: bool) -> serde_json::Value {
        match self.config.api {
            Api::OpenAi => wire::request_body(
                &self.model,
                request,
                names,
                stream,
                &self.config.body_options(),
            ),
            Api::Anthropic => anthropic::request_body(
                &self.model,
                request,
                names,
                stream,
                &anthropic::BodyOptions {
                    default_cap: self.config.max_completion_tokens,
                    thinking_tokens: self.config.thinking_tokens,
                },
            ),
        }
    }

    async fn attempt(
        &self,
        request: &ChatRequest,
        names: &ToolNames,
        stream: bool,
        options: CallOptions<'_>,
    ) -> Result<ChatResponse, Failure> {
        let body = self.body(request, names, stream);
        let mut builder = self
            .http
            .post(self.url())
            .header("content-type", "application/json");
        match (self.config.api, &self.config.api_key) {
            (Api::OpenAi, Some(key)) => builder = builder.bearer_auth(key.expose()),
            (Api::Anthropic, key) => {
                builder = builder.header("anthropic-version", anthropic::VERSION);
                if let Some(key) = key {
                    builder = builder.header("x-api-key", key.expose());
                }
            }
            (Api::OpenAi, None) => {}
        }
        if stream {
            builder = builder.header("accept", "text/event-stream");
        }
        let body = serde_json::to_vec(&body).map_err(|e| LlmError::BadResponse(e.to_string()))?;
        let timeout = self.config.timeout;
        let cap = self.config.max_response_bytes;
        let mut response = match tokio::time::timeout(timeout, builder.body(body).send()).await {
            Err(_) => return Err(LlmError::Timeout(timeout).into()),
            Ok(Err(e)) => return Err(self.send_error(&e, timeout)),
            Ok(Ok(r)) => r,
        };
        self.reached.store(true, Ordering::Relaxed);
        let status = response.status();
        if !status.is_success() {
            let retry_after = retry_after(response.headers());
            // A body that breaks or stalls still leaves the status to report; one that never
            // ends does not get to fill memory.
            let bytes = match body::read_capped(&mut response, cap, timeout).await {
                Ok(b) => b,
                Err(ReadError::TooBig) => {
                    return Err(LlmError::BadResponse(format!(
                        "HTTP {} with an error body larger than {cap} bytes (max_response_bytes under [llm])",
                        status.as_u16()
                    ))
                    .into());
                }
                Err(ReadError::Timeout | ReadError::Transport(_)) => Vec::new(),
            };
            let message = wire::error_message(&bytes);
            return Err(if status.as_u16() == 429 {
                LlmError::RateLimited {
                    message,
                    retry_after,
                }
                .into()
            } else {
                Failure::Status {
                    error: LlmError::Http {
                        status: status.as_u16(),
                        message,
                    },
                    retry_after,
                }
            });
        }
        let is_sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/event-stream"));
        if !(stream && is_sse) {
            // Some servers ignore `stream: true` and answer in one piece.
            let bytes = match body::read_capped(&mut response, cap, timeout).await {
                Ok(b) => b,
                Err(ReadError::TooBig) => return Err(body::too_big(cap).into()),
                Err(ReadError::Timeout) => return Err(LlmError::Timeout(timeout).into()),
                Err(ReadError::Transport(e)) => return Err(transport_error(&e, timeout).into()),
            };
            let parsed = match self.config.api {
                Api::OpenAi => wire::parse_response(&bytes, names)?,
                Api::Anthropic => anthropic::parse_response(&bytes, names)?,
            };
            if let Some(text) = parsed.message.content.as_deref().filter(|t| !t.is_empty()) {
                options.emit(StreamEvent::TextDelta(text.to_string()));
            }
            return Ok(parsed);
        }
        // The cap sits under the SSE parser: an event that never ends is cut too.
        let mut events = body::capped_stream(response, cap).eventsource();
        let mut acc = Accumulator::new(self.config.api);
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
                    if acc.done() {
                        break;
                    }
                }
                Some(Err(EventStreamError::Transport(BodyError::TooBig))) => {
                    return Err(body::too_big(cap).into());
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

    /// One answer, with retries and backoff, none of it past `deadline`.
    async fn answer(
        &self,
        request: &ChatRequest,
        names: &ToolNames,
        options: CallOptions<'_>,
        deadline: Instant,
    ) -> Result<ChatResponse, LlmError> {
        let mut stream = self.config.stream;
        let mut retries = 0u32;
        loop {
            let mut server_wait = None;
            let error = match self.attempt(request, names, stream, options).await {
                Ok(response) => return Ok(response),
                Err(Failure::StreamBrokeEarly(_)) if stream => {
                    // Nothing was shown yet: the same request without streaming, once.
                    stream = false;
                    continue;
                }
                Err(Failure::Unreachable(e)) if !self.reached.load(Ordering::Relaxed) => {
                    return Err(e);
                }
                Err(Failure::Status { error, retry_after }) => {
                    server_wait = retry_after;
                    error
                }
                Err(Failure::StreamBrokeEarly(e))
                | Err(Failure::Unreachable(e))
                | Err(Failure::Error(e)) => e,
            };
            if !error.is_retryable() || retries >= self.config.max_retries {
                return Err(error);
            }
            let ra = match &error {
                LlmError::RateLimited { retry_after, .. } => *retry_after,
                _ => server_wait,
            };
            let wait = backoff(
                self.config.retry_base_delay,
                retries,
                ra,
                self.config.max_backoff,
            );
            // A retry that could only start past the deadline would end as a timeout and hide
            // the real cause: report the cause now.
            if Instant::now() + wait >= deadline {
                return Err(error);
            }
            retries += 1;
            tokio::time::sleep(wait).await;
        }
    }

    /// An answer that is not empty: an empty one is asked for again once, with a nudge.
    async fn non_empty_answer(
        &self,
        request: &ChatRequest,
        options: CallOptions<'_>,
        deadline: Instant,
    ) -> Result<ChatResponse, LlmError> {
        let names = ToolNames::new(request.tools.iter().map(|t| t.name.as_str()));
        let response = self.answer(request, &names, options, deadline).await?;
        if !is_empty(&response) {
            return Ok(response);
        }
        let mut nudged = request.clone();
        nudged.messages.push(Message::user(EMPTY_ANSWER_NUDGE));
        let response = self.answer(&nudged, &names, options, deadline).await?;
        if is_empty(&response) {
            return Err(LlmError::BadResponse(
                "the model answered with nothing (no text and no tool call), twice".into(),
            ));
        }
        Ok(response)
    }
}

/// A streamed answer being assembled, in the configured API's events.
enum Accumulator {
    OpenAi(StreamAccumulator),
    Anthropic(MessageStream),
}

impl Accumulator {
    fn new(api: Api) -> Accumulator {
        match api {
            Api::OpenAi => Accumulator::OpenAi(StreamAccumulator::default()),
            Api::Anthropic => Accumulator::Anthropic(MessageStream::default()),
        }
    }

    fn push(&mut self, data: &str, names: &ToolNames) -> Result<wire::ChunkDelta, LlmError> {
        match self {
            Accumulator::OpenAi(a) => a.push(data, names),
            Accumulator::Anthropic(a) => a.push(data, names),
        }
    }

    fn has_content(&self) -> bool {
        match self {
            Accumulator::OpenAi(a) => a.has_content(),
            Accumulator::Anthropic(a) => a.has_content(),
        }
    }

    fn done(&self) -> bool {
        match self {
            Accumulator::OpenAi(a) => a.done,
            Accumulator::Anthropic(a) => a.done,
        }
    }

    fn finish(self, names: &ToolNames) -> Result<ChatResponse, LlmError> {
        match self {
            Accumulator::OpenAi(a) => a.finish(names),
            Accumulator::Anthropic(a) => a.finish(names),
        }
    }
}

/// Sent (as a user message, on the retry only) after an empty answer.
pub const EMPTY_ANSWER_NUDGE: &str =
    "Your last answer was empty. Continue: call a tool, or answer in text.";

/// No tool call and no text but whitespace.
fn is_empty(response: &ChatResponse) -> bool {
    response.message.tool_calls.is_empty() && response.message.text().trim().is_empty()
}

impl HttpChatModel {
    /// A request that got no response: a connect error names the endpoint and the setting
    /// that chose it.
    fn send_error(&self, e: &reqwest::Error, timeout: Duration) -> Failure {
        match transport_error(e, timeout) {
            LlmError::Connect(cause) => {
                let error = LlmError::Connect(format!(
                    "{} (set by {}): {cause}",
                    self.config.endpoint_shown(),
                    self.config.base_url_source
                ));
                if refused_or_unknown_host(e) {
                    Failure::Unreachable(error)
                } else {
                    Failure::Error(error)
                }
            }
            other => Failure::Error(other),
        }
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

/// A refused connection, or a host name that did not resolve (hyper's "dns error"): nobody
/// listens there, and waiting will not change that.
fn refused_or_unknown_host(e: &reqwest::Error) -> bool {
    if e.is_dns() {
        return true;
    }
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        if s.to_string().starts_with("dns error") {
            return true;
        }
        source = s.source();
    }
    false
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

/// `Retry-After` in seconds, as the server said (HTTP dates are rare from model APIs and are
/// ignored; so is a value too large for a `Duration`).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let v = headers.get("retry-after")?.to_str().ok()?.trim();
    let secs: f64 = v.parse().ok()?;
    Duration::try_from_secs_f64(secs).ok()
}

/// Exponential backoff with ±25 % jitter; `Retry-After`, when given, wins. Never more than `max`:
/// a server asking for a day's wait gets the usual retries, then `LLM_RATE_LIMITED`.
fn backoff(base: Duration, attempt: u32, retry_after: Option<Duration>, max: Duration) -> Duration {
    if let Some(ra) = retry_after {
        return ra.min(max);
    }
    let exp = base.saturating_mul(1u32 << attempt.min(16)).min(max);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let jitter = 0.75 + (nanos % 1000) as f64 / 2000.0;
    exp.mul_f64(jitter).min(max)
}

impl ChatModel for HttpChatModel {
    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
        options: CallOptions<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, LlmError>> {
        Box::pin(async move {
            let never = tokio_util::sync::CancellationToken::new();
            let cancel = options.cancel.unwrap_or(&never);
            let max_call = self.config.max_call;
            let deadline = Instant::now() + max_call;
            let outcome = tokio::select! {
                _ = cancel.cancelled() => Err(LlmError::Cancelled),
                r = tokio::time::timeout_at(deadline, self.non_empty_answer(request, options, deadline)) => {
                    r.unwrap_or(Err(LlmError::CallTimeout(max_call)))
                }
            };
            // The one exit: nothing leaves with the key or an authorization value in it.
            outcome.map_err(|e| self.scrubber.error(e))
        })
    }

    fn model_name(&self) -> &str {
        &self.model
    }

    fn identity(&self) -> ModelIdentity {
        ModelIdentity {
            name: self.model.clone(),
            base_url: self.config.endpoint_recordable(),
            api: Some(self.config.api),
            ..ModelIdentity::default()
        }
    }

    fn max_completion_tokens(&self) -> u32 {
        self.config.max_completion_tokens
    }

    fn price(&self) -> Option<crate::Price> {
        self.config.price()
    }

    fn context_tokens(&self) -> Option<u64> {
        Some(self.config.context_tokens())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_never_exceeds_its_maximum() {
        let max = Duration::from_millis(40);
        let day = Some(Duration::from_secs(86_400));
        assert_eq!(backoff(Duration::from_millis(10), 0, day, max), max);
        for attempt in 0..40 {
            assert!(backoff(Duration::from_millis(10), attempt, None, max) <= max);
        }
        assert_eq!(
            backoff(
                Duration::from_secs(1),
                0,
                Some(Duration::from_millis(5)),
                max
            ),
            Duration::from_millis(5)
        );
    }
}
