//! Budgets and usage of an epic: the caps each phase run is driven under (the story's and the
//! epic's, with what their other runs spent) and the stop a capped run makes; the tokens and
//! cost the board shows per run, story and epic are `status_board`'s.
//!
//! What a run spent is read from its own records (its audit log, see
//! [`baton_engine::spend`]), so a budget holds across stops, kills and resumes.

use crate::ctx::Ctx;
pub use crate::status_board::fill_usage;
use baton_engine::spend::{self, BudgetConfig, Cap, Spent};
use baton_llm::Price;
use serde_json::Value;

/// What the runs of the loop's record spent, but `except`: in total, and for `story`.
fn spent_by_others(
    ctx: &Ctx<'_>,
    story: &str,
    except: &str,
    price: Option<Price>,
) -> (Spent, Spent) {
    let mut epic = Spent::default();
    let mut of_story = Spent::default();
    for r in ctx.progress.runs.iter().filter(|r| r.run_id != except) {
        let log = ctx.project.run_paths(&r.run_id).execution_log;
        let s = spend::recorded(&log, price).spent;
        epic.add(s);
        if r.story_key == story {
            of_story.add(s);
        }
    }
    (epic, of_story)
}

/// The caps phase run `run_id` of `story` is driven under: `[budget] tokens_per_story` /
/// `usd_per_story` on the story, `tokens`/`usd` (or the command's flags) on the epic.
pub(super) fn caps_for(ctx: &Ctx<'_>, story: &str, run_id: &str, price: Option<Price>) -> Vec<Cap> {
    let b = &ctx.budget;
    if b.is_empty() {
        return Vec::new();
    }
    let (epic, of_story) = spent_by_others(ctx, story, run_id, price);
    let caps = [
        Cap {
            scope: format!("story {story}"),
            tokens: b.tokens_per_story,
            usd: b.usd_per_story,
            spent_elsewhere: of_story,
        },
        Cap {
            scope: format!("epic {}", baton_bmad::keys::epic_key(ctx.epic)),
            tokens: b.tokens,
            usd: b.usd,
            spent_elsewhere: epic,
        },
    ];
    caps.into_iter().filter(|c| !c.is_empty()).collect()
}

/// The budget a stopped run names in its `waitingFor.error.budget`.
pub(super) fn stop_details(waiting_for: Option<&Value>) -> Value {
    waiting_for
        .and_then(|w| w.pointer("/error/budget"))
        .cloned()
        .unwrap_or(Value::Null)
}

/// A USD budget for a model without a known price is refused before the loop starts.
pub fn check_price(budget: &BudgetConfig, price: Option<Price>, model: &str) -> Result<(), String> {
    let caps = [
        Cap {
            scope: "story".into(),
            tokens: None,
            usd: budget.usd_per_story,
            spent_elsewhere: Spent::default(),
        },
        Cap {
            scope: "epic".into(),
            tokens: None,
            usd: budget.usd,
            spent_elsewhere: Spent::default(),
        },
    ];
    spend::check_price(&caps, price, model).map_err(|s| s.message)
}
