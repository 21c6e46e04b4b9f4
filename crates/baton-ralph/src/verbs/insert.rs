//! `insert --after <i> --template <name> [--gap T]... [--retry N]`: a fix-loop template of seed
//! 003 inserted after step `i`, command files resolved (a missing one is E006 and nothing
//! changes), every later step renumbered, the active pointer and the claim moved with their
//! step.

use crate::Context;
use crate::chain::{self, TEMPLATES};
use crate::error::{RalphError, Result};
use crate::store::{self, Change};
use crate::verbs::{Output, index_in, parse_index};
use serde_json::json;

#[derive(Debug, Clone, Default)]
pub struct InsertArgs {
    pub after: String,
    pub template: String,
    pub gaps: Vec<String>,
    pub retry: Option<u64>,
    pub expect_revision: Option<u64>,
}

pub fn check_template(name: &str) -> Result<()> {
    if TEMPLATES.contains(&name) {
        Ok(())
    } else {
        Err(RalphError::usage(
            "TEMPLATE_INVALID",
            format!(
                "--template must be one of: {} (got \"{name}\")",
                TEMPLATES.join(", ")
            ),
        ))
    }
}

pub fn run(ctx: &Context, session: Option<&str>, args: &InsertArgs) -> Result<Output> {
    check_template(&args.template)?;
    parse_index(&args.after)?;
    let ((after, count), s) = store::transact(ctx, session, args.expect_revision, |s| {
        if !matches!(s.status(), "running" | "paused") {
            return Err(RalphError::NotActive {
                status: s.status().to_string(),
                action: "changed",
            });
        }
        let after = index_in(&args.after, s.len())?;
        // The closing gate carries the retry count: one more than the gate it follows.
        let retry = args.retry.unwrap_or_else(|| {
            s.step(after)
                .filter(|st| st.decision().is_some())
                .map_or(0, |st| st.retry_count() + 1)
        });
        let items = chain::template_items(&args.template, &args.gaps, retry)
            .ok_or_else(|| RalphError::usage("TEMPLATE_INVALID", args.template.clone()))?;
        let count = chain::insert_after(ctx, s, after, &items)?;
        Ok(Change::write((after, count)))
    })?;
    let mut text = format!(
        "+{count} steps inserted after step {after} (template {})\n",
        args.template
    );
    for step in s.all_steps().skip(after + 1).take(count) {
        text.push_str(&format!(
            "  {}. {} {}\n",
            step.index(),
            step.label(),
            step.args()
        ));
    }
    let json = json!({
        "ok": true,
        "session_id": s.id,
        "after": after,
        "inserted": count,
        "template": args.template,
        "revision": s.revision(),
        "active_step_index": s.active_index(),
    });
    Ok(Output::new(json).out(text))
}
