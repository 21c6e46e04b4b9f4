//! Which package, workflow and agent run each phase: `[autopilot.phases.<phase>]` (a package,
//! or an installed BMAD skill or workflow with `skill`), else the project's installed BMAD
//! method for that phase (see [`super::method`]), else the bundled `bmad-phase4`. Every phase
//! package is validated, and every installed method rendered, before the loop writes anything.

use super::bundled;
use super::config::AutopilotConfig;
use super::error::{EpicError, Result};
use super::method::render::{self, Rendered, Renderer};
use super::method::{self, Installed, Kind, files::Reader};
use super::pipeline::{Pipeline, Runner, Runs, Stage};
use baton_bmad::phase::Phase;
use baton_executor::ExecutorKind;
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
    /// The project's installed BMAD skill or workflow, run as a task run instead of a package
    /// workflow.
    pub method: Option<MethodSpec>,
    /// The installed skill's action for this phase, when it has several (create-story's
    /// `validate`).
    pub action: Option<String>,
    /// The installed build skill's settings as its customization sets them (checked).
    pub settings: Vec<(String, String)>,
    /// Who runs the phase: baton's tool loop, or a coding-agent CLI (an installed method only).
    pub executor: ExecutorKind,
}

/// An installed BMAD skill or workflow that runs a phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodSpec {
    pub installed: Installed,
    /// Who renders it when a run starts (BMAD's script with `uv` applies to rendered skills).
    pub renderer: Renderer,
    /// baton's own rendering, checked now: what a run starts from unless BMAD's script renders
    /// it (and the fallback when the script fails).
    pub rendered: Rendered,
    /// Why it runs the phase (`installed`, or `skill = … in baton.toml`).
    pub chosen: String,
}

impl MethodSpec {
    /// Whether BMAD's own `render_skill.py` renders it (with `uv`, in the sandbox).
    pub fn by_script(&self) -> bool {
        self.installed.kind == Kind::Rendered && self.renderer == Renderer::Uv
    }

    /// How it is rendered, in words (for `--dry-run` and the phase's record).
    pub fn how(&self) -> String {
        if self.by_script() {
            format!(
                "rendered by BMAD's {} with uv, in the sandbox, when the phase starts (baton resolves it itself if that fails)",
                render::RENDER_SCRIPT
            )
        } else {
            self.rendered.how.clone()
        }
    }
}

impl PhaseSpec {
    /// How the phase's method is rendered (and who runs it, when a coding-agent CLI does);
    /// `None` for a package workflow.
    pub fn how(&self) -> Option<String> {
        let how = self.method.as_ref().map(MethodSpec::how)?;
        Some(match self.executor {
            ExecutorKind::Baton => how,
            cli => format!("{how}; run by {cli} through baton's gateway"),
        })
    }
}

pub type Specs = BTreeMap<Phase, PhaseSpec>;

/// What runs a phase, as a report shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhaseLine {
    pub phase: Phase,
    /// The package (or the installed skill's folder and kind).
    pub package: String,
    /// The package workflow (or the skill's name).
    pub workflow: String,
    /// For an installed BMAD method: how it is rendered.
    pub how: Option<String>,
}

/// The report lines of `specs`, in `pipeline`'s order.
pub fn lines(specs: &Specs, pipeline: &Pipeline) -> Vec<PhaseLine> {
    pipeline
        .phases()
        .filter_map(|p| specs.get(&p))
        .map(|s| PhaseLine {
            phase: s.phase,
            package: s.shown.clone(),
            workflow: s.workflow.clone(),
            how: s.how(),
        })
        .collect()
}

/// An installed skill or classic workflow as the pipeline's view names it.
fn runs_of(inst: &Installed) -> Runs {
    Runs {
        kind: if inst.is_skill() { "skill" } else { "workflow" },
        name: inst.name.clone(),
        path: inst.rel.clone(),
    }
}

/// `pipeline` with what runs each of its phases (`specs`, resolved for it).
pub fn view(pipeline: &Pipeline, specs: &Specs) -> super::pipeline::PipelineView {
    let mut v = pipeline.view(|stage| match specs.get(&stage.phase) {
        Some(PhaseSpec {
            method: Some(m), ..
        }) => (runs_of(&m.installed), Some(m.how())),
        Some(s) => (
            Runs {
                kind: "package",
                name: s.workflow.clone(),
                path: s.shown.clone(),
            },
            None,
        ),
        None => (
            Runs {
                kind: "package",
                name: stage.runs.workflow.to_string(),
                path: super::bundled::NAME.to_string(),
            },
            None,
        ),
    });
    for p in &mut v.phases {
        if let Some(s) = Phase::parse(p.name).and_then(|ph| specs.get(&ph)) {
            p.settings = s.settings.clone();
        }
    }
    v
}

/// `pipeline` with what would run each phase, found but not rendered (the board's view).
pub fn planned_view(
    config: &AutopilotConfig,
    project: &Path,
    pipeline: &Pipeline,
) -> Result<super::pipeline::PipelineView> {
    let reader = Reader::open(project)?;
    let mut found = BTreeMap::new();
    for stage in pipeline.stages() {
        if let Some((inst, _)) = installed_for(config, stage, &reader)? {
            found.insert(stage.phase, inst);
        }
    }
    Ok(pipeline.view(|stage| match found.get(&stage.phase) {
        Some(inst) => (runs_of(inst), None),
        None => {
            let c = config.phase(stage.phase);
            let runs = Runs {
                kind: "package",
                name: c
                    .workflow
                    .clone()
                    .unwrap_or_else(|| stage.runs.workflow.to_string()),
                path: c
                    .package
                    .clone()
                    .unwrap_or_else(|| format!("{} (bundled)", super::bundled::NAME)),
            };
            (runs, None)
        }
    }))
}

/// The installed method a phase runs: named with `skill`, else the one the pipeline's method
/// names for the stage, else the project's default for the phase when no package is named.
pub(crate) fn installed_for(
    config: &AutopilotConfig,
    stage: &Stage,
    reader: &Reader,
) -> Result<Option<(Installed, String)>> {
    let phase = stage.phase;
    let c = config.phase(phase);
    if let Some(name) = c.skill.as_deref().map(str::trim) {
        return match method::find(reader, name)? {
            Some(found) => Ok(Some((
                found,
                format!("skill = {name:?} in baton.toml [autopilot.phases.{phase}]"),
            ))),
            None => Err(skill_not_found(phase, name, reader)),
        };
    }
    if c.package.is_some() || c.workflow.is_some() || c.agent.is_some() {
        return Ok(None);
    }
    if let Some(name) = &stage.method
        && let Some(found) = method::find(reader, name)?
    {
        let chosen = match &stage.action {
            Some(action) => format!("installed in the project (its {action} action)"),
            None => "installed in the project".into(),
        };
        return Ok(Some((found, chosen)));
    }
    Ok(method::default_for(reader, phase)?.map(|found| (found, "installed in the project".into())))
}

fn skill_not_found(phase: Phase, name: &str, reader: &Reader) -> EpicError {
    let installed = method::installed_names(reader);
    let listed = if installed.is_empty() {
        "none is installed".to_string()
    } else {
        let names: Vec<&str> = installed.iter().take(30).map(|(n, _)| n.as_str()).collect();
        format!("installed: {}", names.join(", "))
    };
    EpicError::usage(
        "EPIC_PHASE_SKILL_NOT_FOUND",
        format!(
            "[autopilot.phases.{phase}] skill {name:?} is neither an installed BMAD skill ({}), a classic workflow ({}) nor a folder of one",
            method::SKILL_FOLDERS[..2].join(", "),
            method::CLASSIC_ROOTS[0]
        ),
    )
    .hint(listed)
}

/// Renders `installed` now (the check before the loop writes anything).
pub(crate) fn method_spec(
    config: &AutopilotConfig,
    reader: &Reader,
    installed: Installed,
    chosen: String,
) -> Result<MethodSpec> {
    let renderer = match installed.kind {
        Kind::Rendered => render::renderer(
            config.render.as_deref(),
            std::env::var_os("PATH").as_deref(),
            reader.is_file(render::RENDER_SCRIPT),
        ),
        _ => Renderer::Baton(String::new()),
    };
    let why = match &renderer {
        Renderer::Baton(why) => why.clone(),
        Renderer::Uv => "BMAD's renderer failed".to_string(),
    };
    let rendered = render::render(reader, &installed, &why)?;
    Ok(MethodSpec {
        installed,
        renderer,
        rendered,
        chosen,
    })
}

/// Renders every installed skill or workflow `pipeline` runs, and checks the build's settings:
/// what [`resolve`] refuses of the project's method, without the store.
pub fn check_methods(config: &AutopilotConfig, project: &Path, pipeline: &Pipeline) -> Result<()> {
    let reader = Reader::open(project)?;
    for stage in pipeline.stages() {
        if let Some((installed, chosen)) = installed_for(config, stage, &reader)? {
            if stage.phase == Phase::Build {
                baton_bmad::pipeline::build_settings(&reader, &installed)?;
            }
            method_spec(config, &reader, installed, chosen)?;
        }
    }
    Ok(())
}

/// Resolves and validates `pipeline`'s phases.
pub fn resolve(
    config: &AutopilotConfig,
    project: &Path,
    store: &Store,
    pipeline: &Pipeline,
) -> Result<Specs> {
    let mut out = BTreeMap::new();
    let mut bundled_dir = None;
    let reader = Reader::open(project)?;
    for stage in pipeline.stages() {
        let phase = stage.phase;
        if let Some((installed, chosen)) = installed_for(config, stage, &reader)? {
            // A setting BMAD's build would halt on is refused before anything runs.
            let settings = match phase {
                Phase::Build => baton_bmad::pipeline::build_settings(&reader, &installed)?,
                _ => Vec::new(),
            };
            let m = method_spec(config, &reader, installed, chosen)?;
            out.insert(
                phase,
                PhaseSpec {
                    phase,
                    package: project.join(&m.installed.rel),
                    shown: format!("{} ({})", m.installed.rel, m.installed.kind_name()),
                    workflow: m.installed.name.clone(),
                    agent: None,
                    method: Some(m),
                    action: stage.action.clone(),
                    settings,
                    executor: config.executor_for(phase),
                },
            );
            continue;
        }
        let c = config.phase(phase);
        let Runner {
            workflow: default_workflow,
            agent: default_agent,
        } = stage.runs;
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
                    method: None,
                    action: None,
                    settings: Vec::new(),
                    executor: ExecutorKind::Baton,
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
                    method: None,
                    action: None,
                    settings: Vec::new(),
                    executor: ExecutorKind::Baton,
                }
            }
        };
        check(&spec)?;
        let executor = config.executor_for(phase);
        if executor != ExecutorKind::Baton {
            return Err(EpicError::usage(
                "EPIC_EXECUTOR_NEEDS_SKILL",
                format!(
                    "{phase} is to be run by {executor}, but it runs {} and no installed BMAD skill",
                    spec.shown
                ),
            )
            .hint("a coding-agent CLI runs the project's installed BMAD skills: install BMAD in the project (npx bmad-method install), name one with [autopilot.phases.<phase>] skill, or set executor = \"baton\" for this phase"));
        }
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
