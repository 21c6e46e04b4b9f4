//! Which package, workflow and agent run each phase: `[autopilot.phases.<phase>]`, else the
//! bundled `bmad-phase4`. Every phase package is validated before the loop writes anything.

use super::bundled;
use super::config::AutopilotConfig;
use super::error::{EpicError, Result};
use super::phase::Phase;
use baton_package::{ValidateOptions, validate_path};
use baton_store::Store;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhaseSpec {
    pub phase: Phase,
    /// The package directory or `.bmad` file a run is started from.
    pub package: PathBuf,
    /// How the package is named to people (`bmad-phase4 (bundled)`, a path, an installed id).
    pub shown: String,
    pub workflow: String,
    /// `None`: the workflow's entry agent.
    pub agent: Option<String>,
}

pub type Specs = BTreeMap<Phase, PhaseSpec>;

/// Resolves and validates the five phases.
pub fn resolve(config: &AutopilotConfig, project: &Path, store: &Store) -> Result<Specs> {
    let mut out = BTreeMap::new();
    let mut bundled_dir = None;
    for phase in Phase::ALL {
        let c = config.phase(phase);
        let (default_workflow, default_agent) = phase.default_workflow();
        let named = c
            .package
            .as_deref()
            .map(str::trim)
            .filter(|p| !p.is_empty());
        // The bundled package, unless the name is a path or an installed package (a team may
        // install its own bmad-phase4).
        let use_bundled = match named {
            None => true,
            Some(n) => {
                n == bundled::NAME
                    && !project.join(n).exists()
                    && store.packages().find(n)?.is_empty()
            }
        };
        let spec = match named.filter(|_| !use_bundled) {
            None => {
                let dir = match &bundled_dir {
                    Some(d) => PathBuf::clone(d),
                    None => {
                        let d = bundled::materialize(store.home())?;
                        bundled_dir = Some(d.clone());
                        d
                    }
                };
                PhaseSpec {
                    phase,
                    package: dir,
                    shown: format!("{} (bundled)", bundled::NAME),
                    workflow: c
                        .workflow
                        .clone()
                        .unwrap_or_else(|| default_workflow.into()),
                    agent: Some(c.agent.clone().unwrap_or_else(|| default_agent.into())),
                }
            }
            Some(name) => {
                let (package, shown) = locate(name, project, store, phase)?;
                // An installed bmad-phase4 keeps the bundled defaults.
                let defaults = name == bundled::NAME;
                let workflow = match &c.workflow {
                    Some(w) => w.clone(),
                    None if defaults => default_workflow.into(),
                    None => only_workflow(&package, &shown, phase)?,
                };
                let agent = c
                    .agent
                    .clone()
                    .or_else(|| defaults.then(|| default_agent.into()));
                PhaseSpec {
                    phase,
                    package,
                    shown,
                    workflow,
                    agent,
                }
            }
        };
        check(&spec)?;
        out.insert(phase, spec);
    }
    Ok(out)
}

fn not_found(phase: Phase, name: &str) -> EpicError {
    EpicError::usage(
        "EPIC_PHASE_PACKAGE_NOT_FOUND",
        format!("[autopilot.phases.{phase}] package {name:?} is neither a path in the project nor an installed package"),
    )
    .hint("give a package directory or .bmad file (relative to the project), or install it with `baton package install`")
}

/// A path (relative to the project, or absolute) when it exists, else an installed package.
fn locate(name: &str, project: &Path, store: &Store, phase: Phase) -> Result<(PathBuf, String)> {
    let as_path = project.join(name);
    if as_path.exists() {
        return Ok((as_path, name.to_string()));
    }
    let found = store.packages().find(name)?;
    match found.as_slice() {
        [one] => Ok((one.path.clone(), format!("{} (installed)", one.id))),
        [] => Err(not_found(phase, name)),
        many => Err(EpicError::usage(
            "EPIC_PHASE_PACKAGE_NOT_FOUND",
            format!(
                "[autopilot.phases.{phase}] package {name:?} matches {} installed packages: {}",
                many.len(),
                many.iter()
                    .map(|p| p.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
        .hint("name one as name@version or by its id")),
    }
}

/// The one workflow of a package that was given without `workflow`.
fn only_workflow(package: &Path, shown: &str, phase: Phase) -> Result<String> {
    let report = validate_path(package, &ValidateOptions::default());
    match report.workflow_ids.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(invalid(phase, shown, &report)),
        many => Err(EpicError::usage(
            "EPIC_CONFIG_INVALID",
            format!(
                "[autopilot.phases.{phase}] names package {shown}, which has {} workflows ({}); say which with `workflow`",
                many.len(),
                many.join(", ")
            ),
        )),
    }
}

fn invalid(phase: Phase, shown: &str, report: &baton_package::Report) -> EpicError {
    let first = report.diagnostics.errors().next();
    let detail = first
        .map(|d| format!("{}: {} {}", d.code.as_str(), d.location(), d.message))
        .unwrap_or_else(|| "it cannot be read".into());
    EpicError::usage(
        "EPIC_PHASE_PACKAGE_INVALID",
        format!("the package of phase {phase} ({shown}) is invalid: {detail}"),
    )
    .hint(format!("`baton validate {shown}` lists every problem"))
}

/// Validates the package for its workflow and checks the agent.
fn check(spec: &PhaseSpec) -> Result<()> {
    let report = validate_path(
        &spec.package,
        &ValidateOptions {
            workflow: Some(spec.workflow.clone()),
            ..Default::default()
        },
    );
    let Some(package) = report.package.as_ref().filter(|_| report.ok()) else {
        return Err(invalid(spec.phase, &spec.shown, &report));
    };
    if let Some(agent) = &spec.agent
        && package.agent(agent).is_none()
    {
        let known: Vec<&str> = package.agents().iter().map(|a| a.id.as_str()).collect();
        return Err(EpicError::usage(
            "EPIC_PHASE_PACKAGE_INVALID",
            format!(
                "the package of phase {} ({}) has no agent {agent:?} (agents: {})",
                spec.phase,
                spec.shown,
                known.join(", ")
            ),
        ));
    }
    Ok(())
}
