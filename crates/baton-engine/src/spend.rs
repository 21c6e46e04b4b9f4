//! What model calls spend, and hard budgets on it.
//!
//! Before each model call the engine estimates the most the request can cost: its counted
//! prompt tokens plus the completion cap it sends (every request carries one), and at the
//! model's price where a USD budget applies. A request whose estimate would take any budget
//! past its limit is not sent: the run stops between two steps with `BUDGET_EXCEEDED`, phase
//! `idle`, and a later invocation with a larger budget goes on from there.
//!
//! What a call spent is never the provider's word alone: baton counts the prompt before
//! sending and the completion from what came back (text, reasoning, tool names and
//! arguments), and each figure charged is the larger of the provider's and baton's count
//! ([`charge`]). A server answering zeros, a `total_tokens` of 0, negative or absurd figures or
//! no usage at all still spends what it was sent and what it wrote; its faulty figures are
//! warned about ([`PROVIDER_USAGE_INVALID`]) and never lower a sum.
//!
//! What a run spent is summed from its durable records, the `engine.turn` and
//! `engine.summary` lines of its audit log (the usage the provider reported and baton's own
//! count, charged as above), so a budget holds across resumes and processes.
//!
//! Each request's prompt is also compared with the previous one of the invocation: the bytes
//! they share from the start, and whether it extends the previous request whole (it must
//! within a node, so provider prompt caches hit). `baton runs show` sums these figures.

use crate::context::TokenCounter;
use baton_llm::wire::{common_prefix, request_prompt_bytes};
use baton_llm::{ChatModel, ChatRequest, ChatResponse, Price, ToolDef, Usage};
use baton_store::RunUsage;
use serde_json::{Value, json};
use std::io::{BufRead, Read};
use std::path::Path;

/// The code of a run (or loop) stopped before a call that would cross a budget.
pub const BUDGET_EXCEEDED: &str = "BUDGET_EXCEEDED";
/// The code of a USD budget for a model without a known price.
pub const BUDGET_PRICE_UNKNOWN: &str = "BUDGET_PRICE_UNKNOWN";
/// The code of usage figures a provider reported that cannot be counts (warned about; the
/// call is charged baton's own count where they were left out).
pub const PROVIDER_USAGE_INVALID: &str = "PROVIDER_USAGE_INVALID";
/// The smallest completion cap sent, however full the context window is.
const MIN_COMPLETION_CAP: u64 = 256;
/// The longest audit line read when summing (tool lines carry sizes and hashes, not contents).
const MAX_LINE: usize = 1 << 20;

/// Tokens and dollars.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spent {
    pub tokens: u64,
    pub usd: f64,
}

impl Spent {
    pub fn add(&mut self, other: Spent) {
        self.tokens = self.tokens.saturating_add(other.tokens);
        self.usd += other.usd;
    }
}

/// Baton's own count of one call (or a sum of calls): the prompt counted before it was sent,
/// the completion counted from the answer that came back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Counted {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl Counted {
    pub fn add(&mut self, other: Counted) {
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
    }

    pub fn tokens(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }
}

/// What budgets charge for a call: each figure the larger of the provider's (`reported`) and
/// baton's (`counted`); a total over prompt + completion charges the difference as
/// completion (priced as output). The cached share is believed only within the provider's own
/// prompt figure. Priced at `price` where one is known.
pub fn charge(reported: Option<&Usage>, counted: Counted, price: Option<Price>) -> Usage {
    let r = reported.copied().unwrap_or_default();
    let prompt = r.prompt_tokens.max(counted.prompt_tokens);
    let mut completion = r.completion_tokens.max(counted.completion_tokens);
    let parts = prompt.saturating_add(completion);
    if r.total_tokens > parts {
        completion = completion.saturating_add(r.total_tokens - parts);
    }
    let mut u = Usage {
        prompt_tokens: prompt,
        cached_prompt_tokens: r.cached_prompt_tokens.min(r.prompt_tokens),
        cache_write_tokens: r
            .cache_write_tokens
            .min(r.prompt_tokens - r.cached_prompt_tokens.min(r.prompt_tokens)),
        completion_tokens: completion,
        reasoning_tokens: r.reasoning_tokens.min(completion),
        total_tokens: prompt.saturating_add(completion),
        cost_usd: None,
    };
    u.cost_usd = price.map(|p| p.cost(&u));
    u
}

/// A warning about a provider's usage figures.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageWarning {
    pub code: &'static str,
    pub message: String,
    pub hint: String,
}

impl UsageWarning {
    pub fn to_json(&self) -> Value {
        json!({"code": self.code, "message": self.message, "hint": self.hint})
    }
}

/// One finished call, as recorded and charged.
#[derive(Debug, Clone, PartialEq)]
pub struct CallSpend {
    /// What the provider reported (its faulty figures left out), priced where a price is known.
    pub reported: Option<Usage>,
    /// Baton's own count.
    pub counted: Counted,
    /// What budgets charge: see [`charge`].
    pub charged: Usage,
    /// Set when the provider's figures had faults.
    pub warning: Option<UsageWarning>,
}

impl CallSpend {
    /// The fields of the call's audit line: `usage` (reported), `counted` and `estimate`.
    pub fn audit_fields(&self, estimate: &Estimate) -> Value {
        json!({"usage": self.reported, "counted": self.counted, "estimate": estimate.to_json()})
    }
}

/// The warning for `faults` of a provider's usage figures (none without faults).
pub fn usage_warning(faults: &[String]) -> Option<UsageWarning> {
    if faults.is_empty() {
        return None;
    }
    Some(UsageWarning {
        code: PROVIDER_USAGE_INVALID,
        message: format!(
            "the model server reported usage that cannot be true: {}",
            faults.join("; ")
        ),
        hint: "budgets charge baton's own count of what was sent and received for these \
               figures; check the server or the proxy in front of it"
            .into(),
    })
}

/// One hard limit: on the run, or on a larger scope the run belongs to (a story, an epic, a
/// session), which other runs spent from already.
#[derive(Debug, Clone, PartialEq)]
pub struct Cap {
    /// What the limit is on, as messages name it (`run`, `story 1-2-login`, `epic epic-1`).
    pub scope: String,
    pub tokens: Option<u64>,
    pub usd: Option<f64>,
    /// What the scope spent outside this run (its other runs and model calls).
    pub spent_elsewhere: Spent,
}

impl Cap {
    /// A limit on the run alone.
    pub fn run(tokens: Option<u64>, usd: Option<f64>) -> Cap {
        Cap {
            scope: "run".into(),
            tokens,
            usd,
            spent_elsewhere: Spent::default(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_none() && self.usd.is_none()
    }
}

/// The caps that have a USD limit while `price` is unknown: a budget nobody could keep.
pub fn check_price(caps: &[Cap], price: Option<Price>, model: &str) -> Result<(), BudgetStop> {
    match caps.iter().find(|c| c.usd.is_some()) {
        Some(cap) if price.is_none() => Err(BudgetStop {
            code: BUDGET_PRICE_UNKNOWN,
            message: format!(
                "a USD budget is set ({}) but no price is known for model '{model}'",
                cap.scope
            ),
            details: json!({"scope": cap.scope, "kind": "usd", "model": model}),
        }),
        _ => Ok(()),
    }
}

/// What to do about `BUDGET_PRICE_UNKNOWN` for the model priced as `name` (see
/// `ChatModel::price_name`: a replay's recorded model, or `replay`).
pub fn price_hint(name: &str) -> String {
    format!(
        "give the model a price: [models.\"{name}\"] price = {{ input = 2.0, cached_input = 0.5, output = 8.0 }} in baton.toml (USD per million tokens), or budget in tokens"
    )
}

/// The code of a `[budget]` table or budget flag that makes no sense.
pub const BUDGET_CONFIG_INVALID: &str = "BUDGET_CONFIG_INVALID";

/// Budgets from `[budget]` in `$BATON_HOME/config.toml` and the project's `baton.toml` (the
/// project's values win), then the command's flags. `tokens`/`usd` limit the scope of the
/// command (a run for `baton run`, the epic for `baton epic`, the session for `baton
/// session`); `tokens_per_story`/`usd_per_story` limit each story of an epic.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetConfig {
    pub tokens: Option<u64>,
    pub usd: Option<f64>,
    pub tokens_per_story: Option<u64>,
    pub usd_per_story: Option<f64>,
}

#[derive(serde::Deserialize)]
struct BudgetFile {
    budget: Option<BudgetConfig>,
}

impl BudgetConfig {
    /// Reads `[budget]` of the two files (either may be missing).
    pub fn load(home: Option<&Path>, project: Option<&Path>) -> Result<BudgetConfig, String> {
        let mut out = BudgetConfig::default();
        let files = [
            home.map(|h| h.join("config.toml")),
            project.map(|p| p.join("baton.toml")),
        ];
        for file in files.into_iter().flatten() {
            let text = match std::fs::read_to_string(&file) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(format!("cannot read {}: {}", file.display(), e.kind())),
            };
            // Only the [budget] table is read here; other tables belong to other readers.
            let doc: toml::Table = toml::from_str(&text)
                .map_err(|e| format!("{}: {}", file.display(), e.message()))?;
            let Some(table) = doc.get("budget") else {
                continue;
            };
            let mut one = toml::Table::new();
            one.insert("budget".into(), table.clone());
            let parsed: BudgetFile =
                toml::Value::Table(one)
                    .try_into()
                    .map_err(|e: toml::de::Error| {
                        format!("{}: [budget]: {}", file.display(), e.message())
                    })?;
            if let Some(b) = parsed.budget {
                out = out.over(b);
            }
        }
        out.check()?;
        Ok(out)
    }

    /// `other`'s values where it has them, else these.
    pub fn over(self, other: BudgetConfig) -> BudgetConfig {
        BudgetConfig {
            tokens: other.tokens.or(self.tokens),
            usd: other.usd.or(self.usd),
            tokens_per_story: other.tokens_per_story.or(self.tokens_per_story),
            usd_per_story: other.usd_per_story.or(self.usd_per_story),
        }
    }

    /// The command's `--budget-tokens`/`--budget-usd` over the files.
    pub fn with_flags(self, tokens: Option<u64>, usd: Option<f64>) -> Result<BudgetConfig, String> {
        let out = BudgetConfig {
            tokens: tokens.or(self.tokens),
            usd: usd.or(self.usd),
            ..self
        };
        out.check()?;
        Ok(out)
    }

    fn check(&self) -> Result<(), String> {
        for (name, v) in [("usd", self.usd), ("usd_per_story", self.usd_per_story)] {
            if let Some(v) = v
                && !(v.is_finite() && v >= 0.0)
            {
                return Err(format!(
                    "budget {name} must be a number of dollars, 0 or more, not {v}"
                ));
            }
        }
        Ok(())
    }

    /// The cap of a run driven on its own (`baton run`, `resume`, `answer`).
    pub fn run_caps(&self) -> Vec<Cap> {
        let cap = Cap::run(self.tokens, self.usd);
        if cap.is_empty() {
            Vec::new()
        } else {
            vec![cap]
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == BudgetConfig::default()
    }
}

/// Why a call was not made.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetStop {
    pub code: &'static str,
    pub message: String,
    /// `{scope, kind: tokens|usd, limit, spent, estimate}`: which budget, and by how much.
    pub details: Value,
}

/// The most one request can cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub prompt_tokens: u64,
    pub max_tokens: u64,
    /// `None` without a price.
    pub usd: Option<f64>,
}

impl Estimate {
    pub fn tokens(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.max_tokens)
    }

    pub fn to_json(&self) -> Value {
        let mut v = json!({"promptTokens": self.prompt_tokens, "maxTokens": self.max_tokens});
        if let Some(usd) = self.usd {
            v["usd"] = json!(usd);
        }
        v
    }
}

/// What a run's durable records say it spent.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Recorded {
    /// The usage providers reported, summed (`costUsd` only where every call was priced).
    pub usage: Usage,
    /// Model calls made (summary calls included).
    pub calls: u64,
    /// What counts against budgets: reported usage, or the estimate of a call that reported
    /// none.
    pub spent: Spent,
    /// Requests with a previous one in the same invocation, their bytes and the bytes they
    /// share with the start of the previous request.
    pub prefix_requests: u64,
    pub prefix_bytes: u64,
    pub prefix_shared: u64,
    /// Requests whose previous request was at the same node, and how many of them begin with
    /// the whole previous request.
    pub same_node_requests: u64,
    pub extensions: u64,
    /// Requests (after the first of an invocation) that begin with the whole previous request,
    /// whatever its node: under the carrying context policy, all but those after a compaction.
    pub extending: u64,
}

impl Recorded {
    /// Over the requests after the first (of each invocation): the bytes each shares with the
    /// start of the previous request, divided by their bytes. `None` with no such request.
    pub fn cacheable_prefix_share(&self) -> Option<f64> {
        (self.prefix_bytes > 0).then(|| self.prefix_shared as f64 / self.prefix_bytes as f64)
    }

    /// The share of requests within a node that begin with the whole previous request.
    pub fn prefix_extensions(&self) -> Option<f64> {
        (self.same_node_requests > 0)
            .then(|| self.extensions as f64 / self.same_node_requests as f64)
    }

    /// The share of requests after the first (of each invocation) that begin with the whole
    /// previous request, across node changes too.
    pub fn run_extensions(&self) -> Option<f64> {
        (self.prefix_requests > 0).then(|| self.extending as f64 / self.prefix_requests as f64)
    }

    /// The run's usage as `run.json` keeps it.
    pub fn run_usage(&self) -> RunUsage {
        run_usage(&self.usage, self.calls)
    }

    /// Adds one call's audit fields (`usage`, `counted`, `estimate`, `prompt`), as the log's
    /// `engine.turn` lines are summed.
    pub fn add_line(&mut self, line: &Value, price: Option<Price>) {
        let usage = line
            .get("usage")
            .filter(|u| !u.is_null())
            .and_then(|u| serde_json::from_value::<Usage>(u.clone()).ok());
        let estimate = line.get("estimate");
        let n = |v: Option<&Value>, k: &str| v.and_then(|e| e.get(k)).and_then(Value::as_u64);
        let counted = line
            .get("counted")
            .and_then(|c| serde_json::from_value::<Counted>(c.clone()).ok());
        self.calls += 1;
        match (usage, counted) {
            (usage, Some(counted)) => {
                let charged = charge(usage.as_ref(), counted, price);
                self.spent.tokens = self.spent.tokens.saturating_add(charged.total_tokens);
                self.spent.usd += charged
                    .cost_usd
                    .or(usage.and_then(|u| u.cost_usd))
                    .unwrap_or(0.0);
                self.add_reported(usage, price);
            }
            // Lines written before baton counted completions: the prompt it counted, at least.
            (Some(u), None) => {
                let counted = Counted {
                    prompt_tokens: n(estimate, "promptTokens").unwrap_or(0),
                    completion_tokens: 0,
                };
                let charged = charge(Some(&u), counted, price);
                self.spent.tokens = self.spent.tokens.saturating_add(charged.total_tokens);
                self.spent.usd += charged.cost_usd.or(u.cost_usd).unwrap_or(0.0);
                self.add_reported(Some(u), price);
            }
            (None, None) => {
                let tokens = n(estimate, "promptTokens")
                    .unwrap_or(0)
                    .saturating_add(n(estimate, "maxTokens").unwrap_or(0));
                self.spent.tokens = self.spent.tokens.saturating_add(tokens);
                self.spent.usd += estimate
                    .and_then(|e| e.get("usd"))
                    .and_then(Value::as_f64)
                    .unwrap_or(0.0);
                self.add_reported(None, price);
            }
        }
        if let Some(p) = line.get("prompt") {
            if let (Some(bytes), Some(shared)) = (n(Some(p), "bytes"), n(Some(p), "shared")) {
                self.prefix_requests += 1;
                self.prefix_bytes += bytes;
                self.prefix_shared += shared;
                if p.get("extends").and_then(Value::as_bool) == Some(true) {
                    self.extending += 1;
                }
            }
            if p.get("sameNode").and_then(Value::as_bool) == Some(true) {
                self.same_node_requests += 1;
                if p.get("extends").and_then(Value::as_bool) == Some(true) {
                    self.extensions += 1;
                }
            }
        }
    }
}

impl Recorded {
    /// Adds what a provider reported to the usage sums (a call that reported nothing makes the
    /// sum's cost unknown).
    fn add_reported(&mut self, usage: Option<Usage>, price: Option<Price>) {
        match usage {
            Some(mut u) => {
                if u.cost_usd.is_none() {
                    u.cost_usd = price.map(|p| p.cost(&u));
                }
                self.usage.add(u);
            }
            None => self.usage.cost_usd = None,
        }
    }
}

/// `usage` and a call count as `run.json` keeps them.
pub fn run_usage(usage: &Usage, calls: u64) -> RunUsage {
    RunUsage {
        prompt_tokens: usage.prompt_tokens,
        cached_prompt_tokens: usage.cached_prompt_tokens,
        cache_write_tokens: usage.cache_write_tokens,
        completion_tokens: usage.completion_tokens,
        reasoning_tokens: usage.reasoning_tokens,
        total_tokens: usage.total_tokens,
        cost_usd: usage.cost_usd,
        model_calls: calls,
    }
}

/// A run's usage from `run.json` as a [`Usage`].
pub fn usage_of(r: &RunUsage) -> Usage {
    Usage {
        prompt_tokens: r.prompt_tokens,
        cached_prompt_tokens: r.cached_prompt_tokens,
        cache_write_tokens: r.cache_write_tokens,
        completion_tokens: r.completion_tokens,
        reasoning_tokens: r.reasoning_tokens,
        total_tokens: r.total_tokens,
        cost_usd: r.cost_usd,
    }
}

/// Sums the model calls recorded in the audit log at `execution_log` (missing: nothing).
/// Calls recorded without a cost are priced at `price` when one is given.
pub fn recorded(execution_log: &Path, price: Option<Price>) -> Recorded {
    let mut out = Recorded::default();
    let Ok(file) = std::fs::File::open(execution_log) else {
        return out;
    };
    let mut reader = std::io::BufReader::new(file);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader
            .by_ref()
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut buf)
        {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if buf.last() != Some(&b'\n') && buf.len() >= MAX_LINE {
            // An overlong line: skip the rest of it.
            let mut rest = Vec::new();
            if reader.read_until(b'\n', &mut rest).is_err() {
                break;
            }
            continue;
        }
        let is_call = |k: &[u8]| buf.windows(k.len()).any(|w| w == k);
        if !(is_call(b"\"engine.turn\"") || is_call(b"\"engine.summary\"")) {
            continue;
        }
        let Ok(line) = serde_json::from_slice::<Value>(&buf) else {
            continue;
        };
        if matches!(
            line.get("kind").and_then(Value::as_str),
            Some("engine.turn" | "engine.summary")
        ) {
            out.add_line(&line, price);
        }
    }
    out
}

/// The meter of one invocation: caps, the run's spending so far, and the previous request.
pub struct Meter {
    caps: Vec<Cap>,
    price: Option<Price>,
    cap_tokens: u64,
    context_tokens: Option<u64>,
    counter: TokenCounter,
    /// The run's records, from its log at the start, then this invocation's calls.
    run: Recorded,
    previous: Option<(Vec<u8>, Option<String>)>,
    /// The run id, for `prompt_cache_key`.
    key: String,
    /// One `prompt_cache_key` per node (the `node` context policy, whose history restarts at
    /// each node), or one for the whole run (the carrying policy).
    key_per_node: bool,
    /// The stop of the last refused call.
    stopped: Option<BudgetStop>,
    /// The MCP tools of each agent, as first listed in this invocation.
    mcp: std::collections::HashMap<String, Vec<ToolDef>>,
}

impl Meter {
    /// The meter of `run_id` driven by `model`, its spending so far read from `execution_log`.
    pub fn open(
        run_id: &str,
        execution_log: &Path,
        model: &dyn ChatModel,
        caps: Vec<Cap>,
    ) -> Meter {
        let price = model.price();
        Meter {
            caps: caps.into_iter().filter(|c| !c.is_empty()).collect(),
            price,
            cap_tokens: u64::from(model.max_completion_tokens()),
            context_tokens: model.context_tokens(),
            counter: TokenCounter::for_model(model.model_name()),
            run: recorded(execution_log, price),
            previous: None,
            key: run_id.to_string(),
            key_per_node: true,
            stopped: None,
            mcp: Default::default(),
        }
    }

    /// One `prompt_cache_key` for all the run's requests: under the carrying context policy
    /// each request extends the previous one across nodes, so they belong to one cache.
    pub fn key_per_run(mut self) -> Meter {
        self.key_per_node = false;
        self
    }

    /// A meter with no budget and no past (tests, callers that keep no records).
    pub fn unbounded(model: &dyn ChatModel) -> Meter {
        Meter {
            caps: Vec::new(),
            price: model.price(),
            cap_tokens: u64::from(model.max_completion_tokens()),
            context_tokens: model.context_tokens(),
            counter: TokenCounter::for_model(model.model_name()),
            run: Recorded::default(),
            previous: None,
            key: String::new(),
            key_per_node: true,
            stopped: None,
            mcp: Default::default(),
        }
    }

    /// A meter with `caps` and no run of its own: single calls made outside a run (a
    /// session's gates), whose spending the caller records.
    pub fn with_caps(model: &dyn ChatModel, caps: Vec<Cap>) -> Meter {
        let mut m = Meter::unbounded(model);
        m.caps = caps.into_iter().filter(|c| !c.is_empty()).collect();
        m
    }

    pub fn price(&self) -> Option<Price> {
        self.price
    }

    /// What the run spent so far (its records, then this invocation's calls).
    pub fn recorded(&self) -> &Recorded {
        &self.run
    }

    /// The MCP tools of `agent`: listed by `list` the first time it gives any, then the same
    /// list for the rest of the invocation (a server that answers late adds its tools once).
    pub fn mcp_tools(&mut self, agent: &str, list: impl FnOnce() -> Vec<ToolDef>) -> Vec<ToolDef> {
        if let Some(tools) = self.mcp.get(agent) {
            return tools.clone();
        }
        let tools = list();
        if !tools.is_empty() {
            self.mcp.insert(agent.to_string(), tools.clone());
        }
        tools
    }

    /// The stop of the last refused call, once.
    pub fn take_stop(&mut self) -> Option<BudgetStop> {
        self.stopped.take()
    }

    /// Sets the request's completion cap (the configured one, within what the context window
    /// leaves) and, with `node`, its cache key; then checks the budgets against its estimate.
    pub fn prepare(
        &mut self,
        request: &mut ChatRequest,
        node: Option<&str>,
    ) -> Result<Estimate, BudgetStop> {
        let prompt = self.counter.request(&request.messages, &request.tools) as u64;
        let wanted = request
            .options
            .max_tokens
            .map_or(self.cap_tokens, u64::from);
        let room = self.context_tokens.map_or(u64::MAX, |c| {
            c.saturating_sub(prompt).max(MIN_COMPLETION_CAP)
        });
        let cap = wanted.min(room);
        request.options.max_tokens = Some(u32::try_from(cap).unwrap_or(u32::MAX));
        if let Some(node) = node
            && !self.key.is_empty()
        {
            let scope = if self.key_per_node { node } else { RUN_KEY };
            request.options.cache_key = Some(cache_key(&self.key, scope));
        }
        let estimate = Estimate {
            prompt_tokens: prompt,
            max_tokens: cap,
            usd: self.price.map(|p| p.bound(prompt, cap)),
        };
        if let Err(stop) = self.check(&estimate) {
            self.stopped = Some(stop.clone());
            return Err(stop);
        }
        Ok(estimate)
    }

    fn check(&self, estimate: &Estimate) -> Result<(), BudgetStop> {
        check_caps(&self.caps, self.run.spent, estimate)
    }

    /// Counts a call made: baton counts the answer's tokens (text, reasoning, tool names and
    /// arguments), prices the provider's usage where a price is known, and charges the run
    /// the larger of the two (see [`charge`]).
    pub fn record(&mut self, estimate: &Estimate, response: &ChatResponse) -> CallSpend {
        let counted = Counted {
            prompt_tokens: estimate.prompt_tokens,
            completion_tokens: self.counter.message(&response.message) as u64,
        };
        let reported = response.usage.map(|mut u| {
            u.cost_usd = self.price.map(|p| p.cost(&u));
            u
        });
        let spend = CallSpend {
            reported,
            counted,
            charged: charge(reported.as_ref(), counted, self.price),
            warning: usage_warning(&response.usage_faults),
        };
        self.run.add_line(&spend.audit_fields(estimate), self.price);
        spend
    }

    /// How `request` (the one about to be sent) relates to the previous request of this
    /// invocation: `{bytes, shared, extends, sameNode}`; `{bytes}` alone for the first.
    pub fn prompt_figures(&mut self, request: &ChatRequest, node: Option<&str>) -> Value {
        let bytes = request_prompt_bytes(request);
        let node = node.map(str::to_owned);
        let figures = match &self.previous {
            None => json!({"bytes": bytes.len()}),
            Some((prev, prev_node)) => {
                let shared = common_prefix(prev, &bytes);
                json!({"bytes": bytes.len(), "shared": shared, "extends": shared == prev.len(),
                       "sameNode": *prev_node == node})
            }
        };
        if let Some(shared) = figures.get("shared").and_then(Value::as_u64) {
            self.run.prefix_requests += 1;
            self.run.prefix_bytes += bytes.len() as u64;
            self.run.prefix_shared += shared;
            if figures.get("extends").and_then(Value::as_bool) == Some(true) {
                self.run.extending += 1;
            }
        }
        if figures.get("sameNode").and_then(Value::as_bool) == Some(true) {
            self.run.same_node_requests += 1;
            if figures.get("extends").and_then(Value::as_bool) == Some(true) {
                self.run.extensions += 1;
            }
        }
        self.previous = Some((bytes, node));
        figures
    }
}

/// Whether a call that may cost `estimate` fits every cap, the run having spent `run_spent`.
pub fn check_caps(caps: &[Cap], run_spent: Spent, estimate: &Estimate) -> Result<(), BudgetStop> {
    for cap in caps {
        let mut spent = cap.spent_elsewhere;
        spent.add(run_spent);
        if let Some(limit) = cap.tokens
            && spent.tokens.saturating_add(estimate.tokens()) > limit
        {
            return Err(stop(
                cap,
                "tokens",
                limit as f64,
                spent.tokens as f64,
                estimate.tokens() as f64,
            ));
        }
        if let Some(limit) = cap.usd {
            let Some(usd) = estimate.usd else {
                return Err(BudgetStop {
                    code: BUDGET_PRICE_UNKNOWN,
                    message: format!(
                        "a USD budget is set ({}) but the model has no known price",
                        cap.scope
                    ),
                    details: json!({"scope": cap.scope, "kind": "usd"}),
                });
            };
            if spent.usd + usd > limit {
                return Err(stop(cap, "usd", limit, spent.usd, usd));
            }
        }
    }
    Ok(())
}

fn stop(cap: &Cap, kind: &str, limit: f64, spent: f64, estimate: f64) -> BudgetStop {
    let (shown_limit, shown_spent, shown_estimate) = if kind == "usd" {
        (
            format!("${limit:.4}"),
            format!("${spent:.4}"),
            format!("${estimate:.4}"),
        )
    } else {
        (
            format!("{limit:.0} tokens"),
            format!("{spent:.0}"),
            format!("{estimate:.0}"),
        )
    };
    BudgetStop {
        code: BUDGET_EXCEEDED,
        message: format!(
            "the {} budget of {shown_limit} would be crossed: {shown_spent} spent, the next call may cost {shown_estimate}",
            cap.scope
        ),
        details: if kind == "usd" {
            json!({"scope": cap.scope, "kind": kind, "limit": limit, "spent": spent, "estimate": estimate})
        } else {
            // Token counts are whole numbers.
            json!({"scope": cap.scope, "kind": kind, "limit": limit as u64, "spent": spent as u64,
                   "estimate": estimate as u64})
        },
    }
}

/// The scope of the one `prompt_cache_key` of a run under the carrying context policy.
pub const RUN_KEY: &str = "*";

/// `prompt_cache_key` of a run's node: requests of one node share their prefix, so they go to
/// the same cache. A stable hash keeps the key short whatever the node id.
pub fn cache_key(run_id: &str, node: &str) -> String {
    // FNV-1a, 64 bits: stable across builds and platforms.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in node.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("baton-{run_id}-{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_is_summed_with_estimates_for_calls_without_usage() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("execution.jsonl");
        let lines = [
            json!({"kind": "tool.exec", "usage": {"totalTokens": 999}}),
            json!({"kind": "engine.turn", "usage": {"promptTokens": 100, "cachedPromptTokens": 64, "completionTokens": 10, "totalTokens": 110},
                   "estimate": {"promptTokens": 90, "maxTokens": 50}, "prompt": {"bytes": 400}}),
            json!({"kind": "engine.turn", "usage": null, "estimate": {"promptTokens": 120, "maxTokens": 50},
                   "prompt": {"bytes": 500, "shared": 400, "extends": true, "sameNode": true}}),
            json!({"kind": "engine.summary", "usage": {"promptTokens": 30, "completionTokens": 5, "totalTokens": 35}}),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&log, text + "not json\n").unwrap();
        let r = recorded(&log, None);
        assert_eq!(r.calls, 3);
        assert_eq!(r.spent.tokens, 110 + 170 + 35);
        assert_eq!(
            (
                r.usage.prompt_tokens,
                r.usage.cached_prompt_tokens,
                r.usage.total_tokens
            ),
            (130, 64, 145)
        );
        assert_eq!(r.cacheable_prefix_share(), Some(0.8));
        assert_eq!(r.prefix_extensions(), Some(1.0));
        let priced = recorded(&log, Some(Price::new(1.0, 0.5, 2.0)));
        // A call without usage leaves the sum without a cost.
        assert_eq!(priced.usage.cost_usd, None);
        assert!(priced.spent.usd > 0.0);
        assert_eq!(
            recorded(&dir.path().join("missing"), None),
            Recorded::default()
        );
    }

    #[test]
    fn a_call_is_charged_the_larger_of_the_providers_figures_and_batons_count() {
        let counted = Counted {
            prompt_tokens: 1000,
            completion_tokens: 50,
        };
        let usage = |p, c, t| Usage {
            prompt_tokens: p,
            completion_tokens: c,
            total_tokens: t,
            ..Usage::default()
        };
        // Nothing reported, zeros, or a total of 0: baton's count.
        for reported in [None, Some(usage(0, 0, 0)), Some(usage(1000, 50, 0))] {
            let c = charge(reported.as_ref(), counted, None);
            assert_eq!(
                (c.prompt_tokens, c.completion_tokens, c.total_tokens),
                (1000, 50, 1050)
            );
        }
        // Each figure on its own: a provider counting more prompt but less completion.
        let c = charge(Some(&usage(1200, 10, 1210)), counted, None);
        assert_eq!(
            (c.prompt_tokens, c.completion_tokens, c.total_tokens),
            (1200, 50, 1250)
        );
        // A total over its parts is charged, the difference as completion (output price).
        let c = charge(Some(&usage(100, 5, 5000)), counted, None);
        assert_eq!(
            (c.prompt_tokens, c.completion_tokens, c.total_tokens),
            (1000, 4000, 5000)
        );
        // The cached discount holds within the provider's own prompt figure only.
        let cached = Usage {
            cached_prompt_tokens: 900,
            ..usage(100, 50, 150)
        };
        let price = Price::new(1.0, 0.1, 10.0);
        let c = charge(Some(&cached), counted, Some(price));
        assert_eq!(c.cached_prompt_tokens, 100);
        let expected = (900.0 * 1.0 + 100.0 * 0.1 + 50.0 * 10.0) / 1_000_000.0;
        assert!((c.cost_usd.unwrap() - expected).abs() < 1e-12);

        // The log charges the same way, and a line's figures never lower the sum.
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("execution.jsonl");
        let lines = [
            json!({"kind": "engine.turn", "usage": {"promptTokens": 0, "completionTokens": 0, "totalTokens": 0},
                   "counted": {"promptTokens": 1000, "completionTokens": 50},
                   "estimate": {"promptTokens": 1000, "maxTokens": 300}}),
            json!({"kind": "engine.turn", "usage": null, "counted": {"promptTokens": 2000, "completionTokens": 40},
                   "estimate": {"promptTokens": 2000, "maxTokens": 300}}),
            json!({"kind": "engine.warning", "code": PROVIDER_USAGE_INVALID}),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&log, text).unwrap();
        let r = recorded(&log, Some(price));
        assert_eq!(r.calls, 2);
        assert_eq!(r.spent.tokens, 1050 + 2040);
        assert_eq!(
            r.usage.total_tokens, 0,
            "the usage sums stay what was reported"
        );
        let expected = (3000.0 + 90.0 * 10.0) / 1_000_000.0;
        assert!((r.spent.usd - expected).abs() < 1e-12, "{}", r.spent.usd);
    }

    #[test]
    fn budget_tables_layer_and_flags_win() {
        let home = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join("config.toml"),
            "[llm]\nmodel = \"x\"\n[budget]\ntokens = 1000\nusd_per_story = 2.5\n",
        )
        .unwrap();
        std::fs::write(
            project.path().join("baton.toml"),
            "[budget]\ntokens = 500\n",
        )
        .unwrap();
        let b = BudgetConfig::load(Some(home.path()), Some(project.path())).unwrap();
        assert_eq!(
            b,
            BudgetConfig {
                tokens: Some(500),
                usd_per_story: Some(2.5),
                ..BudgetConfig::default()
            }
        );
        let f = b.with_flags(Some(7), Some(0.5)).unwrap();
        assert_eq!((f.tokens, f.usd), (Some(7), Some(0.5)));
        assert_eq!(f.run_caps(), vec![Cap::run(Some(7), Some(0.5))]);
        assert!(b.with_flags(None, Some(-1.0)).is_err());
        std::fs::write(project.path().join("baton.toml"), "[budget]\ntoken = 5\n").unwrap();
        let err = BudgetConfig::load(None, Some(project.path())).unwrap_err();
        assert!(err.contains("token"), "{err}");
        assert!(BudgetConfig::load(None, None).unwrap().is_empty());
    }

    #[test]
    fn cache_keys_are_stable_and_differ_by_node() {
        let a = cache_key("r1", "step-01");
        assert_eq!(a, cache_key("r1", "step-01"));
        assert_ne!(a, cache_key("r1", "step-02"));
        assert!(a.len() < 64, "{a}");
    }
}
