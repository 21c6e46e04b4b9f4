//! `baton run`, `resume`, `answer` and `chat`: choose the model, call the runner, present the
//! outcome.

use crate::cli::{AnswerArgs, BudgetArgs, ChatArgs, ContextArg, ModelArgs, ResumeArgs, RunArgs};
use crate::exit;
use crate::failure::Failure;
use crate::progress::Progress;
use crate::report;
use crate::signals;
use crate::ui::{visible, visible_line};
use baton_engine::driver::ABORTED;
use baton_engine::model_choice::{self, LoadedModel, ModelError, Requested};
use baton_engine::runner::{
    self, AskFn, Claimed, Continuation, Finished, RunnerError, Settings, StartRun,
};
use baton_engine::spend;
use baton_engine::{Budget, EngineEvent, Outcome};
use baton_llm::{ChatModel, ReplayModel, TraceRecorder};
use baton_store::Store;
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Exit code of a run that waits for the user.
pub const WAITING: u8 = 10;
/// Exit code of a command stopped before a model call that could cross a budget.
pub const BUDGET_EXCEEDED: u8 = 12;

/// The caps of a run driven on its own: `[budget] tokens`/`usd` of the configuration, under
/// the command's flags.
pub(crate) fn budget_config(
    store: &Store,
    project: &Path,
    flags: BudgetArgs,
) -> Result<spend::BudgetConfig, Failure> {
    spend::BudgetConfig::load(Some(store.home()), Some(project))
        .and_then(|b| b.with_flags(flags.budget_tokens, flags.budget_usd))
        .map_err(|message| {
            Failure::new(spend::BUDGET_CONFIG_INVALID, message, exit::INVALID).hint(Some(
                "[budget] takes tokens, usd, tokens_per_story and usd_per_story".into(),
            ))
        })
}

/// A USD budget for a model without a price, said before anything is created or sent.
pub(crate) fn check_price(caps: &[spend::Cap], model: &dyn ChatModel) -> Result<(), Failure> {
    spend::check_price(caps, model.price(), model.model_name()).map_err(|stop| {
        Failure::new(stop.code, stop.message, exit::INVALID).hint(Some(
            "give the model a price: [models.\"<name>\"] price = { input = 2.0, cached_input = 0.5, output = 8.0 } in baton.toml (USD per million tokens), or budget in tokens".into(),
        ))
    })
}

/// The model of an invocation (built by `baton_engine::model_choice`, as `baton serve` does).
pub(crate) struct Model(LoadedModel);

impl Model {
    pub(crate) fn as_dyn(&self) -> &dyn ChatModel {
        self.0.as_dyn()
    }

    pub(crate) fn replay(&self) -> Option<&ReplayModel> {
        self.0.replay()
    }

    /// `--context-tokens`, else the configured window of the model, else the default.
    pub(crate) fn budget(&self, args: &ModelArgs) -> Budget {
        self.0.budget(args.context_tokens)
    }
}

fn requested(args: &ModelArgs) -> Requested {
    Requested {
        model: args.model.clone(),
        base_url: args.base_url.clone(),
        replay: args.replay.clone(),
    }
}

pub(crate) fn load_model(
    args: &ModelArgs,
    store: &Store,
    project: Option<&Path>,
) -> Result<Model, Failure> {
    // A new run: the flags over the configuration (nothing is remembered yet).
    let choice = model_choice::continuation_choice(&requested(args), None, || false);
    let env = |k: &str| std::env::var(k).ok();
    model_choice::load_model(&choice, store.home(), project, &env)
        .map(Model)
        .map_err(model_failure)
}

/// The model that continues a claimed run: the one it was started with, unless flags say
/// otherwise (`baton_engine::model_choice::for_run`, as `baton serve` does).
fn continuation_model(
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

/// Two threads: `block_on` drives the run on this one while the signal watcher runs on the
/// worker, even when this thread waits at a prompt.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?)
}

fn interactive(args: &ModelArgs) -> bool {
    !args.non_interactive && !args.json && std::io::stdin().is_terminal()
}

/// Reads an answer at the terminal.
pub(crate) fn prompt(question: &str) -> Option<String> {
    eprintln!("\n{}\n", visible(question));
    eprint!("> ");
    let _ = std::io::stderr().flush();
    let _at_prompt = signals::AtPrompt::enter();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).ok()?;
    let line = line.trim().to_string();
    (!line.is_empty()).then_some(line)
}

struct Invocation<'a> {
    args: &'a ModelArgs,
    inputs: Vec<String>,
    autopilot: bool,
}

fn settings<'a>(
    model: &'a Model,
    progress: &'a (dyn Fn(EngineEvent) + Send + Sync),
    inv: &Invocation<'_>,
    recorder: Option<Arc<Mutex<TraceRecorder>>>,
    ask: Option<AskFn<'a>>,
) -> Settings<'a> {
    let mut s = Settings::new(model.as_dyn());
    s.replay = model.replay();
    s.inputs = inv.inputs.iter().cloned().collect();
    s.ask = ask;
    s.record = recorder;
    s.autopilot = inv.autopilot;
    s.budget = Some(model.budget(inv.args));
    s.context = ContextArg::policy(inv.args.context);
    if !inv.args.json {
        s.on_event = Some(progress);
    }
    s
}

pub(crate) fn present(
    result: Result<Finished, RunnerError>,
    args: &ModelArgs,
    recorder: Option<&Arc<Mutex<TraceRecorder>>>,
) -> anyhow::Result<u8> {
    let finished = match result {
        Ok(f) => f,
        Err(RunnerError::InvalidPackage(r)) => {
            if args.json {
                super::print_json(&report::to_json(&r))?;
            } else {
                eprint!("{}", report::to_text(&r, "package"));
            }
            return Ok(exit::INVALID);
        }
        Err(e) => return Ok(Failure::from(&e).report(args.json)),
    };
    if let (Some(path), Some(rec)) = (&args.record, recorder) {
        runner::save_trace(path, rec)?;
    }
    let code = match &finished.report.outcome {
        Outcome::Completed { .. } => exit::OK,
        Outcome::Waiting { .. } => WAITING,
        Outcome::Failed { code, .. } if code == ABORTED => exit::STOPPED,
        Outcome::Failed { code, .. } if code == spend::BUDGET_EXCEEDED => BUDGET_EXCEEDED,
        Outcome::Failed { .. } => exit::FAILURE,
    };
    if args.json {
        super::print_json(&finished.to_json())?;
        return Ok(code);
    }
    let id = &finished.run.run_id;
    let short = &id[..id.len().min(13)];
    match &finished.report.outcome {
        Outcome::Completed { message } => {
            outln!("{}\n", visible(message));
            outln!("completed: run {id}");
            if let Some(a) = finished.state.get("artifacts").and_then(|a| a.as_array()) {
                for path in a.iter().filter_map(|p| p.as_str()) {
                    outln!("  {}", visible_line(path));
                }
            }
        }
        Outcome::Waiting { question } => {
            outln!("{}\n", visible(question));
            outln!("waiting for you: baton answer {short} \"<your answer>\"");
        }
        Outcome::Failed { code, .. } if code == ABORTED => {
            eprintln!(
                "{} run {short} is idle; continue with `baton resume {short}`",
                crate::ui::color::err(crate::ui::Paint::Warn, "stopped;")
            );
        }
        Outcome::Failed { code, message } if code == spend::BUDGET_EXCEEDED => {
            eprintln!(
                "{} {}",
                crate::ui::color::err(crate::ui::Paint::Warn, "budget reached:"),
                visible(message)
            );
            eprintln!(
                "  run {short} is idle, nothing lost; continue with a larger budget: baton resume {short} --budget-tokens N (or --budget-usd X)"
            );
        }
        Outcome::Failed { code, message } => {
            eprintln!("error[{}]: {}", visible_line(code), visible(message));
            if code == "LLM_CONNECT_ERROR" {
                eprintln!(
                    "hint: the model was never reached; start its server, or fix the endpoint (--base-url, OPENAI_BASE_URL, base_url under [llm] in baton.toml)"
                );
            }
            eprintln!("  the run is kept; retry with: baton resume {short}");
        }
    }
    Ok(code)
}

/// Ctrl-C names this run in what it says (a second Ctrl-C, or one at a prompt).
pub(crate) fn tell_signals(run_id: &str) {
    let short = &run_id[..run_id.len().min(13)];
    signals::set_next(signals::Next {
        resume: format!("baton resume {short}"),
        answer: Some(format!("baton answer {short} \"<your answer>\"")),
    });
}

pub(crate) fn recorder_for(args: &ModelArgs) -> Option<Arc<Mutex<TraceRecorder>>> {
    args.record
        .as_ref()
        .map(|_| Arc::new(Mutex::new(TraceRecorder::default())))
}

/// The tool ceiling of a run (`[tools.*]` and `[mcp]` of the store's config and the project's
/// `baton.toml`).
fn load_tools(store: &Store, project: &Path) -> Result<baton_tools::ToolsConfig, Failure> {
    baton_tools::ToolsConfig::load(Some(store.home()), Some(project))
        .map_err(|e| Failure::new(e.code(), e.to_string(), exit::INVALID).hint(Some(e.hint())))
}

/// Checks `--record` before anything is paid for.
pub(crate) fn check_record(args: &ModelArgs) -> Result<(), Failure> {
    match &args.record {
        Some(path) => runner::check_trace_destination(path).map_err(|e| Failure::from(&e)),
        None => Ok(()),
    }
}

pub fn run(args: RunArgs) -> anyhow::Result<u8> {
    if args.queue.is_some() || args.db_env.is_some() {
        return super::submit::run(&args);
    }
    let json = args.model.json;
    if let Err(f) = check_record(&args.model) {
        return Ok(f.report(json));
    }
    let store = Store::open_default()?;
    if let Err(e) = store.check_apart(&args.project) {
        return Ok(Failure::from(&e).report(json));
    }
    let tools = match load_tools(&store, &args.project) {
        Ok(t) => t,
        Err(f) => return Ok(f.report(json)),
    };
    let start = StartRun {
        package: &args.package,
        project: &args.project,
        workflow: args.workflow.as_deref(),
        agent: args.agent.as_deref(),
    };
    // The package and the project are checked before the model configuration is looked at.
    if let Err(e) = runner::check_start(&start) {
        return present(Err(e), &args.model, None);
    }
    let budget = match budget_config(&store, &args.project, args.budget) {
        Ok(b) => b,
        Err(f) => return Ok(f.report(json)),
    };
    let model = match load_model(&args.model, &store, Some(&args.project)) {
        Ok(m) => m,
        Err(f) => return Ok(f.report(json)),
    };
    let caps = budget.run_caps();
    if let Err(f) = check_price(&caps, model.as_dyn()) {
        return Ok(f.report(json));
    }
    let recorder = recorder_for(&args.model);
    let inv = Invocation {
        args: &args.model,
        inputs: args.inputs.clone(),
        autopilot: !args.no_autopilot,
    };
    let bar = Progress::new();
    let on_event = |e: EngineEvent| bar.event(e);
    let mut ask = |q: &str| bar.suspend(|| prompt(q));
    let ask: Option<AskFn> = if interactive(&args.model) {
        Some(&mut ask)
    } else {
        None
    };
    let mut settings = settings(&model, &on_event, &inv, recorder.clone(), ask);
    settings.tools = tools;
    settings.caps = caps;
    let variables: serde_json::Map<String, serde_json::Value> = args
        .vars
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::from(v.as_str())))
        .collect();
    let runtime = runtime()?;
    let _signals = signals::watch(&runtime, settings.cancel.clone());
    let result = match runner::create(&store, start, &variables) {
        Ok(claimed) => {
            tell_signals(&claimed.run().run_id);
            runtime.block_on(runner::continue_claimed(claimed, settings))
        }
        Err(e) => Err(e),
    };
    bar.finish();
    present(result, &args.model, recorder.as_ref())
}

fn continue_with(
    query: &str,
    continuation: Continuation,
    args: &ModelArgs,
    flags: BudgetArgs,
) -> anyhow::Result<u8> {
    if let Err(f) = check_record(args) {
        return Ok(f.report(args.json));
    }
    let store = Store::open_default()?;
    // The run is found, checked and locked before the model configuration is looked at.
    let claimed = match runner::claim(&store, query, continuation) {
        Ok(c) => c,
        Err(e) => return present(Err(e), args, None),
    };
    tell_signals(&claimed.run().run_id);
    if let Err(e) = store.check_apart(claimed.project_root()) {
        return Ok(Failure::from(&e).report(args.json));
    }
    let tools = match load_tools(&store, claimed.project_root()) {
        Ok(t) => t,
        Err(f) => return Ok(f.report(args.json)),
    };
    let budget = match budget_config(&store, claimed.project_root(), flags) {
        Ok(b) => b,
        Err(f) => return Ok(f.report(args.json)),
    };
    let model = match continuation_model(args, &store, &claimed) {
        Ok(m) => m,
        Err(f) => return Ok(f.report(args.json)),
    };
    let caps = budget.run_caps();
    if let Err(f) = check_price(&caps, model.as_dyn()) {
        return Ok(f.report(args.json));
    }
    let recorder = recorder_for(args);
    let inv = Invocation {
        args,
        inputs: Vec::new(),
        autopilot: true,
    };
    let bar = Progress::new();
    let on_event = |e: EngineEvent| bar.event(e);
    let mut ask = |q: &str| bar.suspend(|| prompt(q));
    let ask: Option<AskFn> = if interactive(args) {
        Some(&mut ask)
    } else {
        None
    };
    let mut settings = settings(&model, &on_event, &inv, recorder.clone(), ask);
    settings.tools = tools;
    settings.caps = caps;
    let runtime = runtime()?;
    let _signals = signals::watch(&runtime, settings.cancel.clone());
    let result = runtime.block_on(runner::continue_claimed(claimed, settings));
    bar.finish();
    present(result, args, recorder.as_ref())
}

pub fn resume(args: ResumeArgs) -> anyhow::Result<u8> {
    continue_with(&args.run, Continuation::Resume, &args.model, args.budget)
}

/// The answer `baton answer` gives: the text, or a confirmation widget's yes or no.
pub(super) fn answer_text(args: &AnswerArgs) -> String {
    if args.confirm || args.deny {
        let confirmed = args.confirm;
        format!(
            "WIDGET_SUBMIT\n{{\"type\": \"confirmation\", \"value\": {{\"confirmed\": {confirmed}}}}}"
        )
    } else {
        args.text.clone().unwrap_or_default()
    }
}

pub fn answer(args: AnswerArgs) -> anyhow::Result<u8> {
    // A unit of the work queue: answered in its database, for a worker to go on with.
    if args.db.is_some() || args.db_env.is_some() {
        return super::answer_queued::run(args);
    }
    let text = answer_text(&args);
    continue_with(
        &args.run,
        Continuation::Answer(text),
        &args.model,
        args.budget,
    )
}

pub fn chat(args: ChatArgs) -> anyhow::Result<u8> {
    continue_with(
        &args.run,
        Continuation::Chat(args.text),
        &args.model,
        args.budget,
    )
}
