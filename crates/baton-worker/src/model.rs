//! The model a unit runs with: the worker's own `--model`/`--base-url`/`--api` when given
//! (over the unit's), else the trace the unit replays, else the model the unit names — always
//! with this worker's key and configuration files. An error about the endpoint names the
//! setting that really chose it (the worker's flag, or the submitter's flag or environment).

use crate::WorkerError;
use crate::payload::{BaseUrlFrom, ModelPayload};
use baton_engine::model_choice::{self, ModelChoice};
use baton_llm::LlmOverrides;
use std::path::Path;

/// The worker's own model settings, each over the unit's.
#[derive(Debug, Clone, Default)]
pub struct ModelOverride {
    pub name: Option<String>,
    pub base_url: Option<String>,
    /// `openai` or `anthropic`.
    pub api: Option<String>,
}

impl ModelOverride {
    /// Whether the worker names a model of its own (then a unit's trace is not replayed).
    pub fn is_set(&self) -> bool {
        self.name.is_some() || self.base_url.is_some() || self.api.is_some()
    }
}

/// How the setting that chose a unit's endpoint is named in errors.
fn base_url_setting(worker: bool, from: Option<BaseUrlFrom>) -> &'static str {
    match (worker, from) {
        (true, _) => "--base-url of `baton worker`",
        (false, Some(BaseUrlFrom::Flag)) => {
            "--base-url of the `baton run --queue` that submitted the unit"
        }
        (false, Some(BaseUrlFrom::Env)) => "OPENAI_BASE_URL where the unit was submitted",
        (false, None) => "the base URL the unit was submitted with",
    }
}

fn parse_api(api: Option<&str>) -> Result<Option<baton_llm::config::Api>, WorkerError> {
    api.map(str::parse::<baton_llm::config::Api>)
        .transpose()
        .map_err(|e| WorkerError::other(e.code(), e.to_string()))
}

/// The live model: the worker's settings over the unit's, the rest from this worker's
/// environment and files.
pub(crate) fn live_choice(
    unit: &ModelPayload,
    worker: &ModelOverride,
) -> Result<ModelChoice, WorkerError> {
    let (base_url, setting) = match (&worker.base_url, &unit.base_url) {
        (Some(url), _) => (Some(url.clone()), Some(base_url_setting(true, None))),
        (None, Some(url)) => (
            Some(url.clone()),
            Some(base_url_setting(false, unit.base_url_from)),
        ),
        (None, None) => (None, None),
    };
    Ok(ModelChoice::Live(LlmOverrides {
        model: worker.name.clone().or_else(|| unit.name.clone()),
        base_url,
        base_url_flag: setting,
        api: parse_api(worker.api.as_deref().or(unit.api.as_deref()))?,
        ..LlmOverrides::default()
    }))
}

/// What answers a unit.
pub(crate) enum UnitModel {
    /// A live model (or any other choice).
    Choice(ModelChoice),
    /// The trace pinned with the unit: its text, and how the run remembers it (its name and
    /// digest, no path of the worker).
    Trace { text: String, source: String },
}

/// Loads the model for a unit whose project is at `project`.
pub(crate) fn load(
    home: &Path,
    project: &Path,
    model: &UnitModel,
) -> Result<model_choice::LoadedModel, WorkerError> {
    match model {
        UnitModel::Trace { text, source } => baton_llm::Trace::parse(text)
            .map(|t| {
                model_choice::LoadedModel::Replay(
                    baton_llm::ReplayModel::new(t).with_source(source.clone()),
                )
            })
            .map_err(|e| WorkerError::other(e.code(), e.to_string())),
        UnitModel::Choice(choice) => {
            let env = |k: &str| std::env::var(k).ok();
            model_choice::load_model(choice, home, Some(project), &env)
                .map_err(|e| WorkerError::other(e.code, e.message))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn overrides(choice: ModelChoice) -> LlmOverrides {
        match choice {
            ModelChoice::Live(o) => o,
            _ => panic!("a live model"),
        }
    }

    #[test]
    fn the_worker_settings_win_and_the_endpoint_names_its_real_setting() {
        let unit = ModelPayload {
            name: Some("unit-model".into()),
            base_url: Some("http://127.0.0.1:9/v1".into()),
            base_url_from: Some(BaseUrlFrom::Env),
            ..Default::default()
        };
        let o = overrides(live_choice(&unit, &ModelOverride::default()).unwrap());
        assert_eq!(o.model.as_deref(), Some("unit-model"));
        assert_eq!(
            o.base_url_flag,
            Some("OPENAI_BASE_URL where the unit was submitted")
        );
        let flag = ModelPayload {
            base_url_from: Some(BaseUrlFrom::Flag),
            ..unit.clone()
        };
        let o = overrides(live_choice(&flag, &ModelOverride::default()).unwrap());
        assert!(
            o.base_url_flag
                .unwrap()
                .starts_with("--base-url of the `baton run --queue`")
        );
        let worker = ModelOverride {
            name: Some("worker-model".into()),
            base_url: Some("http://127.0.0.1:8/v1".into()),
            api: Some("anthropic".into()),
        };
        let o = overrides(live_choice(&unit, &worker).unwrap());
        assert_eq!(o.model.as_deref(), Some("worker-model"));
        assert_eq!(o.base_url.as_deref(), Some("http://127.0.0.1:8/v1"));
        assert_eq!(o.base_url_flag, Some("--base-url of `baton worker`"));
        assert_eq!(o.api, Some(baton_llm::config::Api::Anthropic));
        // Nothing named anywhere: the worker's environment and files choose.
        let o =
            overrides(live_choice(&ModelPayload::default(), &ModelOverride::default()).unwrap());
        assert!(o.model.is_none() && o.base_url.is_none() && o.base_url_flag.is_none());
    }
}
