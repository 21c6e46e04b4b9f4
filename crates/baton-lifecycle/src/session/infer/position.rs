//! A_INFER_POSITION: where the chain starts. Intent overrides and the bootstrap table decide
//! before any phase exists; then the phase's latest artifact, refined from the gate result
//! files when it is a verify (or later) artifact.
//!
//! Baton's choices where the seed is silent (each also in the report of the work):
//! - the brainstorm/blueprint overrides win over bootstrap; the broad-intent override
//!   (analyze-macro) yields to bootstrap, whose `init` chain passes through analyze-macro;
//! - "no milestones and no roadmap" is decided before the phase (rule 5 gives it phase null);
//! - a latest artifact that is pending, in progress or failed restarts its own stage; a
//!   latest `debug` artifact leads to `plan`; a latest `review` or `test` artifact refines
//!   like `verify`, from the newest completed verify artifact;
//! - a completed verify artifact without a readable `verification.json` restarts `verify`;
//!   an inconclusive `uat.md` (no pass, no failure) restarts `test`.

use super::error::Result;
use super::files;
use super::inference::{Breadth, Failed, Position};
use super::intent;
use super::results::{self, Uat};
use super::state_file::{Artifact, ArtifactStatus, State};
use baton_ralph::chain::STAGES;
use std::collections::BTreeSet;
use std::path::Path;

/// Stages before any phase exists (S_PLANNING_MODE's guard list).
pub const EARLY: [&str; 5] = [
    "brainstorm",
    "blueprint",
    "init",
    "analyze-macro",
    "roadmap",
];

/// The position decided without a phase, if any: overrides, bootstrap, no roadmap yet.
pub fn early(
    project: &Path,
    intent_text: &str,
    breadth: Breadth,
    explicit_phase: bool,
    state: Option<&State>,
) -> Option<&'static str> {
    if let Some(stage) = intent::stage_override(intent_text) {
        return Some(stage);
    }
    let workflow = project.join(".workflow");
    if !workflow.is_dir() {
        return Some(if has_sources(project) {
            "init"
        } else {
            "brainstorm"
        });
    }
    let Some(state) = state else {
        return Some("init");
    };
    if !explicit_phase && (breadth == Breadth::Broad || intent::names_new_feature(intent_text)) {
        return Some("analyze-macro");
    }
    if state.milestones.is_empty() && !workflow.join("roadmap.md").is_file() {
        let analysed = state
            .artifacts
            .iter()
            .any(|a| a.is_macro_analysis() && a.status == ArtifactStatus::Completed);
        return Some(if analysed { "roadmap" } else { "analyze-macro" });
    }
    None
}

/// The stage an artifact type belongs to, for phase-level inference.
fn stage_of(a: &Artifact) -> Option<&'static str> {
    Some(match a.kind.as_str() {
        "analyze" if a.is_macro_analysis() => return None,
        "analyze" => "analyze",
        "plan" => "plan",
        "execute" => "execute",
        "verify" => "verify",
        "review" => "review",
        "test" => "test",
        _ => return None,
    })
}

/// The phase-aware table, for a resolved phase (`None` only while the phase question is
/// pending: a provisional `analyze`).
pub fn phase_aware(
    workflow: &Path,
    state: &State,
    phase: Option<u64>,
    is_new: bool,
) -> Result<Position> {
    let Some(phase) = phase.filter(|_| !is_new) else {
        return Ok(Position::Stage("analyze"));
    };
    let mine: Vec<&Artifact> = state
        .artifacts
        .iter()
        .filter(|a| a.phase == Some(phase) && (stage_of(a).is_some() || a.kind == "debug"))
        .collect();
    let Some(latest) = mine.iter().max_by(|x, y| x.age_key().cmp(&y.age_key())) else {
        return Ok(Position::Stage("analyze"));
    };
    let stage = stage_of(latest);
    if latest.status != ArtifactStatus::Completed {
        return Ok(Position::Stage(stage.unwrap_or("plan")));
    }
    Ok(Position::Stage(match stage {
        None => "plan", // debug
        Some("analyze") => "plan",
        Some("plan") => "execute",
        Some("execute") => "verify",
        Some(_) => return refine(workflow, state, &mine),
    }))
}

/// Refinement from the result files of the newest completed verify artifact and the phase's
/// artifacts after it.
fn refine(workflow: &Path, state: &State, mine: &[&Artifact]) -> Result<Position> {
    let Some(v) = mine
        .iter()
        .filter(|a| a.kind == "verify" && a.status == ArtifactStatus::Completed)
        .max_by(|x, y| x.age_key().cmp(&y.age_key()))
    else {
        return Ok(Position::Stage("verify"));
    };
    let Some(vdir) = dir_of(workflow, state, v)? else {
        return Ok(Position::Stage("verify"));
    };
    let Some(verification) = results::verification(&vdir.join("verification.json"))? else {
        return Ok(Position::Stage("verify"));
    };
    if !verification.passed || !verification.gaps.is_empty() {
        return Ok(Position::Failed {
            kind: Failed::Verify,
            gaps: verification.gaps,
        });
    }
    // The verify dir and every later artifact dir of the phase, newest first.
    let mut later: Vec<&&Artifact> = mine.iter().filter(|a| a.age_key() > v.age_key()).collect();
    later.sort_by(|x, y| y.age_key().cmp(&x.age_key()));
    let mut dirs = Vec::new();
    for a in later {
        if let Some(d) = dir_of(workflow, state, a)? {
            dirs.push(d);
        }
    }
    dirs.push(vdir);
    let Some(review) = first_found(&dirs, "review.json", results::review)? else {
        return Ok(Position::Stage("business-test"));
    };
    if review.blocked {
        return Ok(Position::Failed {
            kind: Failed::Review,
            gaps: review.gaps,
        });
    }
    Ok(match first_found(&dirs, "uat.md", results::uat)? {
        None | Some(Uat::Inconclusive) => Position::Stage("test"),
        Some(Uat::AllPassed) => Position::Stage("milestone-audit"),
        Some(Uat::Failures(gaps)) => Position::Failed {
            kind: Failed::Test,
            gaps,
        },
    })
}

fn first_found<T>(
    dirs: &[std::path::PathBuf],
    name: &str,
    read: impl Fn(&Path) -> Result<Option<T>>,
) -> Result<Option<T>> {
    for d in dirs {
        if let Some(found) = read(&d.join(name))? {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// The artifact's directory inside `.workflow/` (checked after symlinks), `None` when it has
/// no path or nothing is there. A path naming a file (`…/analysis.md`) means its folder.
pub fn dir_of(workflow: &Path, state: &State, a: &Artifact) -> Result<Option<std::path::PathBuf>> {
    let Some(rel) = a.path.as_deref() else {
        return Ok(None);
    };
    let field = format!("artifacts[{}].path", a.order);
    Ok(
        files::resolve_inside(workflow, rel, &state.path, &field)?.and_then(|p| {
            if p.is_dir() {
                Some(p)
            } else {
                p.parent().map(Path::to_path_buf)
            }
        }),
    )
}

/// Build rule 2: the stages of this phase (of this milestone in unified mode) with a
/// completed artifact in the current cycle. A stage counts only when its newest completed
/// artifact is newer than every artifact of an earlier stage: a re-plan makes the execute and
/// verify before it stale.
pub fn completed_stages(
    state: &State,
    phase: Option<u64>,
    milestone: Option<&str>,
    unified: bool,
) -> Vec<&'static str> {
    // The phases of this milestone, computed once (D-007 for artifacts without a milestone).
    let index = state.phase_milestones();
    let milestone_phases: BTreeSet<u64> = if unified {
        state
            .artifacts
            .iter()
            .filter_map(|a| a.phase)
            .collect::<BTreeSet<u64>>()
            .into_iter()
            .filter(|n| index.get(n).copied().or(state.current_milestone.as_deref()) == milestone)
            .collect()
    } else {
        BTreeSet::new()
    };
    let in_scope = |a: &Artifact| {
        if unified {
            milestone.is_some()
                && (a.milestone.as_deref() == milestone
                    || (a.milestone.is_none()
                        && a.phase.is_some_and(|n| milestone_phases.contains(&n))))
        } else {
            phase.is_some() && a.phase == phase
        }
    };
    let mine: Vec<(&'static str, &Artifact)> = state
        .artifacts
        .iter()
        .filter(|a| in_scope(a))
        .filter_map(|a| Some((stage_of(a)?, a)))
        .collect();
    let newest = |stage: &str, completed_only: bool| {
        mine.iter()
            .filter(|(s, a)| {
                *s == stage && (!completed_only || a.status == ArtifactStatus::Completed)
            })
            .map(|(_, a)| a.age_key())
            .max()
    };
    let mut out = Vec::new();
    for (i, stage) in STAGES.iter().enumerate() {
        let Some(done) = newest(stage, true) else {
            continue;
        };
        let fresh = STAGES[..i]
            .iter()
            .all(|earlier| newest(earlier, false).is_none_or(|t| t < done));
        if fresh {
            out.push(*stage);
        }
    }
    out
}

/// Whether the project has source files (bootstrap: `init` rather than `brainstorm`): a
/// bounded look, three levels deep, at most [`MAX_SCAN`] entries, hidden and build folders
/// skipped.
pub fn has_sources(project: &Path) -> bool {
    let mut seen = 0usize;
    let mut queue = vec![(project.to_path_buf(), 0u8)];
    while let Some((dir, depth)) = queue.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > MAX_SCAN {
                return false;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || SKIP_DIRS.contains(&name.as_str()) {
                continue;
            }
            let Ok(kind) = e.file_type() else { continue };
            if kind.is_dir() {
                if depth < 2 {
                    queue.push((e.path(), depth + 1));
                }
            } else if kind.is_file() && is_source(&name) {
                return true;
            }
        }
    }
    false
}

pub const MAX_SCAN: usize = 5_000;
const SKIP_DIRS: &[&str] = &[
    "node_modules",
    "target",
    "vendor",
    "dist",
    "build",
    "__pycache__",
];
const SOURCE_EXT: &[&str] = &[
    "rs", "py", "js", "jsx", "ts", "tsx", "go", "java", "kt", "c", "h", "cc", "cpp", "hpp", "cs",
    "rb", "php", "swift", "scala", "m", "mm", "lua", "sh", "ex", "exs", "erl", "hs", "ml", "dart",
    "vue", "svelte", "zig", "sql",
];
const MANIFESTS: &[&str] = &[
    "Cargo.toml",
    "package.json",
    "go.mod",
    "pyproject.toml",
    "setup.py",
    "pom.xml",
    "build.gradle",
    "Gemfile",
    "composer.json",
    "Makefile",
    "CMakeLists.txt",
];

fn is_source(name: &str) -> bool {
    MANIFESTS.contains(&name)
        || name
            .rsplit_once('.')
            .is_some_and(|(stem, ext)| !stem.is_empty() && SOURCE_EXT.contains(&ext))
}

/// The project's top-level folders (not hidden, not build output), sorted, at most six: the
/// scope suggestions of the clarification round.
pub fn top_folders(project: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(project) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .flatten()
        .take(MAX_SCAN)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.') && !SKIP_DIRS.contains(&n.as_str()))
        .collect();
    out.sort();
    out.truncate(6);
    out
}
