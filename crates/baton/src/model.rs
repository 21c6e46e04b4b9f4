//! The model an invocation talks to (chosen by `baton_engine::model_choice` from the flags and
//! the configuration, as `baton serve` does) and its `--record` trace.

use crate::args::ModelArgs;
use crate::exit;
use crate::failure::Failure;
use baton_engine::Budget;
use baton_engine::model_choice::{self, LoadedModel, ModelError, Requested};
use baton_engine::runner::{self, Claimed};
use baton_llm::{ChatModel, ReplayModel, TraceRecorder};
use baton_store::Store;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The model of an invocation (built by `baton_engine::model_choice`, as `baton serve` does).
pub struct Model(LoadedModel);

impl Model {
    pub fn as_dyn(&self) -> &dyn ChatModel {
        self.0.as_dyn()
    }

    pub fn replay(&self) -> Option<&ReplayModel> {
        self.0.replay()
    }

    /// `--context-tokens`, else the configured window of the model, else the default.
    pub fn budget(&self, args: &ModelArgs) -> Budget {
        self.0.budget(args.context_tokens)
    }
}

fn requested(args: &ModelArgs) -> Requested {
    Requested {
        model: args.model.clone(),
        base_url: args.base_url.clone(),
        api: crate::args::ApiArg::api(args.api),
        replay: args.replay.clone(),
    }
}

pub fn load_model(
    args: &ModelArgs,
    store: &Store,
    project: Option<&Path>,
) -> Result<Model, Failure> {
    // A new run: the flags over the configuration (nothing is remembered yet).
    let choice = model_choice::continuation_choice(&requested(args), None, || false)
        .map_err(model_failure)?;
    let env = |k: &str| std::env::var(k).ok();
    model_choice::load_model(&choice, store.home(), project, &env)
        .map(Model)
        .map_err(model_failure)
}

/// The model that continues a claimed run: the one it was started with, unless flags say
/// otherwise (`baton_engine::model_choice::for_run`, as `baton serve` does).
pub fn continuation_model(
    args: &ModelArgs,
    store: &Store,
    claimed: &Claimed,
) -> Result<Model, Failure> {
    let env = |k: &str| std::env::var(k).ok();
    model_choice::for_run(claimed, &requested(args), store.home(), &env)
        .map(Model)
        .map_err(model_failure)
}

fn model_failure(e: ModelError) -> Failure {
    let general = e.configuration.then(|| {
        "pass --model (and set OPENAI_API_KEY / OPENAI_BASE_URL), or --replay TRACE to run offline"
            .to_string()
    });
    Failure::new(e.code, e.message, exit::INVALID).hint(e.hint.or(general))
}

pub fn recorder_for(args: &ModelArgs) -> Option<Arc<Mutex<TraceRecorder>>> {
    args.record
        .as_ref()
        .map(|_| Arc::new(Mutex::new(TraceRecorder::default())))
}

/// Checks `--record` before anything is paid for.
pub fn check_record(args: &ModelArgs) -> Result<(), Failure> {
    match &args.record {
        Some(path) => runner::check_trace_destination(path).map_err(|e| Failure::from(&e)),
        None => Ok(()),
    }
}
