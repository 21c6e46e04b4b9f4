//! `baton validate <folder>` on a BMAD skill or classic workflow folder: the description of
//! `baton_bmad::method::describe`, rendered with the project's `[autopilot] render` choice.

use crate::config::AutopilotConfig;
use crate::error::Result;
use std::path::Path;

pub use baton_bmad::method::describe::{Description, Interactive, judged_by};

/// Describes the skill or workflow in `dir` (`None` when it is neither); `render_pref` wins
/// over the project's `[autopilot] render`.
pub fn describe(dir: &Path, render_pref: Option<&str>) -> Option<Result<Description>> {
    baton_bmad::method::describe::describe(dir, render_pref, &|root| {
        AutopilotConfig::load(root).ok().and_then(|c| c.render)
    })
}
