//! Placeholders of a step's args that only a later step can fill (`{phase}` before the
//! roadmap exists), said in words wherever a chain is shown to a person, so `{phase}` never
//! reads as a bug.

/// Each placeholder filled later, and what fills it.
const LATE: [(&str, &str); 11] = [
    ("{phase}", "the phase the roadmap picks"),
    ("{milestone_num}", "the milestone number the roadmap picks"),
    ("{milestone}", "the milestone the roadmap picks"),
    ("{analyze_macro_id}", "the id the analysis records"),
    ("{blueprint_id}", "the id the blueprint records"),
    ("{scratch_dir}", "the scratch folder an earlier step names"),
    ("{plan_dir}", "the plan folder an earlier step names"),
    (
        "{analysis_dir}",
        "the analysis folder an earlier step names",
    ),
    ("{issue_id}", "the issue an earlier step names"),
    ("{intent}", "the session's intent"),
    ("{description}", "the session's intent"),
];

/// `args` as a person reads it: each placeholder still in it (not filled yet) replaced by
/// `<what fills it>`.
pub fn shown(args: &str) -> String {
    LATE.iter().fold(args.to_string(), |acc, (from, words)| {
        acc.replace(from, &format!("<{words}>"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_late_phase_is_said_in_words_and_filled_text_is_kept() {
        assert_eq!(
            shown("plan: maestro-plan {phase} @M1"),
            "plan: maestro-plan <the phase the roadmap picks> @M1"
        );
        assert_eq!(
            shown("{milestone_num}/{milestone}"),
            "<the milestone number the roadmap picks>/<the milestone the roadmap picks>"
        );
        assert_eq!(shown("verify 2 @M1"), "verify 2 @M1");
    }
}
