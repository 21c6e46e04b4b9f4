//! `new "<intent>" --chain <stage,…>`: create a session from a stage list, with the decision
//! nodes seed 003's build table puts after verify, business-test, review, test,
//! analyze-macro and milestone-complete (and the goal-audit gate where `goal-audit` is
//! listed). Command files are resolved like `skills` (project over global); a missing one is
//! E006 and nothing is created (A_CREATE_SESSION).

use crate::Context;
use crate::chain::{self, PlanningMode, STAGES};
use crate::discovery::{self, Pick};
use crate::error::{RalphError, Result};
use crate::session::Session;
use crate::skills::PLATFORMS;
use crate::store;
use crate::time;
use crate::verbs::Output;
use serde_json::{Map, Value, json};
use std::fs;

#[derive(Debug, Clone, Default)]
pub struct NewArgs {
    pub intent: String,
    pub chain: String,
    pub phase: Option<String>,
    pub milestone: Option<String>,
    pub planning_mode: Option<String>,
    pub quality_mode: Option<String>,
    pub auto: bool,
    pub platform: Option<String>,
    pub source: Option<String>,
    pub force: bool,
}

fn one_of<'a>(
    flag: &str,
    raw: Option<&'a str>,
    allowed: &[&'a str],
    default: &'a str,
) -> Result<&'a str> {
    match raw {
        None => Ok(default),
        Some(v) => allowed.iter().find(|a| **a == v).copied().ok_or_else(|| {
            RalphError::usage(
                "ARGUMENT_INVALID",
                format!(
                    "{flag} must be one of: {} (got \"{v}\")",
                    allowed.join(", ")
                ),
            )
        }),
    }
}

pub fn parse_chain(raw: &str) -> Result<Vec<String>> {
    let stages: Vec<String> = raw
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    if stages.is_empty() {
        return Err(RalphError::usage("CHAIN_EMPTY", "--chain lists no stage"));
    }
    if let Some(bad) = stages.iter().find(|s| !STAGES.contains(&s.as_str())) {
        return Err(RalphError::usage(
            "STAGE_INVALID",
            format!("unknown stage \"{bad}\"; stages: {}", STAGES.join(", ")),
        ));
    }
    Ok(stages)
}

pub fn run(ctx: &Context, args: &NewArgs) -> Result<Output> {
    if args.intent.trim().is_empty() {
        return Err(RalphError::usage("INTENT_EMPTY", "the intent is empty"));
    }
    let stages = parse_chain(&args.chain)?;
    let mode = match one_of(
        "--planning-mode",
        args.planning_mode.as_deref(),
        &["independent", "unified"],
        "independent",
    )? {
        "unified" => PlanningMode::Unified,
        _ => PlanningMode::Independent,
    };
    let quality = one_of(
        "--quality-mode",
        args.quality_mode.as_deref(),
        &["full", "standard", "quick"],
        "standard",
    )?;
    let platform = one_of("--platform", args.platform.as_deref(), &PLATFORMS, "claude")?;
    let source = one_of(
        "--source",
        args.source.as_deref(),
        &["ralph", "maestro"],
        "ralph",
    )?;

    if !args.force {
        refuse_if_active(ctx)?;
    }

    let milestone = args.milestone.clone().map_or(Value::Null, Value::String);
    let mut steps: Vec<Value> = Vec::new();
    for stage in &stages {
        for item in chain::stage_items(stage, mode, quality == "quick").unwrap_or_default() {
            steps.push(chain::step_value(&item, steps.len(), &milestone));
        }
    }
    let phase = match &args.phase {
        None => Value::Null,
        Some(p) => p.parse::<u64>().map_or_else(|_| json!(p), |n| json!(n)),
    };
    let fields = SessionFields {
        source: source.into(),
        intent: args.intent.clone(),
        lifecycle_position: stages.first().cloned().unwrap_or_default(),
        phase,
        phase_is_new: false,
        milestone: args.milestone.clone().unwrap_or_default(),
        auto_mode: args.auto,
        quality_mode: quality.into(),
        planning_mode: mode,
        scope_verdict: Value::Null,
        analyze_macro_id: Value::Null,
        blueprint_id: Value::Null,
        platform: platform.into(),
        extra: Map::new(),
    };
    let session = create(ctx, &fields, steps)?;

    let mut text = format!("✓ Created {} ({} steps)\n", session.id, session.len());
    for st in session.all_steps() {
        let scope = if st.decision().is_some() {
            "decision"
        } else {
            st.command_scope().unwrap_or("?")
        };
        text.push_str(&format!("  {}. {} [{scope}]\n", st.index(), st.label()));
    }
    let mut out = Output::new(json!({
        "ok": true,
        "session_id": session.id,
        "path": session.status_path(),
        "steps": session.len(),
        "revision": session.revision(),
    }))
    .out(text);
    if stages.last().map(String::as_str) != Some("milestone-complete") {
        out = out.err("W008: chain does not terminate with milestone-complete\n");
    }
    Ok(out)
}

/// `<source>-YYYYMMDD-HHmmss`, with `-2`, `-3`… when that second is taken (maestro's ids have
/// one-second resolution and collide).
fn create_unique_dir(root: &std::path::Path, source: &str) -> Result<(String, std::path::PathBuf)> {
    let base = format!("{source}-{}", time::session_stamp());
    for n in 1..=1000u32 {
        let id = if n == 1 {
            base.clone()
        } else {
            format!("{base}-{n}")
        };
        let dir = root.join(&id);
        match fs::create_dir(&dir) {
            Ok(()) => return Ok((id, dir)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(RalphError::io("create", &dir)(e)),
        }
    }
    Err(RalphError::io("create", root.join(&base))(
        std::io::Error::other("every id of this second is taken"),
    ))
}

/// Everything a new session's document holds besides its id and steps.
#[derive(Debug, Clone)]
pub struct SessionFields {
    /// `ralph` or `maestro`: the id prefix and the `source` field.
    pub source: String,
    pub intent: String,
    pub lifecycle_position: String,
    /// A number, a string, or null.
    pub phase: Value,
    pub phase_is_new: bool,
    /// `""` when unknown, as the schema appendix writes it.
    pub milestone: String,
    pub auto_mode: bool,
    pub quality_mode: String,
    pub planning_mode: PlanningMode,
    pub scope_verdict: Value,
    pub analyze_macro_id: Value,
    pub blueprint_id: Value,
    pub platform: String,
    /// Fields written after `current_step`, in this order (the decomposition's
    /// `boundary_contract`, `execution_criteria`, `task_decomposition`, …).
    pub extra: Map<String, Value>,
}

/// Refuses when a running or paused session exists (router rule 3: continue it or abandon
/// it). A damaged newest session is reported as such rather than overwritten.
pub fn refuse_if_active(ctx: &Context) -> Result<()> {
    match discovery::find(ctx, None, Pick::Active) {
        Ok(found) if !found.issues.is_empty() => found.into_session().map(|_| ()),
        Ok(found) => Err(RalphError::SessionActive(found.id)),
        Err(RalphError::NoActiveSession) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Resolves the command files of `steps` (E006 and nothing written when one is missing),
/// then writes a new session folder with its status.json (removed again if the write fails).
pub fn create(ctx: &Context, fields: &SessionFields, mut steps: Vec<Value>) -> Result<Session> {
    let missing = chain::resolve_commands(ctx, &fields.platform, &mut steps);
    if !missing.is_empty() {
        return Err(RalphError::SkillsMissing(missing));
    }
    let root = ctx.sessions_root();
    fs::create_dir_all(&root).map_err(RalphError::io("create", &root))?;
    let (id, dir) = create_unique_dir(&root, &fields.source)?;
    let doc = document(&id, fields, steps);
    let mut session = Session { id, dir, doc };
    if let Err(e) = store::write(&mut session) {
        let _ = fs::remove_dir_all(&session.dir);
        return Err(e);
    }
    Ok(session)
}

/// The session document, fields in the order of the skill's schema appendix.
fn document(id: &str, f: &SessionFields, steps: Vec<Value>) -> Map<String, Value> {
    let mut d = Map::new();
    let mut put = |k: &str, v: Value| {
        d.insert(k.into(), v);
    };
    put("session_id", json!(id));
    put("source", json!(f.source));
    put("status", json!("running"));
    put("ralph_protocol_version", json!("2"));
    put("active_step_index", Value::Null);
    put("intent", json!(f.intent));
    put("lifecycle_position", json!(f.lifecycle_position));
    put("phase", f.phase.clone());
    put("phase_is_new", json!(f.phase_is_new));
    put("milestone", json!(f.milestone));
    put("auto_mode", json!(f.auto_mode));
    put("quality_mode", json!(f.quality_mode));
    put(
        "planning_mode",
        json!(match f.planning_mode {
            PlanningMode::Independent => "independent",
            PlanningMode::Unified => "unified",
        }),
    );
    put("scope_verdict", f.scope_verdict.clone());
    put("analyze_macro_id", f.analyze_macro_id.clone());
    put("blueprint_id", f.blueprint_id.clone());
    put("cli_tool", json!(f.platform));
    put("passed_gates", json!([]));
    put("consec_exit2_count", json!(0));
    put(
        "context",
        json!({"issue_id": null, "scratch_dir": null, "plan_dir": null,
               "analysis_dir": null, "brainstorm_dir": null, "blueprint_dir": null}),
    );
    put("steps", Value::Array(steps));
    put("current_step", json!(0));
    for (k, v) in &f.extra {
        put(k, v.clone());
    }
    put("platform", json!(f.platform));
    put("created_at", json!(time::now_iso()));
    d
}
