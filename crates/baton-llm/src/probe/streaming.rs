//! A streamed answer arrives in pieces and carries usage: without usage, budgets and cost
//! cannot count this endpoint's calls.

use super::failure::Outcome;
use super::prober::{Probe, STREAMING};
use super::report::{Check, Verdict};
use crate::types::Message;

pub(crate) async fn check(probe: &Probe) -> Outcome {
    let request = probe.request(
        vec![Message::user(
            "Count from 1 to 20, the numbers separated by spaces, nothing else.",
        )],
        Vec::new(),
    );
    let (response, pieces) = match probe.chat_streamed(&request).await {
        Ok(r) => r,
        Err(e) => return probe.failed(STREAMING, &e),
    };
    // Runs stream only when configured to; the probe streams regardless.
    let off = if probe.config.stream {
        ""
    } else {
        " (stream = false under [llm]: runs do not stream)"
    };
    let mut check = Check::new(STREAMING, Verdict::Pass, "").figure("pieces", pieces);
    if let Some(u) = response.usage {
        check = check
            .figure("promptTokens", u.prompt_tokens)
            .figure("completionTokens", u.completion_tokens);
    }
    let (verdict, detail, hint) = match (response.usage.is_some(), pieces > 1) {
        (true, true) => (
            Verdict::Pass,
            format!("the answer arrived in {pieces} pieces, with usage{off}"),
            None,
        ),
        (false, _) => (
            Verdict::Warn,
            format!(
                "the streamed answer carried no usage: budgets and cost can't count this endpoint{off}"
            ),
            Some(
                "baton asks for it (stream_options.include_usage); if the provider ignores that, \
                 set stream = false under [llm]: whole answers usually carry usage",
            ),
        ),
        (true, false) => (
            Verdict::Warn,
            format!(
                "the answer arrived in one piece: the endpoint does not stream, so a run shows \
                 an answer only once it is complete{off}"
            ),
            None,
        ),
    };
    check.verdict = verdict;
    check.detail = detail;
    check.hint = hint.map(str::to_owned);
    check.into()
}
