//! The implementation phases a story goes through (seed 004's five), their names as state files
//! and commands write them, and where a story starts for its sprint status. Their order, what
//! runs each and what each must leave are the epic's pipeline (`baton_epic::pipeline`).

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    CreateStory,
    Validate,
    Dev,
    Revision,
    CodeReview,
}

impl Phase {
    pub const ALL: [Phase; 5] = [
        Phase::CreateStory,
        Phase::Validate,
        Phase::Dev,
        Phase::Revision,
        Phase::CodeReview,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::CreateStory => "create-story",
            Phase::Validate => "validate",
            Phase::Dev => "dev",
            Phase::Revision => "revision",
            Phase::CodeReview => "code-review",
        }
    }

    pub fn parse(text: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.as_str() == text)
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
                "unknown phase {s:?}; expected one of: create-story, validate, dev, revision, code-review"
            ))
        })
    }
}
