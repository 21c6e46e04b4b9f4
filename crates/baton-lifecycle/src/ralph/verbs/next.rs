//! `next`: claim the next step and print its prompt.
//!
//! Exit codes as maestro: 0 printed a step; 1 an error (no session, not running, E-findings,
//! E006, E007); 2 nothing to load (all complete, or the next pending step is a decision); 3 a
//! step is already claimed. Unlike maestro, steps are taken in strict index order (a pending
//! decision stops `next` instead of being jumped over), the claim records its owner, and the
//! whole read-check-write runs under the session lock.

use crate::ralph::Context;
use crate::ralph::check::{self, Scope};
use crate::ralph::error::{RalphError, Result};
use crate::ralph::manifest;
use crate::ralph::prompt::{self, Loaded};
use crate::ralph::session::Session;
use crate::ralph::skill_config;
use crate::ralph::store::{self, Change};
use crate::ralph::time;
use crate::ralph::verbs::Output;
use serde_json::{Value, json};

pub const PROTOCOL_VERSION: &str = "1";

pub struct Claimed {
    index: usize,
    prompt: String,
    warnings: Vec<String>,
    required: Vec<String>,
    deferred: Vec<String>,
    owner: String,
}

pub fn run(
    ctx: &Context,
    session: Option<&str>,
    owner: Option<&str>,
    expect_revision: Option<u64>,
) -> Result<Output> {
    run_prepared(ctx, session, owner, expect_revision, |_| {})
}

/// [`run`] that lets `prepare` change the session first, under the same lock and in the same
/// write: the session loop fills the next step's args this way, without a status.json write
/// (two fsyncs) of its own.
pub fn run_prepared(
    ctx: &Context,
    session: Option<&str>,
    owner: Option<&str>,
    expect_revision: Option<u64>,
    prepare: impl FnOnce(&mut Session),
) -> Result<Output> {
    let owner = owner.unwrap_or(&ctx.owner).to_string();
    let (claimed, s) = store::transact(ctx, session, expect_revision, |s| {
        prepare(s);
        if s.status() != "running" {
            return Err(RalphError::NotRunning {
                status: s.status().to_string(),
            });
        }
        let findings = check::check(ctx, Some(&s.doc), &[], Scope::Unfinished);
        if check::has_errors(&findings) {
            return Err(RalphError::Findings(findings));
        }
        if let Some(a) = s.active_index() {
            let status = s.step(a).map_or("", |st| st.status());
            if status == "completed" {
                // W005: a completed step still holding the pointer; clear it and go on.
                s.release();
            } else {
                let claim = s.claim_on(a);
                return Err(RalphError::StepActive {
                    index: a,
                    status: status.to_string(),
                    owner: claim.as_ref().and_then(|c| c.owner.clone()),
                    since: claim.and_then(|c| c.claimed_at),
                });
            }
        }
        let Some(step) = s.all_steps().find(|st| st.status() == "pending") else {
            return Err(RalphError::NothingPending);
        };
        let index = step.index();
        if let Some(gate) = step.decision() {
            return Err(RalphError::DecisionNext {
                index,
                gate: gate.to_string(),
            });
        }
        let Some(raw_path) = step.command_path() else {
            return Err(RalphError::NoCommandPath {
                index,
                skill: step.skill().to_string(),
            });
        };
        let loaded = Loaded::read(
            &manifest::stored_path(raw_path, ctx.home.as_deref()),
            ctx.home.as_deref(),
            ctx.prompt_roots().as_deref(),
        )?;
        let mut warnings = Vec::new();
        let params = skill_config::defaults(ctx, step.skill(), &mut warnings);
        let section = skill_config::section(step.skill(), step.args().trim(), &params);
        let prompt = prompt::render(&ctx.cli, &s.id, s.len(), &step, &loaded, section.as_deref());
        let (required, deferred) = (loaded.required_files(), loaded.deferred_files());

        let now = time::now_iso();
        s.set_step(
            index,
            "load",
            json!({
                "loaded_at": now,
                "required_files": required,
                "deferred_files": deferred,
                "resolve_version": "1",
            }),
        );
        s.set_step(index, "deferred_reads", json!(deferred));
        s.set_step(index, "status", json!("running"));
        s.set_active(Some(index));
        if s.doc
            .get("ralph_protocol_version")
            .is_none_or(Value::is_null)
        {
            s.set("ralph_protocol_version", json!(PROTOCOL_VERSION));
        }
        s.set_claim(index, &owner, &now);
        Ok(Change::write(Claimed {
            index,
            prompt,
            warnings,
            required,
            deferred,
            owner: owner.clone(),
        }))
    })?;
    let step = s.step(claimed.index);
    let json = json!({
        "ok": true,
        "session_id": s.id,
        "index": claimed.index,
        "total": s.len(),
        "skill": step.map(|st| st.skill()),
        "args": step.map(|st| st.args()),
        "stage": step.map(|st| st.stage()),
        "command_path": step.and_then(|st| st.command_path()),
        "required_files": claimed.required,
        "deferred_files": claimed.deferred,
        "owner": claimed.owner,
        "revision": s.revision(),
        "prompt": claimed.prompt,
    });
    let mut out = Output::new(json).out(&claimed.prompt);
    for w in &claimed.warnings {
        out = out.err(format!("{w}\n"));
    }
    Ok(out)
}
