//! A_RESOLVE_PHASE: the phase, whether it is new, and its milestone (D-007), in the seed's
//! priority order. Ambiguity becomes a question, even with `-y`.

use super::error::{InferError, Result};
use super::inference::{Choice, Question, question};
use super::intent;
use super::state_file::{ArtifactStatus, State, phase_number_str};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    pub phase: Option<u64>,
    pub slug: Option<String>,
    pub is_new: bool,
    /// Named by the intent or answered by the user.
    pub explicit: bool,
    pub milestone: Option<String>,
    pub question: Option<Question>,
}

/// Resolves the phase. `early` says the position is already one of the stages before any
/// phase exists (brainstorm, blueprint, init, analyze-macro, roadmap): rule 5, phase `null`,
/// unless the intent or an answer names one.
pub fn resolve(
    intent_text: &str,
    state: Option<&State>,
    early: bool,
    answers: &BTreeMap<String, String>,
) -> Result<Resolved> {
    let mut r = Resolved::default();
    if let Some(answer) = answers.get(question::PHASE) {
        let n = phase_number_str(answer).ok_or_else(|| InferError::AnswerInvalid {
            id: question::PHASE.into(),
            value: answer.clone(),
            options: vec!["a phase number".into()],
        })?;
        r.phase = Some(n);
        r.explicit = true;
    } else {
        // Rule 1: `phase N` / `PN` in the intent.
        match intent::explicit_phases(intent_text).as_slice() {
            [] => {}
            [n] => {
                r.phase = Some(*n);
                r.explicit = true;
            }
            many => {
                r.question = Some(phase_question(
                    state,
                    many,
                    "The intent names several phases.",
                ));
                return Ok(r);
            }
        }
    }
    let Some(state) = state else {
        return Ok(r);
    };
    if r.phase.is_none() && !early {
        resolve_implicit(intent_text, state, &mut r);
    }
    if let Some(n) = r.phase {
        r.milestone = milestone_of(state, n);
        if r.slug.is_none() {
            r.slug = slug_of(state, n);
        }
    } else {
        r.milestone = state.current_milestone.clone();
    }
    Ok(r)
}

/// Rules 2–4 and 6.
fn resolve_implicit(intent_text: &str, state: &State, r: &mut Resolved) {
    // Rule 2: a phrase of the intent matches a known phase slug or artifact path.
    if let Some(slug) = intent::derived_slug(intent_text) {
        let ws = intent::words(intent_text);
        let mut hits: Vec<u64> = Vec::new();
        for m in &state.milestones {
            let named = m.phase_slugs.iter().map(|(n, s)| (*n, s.as_str())).chain(
                m.phases
                    .iter()
                    .filter_map(|p| Some((p.number, p.slug.as_deref()?))),
            );
            for (n, s) in named {
                if intent::slug_matches(s, &ws) {
                    hits.push(n);
                }
            }
        }
        for a in &state.artifacts {
            if let (Some(n), Some(s)) = (a.phase, a.path.as_deref().and_then(intent::artifact_slug))
                && intent::slug_matches(&s, &ws)
            {
                hits.push(n);
            }
        }
        hits.sort_unstable();
        hits.dedup();
        match hits.as_slice() {
            [n] => r.phase = Some(*n),
            [] => {
                // No match: a new phase after every phase known.
                r.phase = Some(known_phases(state).last().map_or(1, |m| m + 1));
                r.slug = Some(slug);
                r.is_new = true;
            }
            many => {
                r.question = Some(phase_question(
                    Some(state),
                    many,
                    "The intent matches several phases.",
                ));
            }
        }
        return;
    }
    // Rule 3: the latest in-progress artifact's phase.
    if let Some(a) = state
        .artifacts
        .iter()
        .filter(|a| a.status == ArtifactStatus::InProgress && a.phase.is_some())
        .max_by(|x, y| x.age_key().cmp(&y.age_key()))
    {
        r.phase = a.phase;
        return;
    }
    // Rule 4: the first incomplete phase of the current milestone (of all milestones, in
    // order, when there is no current one).
    let candidates = match state
        .current_milestone
        .as_deref()
        .and_then(|id| state.milestone(id))
    {
        Some(m) => vec![m],
        None => state.milestones.iter().collect(),
    };
    // Computed once: a hostile registry must not make this quadratic.
    let verified: BTreeSet<u64> = state
        .artifacts
        .iter()
        .filter(|a| a.kind == "verify" && a.status == ArtifactStatus::Completed)
        .filter_map(|a| a.phase)
        .collect();
    for m in candidates {
        if is_done(m.status.as_deref()) {
            continue;
        }
        let statuses: BTreeMap<u64, &str> = m
            .phases
            .iter()
            .filter_map(|p| Some((p.number, p.status.as_deref()?)))
            .collect();
        // A phase is complete when its entry says so, or, without a status, when a completed
        // verify artifact exists for it (the registry is the only record of progress then).
        let complete = |n: u64| match statuses.get(&n) {
            Some(s) => is_done(Some(s)),
            None => verified.contains(&n),
        };
        if let Some(n) = State::phases_of(m).into_iter().find(|n| !complete(*n)) {
            r.phase = Some(n);
            return;
        }
    }
    // Rule 6: still ambiguous.
    let all = known_phases(state);
    r.question = Some(phase_question(
        Some(state),
        &all,
        "No phase is in progress or incomplete.",
    ));
}

fn is_done(status: Option<&str>) -> bool {
    matches!(status, Some("completed" | "complete" | "done"))
}

/// Every phase number state.json knows, ascending.
fn known_phases(state: &State) -> Vec<u64> {
    let mut all: Vec<u64> = state.milestones.iter().flat_map(State::phases_of).collect();
    all.extend(state.artifacts.iter().filter_map(|a| a.phase));
    all.sort_unstable();
    all.dedup();
    all
}

/// D-007: the milestone whose phases or phase_slugs list the phase, else the current one.
pub fn milestone_of(state: &State, n: u64) -> Option<String> {
    state
        .milestones
        .iter()
        .find(|m| State::phases_of(m).contains(&n))
        .map(|m| m.id.clone())
        .or_else(|| state.current_milestone.clone())
}

fn slug_of(state: &State, n: u64) -> Option<String> {
    state.milestones.iter().find_map(|m| {
        m.phase_slugs.get(&n).cloned().or_else(|| {
            m.phases
                .iter()
                .find(|p| p.number == n)
                .and_then(|p| p.slug.clone())
        })
    })
}

fn phase_question(state: Option<&State>, phases: &[u64], why: &str) -> Question {
    let options = phases
        .iter()
        .take(50)
        .map(|n| {
            let slug = state.and_then(|s| slug_of(s, *n));
            Choice {
                value: n.to_string(),
                label: match &slug {
                    Some(s) => format!("phase {n} ({s})"),
                    None => format!("phase {n}"),
                },
                description: state
                    .and_then(|s| milestone_of(s, *n))
                    .map(|m| format!("milestone {m}"))
                    .unwrap_or_default(),
            }
        })
        .collect();
    Question {
        id: question::PHASE.into(),
        text: format!("{why} Which phase should this session work on?"),
        options,
        free_text: true,
        even_with_auto: true,
    }
}
