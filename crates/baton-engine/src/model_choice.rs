//! Which model answers a run: a recorded trace (offline), or the live model the configuration
//! names (`config.toml` of the store, the project's `baton.toml`, the environment, overrides).
//! The CLI and `baton serve` build their model here, the same way, and continue a run with
//! the model it remembers ([`for_run`]).

use crate::context::Budget;
use baton_llm::config::Api;
use baton_llm::{ChatModel, HttpChatModel, LlmConfig, LlmOverrides, ReplayModel, Trace};
use baton_store::ModelRecord;
use std::path::{Path, PathBuf};

/// What the caller asked for.
#[derive(Debug, Clone)]
pub enum ModelChoice {
    /// Answer from this recorded trace; its recorded user inputs answer the questions.
    Replay(PathBuf),
    /// The configured live model, optionally with another model name.
    Configured { model: Option<String> },
    /// The configured live model with these overrides (flags, a run's record).
    Live(LlmOverrides),
    /// A trace inside baton (`bundled:<name>`, the demos').
    Bundled(String),
}

/// What a person asked for when continuing something: flags (or API fields), each optional.
#[derive(Debug, Clone, Default)]
pub struct Requested {
    pub model: Option<String>,
    pub base_url: Option<String>,
    /// The endpoint's wire protocol (`--api`).
    pub api: Option<Api>,
    /// A trace file (or, for the orchestrators, a directory of traces).
    pub replay: Option<PathBuf>,
}

impl Requested {
    fn overrides(&self) -> LlmOverrides {
        LlmOverrides {
            model: self.model.clone(),
            base_url: self.base_url.clone(),
            api: self.api,
            ..LlmOverrides::default()
        }
    }
}

/// The API a run remembers, read back. A value this baton does not know (a newer baton's, or
/// an edited file) is refused rather than silently spoken to in another protocol.
fn recorded_api(recorded: &ModelRecord) -> Result<Option<Api>, ModelError> {
    let Some(name) = recorded.api.as_deref() else {
        return Ok(None);
    };
    name.parse::<Api>().map(Some).map_err(|_| ModelError {
        code: "LLM_CONFIG_INVALID",
        message: format!(
            "the run remembers api {name:?}, which this version of baton does not speak"
        ),
        configuration: true,
        hint: Some("go on with --api openai or --api anthropic".into()),
    })
}

/// The model to continue something with that remembers `recorded` (a run's metadata, or the
/// newest run of an epic or a session):
///
/// - `--replay` wins;
/// - a live model is remembered: its name, endpoint and API, over the configuration files,
///   under the environment (`BATON_MODEL`, `OPENAI_BASE_URL`) and `--model` / `--base-url` /
///   `--api` of the command that continues (the key still comes from the environment); a
///   remembered API this baton does not know is an error unless `--api` is given;
/// - a replay is remembered: the same trace, unless a model is configured (`BATON_MODEL`,
///   `baton.toml`) or asked for (a model, an endpoint or an API), which then answers live;
/// - nothing remembered: the configuration, as for a new run.
pub fn continuation_choice(
    requested: &Requested,
    recorded: Option<&ModelRecord>,
    configured_model: impl FnOnce() -> bool,
) -> Result<ModelChoice, ModelError> {
    if let Some(path) = &requested.replay {
        return Ok(ModelChoice::Replay(path.clone()));
    }
    let mut overrides = requested.overrides();
    match recorded {
        Some(r) if !r.replay => {
            overrides.recorded_model = Some(r.name.clone()).filter(|n| !n.is_empty());
            overrides.recorded_base_url = r.base_url.clone();
            if requested.api.is_none() {
                overrides.recorded_api = recorded_api(r)?;
            }
        }
        Some(ModelRecord {
            replay: true,
            trace: Some(trace),
            ..
        }) if requested.model.is_none()
            && requested.base_url.is_none()
            && requested.api.is_none()
            && !configured_model() =>
        {
            return Ok(match trace.strip_prefix(BUNDLED) {
                Some(_) => ModelChoice::Bundled(trace.clone()),
                None => ModelChoice::Replay(PathBuf::from(trace)),
            });
        }
        _ => {}
    }
    Ok(ModelChoice::Live(overrides))
}

/// The model an orchestrator (the epic autopilot, a session) goes on with: a live model, or
/// the directory of per-run traces it replays.
pub enum Orchestrated {
    Live(Box<LoadedModel>),
    Traces(PathBuf),
}

/// [`continuation_choice`] for an orchestrator whose runs remember `recorded` (see
/// [`newest_record`]): `--replay DIR`, else a remembered trace's directory, else the live model
/// (the remembered one under the flags, or the configuration).
pub fn for_orchestration(
    requested: &Requested,
    recorded: Option<&ModelRecord>,
    home: &Path,
    project: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Orchestrated, ModelError> {
    if let Some(dir) = &requested.replay {
        return Ok(Orchestrated::Traces(dir.clone()));
    }
    let choice = continuation_choice(requested, recorded, || {
        configured_model(home, Some(project), env)
    })?;
    let choice = match choice {
        // A phase or step run replays one trace of the directory the orchestrator was given.
        ModelChoice::Replay(trace) => match trace.parent() {
            Some(dir) if dir.is_dir() => return Ok(Orchestrated::Traces(dir.to_path_buf())),
            // Only a remembered trace gets here (`--replay` returned above), and no model is
            // configured: going on live would only fail on the missing model.
            _ => {
                return Err(ModelError {
                    code: "TRACE_INVALID",
                    message: format!(
                        "its runs were started with the recorded traces of {}, which is gone",
                        trace.parent().unwrap_or(trace.as_path()).display()
                    ),
                    configuration: false,
                    hint: Some(
                        "continue with --replay DIR (a copy of those traces), or live with \
                         --model NAME (and OPENAI_API_KEY / OPENAI_BASE_URL)"
                            .into(),
                    ),
                });
            }
        },
        // Traces inside baton belong to the demos, which continue on their own.
        ModelChoice::Bundled(_) => ModelChoice::Live(requested.overrides()),
        other => other,
    };
    load_model(&choice, home, Some(project), env).map(|m| Orchestrated::Live(Box::new(m)))
}

/// What the newest of `run_ids` that remembers a model remembers (run ids are UUID v7: the
/// greatest is the newest). The runs of an epic or a session, found through the store.
pub fn newest_record(store: &baton_store::Store, run_ids: &[String]) -> Option<ModelRecord> {
    let mut ids: Vec<&String> = run_ids.iter().collect();
    ids.sort_unstable_by(|a, b| b.cmp(a));
    ids.dedup();
    // Bounded: an orchestrator with thousands of runs is asked about its newest ones only.
    ids.into_iter()
        .take(64)
        .filter_map(|id| store.find_run(id).ok())
        .find_map(|(_, run)| run.model)
}

/// The prefix of a trace inside baton.
pub const BUNDLED: &str = "bundled:";

/// True when the configuration names a model (`BATON_MODEL`, `baton.toml`, `config.toml`).
pub fn configured_model(
    home: &Path,
    project: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> bool {
    LlmConfig::load(Some(home), project, env, &LlmOverrides::default())
        .is_ok_and(|c| c.model.is_some())
}

/// The model that continues a claimed run: [`continuation_choice`] with what the run
/// remembers. A remembered trace is positioned where the run stands (an answer passes over
/// the recorded one: the person answered).
pub fn for_run(
    claimed: &crate::runner::Claimed,
    requested: &Requested,
    home: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<LoadedModel, ModelError> {
    let project = claimed.project_root();
    let choice = continuation_choice(requested, claimed.run().model.as_ref(), || {
        configured_model(home, Some(project), env)
    })?;
    let remembered_trace = matches!(choice, ModelChoice::Bundled(_))
        || (requested.replay.is_none() && matches!(choice, ModelChoice::Replay(_)));
    let model = load_model(&choice, home, Some(project), env).map_err(|e| match &choice {
        // The person did not name this trace: say where it came from and how to go on.
        ModelChoice::Replay(path) if remembered_trace => ModelError {
            message: format!(
                "the run was started with the recorded trace {}, which cannot be read any more: {}",
                path.display(),
                e.message
            ),
            hint: Some(
                "continue with --replay TRACE (a copy of that trace), or live with --model NAME \
                 (and OPENAI_API_KEY / OPENAI_BASE_URL)"
                    .into(),
            ),
            ..e
        },
        _ => e,
    })?;
    if remembered_trace && let LoadedModel::Replay(replay) = &model {
        claimed.position_replay(replay);
    }
    Ok(model)
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
    /// What to do about it, when the error knows better than the caller's general hint.
    pub hint: Option<String>,
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
    let trace_error = |e: baton_llm::LlmError| ModelError {
        code: e.code(),
        message: e.to_string(),
        configuration: false,
        hint: None,
    };
    let overrides = match choice {
        ModelChoice::Replay(path) => {
            // Named as given and as found, so a continuation finds it from anywhere.
            let source = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
            return Trace::load(path)
                .map(|t| {
                    let replay =
                        ReplayModel::new(t).with_source(source.to_string_lossy().into_owned());
                    LoadedModel::Replay(priced(replay, home, project, env))
                })
                .map_err(trace_error);
        }
        ModelChoice::Bundled(name) => {
            return match bundled_trace(name) {
                Some(text) => Trace::parse(text)
                    .map(|t| {
                        let replay = ReplayModel::new(t).with_source(name.clone());
                        LoadedModel::Replay(priced(replay, home, project, env))
                    })
                    .map_err(trace_error),
                None => Err(ModelError {
                    code: "TRACE_INVALID",
                    message: format!("this version of baton holds no recorded trace {name}"),
                    configuration: false,
                    hint: Some("continue with --model, or --replay TRACE".into()),
                }),
            };
        }
        ModelChoice::Configured { model } => LlmOverrides {
            model: model.clone(),
            ..Default::default()
        },
        ModelChoice::Live(overrides) => overrides.clone(),
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
            hint: e.hint(),
        })
}

/// A replay priced as the model its trace recorded (`[models."<name>"] price`, else the
/// built-in table), or under `[models."replay"]` when the trace names none; a configuration
/// that cannot be read leaves only the built-in table.
fn priced(
    replay: ReplayModel,
    home: &Path,
    project: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> ReplayModel {
    let name = replay.price_name().to_string();
    let price = LlmConfig::load(Some(home), project, env, &LlmOverrides::default()).map_or_else(
        |_| baton_llm::price::built_in_price(&name),
        |c| c.price_of(&name),
    );
    replay.with_price(price)
}

/// The bundled traces by name: the create-story demo's.
fn bundled_trace(name: &str) -> Option<&'static str> {
    (name == crate::bundled_demo::TRACE_SOURCE).then_some(crate::bundled_demo::TRACE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_orchestrator_whose_remembered_traces_are_gone_says_so() {
        let home = tempfile::tempdir().unwrap();
        let record = ModelRecord {
            name: "replay".into(),
            replay: true,
            trace: Some(
                home.path()
                    .join("gone/dev.trace.json")
                    .display()
                    .to_string(),
            ),
            ..ModelRecord::default()
        };
        let result = for_orchestration(
            &Requested::default(),
            Some(&record),
            home.path(),
            home.path(),
            &|_| None,
        );
        let Err(e) = result else {
            panic!("a gone trace directory was not refused")
        };
        assert_eq!(e.code, "TRACE_INVALID");
        assert!(e.message.contains("gone"), "{}", e.message);
        assert!(e.hint.is_some_and(|h| h.contains("--replay DIR")));
    }

    fn live(name: &str, url: &str) -> ModelRecord {
        ModelRecord {
            name: name.into(),
            base_url: Some(url.into()),
            ..ModelRecord::default()
        }
    }

    fn overrides(choice: ModelChoice) -> LlmOverrides {
        match choice {
            ModelChoice::Live(o) => o,
            _ => panic!("not a live model"),
        }
    }

    #[test]
    fn a_remembered_live_model_sits_between_the_files_and_the_environment() {
        let recorded = live("model-x", "http://127.0.0.1:8080/v1");
        let none = Requested::default();
        let o = overrides(continuation_choice(&none, Some(&recorded), || true).unwrap());
        assert_eq!(o.recorded_model.as_deref(), Some("model-x"));
        assert_eq!(
            o.recorded_base_url.as_deref(),
            Some("http://127.0.0.1:8080/v1")
        );
        assert_eq!((o.model, o.base_url), (None, None));
        let flags = Requested {
            model: Some("model-y".into()),
            base_url: Some("http://127.0.0.1:9/v1".into()),
            ..Requested::default()
        };
        let o = overrides(continuation_choice(&flags, Some(&recorded), || false).unwrap());
        assert_eq!(o.model.as_deref(), Some("model-y"));
        assert_eq!(o.base_url.as_deref(), Some("http://127.0.0.1:9/v1"));
        // The files come below the record, the environment above it.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("baton.toml"),
            "[llm]\nmodel = \"file-model\"\nbase_url = \"http://file/v1\"\n",
        )
        .unwrap();
        let o = overrides(continuation_choice(&none, Some(&recorded), || true).unwrap());
        let c = LlmConfig::load(None, Some(dir.path()), &|_| None, &o).unwrap();
        assert_eq!(
            (c.model.as_deref(), c.base_url.as_str()),
            (Some("model-x"), "http://127.0.0.1:8080/v1")
        );
        let env = |k: &str| (k == "BATON_MODEL").then(|| "env-model".to_string());
        let c = LlmConfig::load(None, Some(dir.path()), &env, &o).unwrap();
        assert_eq!(c.model.as_deref(), Some("env-model"));
    }

    #[test]
    fn a_remembered_api_is_used_unless_api_is_given_and_an_unknown_one_is_refused() {
        let recorded = ModelRecord {
            api: Some("anthropic".into()),
            ..live("claude-x", "http://127.0.0.1:8080/v1")
        };
        let none = Requested::default();
        let o = overrides(continuation_choice(&none, Some(&recorded), || true).unwrap());
        assert_eq!((o.api, o.recorded_api), (None, Some(Api::Anthropic)));
        let c = LlmConfig::load(None, None, &|_| None, &o).unwrap();
        assert_eq!(c.api, Api::Anthropic);
        assert_eq!(c.api_key_env, "ANTHROPIC_API_KEY");
        let flag = Requested {
            api: Some(Api::OpenAi),
            ..Requested::default()
        };
        let o = overrides(continuation_choice(&flag, Some(&recorded), || true).unwrap());
        let c = LlmConfig::load(None, None, &|_| None, &o).unwrap();
        assert_eq!(c.api, Api::OpenAi);
        // A run written before the API was remembered spoke OpenAI's.
        let old = live("m", "http://127.0.0.1:8080/v1");
        let o = overrides(continuation_choice(&none, Some(&old), || true).unwrap());
        assert_eq!(o.recorded_api, None);

        let unknown = ModelRecord {
            api: Some("gemini".into()),
            ..recorded
        };
        let Err(e) = continuation_choice(&none, Some(&unknown), || true) else {
            panic!("an unknown remembered api was taken")
        };
        assert!(e.message.contains("\"gemini\""), "{}", e.message);
        assert!(e.hint.is_some_and(|h| h.contains("--api")));
        // The flag decides, so the remembered value does not matter then.
        assert!(continuation_choice(&flag, Some(&unknown), || true).is_ok());
        let dir = tempfile::tempdir().unwrap();
        assert!(
            for_orchestration(&none, Some(&unknown), dir.path(), dir.path(), &|_| None).is_err()
        );
    }

    #[test]
    fn a_remembered_trace_is_replayed_unless_a_model_is_configured_or_asked_for() {
        let recorded = ModelRecord {
            name: "replay".into(),
            replay: true,
            trace: Some("/traces/a.trace.json".into()),
            ..ModelRecord::default()
        };
        let none = Requested::default();
        assert!(matches!(
            continuation_choice(&none, Some(&recorded), || false).unwrap(),
            ModelChoice::Replay(p) if p == Path::new("/traces/a.trace.json")
        ));
        assert!(matches!(
            continuation_choice(&none, Some(&recorded), || true).unwrap(),
            ModelChoice::Live(_)
        ));
        let asked = Requested {
            model: Some("m".into()),
            ..Requested::default()
        };
        assert!(matches!(
            continuation_choice(&asked, Some(&recorded), || false).unwrap(),
            ModelChoice::Live(_)
        ));
        let bundled = ModelRecord {
            trace: Some(crate::bundled_demo::TRACE_SOURCE.into()),
            ..recorded
        };
        assert!(matches!(
            continuation_choice(&none, Some(&bundled), || false).unwrap(),
            ModelChoice::Bundled(_)
        ));
        // --replay wins over everything.
        let replay = Requested {
            replay: Some("/other.json".into()),
            ..Requested::default()
        };
        assert!(matches!(
            continuation_choice(&replay, Some(&live("x", "http://h/v1")), || true).unwrap(),
            ModelChoice::Replay(p) if p == Path::new("/other.json")
        ));
    }

    #[test]
    fn the_bundled_demo_trace_loads_by_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let choice = ModelChoice::Bundled(crate::bundled_demo::TRACE_SOURCE.into());
        let model = load_model(&choice, dir.path(), None, &|_| None).unwrap();
        let replay = model.replay().expect("a replay");
        assert_eq!(
            replay.identity().trace.as_deref(),
            Some(crate::bundled_demo::TRACE_SOURCE)
        );
        let unknown = ModelChoice::Bundled("bundled:nothing".into());
        assert!(load_model(&unknown, dir.path(), None, &|_| None).is_err());
    }

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
