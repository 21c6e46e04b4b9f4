//! `new "<intent>" --chain <stage,…>`: create a session from a stage list, with the decision
//! nodes seed 003's build table puts after verify, business-test, review, test,
//! analyze-macro and milestone-complete (and the goal-audit gate where `goal-audit` is
//! listed). Command files are resolved like `skills` (project over global); a missing one is
//! E006 and nothing is created (A_CREATE_SESSION).

use crate::ralph::Context;
use crate::ralph::chain::{self, PlanningMode, STAGES};
use crate::ralph::discovery::{self, Pick};
use crate::ralph::error::{RalphError, Result};
use crate::ralph::session::Session;
use crate::ralph::skills::PLATFORMS;
use crate::ralph::store;
use crate::ralph::time;
use crate::ralph::verbs::Output;
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
        match discovery::find(ctx, None, Pick::Active) {
            Ok(found) if !found.issues.is_empty() => {
                found.into_session()?;
            }
            Ok(found) => return Err(RalphError::SessionActive(found.id)),
            Err(RalphError::NoActiveSession) => {}
            Err(e) => return Err(e),
        }
    }

    let milestone = args.milestone.clone().map_or(Value::Null, Value::String);
    let mut steps: Vec<Value> = Vec::new();
    for stage in &stages {
        for item in chain::stage_items(stage, mode, quality == "quick").unwrap_or_default() {
            steps.push(chain::step_value(&item, steps.len(), &milestone));
        }
    }
    let missing = chain::resolve_commands(ctx, platform, &mut steps);
    if !missing.is_empty() {
        return Err(RalphError::SkillsMissing(missing));
    }

    let root = ctx.sessions_root();
    fs::create_dir_all(&root).map_err(RalphError::io("create", &root))?;
    let (id, dir) = create_unique_dir(&root, source)?;
    let doc = document(&id, source, args, &stages, mode, quality, platform, steps);
    let mut session = Session { id, dir, doc };
    if let Err(e) = store::write(&mut session) {
        let _ = fs::remove_dir_all(&session.dir);
        return Err(e);
    }

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

/// The session document, fields in the order of the skill's schema appendix.
#[allow(clippy::too_many_arguments)]
fn document(
    id: &str,
    source: &str,
    args: &NewArgs,
    stages: &[String],
    mode: PlanningMode,
    quality: &str,
    platform: &str,
    steps: Vec<Value>,
) -> Map<String, Value> {
    let phase = match &args.phase {
        None => Value::Null,
        Some(p) => p.parse::<u64>().map_or_else(|_| json!(p), |n| json!(n)),
    };
    let mut d = Map::new();
    let mut put = |k: &str, v: Value| {
        d.insert(k.into(), v);
    };
    put("session_id", json!(id));
    put("source", json!(source));
    put("status", json!("running"));
    put("ralph_protocol_version", json!("2"));
    put("active_step_index", Value::Null);
    put("intent", json!(args.intent));
    put("lifecycle_position", json!(stages.first()));
    put("phase", phase);
    put("phase_is_new", json!(false));
    put(
        "milestone",
        json!(args.milestone.clone().unwrap_or_default()),
    );
    put("auto_mode", json!(args.auto));
    put("quality_mode", json!(quality));
    put(
        "planning_mode",
        json!(match mode {
            PlanningMode::Independent => "independent",
            PlanningMode::Unified => "unified",
        }),
    );
    put("scope_verdict", Value::Null);
    put("analyze_macro_id", Value::Null);
    put("blueprint_id", Value::Null);
    put("cli_tool", json!(platform));
    put("passed_gates", json!([]));
    put("consec_exit2_count", json!(0));
    put(
        "context",
        json!({"issue_id": null, "scratch_dir": null, "plan_dir": null,
               "analysis_dir": null, "brainstorm_dir": null, "blueprint_dir": null}),
    );
    put("steps", Value::Array(steps));
    put("current_step", json!(0));
    put("platform", json!(platform));
    put("created_at", json!(time::now_iso()));
    d
}
