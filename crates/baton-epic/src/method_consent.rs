//! The method's files are the operator's. Before each phase the loop compares the project's
//! BMAD method with the snapshot taken when the epic started (see [`super::method::snapshot`]).
//! A change — a customization layer rewritten, a skill appended to, a skill installed where the
//! phase ran baton's bundled one — is never used silently: the loop asks in the story's
//! agent-state file, the way it asks about a status BMAD does not define. A person at the
//! terminal answers at once; otherwise (`--non-interactive`) the loop stops with
//! `EPIC_METHOD_CHANGED`, the question waiting for `baton epic answer <story> accept`.
//!
//! - `accept`: the phases are rendered again from the files as they are now, which become the
//!   snapshot.
//! - `refuse`: the loop stops; restore the files, then `baton epic resume`.
//! - Files restored to the snapshot make a waiting question moot: it is removed.
//!
//! Any other answer is not guessed at: the question is asked again, saying why.

use super::error::Result;
use super::events::EpicEvent;
use super::method::snapshot::{self, MethodSnapshot};
use super::outcome::EpicOutcome;
use super::progress::FailureDetail;
use super::specs::{self, Specs};
use crate::ctx::Ctx;
use baton_bmad::phase::Phase;
use baton_epic_state::agent_state::{AgentState, Question};

/// The code the loop stops with when nobody can answer.
pub const CODE: &str = "EPIC_METHOD_CHANGED";
/// How every question about the method begins (a later change replaces an earlier question).
const PREFIX: &str = "The project's BMAD method changed since this epic took its snapshot";
const BLOCKED_AT: &str = "method";
const REASON: &str = "critical_decision";

/// The question about `changes` (one line naming the files).
pub fn question(changes: &str) -> String {
    format!(
        "{PREFIX}: {changes}. The phases' instructions are rendered from these files, and a \
         phase's model may have written them. Answer `accept` to run with the files as they are \
         now (baton takes a new snapshot), or `refuse` to stop here (restore the files, then \
         `baton epic resume`)."
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Accept,
    Refuse,
    Unclear,
}

fn answer_of(text: &str) -> Answer {
    let w = text
        .trim()
        .trim_matches(['`', '"', '\'', '.', '!'])
        .trim()
        .to_ascii_lowercase();
    match w.as_str() {
        "accept" | "accepted" | "yes" | "y" => Answer::Accept,
        "refuse" | "no" | "n" | "stop" => Answer::Refuse,
        _ => Answer::Unclear,
    }
}

/// What the loop does before a phase.
pub(super) enum MethodConsent {
    /// The method is the snapshot's (or the person accepted it): the phase runs.
    Go,
    /// Ask (or wait for) this question in the story's agent-state file.
    Ask(Question),
    /// The person refused the change: the loop stops.
    Refused(FailureDetail),
}

/// The paths phase runs may not write, for `specs` of the project whose artifacts folder is
/// `artifacts_rel` (set on the tools' settings before any phase runs).
pub(super) fn protect(tools: &mut baton_tools::ToolsConfig, artifacts_rel: &str, specs: &Specs) {
    let chosen: Vec<String> = specs
        .values()
        .filter_map(|s| s.method.as_ref().map(|m| m.installed.rel.clone()))
        .collect();
    tools.system.protected = snapshot::protected_paths(artifacts_rel, &chosen);
}

impl Ctx<'_> {
    /// Compares the method with the epic's snapshot before `story`'s `phase` (taking the
    /// snapshot when the epic has none yet).
    pub(super) fn method_consent(&mut self, story: &str, phase: Phase) -> Result<MethodConsent> {
        let epic_id = self.progress.epic_id.clone();
        let now = MethodSnapshot::take(&self.config, &self.layout.project, &epic_id)?;
        let kept = MethodSnapshot::load(&self.layout.dir, &self.layout.rel)?
            .filter(|k| k.epic_id == epic_id);
        let Some(kept) = kept else {
            now.save(&self.layout.dir)?;
            return Ok(MethodConsent::Go);
        };
        let changes = kept.changes(&now);
        let agent = AgentState::load(&self.layout.dir, &self.layout.rel, story)?;
        if changes.is_empty() {
            // Files put back as they were: a question about them is moot.
            if let Some(mut agent) = agent
                && drop_questions(&mut agent, None)
            {
                agent.save(&self.layout.dir)?;
            }
            return Ok(MethodConsent::Go);
        }
        let listed = snapshot::describe(&changes);
        let text = question(&listed);
        let mut agent = agent.unwrap_or_else(|| AgentState::new(story, phase.as_str()));
        let dropped = drop_questions(&mut agent, Some(&text));
        let context = format!(
            "the snapshot was taken at {} ({}); before {phase} of {story}",
            kept.taken_at,
            self.layout.rel_file(snapshot::FILE_NAME)
        );
        let Some(q) = agent.questions.iter().find(|q| q.question == text).cloned() else {
            return Ok(MethodConsent::Ask(self.ask_saved(
                &mut agent, phase, text, context, BLOCKED_AT, REASON,
            )?));
        };
        let Some(answer) = q.answer.clone() else {
            if dropped {
                agent.save(&self.layout.dir)?;
            }
            return Ok(MethodConsent::Ask(q));
        };
        match answer_of(&answer) {
            Answer::Accept => {
                // Rendered again from the files as they are now, which become the snapshot.
                if let Some(recorded) = &now.pipeline {
                    self.pipeline = crate::pipeline::Pipeline::from_record(recorded)?;
                    // A story at a phase the new pipeline does not run goes on where it stands.
                    if let Some(sp) = self.progress.story.as_mut() {
                        let at = self.pipeline.nearest(sp.phase);
                        if at != sp.phase {
                            sp.go(at);
                        }
                    }
                }
                self.specs = specs::resolve(
                    &self.config,
                    &self.layout.project,
                    self.store,
                    &self.pipeline,
                )?;
                now.save(&self.layout.dir)?;
                agent.remove(&q.id);
                agent.save(&self.layout.dir)?;
                self.emit(EpicEvent::Note(format!(
                    "the project's BMAD method changed ({listed}); accepted: the phases run with it from now on"
                )));
                Ok(MethodConsent::Go)
            }
            Answer::Refuse => {
                agent.remove(&q.id);
                agent.save(&self.layout.dir)?;
                Ok(MethodConsent::Refused(self.method_failure(
                    story,
                    phase,
                    format!(
                        "{PREFIX}: {listed}; you refused the change: restore the files, then `baton epic resume`"
                    ),
                )))
            }
            Answer::Unclear => {
                agent.remove(&q.id);
                let context = format!(
                    "{context}. The answer `{}` was neither `accept` nor `refuse`.",
                    answer.trim()
                );
                Ok(MethodConsent::Ask(self.ask_saved(
                    &mut agent, phase, text, context, BLOCKED_AT, REASON,
                )?))
            }
        }
    }

    /// Nobody can answer now (`--non-interactive`): the loop stops with [`CODE`], the question
    /// waiting in the agent-state file.
    pub(super) fn method_changed_stop(
        &mut self,
        story: &str,
        phase: Phase,
        q: &Question,
    ) -> Result<EpicOutcome> {
        let listed = q
            .question
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.strip_prefix(": "))
            .and_then(|rest| rest.split(". The phases'").next())
            .unwrap_or("")
            .to_string();
        let failure = self.method_failure(
            story,
            phase,
            format!(
                "{PREFIX}: {listed}; nothing ran with it. `baton epic answer {story} accept` runs the phases with the files as they are now (a new snapshot); or restore them and `baton epic resume`"
            ),
        );
        self.method_stopped(failure)
    }

    /// Pauses on `failure` without touching the phase run in flight (it goes on once the
    /// method is settled).
    pub(super) fn method_stopped(&mut self, failure: FailureDetail) -> Result<EpicOutcome> {
        self.progress.failure = Some(failure.clone());
        self.pause(EpicOutcome::Paused { failure })
    }

    fn method_failure(&self, story: &str, phase: Phase, message: String) -> FailureDetail {
        FailureDetail {
            phase,
            story_key: story.to_string(),
            code: CODE.to_string(),
            message,
            run_id: None,
        }
    }
}

/// Removes the method questions of `agent` but the one asking `keep`; whether any was removed.
fn drop_questions(agent: &mut AgentState, keep: Option<&str>) -> bool {
    let stale: Vec<String> = agent
        .questions
        .iter()
        .filter(|q| q.question.starts_with(PREFIX) && Some(q.question.as_str()) != keep)
        .map(|q| q.id.clone())
        .collect();
    for id in &stale {
        agent.remove(id);
    }
    !stale.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_strictly() {
        assert_eq!(answer_of(" Accept. "), Answer::Accept);
        assert_eq!(answer_of("`yes`"), Answer::Accept);
        assert_eq!(answer_of("refuse"), Answer::Refuse);
        assert_eq!(answer_of("maybe later"), Answer::Unclear);
    }

    #[test]
    fn the_question_names_the_files_and_how_to_answer() {
        let q = question("_bmad/custom/bmad-code-review.toml (changed)");
        assert!(q.starts_with(PREFIX), "{q}");
        assert!(q.contains("_bmad/custom/bmad-code-review.toml (changed)"));
        assert!(q.contains("`accept`") && q.contains("`refuse`"));
    }
}
