//! What every driving `baton session` command needs before it ticks: the store, the session
//! context (with the bundled skills as the last fallback), the tool settings, the model (live
//! from the same configuration as `baton run`, or replayed from a trace directory), the record
//! directory, one driver per session, and what Ctrl-C says meanwhile.

use super::args::LoopArgs;
use super::context::context;
use crate::exit;
use crate::failure::Failure;
use baton_engine::model_choice::{self, LoadedModel, Orchestrated, Requested};
use baton_lifecycle::ralph::Context;
use baton_lifecycle::ralph::claim;
use baton_lifecycle::session::executor::{self, StepExecutor};
use baton_lifecycle::session::step_run::ModelSource;
use baton_store::ModelRecord;
use baton_store::Store;
use baton_store::driver_lock::{self, DriverLock, DriverLockError};
use baton_tools::ToolsConfig;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

pub struct Setup {
    pub store: Store,
    pub ctx: Context,
    pub tools: ToolsConfig,
    /// `None` with `--replay`.
    pub live: Option<LoadedModel>,
    pub replay: Option<PathBuf>,
    pub record: Option<PathBuf>,
    /// `--max-turns`, else the engine's default.
    pub max_turns: Option<usize>,
    /// Who claims the steps. The same in every process on this host, so a `continue` after a
    /// kill picks up the step the killed process held (the session lock keeps two drivers
    /// apart).
    pub owner: String,
    /// Questions may be asked at the terminal.
    pub interactive: bool,
    pub json: bool,
    /// `[budget] tokens`/`usd` under `--budget-tokens`/`--budget-usd`: the session's.
    pub budget: baton_engine::spend::BudgetConfig,
    /// The CLI that runs the execution steps (`--executor` over `[session] executor`);
    /// `None`: baton's own loop.
    pub executor: Option<StepExecutor>,
}

impl Setup {
    pub fn source(&self) -> Option<ModelSource<'_>> {
        match (&self.replay, &self.live) {
            (Some(dir), _) => Some(ModelSource::Replay(dir)),
            (None, Some(m)) => Some(ModelSource::Live(m.as_dyn())),
            (None, None) => None,
        }
    }
}

/// Who claims a session's steps: the same in every process on this host, so a `continue`
/// after a kill picks up the step the killed process held.
pub fn owner() -> String {
    format!("baton-session@{}", claim::hostname())
}

/// What Ctrl-C says during a session command.
pub const SIGNAL_HINTS: crate::signals::Hints = crate::signals::Hints {
    at_prompt: "stopped; nothing is lost: `baton session status` shows where the session stands, \
                `baton session continue` goes on",
    quit: "quit; `baton session continue` goes on (a step in flight is continued from its log)",
};

fn invalid(code: &str, message: String, hint: &str) -> Failure {
    Failure::new(code, message, exit::INVALID).hint(Some(hint.to_string()))
}

/// `--record DIR`: created when missing; must be a directory baton can write to.
fn record_dir(dir: &Path) -> Result<PathBuf, Failure> {
    let bad = |why: String| {
        invalid(
            "RECORD_PATH_INVALID",
            format!(
                "cannot record the session's traces in {}: {why}",
                dir.display()
            ),
            "give --record a directory (it is created when missing)",
        )
    };
    if dir.exists() && !dir.is_dir() {
        return Err(bad("it is not a directory".into()));
    }
    std::fs::create_dir_all(dir).map_err(|e| bad(e.to_string()))?;
    let probe = baton_store::durable::temp_sibling(&dir.join("probe"));
    std::fs::File::create(&probe).map_err(|e| bad(format!("not writable ({})", e.kind())))?;
    let _ = std::fs::remove_file(&probe);
    Ok(dir.to_path_buf())
}

/// Everything but the session; nothing is written except a missing `--record` directory and
/// the bundled skills under the baton home.
pub fn prepare(project: &Path, args: &LoopArgs) -> anyhow::Result<Result<Setup, Failure>> {
    let store = Store::open_default()?;
    Ok(prepare_in(store, project, args, &[]))
}

/// [`prepare`] for a session that goes on: unless flags say otherwise, with the model its
/// newest step run remembers (its name and endpoint, or its traces' directory).
pub fn prepare_continuing(
    project: &Path,
    args: &LoopArgs,
    step_runs: &[String],
) -> anyhow::Result<Result<Setup, Failure>> {
    let store = Store::open_default()?;
    Ok(prepare_in(store, project, args, step_runs))
}

fn prepare_in(
    store: Store,
    project: &Path,
    args: &LoopArgs,
    step_runs: &[String],
) -> Result<Setup, Failure> {
    if !project.is_dir() {
        return Err(invalid(
            "PROJECT_NOT_FOUND",
            format!("{} is not a directory", project.display()),
            "pass the project directory with --project DIR",
        ));
    }
    store.check_apart(project).map_err(|e| Failure::from(&e))?;
    let ctx = context(project)
        .with_bundled_skills(store.home())
        .map_err(|e| super::errors::failure(&e))?;
    let tools = ToolsConfig::load(Some(store.home()), Some(project))
        .map_err(|e| Failure::new(e.code(), e.to_string(), exit::INVALID).hint(Some(e.hint())))?;
    let record = args.record.as_deref().map(record_dir).transpose()?;
    if let Some(dir) = &args.replay
        && !dir.is_dir()
    {
        return Err(invalid(
            "REPLAY_DIR_INVALID",
            format!("{} is not a directory of recorded traces", dir.display()),
            "pass the directory a session was recorded to with --record",
        ));
    }
    let executor = executor::load(project, args.executor.as_deref())
        .map_err(|e| super::errors::failure(&e))?;
    let recorded = match args.replay {
        Some(_) => None,
        None => newest_model(&store, step_runs),
    };
    let budget = crate::budget::budget_config(&store, project, args.budget)?;
    let (live, replay) = match model(args, &store, project, recorded.as_ref())? {
        Orchestrated::Live(m) => (Some(*m), None),
        Orchestrated::Traces(dir) => (None, Some(dir)),
    };
    if let Some(m) = &live {
        let caps = [baton_engine::spend::Cap::run(budget.tokens, budget.usd)];
        crate::budget::check_price(&caps, m.as_dyn())?;
    }
    Ok(Setup {
        interactive: !args.non_interactive && !args.json && std::io::stdin().is_terminal(),
        json: args.json,
        owner: owner(),
        store,
        ctx,
        tools,
        live,
        replay,
        record,
        max_turns: args.max_turns.map(usize::from),
        budget,
        executor,
    })
}

/// The model the newest of the session's step runs remembers, passing over the runs a CLI
/// drove (theirs is the CLI's model, not one baton calls for the gates).
fn newest_model(store: &Store, step_runs: &[String]) -> Option<ModelRecord> {
    let mut ids: Vec<&String> = step_runs.iter().collect();
    ids.sort_unstable_by(|a, b| b.cmp(a));
    ids.dedup();
    ids.into_iter()
        .take(64)
        .filter_map(|id| store.find_run(id).ok())
        .filter_map(|(_, run)| run.model)
        .find(|m| !executor::names_a_cli(m))
}

/// The configured model (`baton.toml`, the store's `config.toml`, the environment), with
/// `--model`, `--base-url` and `--api` on top, built as `baton run` builds it; a session that goes on
/// uses what its runs remember first (`model_choice::for_orchestration`).
fn model(
    args: &LoopArgs,
    store: &Store,
    project: &Path,
    recorded: Option<&ModelRecord>,
) -> Result<Orchestrated, Failure> {
    let requested = Requested {
        model: args.model.clone(),
        base_url: args.base_url.clone(),
        api: crate::args::ApiArg::api(args.api),
        replay: args.replay.clone(),
    };
    let env = |k: &str| std::env::var(k).ok();
    model_choice::for_orchestration(&requested, recorded, store.home(), project, &env).map_err(
        |e| {
            let general = e.configuration.then(|| {
                "pass --model and --base-url (or set BATON_MODEL, OPENAI_BASE_URL and OPENAI_API_KEY), \
                 or --replay DIR to run offline"
                    .to_string()
            });
            Failure::new(e.code, e.message, exit::INVALID).hint(e.hint.or(general))
        },
    )
}

/// One driver per session: an exclusive lock on `<session dir>/driver.lock`, dropped by the
/// kernel when the process dies.
pub fn lock_session(dir: &Path, id: &str, verb: &str) -> Result<DriverLock, Failure> {
    driver_lock::acquire(dir, id, &format!("baton session {verb}")).map_err(|e| match e {
        DriverLockError::Busy { holder, .. } => {
            let by = holder
                .map(|h| format!(" (pid {}, {}, since {})", h.pid, h.command, h.since))
                .unwrap_or_default();
            Failure::new(
                "SESSION_BUSY",
                format!("session {id} is driven by another process{by}"),
                exit::FAILURE,
            )
            .hint(Some(
                "wait for it to end, or stop it (Ctrl-C); `baton session status` shows where it is"
                    .into(),
            ))
        }
        other => Failure::new(other.code(), other.to_string(), exit::FAILURE).hint(other.hint()),
    })
}
