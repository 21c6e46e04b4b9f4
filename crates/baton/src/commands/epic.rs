//! `baton epic …`: the epic autopilot. Parsing, live progress and presentation only; the loop
//! lives in `baton_epic`.
//!
//! Exit codes: 0 done, 10 waiting for an answer, 1 paused on a failure (or any failure),
//! 2 usage or bad input (nothing written), 130 stopped (`baton epic stop`, Ctrl-C).

use crate::exit;
use crate::failure::Failure;
use crate::progress::Progress;
use crate::signals;
use crate::ui::table::pad;
use crate::ui::{visible, visible_line};
use baton_engine::model_choice::{self, Orchestrated, Requested};
use baton_epic::{
    self, Board, Command, EpicError, EpicEvent, EpicOutcome, EpicReport, EpicSettings, ModelSource,
    Question,
};
use baton_store::Store;
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
pub struct EpicArgs {
    #[command(subcommand)]
    pub command: EpicCommand,
}

#[derive(Debug, Subcommand)]
pub enum EpicCommand {
    /// Run the stories of an epic, in sprint-status order (or with --stories FOLDER those of a
    /// BMAD spec folder's stories.yaml, in list order), through create-story, validate, dev,
    /// revision and code-review, to done.
    Run(RunArgs),
    /// Run one story to done (sets lastStoryCompleted).
    Story(StoryArgs),
    /// The board: stories and statuses, the phase in flight, pending questions.
    Status(StatusArgs),
    /// Answer the question the loop waits on, then continue the loop.
    Answer(AnswerArgs),
    /// Continue the loop where it stopped (after a pause, a kill or a failure).
    Resume(ResumeArgs),
    /// Ask the running loop to pause at the next phase boundary.
    Stop(StopArgs),
}

#[derive(Debug, Args)]
pub struct ProjectArg {
    /// The project (its implementation artifacts hold sprint-status.yaml).
    #[arg(long, short = 'p', default_value = ".", value_name = "DIR")]
    pub project: PathBuf,
}

/// Which model runs the phases, and how the loop talks.
#[derive(Debug, Args)]
pub struct LoopArgs {
    /// Up to N stories in flight, each in its own git worktree, merged back one at a time
    /// (default: [autopilot] parallel, else 1: one story after the other).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub parallel: Option<u32>,
    /// Model name (overrides BATON_MODEL and baton.toml).
    #[arg(long)]
    pub model: Option<String>,
    /// Who runs the phases that name no executor of their own: baton (its own tool loop),
    /// claude-code, codex or opencode (a coding-agent CLI through baton's gateway; over
    /// [autopilot] executor).
    #[arg(long, value_name = "NAME")]
    pub executor: Option<String>,
    /// The endpoint's wire protocol (default openai; anthropic is chosen by itself for
    /// api.anthropic.com). Overrides [llm] api.
    #[arg(long, value_enum, conflicts_with = "replay")]
    pub api: Option<crate::args::ApiArg>,
    /// Answer from recorded traces, one per phase run (<story>.<phase>.<n>.trace.json), offline.
    #[arg(long, value_name = "DIR")]
    pub replay: Option<PathBuf>,
    /// Record each phase run's conversation in DIR as <story>.<phase>.<n>.trace.json.
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// History sent to the model in each phase run of a workflow package: restart at every
    /// node (default, cheaper), or carry it across nodes. The epic and each run remember it:
    /// `answer` and `resume` go on with it unless given. Installed BMAD skills run as tasks,
    /// which have no nodes.
    #[arg(long, value_enum)]
    pub context: Option<crate::args::ContextArg>,
    /// Never prompt; stop with exit code 10 when a question waits.
    #[arg(long)]
    pub non_interactive: bool,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
    /// Run the stories on `baton worker`s: submit each as a unit to the PostgreSQL work queue
    /// at URL (this process stays the orchestrator: it merges approved stories and writes
    /// sprint-status.yaml). The project must be a git repository with a remote the workers
    /// can reach. `baton epic resume` remembers it.
    #[arg(long, value_name = "URL", conflicts_with = "db_env")]
    pub queue: Option<String>,
    /// The environment variable holding the queue's URL (instead of --queue URL).
    #[arg(long = "db-env", value_name = "NAME")]
    pub db_env: Option<String>,
    /// Hard budgets on the whole epic (over `[budget] tokens`/`usd`; per story:
    /// `tokens_per_story`/`usd_per_story`). The loop pauses with exit code 12 before a call
    /// that could cross one.
    #[command(flatten)]
    pub budget: crate::args::BudgetArgs,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The epic: epic-1 (or 1).
    #[arg(required_unless_present = "stories", conflicts_with = "stories")]
    pub epic: Option<String>,
    /// Stories mode: walk the stories.yaml of this BMAD spec folder (relative to the project)
    /// in list order instead of an epic of sprint-status.yaml.
    #[arg(long, value_name = "FOLDER")]
    pub stories: Option<String>,
    #[command(flatten)]
    pub project: ProjectArg,
    /// Stop after this many stories are done.
    #[arg(long, value_name = "N")]
    pub max_stories: Option<u32>,
    /// Check the files and the phase packages and show the plan; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub run: LoopArgs,
}

#[derive(Debug, Args)]
pub struct StoryArgs {
    /// The story key, as in sprint-status.yaml (e.g. 1-2-user-authentication).
    pub story_key: String,
    #[command(flatten)]
    pub project: ProjectArg,
    /// Check the files and the phase packages and show the plan; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub run: LoopArgs,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Only this epic (default: the epic of .run-epic-state.json, else every epic).
    #[arg(conflicts_with = "stories")]
    pub epic: Option<String>,
    /// The board of a BMAD spec folder's stories.yaml (stories mode; the default when the
    /// project's epic runs in stories mode).
    #[arg(long, value_name = "FOLDER")]
    pub stories: Option<String>,
    #[command(flatten)]
    pub project: ProjectArg,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct AnswerArgs {
    /// The story whose question is answered.
    pub story_key: String,
    /// The answer.
    pub text: String,
    /// The question id (default: the first one waiting).
    #[arg(long, value_name = "ID")]
    pub question: Option<String>,
    #[command(flatten)]
    pub project: ProjectArg,
    #[command(flatten)]
    pub run: LoopArgs,
}

#[derive(Debug, Args)]
pub struct ResumeArgs {
    #[command(flatten)]
    pub project: ProjectArg,
    #[command(flatten)]
    pub run: LoopArgs,
}

#[derive(Debug, Args)]
pub struct StopArgs {
    #[command(flatten)]
    pub project: ProjectArg,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(mut args: EpicArgs) -> anyhow::Result<u8> {
    // Without --project, the project found from the current folder upward.
    let project = match &mut args.command {
        EpicCommand::Run(a) => &mut a.project,
        EpicCommand::Story(a) => &mut a.project,
        EpicCommand::Status(a) => &mut a.project,
        EpicCommand::Answer(a) => &mut a.project,
        EpicCommand::Resume(a) => &mut a.project,
        EpicCommand::Stop(a) => &mut a.project,
    };
    project.project = crate::args::project::root(&project.project);
    match args.command {
        EpicCommand::Run(a) => {
            let command = match a.stories {
                Some(folder) => Command::Stories {
                    folder,
                    max_stories: a.max_stories,
                },
                None => Command::Run {
                    epic: a.epic.unwrap_or_default(),
                    max_stories: a.max_stories,
                },
            };
            drive(&a.project.project, command, &a.run, a.dry_run)
        }
        EpicCommand::Story(a) => drive(
            &a.project.project,
            Command::Story { key: a.story_key },
            &a.run,
            a.dry_run,
        ),
        EpicCommand::Answer(a) => drive(
            &a.project.project,
            Command::Answer {
                story: a.story_key,
                question: a.question,
                text: a.text,
            },
            &a.run,
            false,
        ),
        EpicCommand::Resume(a) => drive(&a.project.project, Command::Resume, &a.run, false),
        EpicCommand::Status(a) => status(&a),
        EpicCommand::Stop(a) => stop(&a),
    }
}

fn failure(e: &EpicError) -> Failure {
    let code = if e.is_usage() {
        exit::INVALID
    } else {
        exit::FAILURE
    };
    Failure::new(e.code, e.message.clone(), code).hint(e.hint.clone())
}

/// The model of the phases: `--replay DIR`, else the live model from `--model`, the
/// environment and `baton.toml`. An answer or a resume goes on with what the epic's newest
/// phase run remembers (its model and endpoint, or its traces' directory) unless flags say
/// otherwise (`model_choice::for_orchestration`, as `baton serve` does).
fn phase_model(
    args: &LoopArgs,
    store: &Store,
    project: &Path,
    continuing: bool,
) -> Result<Orchestrated, Failure> {
    let requested = Requested {
        model: args.model.clone(),
        base_url: None,
        api: crate::args::ApiArg::api(args.api),
        replay: args.replay.clone(),
    };
    let recorded = if continuing && args.replay.is_none() {
        // The progress record, whichever mode the epic runs in.
        let runs: Vec<String> = baton_epic::board::phase_runs(project)
            .into_iter()
            .map(|r| r.run_id)
            .collect();
        model_choice::newest_record(store, &runs)
    } else {
        None
    };
    let env = |k: &str| std::env::var(k).ok();
    model_choice::for_orchestration(&requested, recorded.as_ref(), store.home(), project, &env)
        .map_err(|e| {
            let general = e.configuration.then(|| {
                "pass --model (and set OPENAI_API_KEY / OPENAI_BASE_URL), or --replay DIR to run offline".to_string()
            });
            Failure::new(e.code, e.message, exit::INVALID).hint(e.hint.or(general))
        })
}

/// Reads an answer at the terminal.
fn prompt(story: &str, q: &Question) -> Option<String> {
    eprintln!(
        "\n{} asks ({}):\n\n{}\n",
        visible_line(story),
        visible_line(&q.id),
        visible(&q.question)
    );
    eprint!("> ");
    let _ = std::io::stderr().flush();
    let _at_prompt = signals::AtPrompt::enter();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).ok()?;
    let line = line.trim().to_string();
    (!line.is_empty()).then_some(line)
}

/// One line per loop event on stderr; engine events feed the spinner.
pub fn show_event(bar: &Progress, e: EpicEvent) {
    let line = match e {
        EpicEvent::Engine(e) => {
            bar.event(e);
            return;
        }
        EpicEvent::Story { index, total, key } => {
            bar.reset();
            format!("story {index}/{total} · {key}")
        }
        EpicEvent::Phase {
            phase,
            run_id,
            review_cycle,
            attempt,
            resumed,
            ..
        } => {
            // A new phase run: the spinner must not go on showing the last phase's node.
            bar.reset();
            let mut l = format!("  {phase} · run {}", &run_id[..run_id.len().min(13)]);
            if review_cycle > 1 {
                l.push_str(&format!(" · review cycle {review_cycle}"));
            }
            if attempt > 1 {
                l.push_str(" · retry");
            }
            if resumed {
                l.push_str(" · resumed");
            }
            l
        }
        EpicEvent::PhaseEnded { phase, result, .. } => format!("  {phase}: {result}"),
        EpicEvent::Verify {
            command,
            passed,
            millis,
        } => format!(
            "  verify `{command}`: {} ({millis} ms)",
            if passed { "passed" } else { "failed" }
        ),
        EpicEvent::Answered {
            question, answer, ..
        } => format!("  asked: {question}\n  answer: {answer}"),
        EpicEvent::Status { key, status } => format!("  sprint-status: {key} → {status}"),
        EpicEvent::Note(n) => format!("  note: {n}"),
    };
    // Keys, questions, answers and notes come from the model and the project.
    bar.suspend(|| eprintln!("{}", visible(&line)));
}

fn drive(project: &Path, command: Command, args: &LoopArgs, dry_run: bool) -> anyhow::Result<u8> {
    let store = Store::open_default()?;
    if let Err(e) = store.check_apart(project) {
        return Ok(Failure::from(&e).report(args.json));
    }
    // Missing or broken files are said before anything asks for a model.
    if let Err(e) = baton_epic::preflight(project, &command) {
        return Ok(failure(&e).report(args.json));
    }
    let budget = match crate::budget::budget_config(&store, project, args.budget) {
        Ok(b) => b,
        Err(f) => return Ok(f.report(args.json)),
    };
    let continuing = matches!(command, Command::Answer { .. } | Command::Resume);
    let queued = match queue_target(args, project, &command, continuing) {
        Ok(q) => q,
        Err(f) => return Ok(f.report(args.json)),
    };
    let chosen = match queued.is_some() {
        // An orchestrator whose stories run on workers calls no model: any source does. A dry
        // run chooses (and checks) the model as the real run would.
        true => Orchestrated::Traces(PathBuf::from(".")),
        false => match phase_model(args, &store, project, continuing) {
            Ok(m) => m,
            // A plan needs no model: a dry run without one shows it, and says what the real
            // run would need.
            Err(f) if dry_run && f.code == "LLM_CONFIG_INVALID" => {
                eprintln!("note: the model was not checked: {}", visible(&f.message));
                Orchestrated::Traces(PathBuf::from("."))
            }
            Err(f) => return Ok(f.report(args.json)),
        },
    };
    let source = match &chosen {
        Orchestrated::Traces(dir) => ModelSource::Replay(dir.clone()),
        Orchestrated::Live(m) => ModelSource::Live(m.as_dyn()),
    };
    let interactive = !args.non_interactive && !args.json && std::io::stdin().is_terminal();
    let bar = Progress::new();
    let on_event = |e: EpicEvent| show_event(&bar, e);
    let mut ask = |story: &str, q: &Question| bar.suspend(|| prompt(story, q));
    let settings = EpicSettings {
        source,
        record: args.record.clone(),
        ask: if interactive { Some(&mut ask) } else { None },
        on_event: if args.json { None } else { Some(&on_event) },
        cancel: Default::default(),
        dry_run,
        budget,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let _signals = signals::watch(&runtime, settings.cancel.clone());
    // The model answers before anything is written (a dry run says whether it would).
    if let Orchestrated::Live(m) = &chosen
        && let Err(e) = runtime.block_on(baton_epic::model_check::check(
            m.as_dyn(),
            &settings.cancel,
            "nothing was started or written",
        ))
    {
        return Ok(failure(&e).report(args.json));
    }
    signals::set_next(signals::Next {
        resume: continue_command("resume", project, args.replay.as_deref()),
        answer: None,
    });
    let executor = match args.executor.as_deref() {
        Some(name) => match baton_epic::config::parse_executor("--executor", name) {
            Ok(kind) => Some(kind),
            Err(e) => return Ok(failure(&e).report(args.json)),
        },
        None => None,
    };
    let options = baton_epic::LoopOptions {
        parallel: args.parallel,
        context: crate::args::ContextArg::policy(args.context),
        executor,
    };
    // A dry run with --queue checks what the queued run would refuse, and writes nothing.
    let result = runtime.block_on(baton_epic::execute_with_options(
        &store, project, command, settings, options, queued,
    ));
    bar.finish();
    match result {
        Ok(report) if args.json => {
            // The JSON also says what the epic's runs used so far (tokens, cached, cost).
            let mut v = report_json(&report);
            v["projectRoot"] = json!(crate::args::project::shown(project));
            if let Ok(mut board) = baton_epic::status(project, Some(&report.epic_id)) {
                baton_epic::budget::fill_usage(&mut board, &store, project);
                if let Some(u) = board.epics.first().and_then(|e| e.usage) {
                    v["usage"] = serde_json::json!(u);
                }
            }
            crate::ui::print_json(&v)?;
            Ok(exit_code(&report.outcome))
        }
        Ok(report) => {
            let next = |verb: &str| continue_command(verb, project, args.replay.as_deref());
            present(&report, args.json, &next)
        }
        Err(e) => Ok(failure(&e).report(args.json)),
    }
}

/// Where the stories go with `--queue URL` / `--db-env NAME`, or what a queued epic being
/// resumed or answered remembers; `None`: they run here.
fn queue_target(
    args: &LoopArgs,
    project: &Path,
    command: &Command,
    continuing: bool,
) -> Result<Option<baton_epic::queued::QueueTarget>, Failure> {
    let remembered = continuing
        .then(|| baton_epic::queued::remembered(project))
        .flatten();
    if args.queue.is_none() && args.db_env.is_none() && remembered.is_none() {
        return Ok(None);
    }
    if args.context.is_some() {
        // The story units carry no policy: the workers' runs would not follow it.
        return Err(Failure::new(
            "EPIC_QUEUE_UNSUPPORTED",
            "--context is not carried to queue workers (this epic's stories run on the queue)",
            exit::INVALID,
        )
        .hint(Some(
            "leave out --context: the workers' phase runs restart their history at every node"
                .into(),
        )));
    }
    if matches!(command, Command::Story { .. } | Command::Stories { .. }) {
        return Err(Failure::new(
            "EPIC_QUEUE_UNSUPPORTED",
            "--queue runs an epic of sprint-status.yaml (`baton epic run <EPIC> --queue URL`)",
            exit::INVALID,
        ));
    }
    let (url, env) = match (&args.queue, &args.db_env, &remembered) {
        (None, None, Some(r)) => (r.db_url.clone(), r.db_env.clone()),
        _ => (args.queue.clone(), args.db_env.clone()),
    };
    let config = crate::queue_db::db_config(url.as_deref(), env.as_deref(), "--queue URL")
        .map_err(|e| crate::queue_db::failure(&e))?;
    let from_env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let kept = remembered
        .as_ref()
        .map(|r| r.model.clone())
        .unwrap_or_default();
    let model = baton_epic::queued::StoryModel {
        name: args
            .model
            .clone()
            .or(kept.name)
            .or_else(|| from_env("BATON_MODEL")),
        base_url: kept.base_url.or_else(|| from_env("OPENAI_BASE_URL")),
        // The workers speak the API asked for here (or remembered by a resumed epic).
        api: crate::args::ApiArg::api(args.api)
            .map(|a| a.as_str().to_string())
            .or(kept.api),
    };
    let host = baton_lifecycle::ralph::claim::hostname();
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    Ok(Some(baton_epic::queued::QueueTarget {
        // Never the password: a resume finds it where this one did (PGPASSWORD, the password
        // file, or the variable of --db-env).
        url: env.is_none().then(|| config.redacted()),
        db_env: env,
        config,
        model,
        slots: remembered.map(|r| r.slots),
        owner: format!("{host}:{}:{:04x}", std::process::id(), nonce & 0xffff),
        host,
        lease: std::time::Duration::from_secs(30),
        poll: std::time::Duration::from_millis(300),
    }))
}

/// `baton epic <verb> --project DIR [--replay TRACES]`, as a person would type it to go on.
pub fn continue_command(verb: &str, project: &Path, replay: Option<&Path>) -> String {
    let word = |p: &Path| signals::shell_word(&p.display().to_string());
    let mut command = format!("baton epic {verb} --project {}", word(project));
    if let Some(dir) = replay {
        command.push_str(&format!(" --replay {}", word(dir)));
    }
    command
}

/// The JSON of `baton epic … --json` (shared with `baton serve`).
pub fn report_json(r: &EpicReport) -> Value {
    baton_epic::report::to_json(r)
}

pub fn exit_code(o: &EpicOutcome) -> u8 {
    match o {
        EpicOutcome::Done { .. } | EpicOutcome::Planned { .. } => exit::OK,
        EpicOutcome::Waiting { .. } => exit::WAITING,
        EpicOutcome::Paused { .. } => exit::FAILURE,
        EpicOutcome::Stopped | EpicOutcome::Interrupted => exit::STOPPED,
        EpicOutcome::Budget { .. } => exit::BUDGET_EXCEEDED,
    }
}

/// The outcome for people; `next` builds the `baton epic …` commands that go on (with the
/// project, and the traces of a replayed epic).
pub fn present(r: &EpicReport, json: bool, next: &dyn Fn(&str) -> String) -> anyhow::Result<u8> {
    let code = exit_code(&r.outcome);
    if json {
        crate::ui::print_json(&report_json(r))?;
        return Ok(code);
    }
    let n = r.stories_completed.len();
    let stories = if n == 1 { "story" } else { "stories" };
    match &r.outcome {
        EpicOutcome::Done { epic_done: true } => {
            outln!(
                "{} is done: {n} {stories} finished in this run ({} phase runs).",
                visible_line(&r.epic_id),
                r.phases_run
            );
        }
        EpicOutcome::Done { epic_done: false } => {
            outln!(
                "stopped with {} not done: {n} {stories} finished in this run ({} phase runs).",
                visible_line(&r.epic_id),
                r.phases_run
            );
            // Only a command that does something is suggested.
            if r.runnable_left > 0 {
                outln!(
                    "continue with `{}`",
                    next(&match baton_epic::stories_mode::folder_of(&r.epic_id) {
                        Some(folder) => format!("run --stories {}", signals::shell_word(folder)),
                        None => format!("run {}", signals::shell_word(&r.epic_id)),
                    })
                );
            } else {
                outln!(
                    "no story of {} is left that the loop runs without you: change the values below in sprint-status.yaml (or answer the loop's question) to run them",
                    visible_line(&r.epic_id)
                );
            }
            out!("{}", findings_text(&r.findings));
        }
        EpicOutcome::Waiting { story, question } => {
            outln!(
                "{} waits for an answer ({}):\n\n{}\n",
                visible_line(story),
                visible_line(&question.id),
                visible(&question.question)
            );
            outln!(
                "answer with `{} \"<your answer>\"`",
                next(&format!("answer {}", signals::shell_word(story)))
            );
        }
        EpicOutcome::Paused { failure } => {
            eprintln!(
                "error[{}]: {}",
                visible_line(&failure.code),
                visible(&failure.message)
            );
            eprintln!(
                "  {}",
                visible_line(&baton_epic::next_step::after_failure(
                    failure,
                    &next("resume")
                ))
            );
        }
        EpicOutcome::Stopped => {
            eprintln!(
                "paused at a phase boundary, as asked; continue with `{}`",
                next("resume")
            );
        }
        EpicOutcome::Interrupted => {
            eprintln!(
                "{} the phase run is kept; continue with `{}`",
                crate::ui::color::err(crate::ui::Paint::Warn, "stopped;"),
                next("resume")
            );
        }
        EpicOutcome::Budget {
            story,
            phase,
            message,
            ..
        } => {
            eprintln!(
                "{} {}",
                crate::ui::color::err(crate::ui::Paint::Warn, "budget reached:"),
                visible(message)
            );
            let story = visible_line(story);
            eprintln!(
                "  paused at {phase} of {story}, nothing lost; continue with a larger budget: `{} --budget-tokens N` (or --budget-usd X, or raise [budget] in baton.toml)",
                next("resume")
            );
        }
        EpicOutcome::Planned { plan, parallel } => {
            outln!(
                "{}: {} {} to run",
                visible_line(&r.epic_id),
                plan.len(),
                if plan.len() == 1 { "story" } else { "stories" }
            );
            for p in plan {
                outln!(
                    "  {} {} starts at {}",
                    pad(&p.key, 40),
                    pad(&p.status, 14),
                    p.phase
                );
                // Why it starts there when sprint-status alone says otherwise.
                if let Some(note) = &p.note {
                    outln!("      {}", visible(note));
                }
            }
            if let Some(p) = parallel {
                out!("{}", parallel_text(p, true));
            }
            out!("{}", pipeline_text(&r.pipeline));
            if let Some(retro) = &r.retrospective {
                outln!("{}", retrospective_text(retro));
            }
            for p in r.pipeline.phases.iter().filter(|p| !p.settings.is_empty()) {
                let set: Vec<String> = p
                    .settings
                    .iter()
                    .map(|(k, v)| format!("workflow.{k} = {v}"))
                    .collect();
                outln!("  {} settings: {}", p.name, set.join(", "));
            }
            outln!("phases:");
            for l in &r.phases {
                outln!(
                    "  {:<13} {} from {}",
                    l.phase.as_str(),
                    l.workflow,
                    l.package
                );
                if let Some(how) = &l.how {
                    outln!("  {:<13} {}", "", visible(how));
                }
            }
            out!("{}", findings_text(&r.findings));
        }
    }
    Ok(code)
}

/// `[autopilot] retrospective = true` in one line: whether the epic's retrospective runs.
pub fn retrospective_text(r: &baton_epic::retrospective::RetroPlan) -> String {
    let status = r.status.as_deref().unwrap_or("not listed");
    if r.will_run {
        format!(
            "retrospective: {} runs once every story is done; it writes {}, then {}: done (now {})",
            visible_line(&r.skill),
            visible_line(&r.document),
            visible_line(&r.key),
            visible_line(status)
        )
    } else {
        format!(
            "retrospective: {} is {}: not run",
            visible_line(&r.key),
            visible_line(status)
        )
    }
}

/// The pipeline in a few lines: the phases in order with what runs each, and why.
pub fn pipeline_text(p: &baton_epic::pipeline::PipelineView) -> String {
    let names: Vec<&str> = p.phases.iter().map(|ph| ph.name).collect();
    let mut out = format!("pipeline: {} ({})\n", names.join(" → "), p.source);
    out.push_str(&format!("  {}\n", visible(&p.reason)));
    for ph in &p.phases {
        let action = ph
            .action
            .as_deref()
            .map(|a| format!(", its {a} action"))
            .unwrap_or_default();
        out.push_str(&format!(
            "  {:<13} {} {} ({}{action})\n",
            ph.name, ph.runs.kind, ph.runs.name, ph.runs.path
        ));
    }
    out
}

/// What the board and the plan cannot show as epics and stories, each with its line: values
/// BMAD does not define, keys outside its grammar, legacy values, retrospective action items.
/// Keys are shown whole (never cut).
pub fn findings_text(f: &baton_epic::findings::Findings) -> String {
    let mut out = String::new();
    let mut section = |title: String, lines: Vec<String>| {
        if !lines.is_empty() {
            out.push_str(&format!("\n{title}\n"));
            for l in lines {
                out.push_str(&format!("  {l}\n"));
            }
        }
    };
    section(
        "not run, values BMAD does not define:".into(),
        f.not_runnable
            .iter()
            .map(|n| format!("line {:>4}  {}: {} — {}", n.line, n.key, n.status, n.reason))
            .collect(),
    );
    let mut outside: Vec<String> = f
        .unrecognized
        .iter()
        .map(|u| format!("line {:>4}  {}: {}", u.line, u.key, u.status))
        .collect();
    if !outside.is_empty() {
        outside.push(format!("({})", baton_bmad::keys::GRAMMAR));
    }
    section("outside BMAD's key grammar, never run:".into(), outside);
    section(
        "legacy values, read as their modern names:".into(),
        f.legacy_mapped
            .iter()
            .map(|m| {
                format!(
                    "line {:>4}  {}: {} (read as {})",
                    m.line, m.key, m.status, m.mapped_to
                )
            })
            .collect(),
    );
    section(
        "retrospective action items (bmad-loop), shown, not run:".into(),
        f.retro_items
            .iter()
            .map(|i| format!("line {:>4}  {}: {}", i.line, i.key, i.status))
            .collect(),
    );
    // Keys, titles, questions and notes are the project's and the model's text.
    visible(&out).into_owned()
}

fn status(args: &StatusArgs) -> anyhow::Result<u8> {
    let project = &args.project.project;
    let stories = match (&args.stories, &args.epic) {
        (Some(f), _) => Some(f.clone()),
        (None, None) => baton_epic::stories_mode::board::recorded_folder(project),
        (None, Some(_)) => None,
    };
    if let Some(folder) = stories {
        let board = match baton_epic::stories_mode::status(project, &folder) {
            Ok(b) => b,
            Err(e) => return Ok(failure(&e).report(args.json)),
        };
        if args.json {
            let mut v = serde_json::to_value(&board)?;
            v["projectRoot"] = json!(crate::args::project::shown(project));
            crate::ui::print_json(&v)?;
        } else {
            out!("{}", stories_board_text(&board));
        }
        return Ok(exit::OK);
    }
    // BMAD 7's ticket tree, when the project keeps its work there (experimental).
    match baton_epic::tickets_mode::status(project) {
        Ok(Some(board)) => {
            if args.json {
                let mut v = serde_json::to_value(&board)?;
                v["projectRoot"] = json!(crate::args::project::shown(project));
                crate::ui::print_json(&v)?;
            } else {
                out!("{}", tickets_board_text(&board));
            }
            return Ok(exit::OK);
        }
        Ok(None) => {}
        Err(e) => return Ok(failure(&e).report(args.json)),
    }
    // `done_when = "merged"`: the remote is asked which published stories are merged.
    let merge_check = baton_epic::publishing::check_merges(project);
    let board = match Store::open_default() {
        Ok(store) => baton_epic::status_board(&store, project, args.epic.as_deref()),
        Err(_) => baton_epic::status(project, args.epic.as_deref()),
    };
    let mut board = match board {
        Ok(b) => b,
        Err(e) => return Ok(failure(&e).report(args.json)),
    };
    if let Err(e) = merge_check {
        let w = format!("publish: {}: {}", e.code, e.message);
        board.findings.warnings.push(w);
    }
    if args.json {
        let mut v = serde_json::to_value(&board)?;
        v["projectRoot"] = json!(crate::args::project::shown(project));
        crate::ui::print_json(&v)?;
    } else {
        out!("{}", board_text(&board));
    }
    Ok(exit::OK)
}

/// Which sprint-status.yaml the board reads and why; the rules passed over, the other files
/// found, and where story files were looked for when something was passed over there.
fn sources_text(b: &Board) -> String {
    let mut out = String::new();
    let s = &b.sprint_status;
    out.push_str(&format!("sprint status: {} (rule: {})\n", s.path, s.rule));
    for n in &s.notes {
        out.push_str(&format!("  passed over: {n}\n"));
    }
    for o in &s.others {
        out.push_str(&format!(
            "  also found, not used: {} ({})\n",
            o.path, o.rule
        ));
    }
    for n in &b.story_files.notes {
        out.push_str(&format!("  story files: {n}\n"));
    }
    out
}

/// The board of a ticket tree as text: epics and their tickets in build order.
pub fn tickets_board_text(b: &baton_epic::tickets_mode::TicketsBoard) -> String {
    let mut out = format!(
        "ticket tree (BMAD 7, experimental) under {} ({})\n",
        b.output_folder, b.output_rule
    );
    if let Some(id) = &b.epic_id {
        let live = if b.live {
            ", a process is running it"
        } else {
            ""
        };
        out.push_str(&format!("walk: {id}{live}\n"));
    }
    for i in &b.initiatives {
        let next = i.next.as_deref().unwrap_or("nothing can start now");
        out.push_str(&format!("\n{} · next: {next}\n", i.folder));
        for e in &i.epics {
            out.push_str(&format!("  {}\n", e.name));
            for t in &e.tickets {
                let mut line = format!(
                    "    {} {} {} {}",
                    if t.next { "→" } else { " " },
                    pad(&t.key, 24),
                    pad(t.title.as_deref().unwrap_or(""), 28),
                    pad(&t.status, 14)
                );
                match t.state {
                    "blocked" => line.push_str(&format!(
                        "blocked: {}",
                        t.blocked_reason.as_deref().unwrap_or("no reason given")
                    )),
                    "waiting" => line.push_str(&format!("waits on {}", t.waiting_on.join(", "))),
                    "built" => line.push_str("built: waits for a review before done"),
                    "not-pulled" => line.push_str("not pulled yet"),
                    _ => {}
                }
                if let Some(p) = &t.phase {
                    line.push_str(&format!("  [{p}]"));
                }
                out.push_str(&line);
                out.push('\n');
            }
        }
    }
    visible(&out).into_owned()
}

/// The board of a spec folder (stories mode) as text.
pub fn stories_board_text(b: &baton_epic::stories_mode::StoriesBoard) -> String {
    let mut out = String::new();
    let live = if b.live {
        " (a process is running it)"
    } else {
        ""
    };
    out.push_str(&format!(
        "{} · {}{live} · stories mode\n",
        b.stories_folder,
        b.standing.as_str()
    ));
    if let Some(other) = &b.other_epic {
        out.push_str(&format!(
            "the project's epic in progress is another one: {other}\n"
        ));
    }
    out.push_str(&format!("\n{} [{}]\n", b.stories_folder, b.status));
    for s in &b.stories {
        let mut line = format!(
            "  {} {} {}",
            pad(&s.id, 8),
            pad(&s.title, 30),
            pad(&s.status, 14)
        );
        line.push_str(&phase_text(
            s.phase.as_deref(),
            s.review_cycle,
            s.review.as_deref(),
        ));
        if let Some(f) = &s.file {
            line.push_str(&format!("  {f}"));
        }
        let mut marks = Vec::new();
        if s.spec_checkpoint {
            marks.push("spec checkpoint");
        }
        if s.done_checkpoint {
            marks.push("done checkpoint");
        }
        if !marks.is_empty() {
            line.push_str(&format!("  [{}]", marks.join(", ")));
        }
        out.push_str(line.trim_end());
        out.push('\n');
        for q in &s.questions {
            out.push_str(&format!("      ? {}: {}\n", q.id, q.question));
        }
        if let Some(n) = &s.not_runnable {
            out.push_str(&format!("      ! the walk stops here: status {n}\n"));
        }
        if let Some(p) = &s.problem {
            out.push_str(&format!("      ! {p}\n"));
        }
    }
    if let Some(f) = &b.last_failure {
        out.push_str(&format!(
            "\npaused on a failure: {} of {}: {}: {}\n",
            f.phase, f.story_key, f.code, f.message
        ));
    }
    // Keys, titles, questions and notes are the project's and the model's text.
    visible(&out).into_owned()
}

/// A story's phase in flight (with its review cycle past the first) and its last review
/// verdict, as its board line shows them: ` ← dev (review cycle 2) review: approved`.
fn phase_text(phase: Option<&str>, review_cycle: Option<u32>, review: Option<&str>) -> String {
    let mut t = String::new();
    if let Some(p) = phase {
        t.push_str(&format!(" ← {p}"));
        if let Some(c) = review_cycle.filter(|c| *c > 1) {
            t.push_str(&format!(" (review cycle {c})"));
        }
    }
    if let Some(r) = review {
        t.push_str(&format!(" review: {r}"));
    }
    t
}

/// `12,345 tokens (71% of the prompt cached), $0.0123` (`cached, 2,100 written to cache)`
/// where the provider wrote to its cache).
fn usage_text(u: &baton_llm::Usage) -> String {
    let mut t = format!(
        "{} tokens ({:.0}% of the prompt cached{})",
        crate::ui::thousands(u.total_tokens),
        u.cached_share() * 100.0,
        crate::ui::cache_writes(u.cache_write_tokens)
    );
    if let Some(c) = u.cost_usd {
        t.push_str(&format!(", ${c:.4}"));
    }
    t
}

/// A published story's lines: its branch, how far publishing got, its link, its last error.
fn publish_text(p: &baton_epic::publish::Story) -> String {
    let waits = if p.holds() {
        ", waits for its merge"
    } else {
        ""
    };
    let mut out = format!("      branch {} · {}{waits}", p.branch, p.state.as_str());
    if let Some(url) = &p.url {
        out.push_str(&format!(" · {url}"));
    }
    out.push('\n');
    if let Some(e) = &p.error {
        out.push_str(&format!("      ! publish: {}: {}\n", e.code, e.message));
        if let Some(h) = &e.hint {
            out.push_str(&format!("        hint: {h}\n"));
        }
    }
    out
}

/// The board as text.
pub fn board_text(b: &Board) -> String {
    let mut out = String::new();
    // The standing, not the file's raw state: a finished epic's file still says "paused".
    let state = match &b.epic_id {
        Some(e) => format!(
            "{e} · {}{}",
            b.standing.as_str(),
            if b.live {
                " (a process is running it)"
            } else {
                ""
            }
        ),
        None => "no epic started".to_string(),
    };
    out.push_str(&format!("{state} · {}\n", b.implementation_artifacts));
    out.push_str(&sources_text(b));
    for w in &b.findings.warnings {
        out.push_str(&format!("\nwarning: {w}\n"));
    }
    for e in &b.epics {
        out.push_str(&format!("\n{} [{}]\n", e.key, e.status));
        for s in &e.stories {
            let mut line = format!("  {} {}", pad(&s.key, 40), pad(&s.status, 14));
            line.push_str(&phase_text(
                s.phase.as_deref(),
                s.review_cycle,
                s.review.as_deref(),
            ));
            if let Some(f) = &s.file {
                line.push_str(&format!("  {f}"));
                // The file's own status, when it says something else than sprint-status.
                if let Some(fs) = s.file_status.as_deref().filter(|fs| {
                    baton_bmad::story_files::as_sprint_status(fs)
                        != baton_bmad::story_files::as_sprint_status(&s.status)
                }) {
                    line.push_str(&format!(" (file: {fs})"));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
            for q in &s.questions {
                out.push_str(&format!("      ? {}: {}\n", q.id, q.question));
            }
            if let Some(p) = &s.problem {
                out.push_str(&format!("      ! {p}\n"));
            }
            if let Some(p) = &s.publish {
                out.push_str(&publish_text(p));
            }
        }
        if let Some(u) = &e.usage {
            out.push_str(&format!("  usage: {}\n", usage_text(u)));
        }
    }
    if let Some(p) = &b.parallel {
        out.push('\n');
        out.push_str(&parallel_text(p, false));
    }
    if let Some(p) = &b.pipeline {
        out.push_str(&format!("\n{}", pipeline_text(p)));
    }
    out.push_str(&findings_text(&b.findings));
    if let Some(f) = &b.last_failure {
        out.push_str(&format!(
            "\npaused on a failure: {} of {}: {}: {}\n",
            f.phase, f.story_key, f.code, f.message
        ));
    }
    // Keys, titles, questions and notes are the project's and the model's text.
    visible(&out).into_owned()
}

/// The schedule of a parallel epic (`--dry-run` and `epic status`): the stories in flight side
/// by side with their phase, branch and worktree, those that start now, and why each other
/// story waits.
pub fn parallel_text(p: &baton_epic::parallel_board::ParallelBoard, dry_run: bool) -> String {
    let mut out = format!(
        "parallel: up to {} {} in flight",
        p.slots,
        if p.slots == 1 { "story" } else { "stories" }
    );
    if let Some(b) = &p.branch {
        out.push_str(&format!(", merged onto {b}"));
    }
    out.push_str(&format!(
        "\n  worktrees: {} = {}\n",
        baton_epic::parallel_board::WORKTREES,
        p.worktrees
    ));
    if !p.in_flight.is_empty() {
        out.push_str("  in flight:\n");
        for f in &p.in_flight {
            let mut line = format!("    {} {}", pad(&f.key, 40), pad(f.state.as_str(), 9));
            line.push_str(&phase_text(f.phase.as_deref(), f.review_cycle, None));
            out.push_str(line.trim_end());
            out.push('\n');
            out.push_str(&format!(
                "      branch {}  worktree {}\n",
                f.branch, f.worktree
            ));
            if let Some(n) = &f.note {
                out.push_str(&format!("      {n}\n"));
            }
        }
    }
    if !p.start.is_empty() {
        let label = if dry_run {
            "start together"
        } else {
            "start next"
        };
        out.push_str(&format!("  {label}: {}\n", p.start.join(", ")));
    }
    if !p.waiting.is_empty() {
        out.push_str("  waiting:\n");
        for w in &p.waiting {
            out.push_str(&format!("    {}: {}\n", w.key, w.reason));
        }
    }
    if p.waves.len() > 1 {
        out.push_str("  then, wave after wave:\n");
        for (i, w) in p.waves.iter().enumerate().skip(1) {
            out.push_str(&format!("    {}. {}\n", i + 1, w.join(", ")));
        }
    }
    // Keys, titles, questions and notes are the project's and the model's text.
    visible(&out).into_owned()
}

fn stop(args: &StopArgs) -> anyhow::Result<u8> {
    match baton_epic::stop(&args.project.project) {
        Ok(()) => {
            if args.json {
                crate::ui::print_json(&json!({"stopRequested": true}))?;
            } else {
                outln!("asked the running loop to pause at the next phase boundary");
            }
            Ok(exit::OK)
        }
        Err(e) => Ok(failure(&e).report(args.json)),
    }
}
