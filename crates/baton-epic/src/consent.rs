//! A value BMAD does not define (`blocked`, `deferred`, `superseded`, bmad-loop's
//! `awaiting-operator`, `In progress`, a file path…) was written by a person or another tool,
//! and only a person changes it. When the loop reaches such a story, or a story of such an
//! epic, it asks in that story's agent-state file, the way a phase asks: a person at the
//! terminal answers at once; otherwise the loop pauses (exit code 10) until `baton epic answer`.
//!
//! - A story: `skip` leaves it as it is (the answer stays in its agent-state file, so the loop
//!   does not ask again while the value is the same), or a BMAD status (`backlog`,
//!   `ready-for-dev`, `in-progress`, `review`, `done`) is written and the story runs from there.
//! - An epic: `run` writes `in-progress` and its stories run; `leave` stops the loop and
//!   changes nothing (the next `baton epic run` asks again).
//!
//! Any other answer is not guessed at: the question is asked again, saying why.

use baton_bmad::keys::{self, KeyKind};
use baton_bmad::layout::Layout;
use baton_bmad::sprint::{self, Entry, SprintStatus};
use baton_epic_state::agent_state::{AgentState, Question};
use baton_epic_state::findings::Findings;

/// Why the block fields of an agent-state file name the sprint status.
pub(crate) const BLOCKED_AT: &str = "sprint-status";
pub(crate) const REASON: &str = "critical_decision";

/// The question about a story whose value BMAD does not define. It names the value (not the
/// line), so the same value is the same question after other lines of the file change.
pub fn story_question(shown: &str, key: &str, status: &str) -> String {
    format!(
        "{key} is `{status}` in {shown}, a value BMAD does not define for a story, so the loop \
         neither runs it nor changes it without you. Answer `skip` to leave it as it is (the loop \
         goes on with the next story and does not ask again while the value stays), or the \
         status to set it to (backlog, ready-for-dev, in-progress, review or done) to run it \
         from there."
    )
}

/// The question about an epic whose value BMAD does not define.
pub fn epic_question(shown: &str, epic: &str, status: &str) -> String {
    format!(
        "{epic} is `{status}` in {shown}, a value BMAD does not define for an epic, so the loop \
         runs none of its stories and changes nothing without you. Answer `run` to run them \
         ({epic} becomes in-progress), or `leave` to leave it as it is and stop."
    )
}

pub(crate) fn word(answer: &str) -> String {
    answer
        .trim()
        .trim_matches(['`', '"', '\'', '.', '!'])
        .trim()
        .to_ascii_lowercase()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoryAnswer {
    Skip,
    Set(&'static str),
    Unclear,
}

pub(crate) fn story_answer(answer: &str) -> StoryAnswer {
    let w = word(answer);
    if matches!(w.as_str(), "skip" | "leave") {
        return StoryAnswer::Skip;
    }
    keys::STORY_STATUSES
        .iter()
        .find(|s| **s == w)
        .map_or(StoryAnswer::Unclear, |s| StoryAnswer::Set(s))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EpicAnswer {
    Run,
    Leave,
    Unclear,
}

pub(crate) fn epic_answer(answer: &str) -> EpicAnswer {
    match word(answer).as_str() {
        "run" | "yes" | "y" => EpicAnswer::Run,
        "leave" | "skip" | "stop" | "no" | "n" => EpicAnswer::Leave,
        _ => EpicAnswer::Unclear,
    }
}

/// Whether a person answered `skip` for `entry` (a story) at its current value.
pub fn skipped(layout: &Layout, entry: &Entry) -> bool {
    if !matches!(entry.kind, KeyKind::Story { .. }) {
        return false;
    }
    let text = story_question(
        &layout.rel_file(sprint::FILE_NAME),
        &entry.key,
        &entry.status,
    );
    let Ok(Some(agent)) = AgentState::load(&layout.dir, &layout.rel, &entry.key) else {
        return false;
    };
    agent.questions.iter().any(|q| {
        q.question == text
            && q.answer
                .as_deref()
                .is_some_and(|a| story_answer(a) == StoryAnswer::Skip)
    })
}

/// The reasons of `findings` with the answers already given.
pub fn amend(findings: &mut Findings, layout: &Layout, sprint: &SprintStatus) {
    for n in &mut findings.not_runnable {
        if let Some(entry) = sprint.get(&n.key)
            && skipped(layout, entry)
        {
            n.reason.push_str(&format!(
                "; left as it is, as you answered (in {})",
                layout.rel_file(&format!(
                    "{}{}",
                    n.key,
                    baton_epic_state::agent_state::SUFFIX
                ))
            ));
        }
    }
}

/// How many stories of epic `n` another `baton epic run` would run without asking: none
/// while the epic's own value is one BMAD does not define.
pub fn runnable_left(sprint: &SprintStatus, n: u32) -> usize {
    if sprint
        .epic_entry(n)
        .is_some_and(|e| !keys::defined(&e.kind, &e.status))
    {
        return 0;
    }
    sprint
        .stories_of(n)
        .filter(|e| keys::defined(&e.kind, &e.status) && e.normalized() != "done")
        .count()
}

/// What the loop does with a story whose value BMAD does not define.
pub(crate) enum StoryConsent {
    /// Left as it is; the loop goes on.
    Skip,
    /// Ask (or wait for) this question in the story's agent-state file.
    Ask(Question),
    /// The person's status was written; the story runs from there.
    Set(&'static str),
}

/// What the loop does with an epic whose value BMAD does not define.
pub(crate) enum EpicConsent {
    Go,
    Ask(Question),
    Leave,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_strictly() {
        assert_eq!(story_answer(" Skip "), StoryAnswer::Skip);
        assert_eq!(
            story_answer("`ready-for-dev`"),
            StoryAnswer::Set("ready-for-dev")
        );
        assert_eq!(story_answer("Backlog."), StoryAnswer::Set("backlog"));
        assert_eq!(story_answer("drafted"), StoryAnswer::Unclear);
        assert_eq!(story_answer("yes please"), StoryAnswer::Unclear);
        assert_eq!(epic_answer("run"), EpicAnswer::Run);
        assert_eq!(epic_answer("LEAVE"), EpicAnswer::Leave);
        assert_eq!(epic_answer("in-progress"), EpicAnswer::Unclear);
    }

    #[test]
    fn the_question_names_the_value_not_the_line() {
        let q = story_question("impl/sprint-status.yaml", "2-3-x", "superseded");
        assert!(q.starts_with("2-3-x is `superseded` in impl/sprint-status.yaml"));
        assert!(q.contains("`skip`") && q.contains("ready-for-dev"));
        let e = epic_question("impl/sprint-status.yaml", "epic-2", "blocked");
        assert!(e.contains("`run`") && e.contains("`leave`"));
    }
}
