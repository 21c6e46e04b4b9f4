//! `{story_key}.review.json` (seed 004 §3): the code-review verdict, `reviewResult`
//! (`approved` | `changes-requested`) and a `summary` that becomes the developer's instruction.

use super::error::{EpicError, Result};
use super::jsonfile::{self, Fields};
use baton_autopilot::untrusted::limit;
use baton_bmad::layout::{ArtifactFile, Artifacts};

pub const SUFFIX: &str = ".review.json";
const CODE: &str = "REVIEW_INVALID";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    pub approved: bool,
    pub summary: String,
}

pub fn path(dir: &Artifacts, story_key: &str) -> ArtifactFile {
    dir.file(&format!("{story_key}{SUFFIX}"))
}

impl Review {
    /// Reads and checks the verdict; `None` when there is none.
    pub fn load(dir: &Artifacts, shown_dir: &str, story_key: &str) -> Result<Option<Review>> {
        let shown = format!("{shown_dir}/{story_key}{SUFFIX}");
        let file = path(dir, story_key);
        let Some(doc) = jsonfile::read_object(&file, &shown, CODE, limit::SMALL_JSON)? else {
            return Ok(None);
        };
        let f = Fields::top(&doc, &shown, CODE);
        let result = f.one_of("reviewResult", &["approved", "changes-requested"])?;
        let summary = f.string("summary")?;
        if summary.trim().is_empty() {
            return Err(EpicError::invalid_file(
                CODE,
                &shown,
                Some("/summary"),
                "is empty; a review says what it found",
            ));
        }
        Ok(Some(Review {
            approved: result == "approved",
            summary: summary.to_string(),
        }))
    }
}
