//! The implementation phases a story can go through — seed 004's five, and BMAD 6.11+'s
//! `build` (one skill that plans, implements and reviews) — their names as state files and
//! commands write them, and where a story starts for its sprint status. Which of them a
//! project runs, in which order, is its pipeline ([`crate::pipeline`], `baton_epic::pipeline`).

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    CreateStory,
    Validate,
    Dev,
    /// BMAD 6.11+'s implementation phase (`bmad-build-auto`): the story planned, implemented
    /// and reviewed by one skill, in the place of create-story, dev and their checks.
    Build,
    Revision,
    CodeReview,
}

impl Phase {
    pub const ALL: [Phase; 6] = [
        Phase::CreateStory,
        Phase::Validate,
        Phase::Dev,
        Phase::Build,
        Phase::Revision,
        Phase::CodeReview,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::CreateStory => "create-story",
            Phase::Validate => "validate",
            Phase::Dev => "dev",
            Phase::Build => "build",
            Phase::Revision => "revision",
            Phase::CodeReview => "code-review",
        }
    }

    pub fn parse(text: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.as_str() == text)
    }

    /// The phase that writes the story's code (dev, or build): where a failed check or a review
    /// asking for changes sends a story.
    pub fn is_implementation(self) -> bool {
        matches!(self, Phase::Dev | Phase::Build)
    }

    /// Where a story with no progress of ours starts, from its sprint status (legacy values
    /// already mapped): `None` for a done story or a status BMAD does not define.
    pub fn start_for(status: &str) -> Option<Phase> {
        match status {
            "backlog" => Some(Phase::CreateStory),
            "ready-for-dev" => Some(Phase::Validate),
            "in-progress" => Some(Phase::Dev),
            "review" => Some(Phase::CodeReview),
            _ => None,
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for Phase {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Phase {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Phase, D::Error> {
        let s = String::deserialize(d)?;
        Phase::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown phase {s:?}; expected one of: create-story, validate, dev, build, revision, code-review"
            ))
        })
    }
}
