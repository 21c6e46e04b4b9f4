//! Where a session stands now, as `baton session status` and the session pages say it:
//! `done (started at analyze)` once completed, else the stage of its current step. status.json's
//! `lifecycle_position` is only where it was built.

use baton_ralph::session::Session;

/// The position of a session whose `status` is this, built at `started`, whose current (or
/// next pending) step is at `stage` (when known).
pub fn describe(status: &str, started: &str, stage: Option<&str>) -> String {
    let started = if started.is_empty() { "—" } else { started };
    if status == "completed" {
        return format!("done (started at {started})");
    }
    match stage.filter(|s| !s.is_empty()) {
        Some(stage) if stage != started => format!("{stage} (started at {started})"),
        _ => started.to_string(),
    }
}

/// [`describe`] of a loaded session.
pub fn now(s: &Session) -> String {
    let stage = s
        .active_index()
        .and_then(|i| s.step(i))
        .or_else(|| s.all_steps().find(|st| st.status() == "pending"))
        .map(|st| st.stage());
    describe(s.status(), s.str("lifecycle_position").unwrap_or(""), stage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completed_session_is_done_and_a_running_one_at_its_step() {
        assert_eq!(
            describe("completed", "analyze", Some("analyze")),
            "done (started at analyze)"
        );
        assert_eq!(
            describe("running", "analyze", Some("build")),
            "build (started at analyze)"
        );
        assert_eq!(describe("running", "analyze", Some("analyze")), "analyze");
        assert_eq!(describe("running", "", None), "—");
    }
}
