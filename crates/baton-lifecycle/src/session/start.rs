//! `baton session start "<intent>"`: the build phase of seed 003 as code.
//!
//! Router guard (an active session → refuse: continue it or abandon it) → inference (phase,
//! position, modes, questions) → command resolution (E006 before any model call) →
//! decomposition (one model call, skipped for brainstorm, blueprint and init) → the chain →
//! creation through ralph's `new` internals.
//!
//! Confirmation belongs to the caller: [`plan`] returns the questions to ask or the chain to
//! show; [`create`] writes the session the caller agreed to; [`start`] does both when `auto`
//! (`-y`) is set.

use super::build::decompose::{self, Decomposed};
use super::build::error::{BuildError, Result};
use super::build::goals::Decomposition;
use super::build::{ChainLine, rules};
use super::infer::{self, Inference, Options, QualityMode, Question};
use baton_llm::{ChatModel, Usage};
use baton_ralph::Context;
use baton_ralph::chain::{self, PlanningMode};
use baton_ralph::check::{self, Scope};
use baton_ralph::verbs::new::{self, SessionFields};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

/// What `baton session start` was given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StartOptions {
    pub intent: String,
    /// `--quality`; `None` lets the rules choose.
    pub quality: Option<QualityMode>,
    /// `-y`: create without confirmation and skip the questions auto mode may skip.
    pub auto: bool,
    /// Answers to earlier [`Question`]s, by id.
    pub answers: BTreeMap<String, String>,
    /// `claude` (default) or `codex`: where command files are looked up.
    pub platform: Option<String>,
}

/// A chain ready to be shown and created.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub project: PathBuf,
    pub intent: String,
    pub auto: bool,
    pub platform: String,
    pub inference: Inference,
    pub decomposition: Option<Decomposition>,
    /// The status.json steps, commands resolved.
    pub steps: Vec<Value>,
    /// Tokens the decomposition cost (zero when skipped).
    pub usage: Usage,
    /// Decomposition calls made (0, 1 or 2).
    pub model_calls: u32,
}

impl Plan {
    pub fn chain(&self) -> Vec<ChainLine> {
        ChainLine::from_steps(&self.steps)
    }

    /// The chain as a person reads it: the placeholders the plan already knows (`{intent}`,
    /// `{phase}`, …) filled as each step's claim will fill them.
    pub fn chain_shown(&self) -> Vec<ChainLine> {
        let inf = &self.inference;
        let mut doc = Map::new();
        doc.insert("intent".into(), json!(self.intent));
        doc.insert("phase".into(), json!(inf.phase));
        doc.insert("milestone".into(), json!(inf.milestone));
        doc.insert("analyze_macro_id".into(), json!(inf.analyze_macro_id));
        doc.insert("blueprint_id".into(), json!(inf.blueprint_id));
        let values = super::args::values_of(&doc);
        self.chain()
            .into_iter()
            .map(|mut line| {
                line.args = super::args::substitute(&line.args, &values);
                line
            })
            .collect()
    }

    /// The plan as JSON, for `--json` and the confirmation screen.
    pub fn to_json(&self) -> Value {
        let inf = &self.inference;
        let mut out = json!({
            "intent": self.intent,
            "lifecycle_position": inf.position.name(),
            "phase": inf.phase,
            "phase_is_new": inf.phase_is_new,
            "milestone": inf.milestone,
            "quality_mode": inf.quality.as_str(),
            "planning_mode": planning_name(inf.planning_mode),
            "scope_verdict": inf.scope_verdict.map(|s| s.as_str()),
            "breadth": inf.breadth.as_str(),
            "analyze_macro_id": inf.analyze_macro_id,
            "blueprint_id": inf.blueprint_id,
            "steps": self.chain(),
            "usage": self.usage,
        });
        if let (Some(d), Some(m)) = (&self.decomposition, out.as_object_mut()) {
            m.extend(d.fields());
        }
        out
    }
}

/// A created session.
#[derive(Debug, Clone, PartialEq)]
pub struct Created {
    pub session_id: String,
    /// Its status.json.
    pub path: PathBuf,
    pub steps: Vec<ChainLine>,
    pub plan: Plan,
}

#[derive(Debug, Clone, PartialEq)]
pub enum StartOutcome {
    /// Ask these, then call again with the answers.
    Questions(Vec<Question>),
    /// Show the chain; [`create`] it when the user agrees.
    Planned(Box<Plan>),
    Created(Box<Created>),
}

fn planning_name(mode: Option<PlanningMode>) -> &'static str {
    match mode {
        Some(PlanningMode::Unified) => "unified",
        _ => "independent",
    }
}

/// Router rule 3: a new intent while a session is running or paused is refused.
fn guard(ctx: &Context) -> Result<()> {
    new::refuse_if_active(ctx).map_err(BuildError::from_ralph)
}

/// Resolves the command files of `steps` (E006 for a missing skill) and refuses a chain that
/// `ralph check` would reject (a command file whose required reading is missing is E007): a
/// session is never created already broken.
fn preflight(ctx: &Context, platform: &str, steps: &mut [Value]) -> Result<()> {
    let missing = chain::resolve_commands(ctx, platform, steps);
    if !missing.is_empty() {
        return Err(BuildError::SkillsMissing(missing));
    }
    let mut doc = Map::new();
    doc.insert("steps".into(), Value::Array(steps.to_vec()));
    let findings = check::check(ctx, Some(&doc), &[], Scope::All);
    if check::has_errors(&findings) {
        return Err(BuildError::ChainInvalid(findings));
    }
    Ok(())
}

/// Everything up to the chain, nothing written: the questions still to ask, or the plan.
pub async fn plan(
    ctx: &Context,
    opts: &StartOptions,
    model: &dyn ChatModel,
    cancel: &CancellationToken,
) -> Result<StartOutcome> {
    if opts.intent.trim().is_empty() {
        return Err(BuildError::IntentEmpty);
    }
    guard(ctx)?;
    let options = Options {
        quality: opts.quality,
        auto: opts.auto,
        answers: opts.answers.clone(),
    };
    let inference = infer::infer(&ctx.project, &opts.intent, &options)?;
    if !inference.questions.is_empty() {
        return Ok(StartOutcome::Questions(inference.questions));
    }
    let platform = opts.platform.clone().unwrap_or_else(|| "claude".into());

    // Rule 9 before the model call: a missing skill costs no tokens. Sub-goals add no
    // command (the goal audit is a gate), so this chain needs the same skills as the final one.
    let mut bare = rules::build(&inference, &[])?;
    preflight(ctx, &platform, &mut bare)?;

    let (decomposition, usage, model_calls) = if inference.decompose {
        let stages = rules::stages_of(&bare);
        let Decomposed {
            decomposition,
            usage,
            attempts,
        } = decompose::decompose(
            model,
            &opts.intent,
            &inference,
            &stages,
            &infer::position::top_folders(&ctx.project),
            cancel,
        )
        .await?;
        (Some(decomposition), usage, attempts)
    } else {
        (None, Usage::default(), 0)
    };
    let goals = decomposition.as_ref().map_or(&[][..], |d| &d.goals[..]);
    let mut steps = rules::build(&inference, goals)?;
    preflight(ctx, &platform, &mut steps)?;
    Ok(StartOutcome::Planned(Box::new(Plan {
        project: ctx.project.clone(),
        intent: opts.intent.clone(),
        auto: opts.auto,
        platform,
        inference,
        decomposition,
        steps,
        usage,
        model_calls,
    })))
}

/// Writes the session of `plan` (A_CREATE_SESSION): the guard again (another session may have
/// started meanwhile), command files resolved and checked again (E006/E007, nothing written,
/// when one went missing), then status.json with the decomposition fields.
pub fn create(ctx: &Context, plan: Plan) -> Result<Created> {
    if plan.project != ctx.project {
        return Err(BuildError::PlanMismatch);
    }
    guard(ctx)?;
    let mut steps = plan.steps.clone();
    preflight(ctx, &plan.platform, &mut steps)?;
    let inf = &plan.inference;
    let extra = plan
        .decomposition
        .as_ref()
        .map_or_else(Map::new, Decomposition::fields);
    let fields = SessionFields {
        source: "ralph".into(),
        intent: plan.intent.clone(),
        lifecycle_position: inf.position.name().into(),
        phase: inf.phase.map_or(Value::Null, |p| json!(p)),
        phase_is_new: inf.phase_is_new,
        milestone: inf.milestone.clone().unwrap_or_default(),
        auto_mode: plan.auto,
        quality_mode: inf.quality.as_str().into(),
        planning_mode: inf.planning_mode.unwrap_or(PlanningMode::Independent),
        scope_verdict: inf.scope_verdict.map_or(Value::Null, |s| json!(s.as_str())),
        analyze_macro_id: json!(inf.analyze_macro_id),
        blueprint_id: json!(inf.blueprint_id),
        platform: plan.platform.clone(),
        extra,
    };
    let session = new::create(ctx, &fields, steps).map_err(BuildError::from_ralph)?;
    Ok(Created {
        session_id: session.id.clone(),
        path: session.status_path(),
        steps: ChainLine::from_steps(session.steps()),
        plan,
    })
}

/// [`plan`], then [`create`] when `opts.auto`; otherwise the plan for the caller to confirm.
pub async fn start(
    ctx: &Context,
    opts: &StartOptions,
    model: &dyn ChatModel,
    cancel: &CancellationToken,
) -> Result<StartOutcome> {
    match plan(ctx, opts, model, cancel).await? {
        StartOutcome::Planned(p) if opts.auto => {
            if cancel.is_cancelled() {
                return Err(BuildError::Interrupted);
            }
            Ok(StartOutcome::Created(Box::new(create(ctx, *p)?)))
        }
        other => Ok(other),
    }
}
