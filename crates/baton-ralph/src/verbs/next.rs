//! `next`: claim the next step and print its prompt.
//!
//! Exit codes as maestro: 0 printed a step; 1 an error (no session, not running, E-findings,
//! E006, E007, a lease conflict); 2 nothing to load (all complete, or the next pending step is
//! a decision); 3 a step is already claimed. For a protocol-2 session (maestro v0.5) the
//! prompt starts with the session anchor and an error finding pauses the session. Unlike
//! maestro, steps are taken in strict index order (a pending decision stops `next` instead of
//! being jumped over), the claim records its owner, and the whole read-check-write runs under
//! the session lock.

use crate::Context;
use crate::anchor;
use crate::check::{self, Scope};
use crate::error::{RalphError, Result};
use crate::handle::Target;
use crate::lease::Lease;
use crate::manifest;
use crate::prompt::{self, Layout, Loaded};
use crate::session::Session;
use crate::skill_config;
use crate::store::{self, Change};
use crate::time;
use crate::verbs::Output;
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

pub fn run<'a>(
    ctx: &Context,
    session: impl Into<Target<'a>>,
    owner: Option<&str>,
    expect_revision: Option<u64>,
) -> Result<Output> {
    run_with(
        ctx,
        session,
        owner,
        &Lease::default(),
        expect_revision,
        |_| {},
    )
}

/// [`run`] that lets `prepare` change the session first, under the same lock and in the same
/// write: the session loop fills the next step's args this way, without a status.json write
/// (two fsyncs) of its own.
pub fn run_prepared<'a>(
    ctx: &Context,
    session: impl Into<Target<'a>>,
    owner: Option<&str>,
    expect_revision: Option<u64>,
    prepare: impl FnOnce(&mut Session),
) -> Result<Output> {
    run_with(
        ctx,
        session,
        owner,
        &Lease::default(),
        expect_revision,
        prepare,
    )
}

/// What `next` decided under the lock.
enum Outcome {
    Claimed(Box<Claimed>),
    /// Error findings in a protocol-2 session: it was paused (maestro v0.5.37+).
    Paused(Vec<check::Finding>),
}

/// [`run_prepared`] with maestro v0.5.50's lease flags (`--execution-owner`, `--lease-id`,
/// `--owner-epoch`): checked before anything else and recorded with the claim. The claim's
/// owner is `owner`, else the execution owner, else the caller (`pid@host`).
pub fn run_with<'a>(
    ctx: &Context,
    session: impl Into<Target<'a>>,
    owner: Option<&str>,
    lease: &Lease,
    expect_revision: Option<u64>,
    prepare: impl FnOnce(&mut Session),
) -> Result<Output> {
    let owner = owner
        .or(lease.execution_owner.as_deref())
        .unwrap_or(&ctx.owner)
        .to_string();
    let (outcome, s) = store::transact(ctx, session, expect_revision, |s| {
        lease.check(s, "next")?;
        prepare(s);
        if s.status() != "running" {
            return Err(RalphError::NotRunning {
                status: s.status().to_string(),
            });
        }
        let findings = check::check(ctx, Some(&s.doc), &[], Scope::Unfinished);
        if check::has_errors(&findings) {
            if s.str("ralph_protocol_version") != Some("2") {
                return Err(RalphError::Findings(findings));
            }
            // v0.5.37+: a blocking finding pauses the session, so a loop that calls `next`
            // again stops at "paused" instead of retrying the same error for ever.
            s.set("status", json!("paused"));
            s.release();
            return Ok(Change::write(Outcome::Paused(findings)));
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
        let mut warnings: Vec<String> = loaded
            .manifest
            .missing_later()
            .into_iter()
            .map(|p| {
                format!(
                    "W012 [step {index}]: a later <required_reading> block names a missing file (only the first block is read): {p}"
                )
            })
            .collect();
        let params = skill_config::defaults(ctx, step.skill(), &mut warnings);
        let section = skill_config::section(step.skill(), step.args().trim(), &params);
        let v5 = s.str("ralph_protocol_version") == Some("2");
        let anchor = if v5 {
            anchor::build(&ctx.cli, s, &step)
        } else {
            None
        };
        let layout = if v5 {
            Layout::V5 {
                anchor: anchor.as_deref(),
            }
        } else {
            Layout::V4
        };
        let prompt = prompt::render(
            &ctx.cli,
            &s.id,
            s.len(),
            &step,
            &loaded,
            section.as_deref(),
            layout,
        );
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
        lease.record(s);
        s.set_claim(index, &owner, &now);
        Ok(Change::write(Outcome::Claimed(Box::new(Claimed {
            index,
            prompt,
            warnings,
            required,
            deferred,
            owner: owner.clone(),
        }))))
    })?;
    let claimed = match outcome {
        Outcome::Claimed(c) => c,
        Outcome::Paused(findings) => return Err(RalphError::FindingsPaused(findings)),
    };
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
