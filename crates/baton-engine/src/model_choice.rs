//! Which model answers a run: a recorded trace (offline), or the live model the configuration
//! names (`config.toml` of the store, the project's `baton.toml`, the environment, overrides).
//! The CLI and `baton serve` build their model here, the same way.

use crate::context::Budget;
use baton_llm::{ChatModel, HttpChatModel, LlmConfig, LlmOverrides, ReplayModel, Trace};
use std::path::{Path, PathBuf};

/// What the caller asked for.
#[derive(Debug, Clone)]
pub enum ModelChoice {
    /// Answer from this recorded trace; its recorded user inputs answer the questions.
    Replay(PathBuf),
    /// The configured live model, optionally with another model name.
    Configured { model: Option<String> },
}

/// A model ready to drive a run.
pub enum LoadedModel {
    Replay(ReplayModel),
    /// With the model's context window from the configuration.
    Http(HttpChatModel, u64),
}

/// Why no model could be built: a trace that cannot be read, or a configuration that names no
/// usable model.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ModelError {
    pub code: &'static str,
    pub message: String,
    /// True for the live model's configuration (as opposed to a trace).
    pub configuration: bool,
}

impl LoadedModel {
    pub fn as_dyn(&self) -> &dyn ChatModel {
        match self {
            LoadedModel::Replay(m) => m,
            LoadedModel::Http(m, _) => m,
        }
    }

    pub fn replay(&self) -> Option<&ReplayModel> {
        match self {
            LoadedModel::Replay(m) => Some(m),
            LoadedModel::Http(..) => None,
        }
    }

    /// `context_tokens` when given, else the configured window of the model, else the default.
    pub fn budget(&self, context_tokens: Option<u64>) -> Budget {
        let configured = match self {
            LoadedModel::Http(_, tokens) => Some(*tokens),
            LoadedModel::Replay(_) => None,
        };
        context_tokens
            .or(configured)
            .and_then(|t| usize::try_from(t).ok())
            .map_or_else(Budget::default, Budget::new)
    }
}

/// Builds the model: `home` is the store's directory (its `config.toml`), `project` the
/// project whose `baton.toml` applies, `env` the environment to read.
pub fn load_model(
    choice: &ModelChoice,
    home: &Path,
    project: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<LoadedModel, ModelError> {
    match choice {
        ModelChoice::Replay(path) => Trace::load(path)
            .map(|t| LoadedModel::Replay(ReplayModel::new(t)))
            .map_err(|e| ModelError {
                code: e.code(),
                message: e.to_string(),
                configuration: false,
            }),
        ModelChoice::Configured { model } => {
            let overrides = LlmOverrides {
                model: model.clone(),
                ..Default::default()
            };
            LlmConfig::load(Some(home), project, env, &overrides)
                .and_then(|config| {
                    let tokens = config.context_tokens();
                    HttpChatModel::new(config).map(|m| LoadedModel::Http(m, tokens))
                })
                .map_err(|e| ModelError {
                    code: e.code(),
                    message: e.to_string(),
                    configuration: true,
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_trace_is_a_trace_error_not_a_configuration_error() {
        let dir = tempfile::tempdir().unwrap();
        let choice = ModelChoice::Replay(dir.path().join("none.trace.json"));
        let err = match load_model(&choice, dir.path(), None, &|_| None) {
            Err(e) => e,
            Ok(_) => panic!("a missing trace loaded"),
        };
        assert!(!err.configuration);
        assert!(err.message.contains("none.trace.json"), "{}", err.message);
    }

    #[test]
    fn no_model_configured_is_a_configuration_error() {
        let dir = tempfile::tempdir().unwrap();
        let choice = ModelChoice::Configured { model: None };
        let err = match load_model(&choice, dir.path(), None, &|_| None) {
            Err(e) => e,
            Ok(_) => panic!("a model came from nowhere"),
        };
        assert!(err.configuration);
    }
}
