//! `baton models check`: short, cheap probes of the configured model, each with a verdict and a
//! hint. In order: the endpoint answers and takes the key; one tool-call round trip; a
//! streamed answer with usage; the cache figures of a prefix sent twice; the context window
//! the provider lists. Each check has a deadline, each request a small completion cap
//! ([`PROBE_MAX_TOKENS`]), and a failure that makes the rest meaningless (unreachable, no key,
//! key refused) skips them.
//!
//! The chat checks go through [`HttpChatModel`], so they speak whichever API the
//! configuration chose; the listing is one GET with the same key header.

mod cache;
mod failure;
mod listing;
mod reach;
mod report;
mod streaming;
mod tools;

pub use report::{Check, Report, Verdict};

use crate::client::HttpChatModel;
use crate::config::LlmConfig;
use crate::error::LlmError;
use crate::model::{CallOptions, ChatModel};
use crate::types::{ChatOptions, ChatRequest, ChatResponse, Message, StreamEvent, ToolDef};
use failure::Outcome;
use std::time::Duration;

/// The completion cap of every probe request: room for a reasoning model to think a little
/// and answer, no more.
pub const PROBE_MAX_TOKENS: u32 = 256;
/// The default time one check may take, its retries included.
pub const PROBE_DEADLINE: Duration = Duration::from_secs(60);
/// The largest answer a probe reads (a model listing may be a few megabytes, see `listing`).
const PROBE_MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// The checks' names, in the order they run.
pub const REACHABLE: &str = "reachable";
pub const TOOLS: &str = "tools";
pub const STREAMING: &str = "streaming";
pub const CACHE: &str = "cache";
pub const CONTEXT: &str = "context";
const ORDER: [&str; 5] = [REACHABLE, TOOLS, STREAMING, CACHE, CONTEXT];

/// How long each check may take and how much each request may answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeOptions {
    pub deadline: Duration,
    pub max_tokens: u32,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            deadline: PROBE_DEADLINE,
            max_tokens: PROBE_MAX_TOKENS,
        }
    }
}

/// Checks the model `config` names. An error only when no model can be built from it (no
/// model name, an unusable setting); everything the endpoint does is a verdict.
pub async fn check_model(config: &LlmConfig, options: ProbeOptions) -> Result<Report, LlmError> {
    let mut report = Report {
        model: config.require_model()?.to_string(),
        endpoint: config.endpoint_shown(),
        api: config.api.as_str().to_string(),
        checks: Vec::new(),
    };
    let probe = match Probe::new(config, options) {
        Ok(p) => p,
        Err(e @ LlmError::KeyMissing { .. }) => {
            let outcome = failure::from_error(REACHABLE, &e, config);
            report.checks.push(outcome.check);
            skip_rest(&mut report, REACHABLE);
            return Ok(report);
        }
        Err(e) => return Err(e),
    };
    for name in ORDER {
        let run = async {
            match name {
                REACHABLE => reach::check(&probe).await,
                TOOLS => tools::check(&probe).await,
                STREAMING => streaming::check(&probe).await,
                CACHE => cache::check(&probe).await,
                _ => listing::check(&probe).await,
            }
        };
        let outcome = tokio::time::timeout(options.deadline, run)
            .await
            .unwrap_or_else(|_| failure::deadline_passed(name, options.deadline));
        // Nothing else works when the simplest request did not.
        let stop = outcome.stop || (name == REACHABLE && outcome.check.verdict == Verdict::Fail);
        report.checks.push(outcome.check);
        if stop {
            skip_rest(&mut report, name);
            break;
        }
    }
    Ok(report)
}

/// Marks the checks after `failed` as not tried.
fn skip_rest(report: &mut Report, failed: &str) {
    let after = ORDER.iter().skip_while(|n| **n != failed).skip(1);
    for name in after {
        report.checks.push(Check::new(
            name,
            Verdict::Skipped,
            format!("not tried: the {failed} check failed"),
        ));
    }
}

/// What the checks share: the model as configured, the same with streaming on, and the
/// bounds of a probe.
pub(crate) struct Probe {
    /// The configuration with a probe's bounds (retries, deadline, answer size).
    config: LlmConfig,
    model: HttpChatModel,
    streaming: HttpChatModel,
    options: ProbeOptions,
}

impl Probe {
    fn new(config: &LlmConfig, options: ProbeOptions) -> Result<Probe, LlmError> {
        let mut bounded = config.clone();
        bounded.max_retries = bounded.max_retries.min(1);
        bounded.max_backoff = bounded.max_backoff.min(Duration::from_secs(2));
        bounded.timeout = bounded.timeout.min(options.deadline);
        bounded.max_call = options.deadline;
        bounded.max_response_bytes = bounded.max_response_bytes.min(PROBE_MAX_RESPONSE_BYTES);
        let model = HttpChatModel::new(bounded.clone())?;
        let streaming = HttpChatModel::new(LlmConfig {
            stream: true,
            ..bounded.clone()
        })?;
        Ok(Probe {
            config: bounded,
            model,
            streaming,
            options,
        })
    }

    fn model_name(&self) -> &str {
        self.model.model_name()
    }

    /// A request with the probe's completion cap.
    fn request(&self, messages: Vec<Message>, tools: Vec<ToolDef>) -> ChatRequest {
        ChatRequest {
            messages,
            tools,
            options: ChatOptions {
                max_tokens: Some(self.options.max_tokens),
                ..ChatOptions::default()
            },
        }
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.model.chat(request, CallOptions::default()).await
    }

    /// A streamed call, with the number of text pieces that arrived.
    async fn chat_streamed(
        &self,
        request: &ChatRequest,
    ) -> Result<(ChatResponse, usize), LlmError> {
        let pieces = std::sync::atomic::AtomicUsize::new(0);
        let count = |e: StreamEvent| {
            if matches!(e, StreamEvent::TextDelta(_)) {
                pieces.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        };
        let options = CallOptions {
            on_event: Some(&count),
            cancel: None,
        };
        let response = self.streaming.chat(request, options).await?;
        Ok((response, pieces.load(std::sync::atomic::Ordering::Relaxed)))
    }

    fn failed(&self, name: &'static str, e: &LlmError) -> Outcome {
        failure::from_error(name, e, &self.config)
    }
}
