//! The epic's pipeline as data: the phases a story goes through, in order, each with what runs
//! it, what it must leave and where a failed check sends the story back. The loop (`story`,
//! `phase_run`) runs whatever list it is given and never names a phase to decide what comes
//! next. Which list is built is decided here: `[autopilot] pipeline` in baton.toml, else what
//! the project's installed BMAD method implies ([`baton_bmad::pipeline::detect`]: BMAD 6.11+'s
//! build → code-review, the classic create-story → (validate) → dev → code-review, or seed
//! 004's five phases with the bundled package). An epic keeps the pipeline it started with
//! (recorded in its method snapshot).

use crate::config::AutopilotConfig;
use crate::error::{EpicError, Result};
use baton_bmad::Phase;
use baton_bmad::method::files::Reader;
use baton_bmad::pipeline::{self as detection, MethodPhase, Source};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The bundled package's workflow and agent that run a phase where neither the configuration
/// nor an installed BMAD skill names another (see `specs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Runner {
    pub workflow: &'static str,
    pub agent: &'static str,
}

/// What a completed phase must have left, checked by the runtime (never taken from the model).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leaves {
    /// The story file, non-empty, wherever the finder finds it.
    StoryFile,
    /// Code: the verify commands pass; with `story_file`, the story file too; with `diff`, a
    /// change outside the artifacts folder (under `[autopilot.git] commit`).
    Code { story_file: bool, diff: bool },
    /// A valid review verdict (`{story}.review.json`): approved ends the story, changes
    /// requested send it back.
    Verdict,
}

impl Leaves {
    /// Whether the phase must leave the story file (non-empty, found once).
    pub fn story_file(self) -> bool {
        matches!(
            self,
            Leaves::StoryFile
                | Leaves::Code {
                    story_file: true,
                    ..
                }
        )
    }

    /// In words, for the pipeline's view.
    pub fn describe(self) -> &'static str {
        match self {
            Leaves::StoryFile => "the story file",
            Leaves::Code {
                story_file: true,
                diff: true,
            } => {
                "code (verify commands pass, a change outside the artifacts folder) and the story file"
            }
            Leaves::Code { .. } => "code the verify commands pass",
            Leaves::Verdict => "a review verdict",
        }
    }
}

/// One phase of the pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    pub phase: Phase,
    pub runs: Runner,
    pub leaves: Leaves,
    /// The sprint status the story is raised to when a fresh run of the phase starts.
    pub raises_on_start: Option<&'static str>,
    /// The sprint status the story is raised to once what the phase left is checked.
    pub raises_when_done: Option<&'static str>,
    /// Where a failed verify or a review asking for changes sends the story.
    pub back_to: Option<Phase>,
    /// The installed skill the method runs this phase with by default (`None`: the phase's
    /// usual installed skills, else the bundled workflow).
    pub method: Option<String>,
    /// The skill's action when it has several (create-story's `validate`).
    pub action: Option<String>,
}

/// The phases of a story, in loop order, and where that order came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pipeline {
    stages: Vec<Stage>,
    pub source: Source,
    /// Why this pipeline, in one sentence.
    pub reason: String,
}

/// A pipeline as an epic records it (in its method snapshot): the epic keeps it to the end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recorded {
    pub source: Source,
    pub reason: String,
    pub phases: Vec<RecordedPhase>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedPhase {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
}

impl Recorded {
    /// `a → b → c`, as messages name a pipeline.
    pub fn arrow(&self) -> String {
        let names: Vec<&str> = self.phases.iter().map(|p| p.name.as_str()).collect();
        format!("{} ({})", names.join(" → "), self.source)
    }
}

/// The pipeline as `--dry-run`, `epic status --json` and the web board show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PipelineView {
    pub source: Source,
    pub reason: String,
    pub phases: Vec<PhaseView>,
}

/// One phase of [`PipelineView`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseView {
    pub name: &'static str,
    pub runs: Runs,
    /// How an installed skill is rendered (absent for a package workflow).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub render: Option<String>,
    pub leaves: &'static str,
    /// Where a failed check or a review asking for changes sends the story.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub back_to: Option<&'static str>,
    /// The skill's action, when it has several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// Settings of the installed skill baton checked (build's route, commit, review).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<(String, String)>,
}

/// What runs a phase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Runs {
    /// `skill`, `workflow` (a classic BMAD workflow) or `package`.
    pub kind: &'static str,
    pub name: String,
    /// Project-relative folder of an installed skill or workflow; the package as shown.
    pub path: String,
}

/// The bundled package's workflow and agent for `phase`.
fn bundled_runner(phase: Phase) -> Runner {
    let (workflow, agent) = match phase {
        Phase::CreateStory => ("create-story", "sm"),
        Phase::Validate => ("validate-story", "sm"),
        Phase::Dev | Phase::Build => ("dev-story", "dev"),
        Phase::Revision => ("revision", "revisor"),
        Phase::CodeReview => ("code-review", "qa"),
    };
    Runner { workflow, agent }
}

/// The stage of `phase` in a pipeline whose implementation phase is `rework`.
fn stage_of(p: &MethodPhase, rework: Option<Phase>) -> Stage {
    let base = Stage {
        phase: p.phase,
        runs: bundled_runner(p.phase),
        leaves: Leaves::StoryFile,
        raises_on_start: None,
        raises_when_done: None,
        back_to: None,
        method: p.skill.clone(),
        action: p.action.clone(),
    };
    match p.phase {
        Phase::CreateStory => Stage {
            raises_when_done: Some("ready-for-dev"),
            ..base
        },
        Phase::Validate => base,
        Phase::Dev | Phase::Build => Stage {
            leaves: Leaves::Code {
                story_file: true,
                diff: true,
            },
            raises_on_start: Some("in-progress"),
            raises_when_done: Some("review"),
            back_to: Some(p.phase),
            ..base
        },
        Phase::Revision => Stage {
            leaves: Leaves::Code {
                story_file: false,
                diff: false,
            },
            back_to: rework,
            ..base
        },
        Phase::CodeReview => Stage {
            leaves: Leaves::Verdict,
            back_to: rework,
            ..base
        },
    }
}

/// A phase's place in BMAD's order (dev and build share theirs).
fn rank(p: Phase) -> u8 {
    match p {
        Phase::CreateStory => 0,
        Phase::Validate => 1,
        Phase::Dev | Phase::Build => 2,
        Phase::Revision => 3,
        Phase::CodeReview => 4,
    }
}

fn invalid(problem: impl std::fmt::Display) -> EpicError {
    EpicError::usage(
        "EPIC_PIPELINE_INVALID",
        format!("[autopilot] pipeline: {problem}"),
    )
    .hint("list the phases in run order, e.g. pipeline = [\"build\", \"code-review\"] or [\"create-story\", \"dev\", \"code-review\"]; phases: create-story, validate, dev, build, revision, code-review")
}

impl Pipeline {
    /// The pipeline of `phases`, checked: each phase once, one implementation phase (dev or
    /// build) before the last, and code-review last (its verdict ends a story).
    pub fn of_phases(phases: &[MethodPhase], source: Source, reason: String) -> Result<Pipeline> {
        let names: Vec<&str> = phases.iter().map(|p| p.phase.as_str()).collect();
        for (i, p) in phases.iter().enumerate() {
            if phases[..i].iter().any(|q| q.phase == p.phase) {
                return Err(invalid(format!("{} is listed twice", p.phase)));
            }
        }
        let implementation: Vec<Phase> = phases
            .iter()
            .map(|p| p.phase)
            .filter(|p| p.is_implementation())
            .collect();
        let rework = match implementation.as_slice() {
            [one] => *one,
            [] => {
                return Err(invalid(format!(
                    "{names:?} has no phase that writes the code (dev or build)"
                )));
            }
            _ => {
                return Err(invalid(format!(
                    "{names:?} has both dev and build: one phase writes the code"
                )));
            }
        };
        if phases.last().map(|p| p.phase) != Some(Phase::CodeReview) {
            return Err(invalid(format!(
                "{names:?} must end with code-review: its verdict ends a story"
            )));
        }
        let at = |ph: Phase| phases.iter().position(|p| p.phase == ph);
        if let (Some(r), Some(i)) = (at(Phase::Revision), at(rework))
            && r < i
        {
            return Err(invalid(format!("{names:?}: revision comes after {rework}")));
        }
        for early in [Phase::CreateStory, Phase::Validate] {
            if let (Some(e), Some(i)) = (at(early), at(rework))
                && e > i
            {
                return Err(invalid(format!("{names:?}: {early} comes before {rework}")));
            }
        }
        Ok(Pipeline {
            stages: phases.iter().map(|p| stage_of(p, Some(rework))).collect(),
            source,
            reason,
        })
    }

    /// The pipeline the configuration asks for, else the one the project's installed method
    /// implies.
    pub fn for_project(config: &AutopilotConfig, project: &Path) -> Result<Pipeline> {
        if let Some(names) = &config.pipeline {
            return Pipeline::configured(names);
        }
        let detected = detection::detect(&Reader::open(project)?)?;
        let mut phases = detected.phases;
        let mut reason = detected.reason;
        // `[autopilot.phases.X]` for a phase the method does not run brings it back, in BMAD's
        // order; a second phase writing the code is refused (never silently ignored).
        for name in config.phases.keys() {
            let Some(phase) = Phase::parse(name) else {
                continue;
            };
            if phases.iter().any(|p| p.phase == phase) {
                continue;
            }
            if phase.is_implementation() {
                let runs = phases
                    .iter()
                    .find(|p| p.phase.is_implementation())
                    .map_or("another phase", |p| p.phase.as_str());
                return Err(EpicError::usage(
                    "EPIC_PIPELINE_INVALID",
                    format!(
                        "baton.toml configures [autopilot.phases.{phase}], but the project's pipeline ({}) writes the code in {runs}",
                        detected.source
                    ),
                )
                .hint(format!(
                    "configure [autopilot.phases.{runs}] instead, or list the phases yourself: [autopilot] pipeline = [...]"
                )));
            }
            let at = phases
                .iter()
                .position(|p| rank(p.phase) > rank(phase))
                .unwrap_or(phases.len());
            phases.insert(
                at,
                MethodPhase {
                    phase,
                    skill: None,
                    action: None,
                },
            );
            reason.push_str(&format!(
                "; {phase} added back by [autopilot.phases.{phase}] in baton.toml"
            ));
        }
        Pipeline::of_phases(&phases, detected.source, reason)
    }

    /// `[autopilot] pipeline = [...]`: the phases by name, each run as `[autopilot.phases.X]`
    /// says (else by the project's installed skill for it, else the bundled package).
    pub fn configured(names: &[String]) -> Result<Pipeline> {
        let phases = names
            .iter()
            .map(|n| {
                Phase::parse(n.trim())
                    .map(|phase| MethodPhase {
                        phase,
                        skill: None,
                        action: None,
                    })
                    .ok_or_else(|| invalid(format!("{n:?} is not a phase")))
            })
            .collect::<Result<Vec<_>>>()?;
        Pipeline::of_phases(
            &phases,
            Source::Config,
            format!("baton.toml [autopilot] pipeline = {names:?}"),
        )
    }

    /// Seed 004: create-story → validate → dev → revision → code-review with the bundled
    /// package, a failed verify or a review asking for changes back to dev.
    pub fn classic() -> Pipeline {
        let stages = [
            Phase::CreateStory,
            Phase::Validate,
            Phase::Dev,
            Phase::Revision,
            Phase::CodeReview,
        ]
        .into_iter()
        .map(|phase| {
            stage_of(
                &MethodPhase {
                    phase,
                    skill: None,
                    action: None,
                },
                Some(Phase::Dev),
            )
        })
        .collect();
        Pipeline {
            stages,
            source: Source::Bundled,
            reason: "baton's bundled five phases".into(),
        }
    }

    /// The pipeline an epic recorded (checked again: the file is the epic's own, but a person
    /// may have edited it).
    pub fn from_record(r: &Recorded) -> Result<Pipeline> {
        let phases = r
            .phases
            .iter()
            .map(|p| {
                Phase::parse(&p.name)
                    .map(|phase| MethodPhase {
                        phase,
                        skill: p.skill.clone(),
                        action: p.action.clone(),
                    })
                    .ok_or_else(|| {
                        invalid(format!("the recorded phase {:?} is not a phase", p.name))
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        Pipeline::of_phases(&phases, r.source, r.reason.clone())
    }

    /// What an epic records of this pipeline.
    pub fn record(&self) -> Recorded {
        Recorded {
            source: self.source,
            reason: self.reason.clone(),
            phases: self
                .stages
                .iter()
                .map(|s| RecordedPhase {
                    name: s.phase.as_str().to_string(),
                    skill: s.method.clone(),
                    action: s.action.clone(),
                })
                .collect(),
        }
    }

    pub fn stages(&self) -> &[Stage] {
        &self.stages
    }

    pub fn phases(&self) -> impl Iterator<Item = Phase> + '_ {
        self.stages.iter().map(|s| s.phase)
    }

    /// The phase names in order (what an epic records).
    pub fn names(&self) -> Vec<String> {
        self.phases().map(|p| p.as_str().to_string()).collect()
    }

    /// The stage of `phase`; `None` for a phase this pipeline does not run.
    pub fn stage(&self, phase: Phase) -> Option<&Stage> {
        self.stages.iter().find(|s| s.phase == phase)
    }

    /// The phase after `phase`; none after the last (its verdict decides).
    pub fn next(&self, phase: Phase) -> Option<Phase> {
        let at = self.stages.iter().position(|s| s.phase == phase)?;
        self.stages.get(at + 1).map(|s| s.phase)
    }

    /// The first phase, where a new story starts.
    pub fn first(&self) -> Phase {
        self.stages.first().map_or(Phase::CreateStory, |s| s.phase)
    }

    /// The last phase, whose verdict ends a story (and after which an approved story merges).
    pub fn last(&self) -> Phase {
        self.stages.last().map_or(Phase::CodeReview, |s| s.phase)
    }

    /// The phase a story goes back to when its work must be done again (a failed check, a
    /// review asking for changes, a merge that conflicts or fails the verify commands).
    pub fn rework(&self) -> Phase {
        self.back_from(self.last())
    }

    /// Whether a failed check of some phase sends the story back to `phase`.
    pub fn receives_failures(&self, phase: Phase) -> bool {
        self.stages.iter().any(|s| s.back_to == Some(phase))
    }

    /// Where a failed check of `phase` sends the story (the phase itself when none is set).
    pub fn back_from(&self, phase: Phase) -> Phase {
        self.stage(phase).and_then(|s| s.back_to).unwrap_or(phase)
    }

    /// The phase of this pipeline that stands where `phase` stands in BMAD's order: `phase`
    /// itself when the pipeline runs it; dev and build stand for each other; else the first
    /// later phase it runs (a story recorded at validate, in a pipeline without it, goes on
    /// with the phase that writes the code).
    pub fn nearest(&self, phase: Phase) -> Phase {
        if self.stage(phase).is_some() {
            return phase;
        }
        if phase.is_implementation() {
            return self.rework();
        }
        self.phases()
            .find(|p| rank(*p) > rank(phase))
            .unwrap_or_else(|| self.last())
    }

    /// Where a story with no progress of ours starts, from its sprint status (as
    /// [`Phase::start_for`], moved onto this pipeline's phases).
    pub fn start_for(&self, status: &str) -> Option<Phase> {
        Phase::start_for(status).map(|p| self.nearest(p))
    }

    /// The view of this pipeline; `runs` says what runs each phase (from the resolved specs).
    pub fn view(&self, runs: impl Fn(&Stage) -> (Runs, Option<String>)) -> PipelineView {
        PipelineView {
            source: self.source,
            reason: self.reason.clone(),
            phases: self
                .stages
                .iter()
                .map(|s| {
                    let (runs, render) = runs(s);
                    PhaseView {
                        name: s.phase.as_str(),
                        runs,
                        render,
                        leaves: s.leaves.describe(),
                        back_to: s.back_to.filter(|b| *b != s.phase).map(Phase::as_str),
                        action: s.action.clone(),
                        settings: Vec::new(),
                    }
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_classic_pipeline_is_seed_004s_loop() {
        let p = Pipeline::classic();
        let order: Vec<&str> = p.phases().map(Phase::as_str).collect();
        assert_eq!(
            order,
            ["create-story", "validate", "dev", "revision", "code-review"]
        );
        assert_eq!(p.next(Phase::Revision), Some(Phase::CodeReview));
        assert_eq!(p.next(Phase::CodeReview), None);
        assert_eq!(p.back_from(Phase::CodeReview), Phase::Dev);
        assert_eq!(p.back_from(Phase::Validate), Phase::Validate);
        assert_eq!(
            (p.first(), p.last(), p.rework()),
            (Phase::CreateStory, Phase::CodeReview, Phase::Dev)
        );
        let dev = p.stage(Phase::Dev).unwrap();
        assert_eq!(dev.runs.workflow, "dev-story");
        assert_eq!(
            (dev.raises_on_start, dev.raises_when_done),
            (Some("in-progress"), Some("review"))
        );
    }

    #[test]
    fn a_build_pipeline_sends_failures_back_to_build_and_places_every_status() {
        let p = Pipeline::configured(&["build".into(), "code-review".into()]).unwrap();
        assert_eq!(p.source, Source::Config);
        assert_eq!((p.first(), p.rework()), (Phase::Build, Phase::Build));
        assert_eq!(p.back_from(Phase::CodeReview), Phase::Build);
        for (status, at) in [
            ("backlog", Phase::Build),
            ("ready-for-dev", Phase::Build),
            ("in-progress", Phase::Build),
            ("review", Phase::CodeReview),
        ] {
            assert_eq!(p.start_for(status), Some(at), "{status}");
        }
        assert_eq!(p.start_for("done"), None);
        assert_eq!(p.nearest(Phase::Dev), Phase::Build);
        assert_eq!(p.nearest(Phase::Revision), Phase::CodeReview);
        let build = p.stage(Phase::Build).unwrap();
        assert_eq!(build.raises_on_start, Some("in-progress"));
        assert!(build.leaves.story_file());
    }

    #[test]
    fn a_recorded_pipeline_is_checked_again_when_read() {
        let p = Pipeline::configured(&["build".into(), "code-review".into()]).unwrap();
        let recorded = p.record();
        assert_eq!(Pipeline::from_record(&recorded).unwrap(), p);
        let json = serde_json::to_value(&recorded).unwrap();
        assert_eq!(json["source"], "config");
        // A record someone edited: a phase that does not exist, or a list that ends no story.
        let mut bad = recorded.clone();
        bad.phases[0].name = "deploy".into();
        assert_eq!(
            Pipeline::from_record(&bad).unwrap_err().code,
            "EPIC_PIPELINE_INVALID"
        );
        let mut bad = recorded;
        bad.phases.pop();
        assert_eq!(
            Pipeline::from_record(&bad).unwrap_err().code,
            "EPIC_PIPELINE_INVALID"
        );
        let unknown: Result<Recorded, _> = serde_json::from_str(
            r#"{"source": "bmad-6.11+", "reason": "", "phases": [], "extra": 1}"#,
        );
        assert!(unknown.is_err());
    }

    #[test]
    fn a_pipeline_that_cannot_end_a_story_is_refused() {
        for bad in [
            vec!["build"],
            vec!["create-story", "code-review"],
            vec!["dev", "build", "code-review"],
            vec!["dev", "dev", "code-review"],
            vec!["dev", "code-review", "revision"],
            vec!["revision", "dev", "code-review"],
            vec!["dev", "create-story", "code-review"],
            vec!["deploy", "code-review"],
        ] {
            let names: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
            let e = Pipeline::configured(&names).unwrap_err();
            assert_eq!(e.code, "EPIC_PIPELINE_INVALID", "{bad:?}");
        }
        let ok = Pipeline::configured(&[
            "create-story".into(),
            "dev".into(),
            "revision".into(),
            "code-review".into(),
        ])
        .unwrap();
        assert_eq!(ok.back_from(Phase::Revision), Phase::Dev);
        assert_eq!(ok.start_for("ready-for-dev"), Some(Phase::Dev));
    }
}
