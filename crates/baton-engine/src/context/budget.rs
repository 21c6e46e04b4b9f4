//! How many tokens a request may carry: the window, the thresholds compression works to, and
//! the codes and defaults around them.

/// A model's context window when neither the configuration nor the table of known models
/// says otherwise.
pub const DEFAULT_CONTEXT_TOKENS: usize = 32_768;

/// The most history the carrying context policy (`full`) keeps before it leaves out the
/// earlier nodes: every carried token is paid again on each request, cached or not.
pub const CARRY_MAX_TOKENS: usize = 32_768;

/// The code of a request that cannot be made small enough.
pub const CONTEXT_STILL_TOO_LARGE: &str = "CONTEXT_STILL_TOO_LARGE";

/// How many tokens a request may carry, and how compression keeps it there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// The model's context window.
    pub context_tokens: usize,
    /// Tool groups at the end of the window that are always kept whole.
    pub recent_groups: usize,
    /// Messages at the end of the window that are always kept.
    pub min_recent_messages: usize,
    /// The most a rolling summary may take.
    pub summary_tokens: usize,
}

impl Budget {
    pub fn new(context_tokens: usize) -> Budget {
        Budget {
            context_tokens,
            recent_groups: 6,
            min_recent_messages: 10,
            // Small windows cannot give 2,000 tokens to a summary.
            summary_tokens: (context_tokens / 8).clamp(64, 2_000),
        }
    }

    /// Compression starts when a request would pass 80 % of the window…
    pub fn trigger(&self) -> usize {
        self.context_tokens / 10 * 8 + self.context_tokens % 10 * 8 / 10
    }

    /// …and aims at 50 %, so that it happens in steps, not on every turn.
    pub fn target(&self) -> usize {
        self.context_tokens / 2
    }

    /// Under the carrying policy, a request past this leaves out the history of the nodes
    /// before the current one, in one step: half the window, at most [`CARRY_MAX_TOKENS`].
    pub fn carry_limit(&self) -> usize {
        self.target().min(CARRY_MAX_TOKENS)
    }

    /// A request above this is refused (`CONTEXT_STILL_TOO_LARGE`), never sent.
    pub fn limit(&self) -> usize {
        self.context_tokens
    }
}

impl Default for Budget {
    fn default() -> Budget {
        Budget::new(DEFAULT_CONTEXT_TOKENS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds() {
        let b = Budget::new(16_384);
        assert_eq!(b.trigger(), 13_107);
        assert_eq!(b.target(), 8_192);
        assert_eq!(b.limit(), 16_384);
        assert_eq!(b.carry_limit(), 8_192);
        assert_eq!(Budget::new(1_000_000).carry_limit(), CARRY_MAX_TOKENS);
        assert_eq!(b.summary_tokens, 2_000);
        assert_eq!(Budget::new(4_000).summary_tokens, 500);
        assert_eq!(Budget::default().context_tokens, 32_768);
    }
}
