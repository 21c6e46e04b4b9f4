//! The build phase's inference (seed 003: A_RESOLVE_PHASE, A_INFER_POSITION,
//! A_RESOLVE_SCOPE_VERDICT, A_DETERMINE_QUALITY_MODE, A_DETERMINE_PLANNING_MODE and the breadth
//! step of A_DECOMPOSE_TASKS) as pure, deterministic code: what `baton session start` knows
//! about a project before it builds a chain. Nothing here calls a model or writes a file.
//!
//! Where the seed asks the user, [`Inference::questions`] lists the question instead; the
//! caller asks it (or exits 10 without a terminal) and calls [`infer`] again with the answer
//! in [`Options::answers`], keyed by [`Question::id`]. An answered question is consumed, never
//! asked again. While questions remain, the other fields are provisional.

pub mod breadth;
pub mod error;
pub mod files;
pub mod inference;
pub mod intent;
pub mod modes;
pub mod phase;
pub mod position;
pub mod results;
pub mod state_file;

pub use error::InferError;
pub use inference::{
    Breadth, Choice, Clarification, Failed, Inference, Options, Position, QualityMode, Question,
    ScopeVerdict, question,
};

use baton_ralph::chain::PlanningMode;
use std::path::Path;

/// The build phase's inference for `intent` in the project at `project`: reads
/// `.workflow/state.json` and the gate result files the tables name, never writes. Questions
/// come in rounds: while the phase is ambiguous only that question is returned (everything
/// after it depends on the phase); then the planning mode and the clarification rounds.
pub fn infer(project: &Path, intent_text: &str, opts: &Options) -> error::Result<Inference> {
    if intent_text.trim().is_empty() {
        return Err(InferError::IntentEmpty);
    }
    let workflow = project.join(".workflow");
    let state = if workflow.is_dir() {
        state_file::read(&workflow)?
    } else {
        None
    };
    let state = state.as_ref();
    let breadth = breadth::classify(intent_text);
    let explicit = !intent::explicit_phases(intent_text).is_empty()
        || opts.answers.contains_key(question::PHASE);
    let early = position::early(project, intent_text, breadth, explicit, state);
    let resolved = phase::resolve(intent_text, state, early.is_some(), &opts.answers)?;
    let position = match (early, state) {
        (Some(stage), _) => Position::Stage(stage),
        // No state.json always has an early position; kept total for the type's sake.
        (None, None) => Position::Stage("init"),
        // Provisional while the phase question is pending.
        (None, Some(_)) if resolved.question.is_some() => Position::Stage("analyze"),
        (None, Some(st)) => position::phase_aware(&workflow, st, resolved.phase, resolved.is_new)?,
    };
    let analyze_macro_id = state
        .and_then(modes::latest_macro_analysis)
        .map(|a| a.id.clone());
    let blueprint_id = modes::blueprint_id(&workflow, state);
    let quality = modes::quality(&workflow, opts.quality, resolved.phase);
    let decompose = !matches!(
        position,
        Position::Stage("brainstorm" | "blueprint" | "init")
    );
    let mut inference = Inference {
        phase: resolved.phase,
        phase_slug: resolved.slug.clone(),
        phase_is_new: resolved.is_new,
        milestone: resolved.milestone.clone(),
        position,
        completed_stages: Vec::new(),
        quality,
        planning_mode: None,
        scope_verdict: None,
        breadth,
        decompose,
        analyze_macro_id,
        blueprint_id,
        explicit_phase: resolved.explicit,
        clarification: Clarification::default(),
        questions: Vec::new(),
    };
    if let Some(q) = resolved.question {
        inference.questions.push(q);
        return Ok(inference);
    }
    let name = inference.position.name();
    inference.scope_verdict = modes::scope_verdict(&workflow, state, name)?;
    match modes::planning(&modes::PlanningInput {
        position: name,
        phase_is_new: resolved.is_new,
        explicit_phase: resolved.explicit,
        milestone: resolved.milestone.as_deref(),
        state,
        auto: opts.auto,
        answers: &opts.answers,
    })? {
        modes::Planning::Mode(m) => inference.planning_mode = Some(m),
        modes::Planning::Ask(q) => inference.questions.push(q),
    }
    if let Some(st) = state {
        inference.completed_stages = position::completed_stages(
            st,
            resolved.phase,
            resolved.milestone.as_deref(),
            inference.planning_mode == Some(PlanningMode::Unified),
        );
    }
    // Without a decomposition (brainstorm, blueprint, init) nothing is clarified: asked as if
    // narrow, which never asks; answers given anyway are kept.
    let (clarification, rounds) = if decompose {
        breadth::rounds(
            breadth,
            opts.auto,
            &opts.answers,
            &position::top_folders(project),
        )
    } else {
        breadth::rounds(Breadth::Narrow, opts.auto, &opts.answers, &[])
    };
    inference.clarification = clarification;
    inference.questions.extend(rounds);
    Ok(inference)
}

#[cfg(test)]
mod tests;
