//! The epic's pipeline as data: the phases a story goes through, in order, each with what runs
//! it, what it must leave and where a failed check sends the story back. The loop (`story`,
//! `phase_run`) runs whatever list it is given and never names a phase to decide what comes
//! next; which list is built is decided here, from the configuration. Today there is one: seed
//! 004's five phases ([`Pipeline::classic`]).

use crate::config::AutopilotConfig;
use baton_bmad::Phase;

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
}

/// The phases of a story, in loop order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pipeline {
    stages: Vec<Stage>,
}

impl Pipeline {
    /// The pipeline the configuration asks for (one kind today).
    pub fn for_config(_config: &AutopilotConfig) -> Pipeline {
        Pipeline::classic()
    }

    /// Seed 004: create-story → validate → dev → revision → code-review, a failed verify or a
    /// review asking for changes back to dev.
    pub fn classic() -> Pipeline {
        let stage = |phase, workflow, agent, leaves| Stage {
            phase,
            runs: Runner { workflow, agent },
            leaves,
            raises_on_start: None,
            raises_when_done: None,
            back_to: None,
        };
        Pipeline {
            stages: vec![
                Stage {
                    raises_when_done: Some("ready-for-dev"),
                    ..stage(Phase::CreateStory, "create-story", "sm", Leaves::StoryFile)
                },
                stage(Phase::Validate, "validate-story", "sm", Leaves::StoryFile),
                Stage {
                    raises_on_start: Some("in-progress"),
                    raises_when_done: Some("review"),
                    back_to: Some(Phase::Dev),
                    ..stage(
                        Phase::Dev,
                        "dev-story",
                        "dev",
                        Leaves::Code {
                            story_file: true,
                            diff: true,
                        },
                    )
                },
                Stage {
                    back_to: Some(Phase::Dev),
                    ..stage(
                        Phase::Revision,
                        "revision",
                        "revisor",
                        Leaves::Code {
                            story_file: false,
                            diff: false,
                        },
                    )
                },
                Stage {
                    back_to: Some(Phase::Dev),
                    ..stage(Phase::CodeReview, "code-review", "qa", Leaves::Verdict)
                },
            ],
        }
    }

    pub fn stages(&self) -> &[Stage] {
        &self.stages
    }

    pub fn phases(&self) -> impl Iterator<Item = Phase> + '_ {
        self.stages.iter().map(|s| s.phase)
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
}
