//! Starting and answering runs from the server: what `baton run` and `baton answer` do
//! (`baton_engine::runner` with the model of `baton_engine::model_choice` and the tool settings
//! of `baton.toml`), except that the run goes on in the background and nobody is at a prompt:
//! a question stops the run, waiting, until `POST /api/runs/{id}/answer`.
//!
//! The run is created (or claimed) before the request returns, so its driver lock is held
//! from the start: a second driver (`baton resume` in a terminal) gets `RUN_BUSY`.

use crate::api::ApiError;
use crate::demo;
use crate::state::AppState;
use baton_engine::bundled_demo;
use baton_engine::model_choice::{self, LoadedModel, ModelChoice, Requested};
use baton_engine::runner::{self, Claimed, Continuation, Settings, StartRun};
use baton_llm::config::Api;
use baton_llm::{ReplayModel, Trace};
use baton_store::Store;
use baton_tools::ToolsConfig;
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The model a background invocation uses.
#[derive(Clone)]
pub enum RunModel {
    /// A recording, shared between the start and the answers of a run so it goes on where it
    /// stood.
    Replay {
        model: Arc<ReplayModel>,
        /// The recording's user inputs answer the questions (as `baton run --replay`).
        answers_from_trace: bool,
    },
    Live(Arc<LoadedModel>),
}

/// `POST /api/runs`.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartBody {
    /// Package directory or `.bmad` file on this machine (not needed for the demo).
    pub package: Option<PathBuf>,
    pub workflow: Option<String>,
    pub agent: Option<String>,
    /// The project directory (the demo makes a fresh copy of the sample project in the store's
    /// `demo-projects/` when absent: see [`crate::demo`]).
    pub project: Option<PathBuf>,
    /// Model name (overrides BATON_MODEL and baton.toml).
    pub model: Option<String>,
    /// The endpoint's wire protocol, `openai` or `anthropic` (overrides `[llm] api`).
    pub api: Option<String>,
    /// A trace file to replay, or `"demo"`: the bundled create-story demo.
    pub replay: Option<String>,
    /// Whether the trace's recorded user inputs answer the questions. Default: yes for a trace
    /// file (as `baton run --replay`), no for the demo (its question waits for a person).
    pub answer_from_trace: Option<bool>,
    /// Answers given in advance, used in order (`--input`).
    #[serde(default)]
    pub inputs: Vec<String>,
    /// State variables (`--var KEY=VALUE`).
    #[serde(default)]
    pub variables: Map<String, Value>,
}

/// `POST /api/runs/{id}/answer`: exactly one of `text`, `confirm`, `widget`.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnswerBody {
    pub text: Option<String>,
    pub confirm: Option<bool>,
    /// A widget submission: `{"type": "selection", "value": …}`.
    pub widget: Option<Value>,
    pub model: Option<String>,
    /// The endpoint's wire protocol (default: the one the run was started with).
    pub api: Option<String>,
    /// A trace to answer from (default: the recording the server started the run with, or the
    /// bundled one for a demo run another server started).
    pub replay: Option<PathBuf>,
}

/// The answer text the engine takes (what `baton answer` sends).
pub fn answer_text(body: &AnswerBody) -> Result<String, ApiError> {
    match (&body.text, body.confirm, &body.widget) {
        (Some(t), None, None) => Ok(t.clone()),
        (None, Some(confirmed), None) => Ok(format!(
            "WIDGET_SUBMIT\n{}",
            json!({"type": "confirmation", "value": {"confirmed": confirmed}})
        )),
        (None, None, Some(widget)) => {
            if !widget.get("type").is_some_and(Value::is_string) || widget.get("value").is_none() {
                return Err(ApiError::bad_request(
                    "ANSWER_INVALID",
                    "a widget submission is {\"type\": \"<widget type>\", \"value\": …}",
                ));
            }
            Ok(format!("WIDGET_SUBMIT\n{widget}"))
        }
        _ => Err(ApiError::bad_request(
            "ANSWER_INVALID",
            "send exactly one of text, confirm or widget",
        )
        .hint(
            "{\"text\": \"…\"}, {\"confirm\": true} or {\"widget\": {\"type\": …, \"value\": …}}",
        )),
    }
}

/// A start's package and project, the temporary package directory (removed when dropped) and
/// the copy of the sample project made for it (removed unless the run was created).
type StartFiles = (
    PathBuf,
    PathBuf,
    Option<tempfile::TempDir>,
    Option<demo::FreshCopy>,
);

/// Creates the run and drives it in the background; returns `{runId, projectRoot, phase}` as
/// soon as the run exists.
pub fn start(state: &AppState, body: StartBody) -> Result<Value, ApiError> {
    let store = &state.store;
    let demo = body.replay.as_deref() == Some("demo");
    let (package, project, _package_dir, fresh) = if demo {
        demo_files(store, body.project.as_deref())?
    } else {
        let package = body.package.clone().ok_or_else(|| {
            ApiError::bad_request("START_INVALID", "package is required")
                .hint("the package directory or .bmad file, or replay: \"demo\"")
        })?;
        let project = body
            .project
            .clone()
            .ok_or_else(|| ApiError::bad_request("START_INVALID", "project is required"))?;
        // An installed package's name works like its path, as on the command line.
        let package = baton_store::package_lookup::locate(store.home(), &package)
            .map_err(|e| {
                // No such package is a missing resource, as an unknown project is.
                let error = if e.code() == "PACKAGE_NOT_FOUND" {
                    ApiError::not_found(e.code(), e.to_string())
                } else {
                    ApiError::bad_request(e.code(), e.to_string())
                };
                error.hint(e.hint())
            })?
            .path;
        (package, project, None, None)
    };
    let tools = load_tools(store, &project)?;
    let model = if demo {
        let trace = Trace::parse(bundled_demo::TRACE)
            .map_err(|e| ApiError::internal(e.code(), e.to_string()))?;
        RunModel::Replay {
            model: Arc::new(ReplayModel::new(trace).with_source(bundled_demo::TRACE_SOURCE)),
            answers_from_trace: body.answer_from_trace.unwrap_or(false),
        }
    } else {
        let choice = match &body.replay {
            Some(path) => ModelChoice::Replay(PathBuf::from(path)),
            None => ModelChoice::Live(baton_llm::LlmOverrides {
                model: body.model.clone(),
                api: api_field(body.api.as_deref())?,
                ..Default::default()
            }),
        };
        load(
            store,
            &choice,
            &project,
            body.answer_from_trace.unwrap_or(true),
        )?
    };
    let start = StartRun {
        package: &package,
        project: &project,
        workflow: body.workflow.as_deref(),
        agent: body.agent.as_deref(),
    };
    let claimed = runner::create(store, start, &body.variables).map_err(|e| ApiError::from(&e))?;
    // The run owns its copy now (a start refused before this point removes it).
    if let Some(fresh) = fresh {
        fresh.kept();
    }
    let run_id = claimed.run().run_id.clone();
    let root = claimed.project_root().to_path_buf();
    if let RunModel::Replay { model, .. } = &model {
        state.jobs.remember_replay(&run_id, model.clone());
    }
    if demo {
        // Before the run goes on: a server restarted while it waits must know it for a demo.
        demo::remember(store, &run_id).map_err(|e| {
            ApiError::internal(
                "DEMO_FILES_FAILED",
                format!("cannot record demo run {run_id}: {e}"),
            )
        })?;
    }
    spawn(state, claimed, model, tools, body.inputs);
    if demo {
        let store = store.clone();
        // Best effort, off the request: what fails now is tried again at the next demo.
        state.jobs.spawn(move |_| {
            let _ = demo::prune(&store, demo::KEEP_COMPLETED, demo::ORPHAN_AFTER);
        });
    }
    Ok(json!({"runId": run_id, "projectRoot": root, "phase": "running"}))
}

/// Claims a waiting run with the answer and drives it on in the background.
pub fn answer(state: &AppState, query: &str, body: AnswerBody) -> Result<Value, ApiError> {
    let text = answer_text(&body)?;
    let api = api_field(body.api.as_deref())?;
    let store = &state.store;
    // The run is found, checked and locked before any model is looked at.
    let claimed =
        runner::claim(store, query, Continuation::Answer(text)).map_err(|e| ApiError::from(&e))?;
    let run_id = claimed.run().run_id.clone();
    let root = claimed.project_root().to_path_buf();
    let tools = load_tools(store, &root)?;
    let remembered = match state.jobs.replay_of(&run_id) {
        Some(replay) => Some(replay),
        // A demo run this server did not start (or forgot): its recording, rebuilt.
        None if body.replay.is_none() && body.model.is_none() && body.api.is_none() => {
            demo::restore_replay(store, &run_id)?.map(|replay| {
                let replay = Arc::new(replay);
                state.jobs.remember_replay(&run_id, replay.clone());
                replay
            })
        }
        None => None,
    };
    let model = match (&body.replay, &body.model, remembered) {
        (Some(path), _, _) => load(store, &ModelChoice::Replay(path.clone()), &root, true)?,
        (None, None, Some(replay)) if api.is_none() => {
            // The person answered live: the recording's own answer is passed over.
            replay.skip_user_input();
            RunModel::Replay {
                model: replay,
                answers_from_trace: false,
            }
        }
        // The model the run was started with (its name and endpoint, or its trace), unless
        // the body names one: what `baton answer` does.
        (None, model, _) => {
            let requested = Requested {
                model: model.clone(),
                api,
                ..Requested::default()
            };
            let env = |k: &str| std::env::var(k).ok();
            loaded(
                model_choice::for_run(&claimed, &requested, store.home(), &env),
                true,
            )?
        }
    };
    spawn(state, claimed, model, tools, Vec::new());
    Ok(json!({"runId": run_id, "projectRoot": root, "phase": "running"}))
}

/// The `api` field of a body: `openai`, `anthropic`, or absent.
pub(crate) fn api_field(api: Option<&str>) -> Result<Option<Api>, ApiError> {
    api.map(str::parse::<Api>)
        .transpose()
        .map_err(|e| ApiError::bad_request(e.code(), e.to_string()))
}

fn load(
    store: &Store,
    choice: &ModelChoice,
    project: &Path,
    answers_from_trace: bool,
) -> Result<RunModel, ApiError> {
    let env = |k: &str| std::env::var(k).ok();
    loaded(
        model_choice::load_model(choice, store.home(), Some(project), &env),
        answers_from_trace,
    )
}

fn loaded(
    model: Result<LoadedModel, model_choice::ModelError>,
    answers_from_trace: bool,
) -> Result<RunModel, ApiError> {
    match model {
        Ok(LoadedModel::Replay(m)) => Ok(RunModel::Replay {
            model: Arc::new(m),
            answers_from_trace,
        }),
        Ok(live) => Ok(RunModel::Live(Arc::new(live))),
        Err(e) => {
            let general = e.configuration.then(|| {
                "pass model (and set OPENAI_API_KEY / OPENAI_BASE_URL where baton serve runs), or replay: a trace file".to_string()
            });
            Err(ApiError::bad_request(e.code, e.message).maybe_hint(e.hint.or(general)))
        }
    }
}

fn load_tools(store: &Store, project: &Path) -> Result<ToolsConfig, ApiError> {
    ToolsConfig::load(Some(store.home()), Some(project))
        .map_err(|e| ApiError::bad_request(e.code(), e.to_string()).hint(e.hint()))
}

/// Drives a claimed run on a background thread; its outcome is remembered for
/// `GET /api/runs/{id}`.
fn spawn(
    state: &AppState,
    claimed: Claimed,
    model: RunModel,
    tools: ToolsConfig,
    inputs: Vec<String>,
) {
    let jobs = state.jobs.clone();
    let cancel = state.shutdown.child_token();
    state.jobs.spawn(move |runtime| {
        let run_id = claimed.run().run_id.clone();
        let (chat, replay, answers_from_trace) = match &model {
            RunModel::Replay {
                model,
                answers_from_trace,
            } => (
                &**model as &dyn baton_llm::ChatModel,
                Some(&**model),
                *answers_from_trace,
            ),
            RunModel::Live(m) => (m.as_dyn(), None, false),
        };
        let mut settings = Settings::new(chat);
        settings.replay = replay.filter(|_| answers_from_trace);
        settings.inputs = inputs.into_iter().collect();
        settings.tools = tools;
        settings.cancel = cancel;
        if let RunModel::Live(m) = &model {
            settings.budget = Some(m.budget(None));
        }
        let outcome = match runtime.block_on(runner::continue_claimed(claimed, settings)) {
            Ok(finished) => finished.to_json(),
            Err(e) => {
                let e = ApiError::from(&e);
                json!({"runId": run_id, "error": {"code": e.code, "message": e.message, "hint": e.hint}})
            }
        };
        jobs.remember_outcome(&run_id, outcome);
    });
}

/// The demo's package (a fresh directory, removed when the run is created: the store keeps
/// its own copy) and project (a fresh copy of the sample project in the store's
/// `demo-projects/`, unless a project is given).
fn demo_files(store: &Store, project: Option<&Path>) -> Result<StartFiles, ApiError> {
    let io = |what: &str, e: std::io::Error| {
        ApiError::internal(
            "DEMO_FILES_FAILED",
            format!("cannot write the demo's {what}: {e}"),
        )
    };
    let package_dir = tempfile::tempdir().map_err(|e| io("package", e))?;
    bundled_demo::write_files(package_dir.path(), bundled_demo::PACKAGE)
        .map_err(|e| io("package", e))?;
    let (project, fresh) = match project {
        Some(p) => (p.to_path_buf(), None),
        None => {
            let dir = demo::new_copy(store).map_err(|e| io("project", e))?;
            (dir.clone(), Some(demo::FreshCopy::new(dir)))
        }
    };
    Ok((
        package_dir.path().to_path_buf(),
        project,
        Some(package_dir),
        fresh,
    ))
}
