//! The endpoint answers a tiny request and takes the key.

use super::failure::Outcome;
use super::prober::{Probe, REACHABLE};
use super::report::{Check, Verdict};
use crate::types::Message;
use std::time::Instant;

pub(crate) async fn check(probe: &Probe) -> Outcome {
    let request = probe.request(
        vec![Message::user("Reply with the single word: ready")],
        Vec::new(),
    );
    let started = Instant::now();
    let response = match probe.chat(&request).await {
        Ok(r) => r,
        Err(e) => return probe.failed(REACHABLE, &e),
    };
    let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let mut check = Check::new(
        REACHABLE,
        Verdict::Pass,
        format!(
            "{} answered as {} in {ms} ms",
            probe.config.endpoint_shown(),
            probe.model_name()
        ),
    )
    .figure("latencyMs", ms);
    if let Some(u) = response.usage {
        check = check
            .figure("promptTokens", u.prompt_tokens)
            .figure("completionTokens", u.completion_tokens);
    }
    check.into()
}
