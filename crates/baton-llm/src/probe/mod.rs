//! `baton models check`: short, cheap probes of the configured model, each with a verdict and a
//! hint. In order: the endpoint answers and takes the key; one tool-call round trip; a
//! streamed answer with usage; the cache figures of a prefix sent twice; the context window
//! the provider lists. Each check has a deadline, each request a small completion cap
//! ([`PROBE_MAX_TOKENS`]), and a failure that makes the rest meaningless (unreachable, no key,
//! key refused) skips them.
//!
//! The chat checks go through [`crate::HttpChatModel`], so they speak whichever API the
//! configuration chose; the listing is one GET with the same key header.

mod cache;
mod failure;
mod listing;
mod prober;
mod reach;
mod report;
mod streaming;
mod tools;

pub use prober::{
    CACHE, CONTEXT, PROBE_DEADLINE, PROBE_MAX_TOKENS, ProbeOptions, REACHABLE, STREAMING, TOOLS,
};
pub use report::{Check, Report, Verdict};

use crate::config::LlmConfig;
use crate::error::LlmError;
use prober::{ORDER, Probe};

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
