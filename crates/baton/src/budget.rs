//! The budget caps of a model-driving command: `[budget]` of the configuration under the
//! command's flags, and the check that a USD cap has a price to count with.

use crate::args::BudgetArgs;
use crate::exit;
use crate::failure::Failure;
use baton_engine::spend;
use baton_llm::ChatModel;
use baton_store::Store;
use std::path::Path;

/// The caps of a run driven on its own: `[budget] tokens`/`usd` of the configuration, under
/// the command's flags.
pub fn budget_config(
    store: &Store,
    project: &Path,
    flags: BudgetArgs,
) -> Result<spend::BudgetConfig, Failure> {
    spend::BudgetConfig::load(Some(store.home()), Some(project))
        .and_then(|b| b.with_flags(flags.budget_tokens, flags.budget_usd))
        .map_err(|message| {
            Failure::new(spend::BUDGET_CONFIG_INVALID, message, exit::INVALID).hint(Some(
                "[budget] takes tokens, usd, tokens_per_story and usd_per_story".into(),
            ))
        })
}

/// A USD budget for a model without a price, said before anything is created or sent.
pub fn check_price(caps: &[spend::Cap], model: &dyn ChatModel) -> Result<(), Failure> {
    let name = model.price_name();
    spend::check_price(caps, model.price(), name).map_err(|stop| {
        Failure::new(stop.code, stop.message, exit::INVALID).hint(Some(spend::price_hint(name)))
    })
}
