//! Prompt caching: the same long prefix (about 1,300 tokens, above the 1,024 most providers
//! cache from) sent twice; the second request's usage says what the cache served.

use super::failure::Outcome;
use super::prober::{CACHE, Probe};
use super::report::{Check, Verdict};
use crate::config::Api;
use crate::types::{ChatRequest, Message, Usage};

/// Sent as `prompt_cache_key` where the endpoint takes one: both requests go to one cache.
const CACHE_KEY: &str = "baton-models-check";

/// The stable prefix: the same bytes in both requests.
pub fn prefix() -> String {
    let mut text = String::from(
        "You are checking a prompt cache. The numbered notes below are identical in both \
         requests; do not summarise them, just follow the last message.\n",
    );
    for i in 1..=56 {
        text.push_str(&format!(
            "Note {i}: step {i} of a workflow reads its inputs, calls its tools one at a time, \
             checks what they returned, and writes one result for step {} to use.\n",
            i + 1
        ));
    }
    text
}

fn request(probe: &Probe) -> ChatRequest {
    let mut request = probe.request(
        vec![
            Message::system(prefix()),
            Message::user("Reply with the single word: cached"),
        ],
        Vec::new(),
    );
    request.options.cache_key = Some(CACHE_KEY.into());
    request
}

pub(crate) async fn check(probe: &Probe) -> Outcome {
    let request = request(probe);
    let mut usages = Vec::new();
    for _ in 0..2 {
        match probe.chat(&request).await {
            Ok(r) => usages.push(r.usage),
            Err(e) => return probe.failed(CACHE, &e),
        }
    }
    let (Some(first), Some(second)) = (usages[0], usages[1]) else {
        return Check::new(
            CACHE,
            Verdict::Warn,
            "the endpoint reported no usage: cache figures are unknown",
        )
        .hint("budgets and cost can't count this endpoint either; see the streaming check")
        .into();
    };
    verdict(probe, first, second).into()
}

/// The second request's figures; writes are those of both (the first writes what the second
/// reads).
fn verdict(probe: &Probe, first: Usage, second: Usage) -> Check {
    let written = first
        .cache_write_tokens
        .saturating_add(second.cache_write_tokens);
    let mut check = Check::new(CACHE, Verdict::Pass, "")
        .figure("promptTokens", second.prompt_tokens)
        .figure("cachedPromptTokens", second.cached_prompt_tokens);
    if written > 0 {
        check = check.figure("cacheWriteTokens", written);
    }
    let writes = if written > 0 {
        format!(" ({written} written to it)")
    } else {
        String::new()
    };
    if second.cached_prompt_tokens > 0 {
        check.detail = format!(
            "the second request read {} of its {} prompt tokens from the cache{writes}",
            second.cached_prompt_tokens, second.prompt_tokens
        );
        return check;
    }
    check.verdict = Verdict::Warn;
    check.detail = format!(
        "no prompt caching reported; every request pays for its whole prompt (the second \
         request: 0 of {} prompt tokens cached{writes})",
        second.prompt_tokens
    );
    check.hint = Some(match probe.config.api {
        Api::Anthropic => "Anthropic caches from 1,024 tokens (more for some models); a run's \
                           prompts are longer, so runs may still hit the cache"
            .into(),
        Api::OpenAi if probe.model_name().to_ascii_lowercase().contains("claude") => {
            "Claude models cache through Anthropic's own API only: --api anthropic (or api = \
             \"anthropic\" under [llm])"
                .into()
        }
        Api::OpenAi => "some providers cache only larger prompts, or not at all, or do not \
                        report it (OpenAI-compatible usage: prompt_tokens_details.cached_tokens)"
            .into(),
    });
    check
}
