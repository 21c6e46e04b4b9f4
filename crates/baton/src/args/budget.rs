//! The hard budgets a command takes (`--budget-tokens`, `--budget-usd`), shared by runs, the
//! epic autopilot and sessions.

use clap::Args;

/// Hard budgets of a command (over `[budget]` in baton.toml). A model call that could cross one
/// is not made: the command stops with exit code 12 and the run stays resumable.
#[derive(Debug, Clone, Copy, Default, Args)]
pub struct BudgetArgs {
    /// The most tokens (prompt + completion) the run may use, in all its invocations.
    #[arg(long, value_name = "N")]
    pub budget_tokens: Option<u64>,
    /// The most dollars the run may cost, in all its invocations (needs a known price for the
    /// model: built in, or `[models."<name>"] price` in baton.toml).
    #[arg(long, value_name = "USD", value_parser = parse_usd)]
    pub budget_usd: Option<f64>,
}

/// A dollar amount, 0 or more.
pub fn parse_usd(text: &str) -> Result<f64, String> {
    match text.trim().trim_start_matches('$').parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!(
            "expected an amount of dollars, 0 or more, got {text:?}"
        )),
    }
}
