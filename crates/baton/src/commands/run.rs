//! `baton run`, `resume`, `answer` and `chat`: choose the model, call the runner, present the
//! outcome.

use crate::args::run::{AnswerArgs, ChatArgs, ResumeArgs, RunArgs};
use crate::args::{BudgetArgs, ContextArg, ModelArgs};
use crate::budget::{budget_config, check_price};
use crate::exit;
use crate::failure::Failure;
use crate::model::{Model, check_record, continuation_model, load_model, recorder_for};
use crate::progress::Progress;
use crate::report;
use crate::runtime::runtime;
use crate::signals;
use crate::ui::{visible, visible_line};
use baton_engine::driver::ABORTED;
use baton_engine::runner::{self, AskFn, Continuation, Finished, RunnerError, Settings, StartRun};
use baton_engine::spend;
use baton_engine::{EngineEvent, Outcome};
use baton_llm::TraceRecorder;
use baton_store::Store;
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

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
                crate::ui::print_json(&report::to_json(&r))?;
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
        Outcome::Waiting { .. } => exit::WAITING,
        Outcome::Failed { code, .. } if code == ABORTED => exit::STOPPED,
        Outcome::Failed { code, .. } if code == spend::BUDGET_EXCEEDED => exit::BUDGET_EXCEEDED,
        Outcome::Failed { .. } => exit::FAILURE,
    };
    if args.json {
        crate::ui::print_json(&finished.to_json())?;
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
            if code.starts_with("REPLAY_") {
                // Resuming with the same trace would stop at the same place.
                eprintln!(
                    "hint: the recorded trace cannot take this run further; the run is kept, go on with a real model: baton resume {short} --model <MODEL> (or record a new trace: baton run … --model <MODEL> --record <FILE>)"
                );
            } else {
                eprintln!("  the run is kept; retry with: baton resume {short}");
            }
        }
    }
    Ok(code)
}

/// The tool ceiling of a run (`[tools.*]` and `[mcp]` of the store's config and the project's
/// `baton.toml`).
fn load_tools(store: &Store, project: &Path) -> Result<baton_tools::ToolsConfig, Failure> {
    baton_tools::ToolsConfig::load(Some(store.home()), Some(project))
        .map_err(|e| Failure::new(e.code(), e.to_string(), exit::INVALID).hint(Some(e.hint())))
}

pub fn run(mut args: RunArgs) -> anyhow::Result<u8> {
    // A name `baton package list` shows runs like its path, here and on the queue.
    args.package = match crate::args::package::locate(&args.package) {
        Ok(path) => path,
        Err(f) => return Ok(f.report(args.model.json)),
    };
    args.project = crate::args::project::root(&args.project);
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
            signals::name_run(&claimed.run().run_id);
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
    signals::name_run(&claimed.run().run_id);
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

pub fn answer(args: AnswerArgs) -> anyhow::Result<u8> {
    // A unit of the work queue: answered in its database, for a worker to go on with.
    if args.db.is_some() || args.db_env.is_some() {
        return super::answer_queued::run(args);
    }
    let text = args.answer_text();
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
