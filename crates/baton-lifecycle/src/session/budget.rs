//! A session's budget and usage: `[budget] tokens`/`usd` (or the command's flags) on the
//! whole session — its step runs and its gate calls.
//!
//! What a step run spent is read from its audit log; what a gate call spent is appended to
//! `<session dir>/usage.jsonl` in the same line shape (`engine.turn` with its usage, baton's
//! own count and the estimate), so both are charged the same way (the larger of the provider's
//! figures and baton's count, see [`spend::charge`]) and survive kills and resumes. A gate call that
//! could cross the budget is not made: the model wrapper [`Gated`] refuses it, cancels the
//! gate's own token (the gate then ends as interrupted, having written nothing) and keeps the
//! stop for the loop to report as `BUDGET_EXCEEDED`.

use baton_engine::spend::{
    self, BudgetConfig, BudgetStop, Cap, Counted, Meter, Spent, UsageWarning,
};
use baton_llm::{
    BoxFuture, CallOptions, ChatModel, ChatRequest, ChatResponse, LlmError, ModelIdentity, Price,
    Usage,
};
use baton_ralph::session::Session;
use baton_store::Project;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// The file of a session's gate calls.
pub const LEDGER: &str = "usage.jsonl";

fn ledger(s: &Session) -> PathBuf {
    s.dir.join(LEDGER)
}

/// What the session spent outside run `except`: its other step runs and its gate calls.
pub fn spent_elsewhere(
    s: &Session,
    project: &Project,
    except: Option<&str>,
    price: Option<Price>,
) -> Spent {
    let mut total = spend::recorded(&ledger(s), price).spent;
    for id in super::step_run::linked_run_ids(s) {
        if Some(id.as_str()) == except {
            continue;
        }
        total.add(spend::recorded(&project.run_paths(&id).execution_log, price).spent);
    }
    total
}

/// The session's cap, for a call outside run `except` (the run about to be driven).
pub fn caps(
    s: &Session,
    project: &Project,
    budget: &BudgetConfig,
    except: Option<&str>,
    price: Option<Price>,
) -> Vec<Cap> {
    if budget.tokens.is_none() && budget.usd.is_none() {
        return Vec::new();
    }
    vec![Cap {
        scope: format!("session {}", s.id),
        tokens: budget.tokens,
        usd: budget.usd,
        spent_elsewhere: spent_elsewhere(s, project, except, price),
    }]
}

/// The usage of the session: per step (its linked runs, by step index), gates, and total.
pub struct SessionUsage {
    pub steps: Vec<(usize, Usage)>,
    pub gates: Usage,
    pub total: Usage,
}

/// Sums what the session's step runs and gate calls recorded.
pub fn usage(s: &Session, project: &Project) -> SessionUsage {
    let mut steps = Vec::new();
    let mut total = Usage::default();
    for st in s.all_steps() {
        let Some(link) = super::step_run::any_link(s, st.index()) else {
            continue;
        };
        let u = spend::recorded(&project.run_paths(&link).execution_log, None).usage;
        total.add(u);
        steps.push((st.index(), u));
    }
    let gates = spend::recorded(&ledger(s), None).usage;
    total.add(gates);
    SessionUsage {
        steps,
        gates,
        total,
    }
}

/// Appends a gate's calls (their usage, baton's count of them, the estimate the last was
/// allowed on, the warnings about their usage figures) to the session's ledger (best effort,
/// as audit lines are).
pub fn record_gate(s: &Session, usage: Option<Usage>, gated: &Gated<'_>, price: Option<Price>) {
    record_call(
        s,
        "gate",
        usage,
        gated.estimate(),
        Some(gated.counted()),
        price,
    );
    record_warnings(s, &gated.warnings());
}

/// Appends a model call made for the session outside its step runs (`source`: `gate`, or
/// `decompose` for the start's decomposition) to its ledger, with baton's own count of it.
pub fn record_call(
    s: &Session,
    source: &str,
    usage: Option<Usage>,
    estimate: Option<spend::Estimate>,
    counted: Option<Counted>,
    price: Option<Price>,
) {
    let Ok(mut log) = baton_store::jsonl::JsonlWriter::open(&ledger(s)) else {
        return;
    };
    let usage = usage.map(|mut u| {
        u.cost_usd = price.map(|p| p.cost(&u));
        u
    });
    let mut line = json!({"ts": baton_store::time::now_rfc3339(), "kind": "engine.turn",
        "source": source, "usage": usage});
    if let Some(e) = estimate {
        line["estimate"] = e.to_json();
    }
    if let Some(c) = counted {
        line["counted"] = json!(c);
    }
    // Not fsynced on its own (a killed process keeps the line; the gate's decision, written
    // next, is what a power cut must not lose): one more flush per gate is not worth it.
    let _ = log.append(&line, false);
}

/// Appends warnings about a provider's usage figures to the session's ledger
/// (`engine.warning` lines, as a run's log has them).
pub fn record_warnings(s: &Session, warnings: &[UsageWarning]) {
    if warnings.is_empty() {
        return;
    }
    let Ok(mut log) = baton_store::jsonl::JsonlWriter::open(&ledger(s)) else {
        return;
    };
    for w in warnings {
        let mut line = w.to_json();
        line["ts"] = json!(baton_store::time::now_rfc3339());
        line["kind"] = json!("engine.warning");
        let _ = log.append(&line, false);
    }
}

/// A model that refuses a call that could cross the caps (see the module's note).
pub struct Gated<'m> {
    inner: &'m dyn ChatModel,
    /// Each call answered is recorded in it, so the next call is checked with what the
    /// previous ones spent.
    meter: Mutex<Meter>,
    stop: Mutex<Option<BudgetStop>>,
    estimate: Mutex<Option<spend::Estimate>>,
    /// Baton's count of the calls answered, and the warnings about their usage figures.
    counted: Mutex<(Counted, Vec<UsageWarning>)>,
    cancel: CancellationToken,
}

impl<'m> Gated<'m> {
    /// `cancel` is the token the gate is given (a child of the session's).
    pub fn new(inner: &'m dyn ChatModel, caps: Vec<Cap>, cancel: CancellationToken) -> Gated<'m> {
        Gated {
            meter: Mutex::new(Meter::with_caps(inner, caps)),
            inner,
            stop: Mutex::new(None),
            estimate: Mutex::new(None),
            counted: Mutex::new(Default::default()),
            cancel,
        }
    }

    /// Baton's own count of the calls answered so far.
    pub fn counted(&self) -> Counted {
        self.counted.lock().map(|c| c.0).unwrap_or_default()
    }

    /// The warnings about the usage figures of the calls answered so far.
    pub fn warnings(&self) -> Vec<UsageWarning> {
        self.counted.lock().map(|c| c.1.clone()).unwrap_or_default()
    }

    /// The estimate of the last call let through.
    pub fn estimate(&self) -> Option<spend::Estimate> {
        self.estimate.lock().ok().and_then(|e| *e)
    }

    /// The stop of a refused call.
    pub fn stopped(&self) -> Option<BudgetStop> {
        self.stop.lock().ok().and_then(|s| s.clone())
    }
}

impl ChatModel for Gated<'_> {
    fn chat<'a>(
        &'a self,
        request: &'a ChatRequest,
        options: CallOptions<'a>,
    ) -> BoxFuture<'a, Result<ChatResponse, LlmError>> {
        Box::pin(async move {
            let mut sent = request.clone();
            let checked = match self.meter.lock() {
                Ok(mut m) => m.prepare(&mut sent, None),
                Err(_) => Ok(spend::Estimate {
                    prompt_tokens: 0,
                    max_tokens: 0,
                    usd: None,
                }),
            };
            let estimate = match checked {
                Err(stop) => {
                    if let Ok(mut s) = self.stop.lock() {
                        *s = Some(stop);
                    }
                    self.cancel.cancel();
                    return Err(LlmError::Cancelled);
                }
                Ok(e) => {
                    if let Ok(mut last) = self.estimate.lock() {
                        *last = Some(e);
                    }
                    e
                }
            };
            let response = self.inner.chat(&sent, options).await?;
            if let Ok(mut m) = self.meter.lock() {
                let spend = m.record(&estimate, &response);
                if let Ok(mut c) = self.counted.lock() {
                    c.0.add(spend.counted);
                    c.1.extend(spend.warning);
                }
            }
            Ok(response)
        })
    }

    fn model_name(&self) -> &str {
        self.inner.model_name()
    }

    fn identity(&self) -> ModelIdentity {
        self.inner.identity()
    }

    fn max_completion_tokens(&self) -> u32 {
        self.inner.max_completion_tokens()
    }

    fn price(&self) -> Option<Price> {
        self.inner.price()
    }

    fn context_tokens(&self) -> Option<u64> {
        self.inner.context_tokens()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // test code

    use super::*;
    use baton_llm::testing::{Reply, ScriptedServer, played_model};
    use baton_llm::{ChatRequest, Message};

    /// A gate's calls against a server answering usage all zero: each call is charged baton's
    /// count, so the next one is checked with it and refused once the cap would be crossed.
    #[tokio::test]
    async fn a_gates_calls_are_charged_baton_s_count_one_after_another() {
        let answer = json!({"id": "c", "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": "y".repeat(400)}}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": -7}});
        let server = ScriptedServer::start(vec![Reply::json(200, answer.clone()); 3])
            .await
            .unwrap();
        let model = played_model(server.base_url()).unwrap();
        let request = ChatRequest {
            messages: vec![Message::user("x".repeat(4000))],
            options: baton_llm::ChatOptions {
                max_tokens: Some(100),
                ..Default::default()
            },
            ..ChatRequest::default()
        };
        // Room for one call (about 1,000 prompt tokens and a cap of 100), not two.
        let cap = Cap::run(Some(2_000), None);
        let cancel = CancellationToken::new();
        let gated = Gated::new(&model, vec![cap], cancel.clone());
        let options = || CallOptions {
            on_event: None,
            cancel: None,
        };
        gated.chat(&request, options()).await.unwrap();
        let counted = gated.counted();
        assert!(counted.prompt_tokens > 1_000, "{counted:?}");
        assert!(counted.completion_tokens >= 100, "{counted:?}");
        // The total of -7 was a fault: warned about, not believed.
        let warnings = gated.warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert_eq!(warnings[0].code, spend::PROVIDER_USAGE_INVALID);
        let refused = gated.chat(&request, options()).await;
        assert!(matches!(refused, Err(LlmError::Cancelled)), "{refused:?}");
        assert!(cancel.is_cancelled());
        assert_eq!(gated.stopped().unwrap().code, spend::BUDGET_EXCEEDED);
        assert_eq!(server.received().len(), 1);
    }
}
