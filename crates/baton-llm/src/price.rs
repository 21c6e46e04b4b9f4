//! What tokens cost: a price per model (USD per million tokens, input, cached input and output),
//! from `[models."<name>"] price` in the configuration or a small built-in table of list prices.
//! A model with no price has no cost: nothing here guesses one.

use crate::types::Usage;
use serde::Deserialize;

/// The day the built-in prices were taken from the providers' published price lists.
pub const BUILT_IN_PRICES_DATE: &str = "2025-11-24";

/// USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    /// Prompt tokens served from the provider's cache. Absent: the input price (no discount
    /// is assumed that nobody stated).
    #[serde(default)]
    pub cached_input: Option<f64>,
    pub output: f64,
    /// Prompt tokens written to the provider's cache (Anthropic: 1.25 × input for the
    /// five-minute cache). Absent: the input price.
    #[serde(default)]
    pub cache_write: Option<f64>,
}

impl Price {
    pub const fn new(input: f64, cached_input: f64, output: f64) -> Price {
        Price {
            input,
            cached_input: Some(cached_input),
            output,
            cache_write: None,
        }
    }

    /// Anthropic's list prices: cache reads at a tenth of the input price, five-minute cache
    /// writes at 1.25 times it.
    pub const fn claude(input: f64, output: f64) -> Price {
        Price {
            input,
            cached_input: Some(input * 0.1),
            output,
            cache_write: Some(input * 1.25),
        }
    }

    pub fn cache_write(&self) -> f64 {
        self.cache_write.unwrap_or(self.input)
    }

    pub fn cached_input(&self) -> f64 {
        self.cached_input.unwrap_or(self.input)
    }

    /// What `usage` cost: uncached prompt tokens at the input price, cached ones at the cached
    /// price, cache writes at the cache-write price, completion tokens (reasoning included) at
    /// the output price.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let cached = usage.cached_prompt_tokens.min(usage.prompt_tokens);
        let written = usage.cache_write_tokens.min(usage.prompt_tokens - cached);
        let uncached = usage.prompt_tokens - cached - written;
        (uncached as f64 * self.input
            + cached as f64 * self.cached_input()
            + written as f64 * self.cache_write()
            + usage.completion_tokens as f64 * self.output)
            / 1_000_000.0
    }

    /// The most a request can cost: every prompt token uncached (or written to the cache,
    /// when that costs more), the whole completion cap used.
    pub fn bound(&self, prompt_tokens: u64, max_completion: u64) -> f64 {
        let per_prompt_token = self.input.max(self.cache_write());
        (prompt_tokens as f64 * per_prompt_token + max_completion as f64 * self.output)
            / 1_000_000.0
    }

    /// Finite and not negative.
    pub fn is_valid(&self) -> bool {
        [
            self.input,
            self.cached_input(),
            self.output,
            self.cache_write(),
        ]
        .iter()
        .all(|p| p.is_finite() && *p >= 0.0)
    }
}

/// List prices of well-known models on [`BUILT_IN_PRICES_DATE`], by exact model id (a gateway's
/// `vendor/` prefix is ignored). Dated snapshots and other names get no price unless the
/// configuration gives one.
const BUILT_IN: &[(&str, Price)] = &[
    ("gpt-5", Price::new(1.25, 0.125, 10.0)),
    ("gpt-5-mini", Price::new(0.25, 0.025, 2.0)),
    ("gpt-5-nano", Price::new(0.05, 0.005, 0.40)),
    ("gpt-4.1", Price::new(2.0, 0.50, 8.0)),
    ("gpt-4.1-mini", Price::new(0.40, 0.10, 1.60)),
    ("gpt-4.1-nano", Price::new(0.10, 0.025, 0.40)),
    ("gpt-4o", Price::new(2.50, 1.25, 10.0)),
    ("gpt-4o-mini", Price::new(0.15, 0.075, 0.60)),
    ("o3", Price::new(2.0, 0.50, 8.0)),
    ("o4-mini", Price::new(1.10, 0.275, 4.40)),
    ("deepseek-chat", Price::new(0.28, 0.028, 0.42)),
    ("deepseek-reasoner", Price::new(0.28, 0.028, 0.42)),
    // Anthropic: aliases, dated ids, and OpenRouter's dotted names.
    ("claude-opus-4-5", Price::claude(5.0, 25.0)),
    ("claude-opus-4-5-20251101", Price::claude(5.0, 25.0)),
    ("claude-opus-4.5", Price::claude(5.0, 25.0)),
    ("claude-opus-4-1", Price::claude(15.0, 75.0)),
    ("claude-opus-4-1-20250805", Price::claude(15.0, 75.0)),
    ("claude-opus-4.1", Price::claude(15.0, 75.0)),
    ("claude-opus-4-0", Price::claude(15.0, 75.0)),
    ("claude-opus-4-20250514", Price::claude(15.0, 75.0)),
    ("claude-opus-4", Price::claude(15.0, 75.0)),
    ("claude-sonnet-4-5", Price::claude(3.0, 15.0)),
    ("claude-sonnet-4-5-20250929", Price::claude(3.0, 15.0)),
    ("claude-sonnet-4.5", Price::claude(3.0, 15.0)),
    ("claude-sonnet-4-0", Price::claude(3.0, 15.0)),
    ("claude-sonnet-4-20250514", Price::claude(3.0, 15.0)),
    ("claude-sonnet-4", Price::claude(3.0, 15.0)),
    ("claude-3-7-sonnet-latest", Price::claude(3.0, 15.0)),
    ("claude-3-7-sonnet-20250219", Price::claude(3.0, 15.0)),
    ("claude-haiku-4-5", Price::claude(1.0, 5.0)),
    ("claude-haiku-4-5-20251001", Price::claude(1.0, 5.0)),
    ("claude-haiku-4.5", Price::claude(1.0, 5.0)),
    ("claude-3-5-haiku-latest", Price::claude(0.80, 4.0)),
    ("claude-3-5-haiku-20241022", Price::claude(0.80, 4.0)),
];

/// The built-in price of `model`, if it is one of the table's ids.
pub fn built_in_price(model: &str) -> Option<Price> {
    let name = model.rsplit('/').next().unwrap_or(model);
    BUILT_IN
        .iter()
        .find(|(id, _)| id.eq_ignore_ascii_case(name))
        .map(|(_, p)| *p)
}

/// The built-in table, for documentation and `--json` listings.
pub fn built_in_prices() -> &'static [(&'static str, Price)] {
    BUILT_IN
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_split_cached_and_uncached_input() {
        let p = Price::new(2.0, 0.5, 8.0);
        let u = Usage {
            prompt_tokens: 1_000_000,
            cached_prompt_tokens: 500_000,
            completion_tokens: 100_000,
            total_tokens: 1_100_000,
            ..Usage::default()
        };
        assert!((p.cost(&u) - (1.0 + 0.25 + 0.8)).abs() < 1e-9);
        assert!((p.bound(1_000_000, 100_000) - 2.8).abs() < 1e-9);
        let no_discount = Price {
            cached_input: None,
            ..p
        };
        assert!((no_discount.cost(&u) - 2.8).abs() < 1e-9);
    }

    #[test]
    fn only_exact_ids_have_a_built_in_price() {
        assert_eq!(built_in_price("gpt-4.1"), Some(Price::new(2.0, 0.5, 8.0)));
        assert_eq!(
            built_in_price("openai/gpt-4o-mini"),
            Some(Price::new(0.15, 0.075, 0.60))
        );
        assert_eq!(built_in_price("gpt-4o-2024-05-13"), None);
        assert_eq!(built_in_price("qwen2.5-coder:14b"), None);
        assert_eq!(built_in_price("replay"), None);
        assert!(BUILT_IN.iter().all(|(_, p)| p.is_valid()));
    }

    #[test]
    fn cache_writes_cost_the_cache_write_price() {
        let p = built_in_price("anthropic/claude-sonnet-4.5").unwrap();
        assert_eq!(p, built_in_price("claude-sonnet-4-5-20250929").unwrap());
        // 1M prompt tokens: 600k read from the cache, 300k written to it, 100k uncached.
        let u = Usage {
            prompt_tokens: 1_000_000,
            cached_prompt_tokens: 600_000,
            cache_write_tokens: 300_000,
            completion_tokens: 10_000,
            total_tokens: 1_010_000,
            ..Usage::default()
        };
        let expected = 0.1 * 3.0 + 0.6 * 0.3 + 0.3 * 3.75 + 0.01 * 15.0;
        assert!((p.cost(&u) - expected).abs() < 1e-9, "{}", p.cost(&u));
        // The bound prices every prompt token as a cache write, the dearest way in.
        assert!((p.bound(1_000_000, 0) - 3.75).abs() < 1e-9);
    }
}
