//! `baton agent`: talk to one agent of a package (agent-first entry). Its persona greets once
//! and shows its menu; each input goes through the command router and is dispatched: a
//! workflow runs in this terminal (with progress and inline questions), a script or a prompt
//! goes to the agent, anything else is a chat with the persona. With `--input`, one input is
//! resolved and dispatched and the command exits (`--json`: the ResolvedCommand and what
//! happened).

use crate::agent_ui::{self, RunCommand};
use crate::args::{ContextArg, ModelArgs};
use crate::exit;
use crate::failure::Failure;
use crate::model::{self, Model};
use crate::progress::Progress;
use crate::report;
use crate::signals;
use crate::ui::{visible, visible_line};
use baton_engine::agent::{Chat, ChatError, Conversation, texts};
use baton_engine::driver::ABORTED;
use baton_engine::router::{Kind, Menu, ResolvedCommand, RouteError, Surface, resolve};
use baton_engine::runner::{
    self, Claimed, Continuation, Finished, RunnerError, Settings, StartRun,
};
use baton_engine::{EngineEvent, Outcome, TokenCounter};
use baton_llm::{TraceRecorder, Usage};
use baton_package::model::Agent;
use baton_package::{Package, ValidateOptions, validate_path};
use baton_store::{Phase, Project, Store};
use clap::Args;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Package directory or .bmad file, or the name of an installed package (`baton package
    /// list`); a path that exists wins.
    pub package: PathBuf,
    /// The agent to talk to (default: the first agent with a menu).
    #[arg(long)]
    pub agent: Option<String>,
    /// The project the agent's workflows work on.
    #[arg(long, short = 'p', default_value = ".")]
    pub project: PathBuf,
    /// Resolve and dispatch this one input, then exit (no session).
    #[arg(long, value_name = "TEXT")]
    pub input: Option<String>,
    /// Go on with this chat conversation (its id) instead of starting a new one.
    #[arg(long, value_name = "ID")]
    pub conversation: Option<String>,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// What a dispatched command did.
enum Event {
    ShowMenu,
    Clarify,
    Run {
        started: bool,
        result: Box<Result<Finished, RunnerError>>,
        said: Option<RunCommand>,
    },
    Chat {
        assistant: String,
        usage: Usage,
        conversation: String,
    },
    Dismissed,
    /// Nothing was run; a note for the person.
    Note(String),
}

impl Event {
    fn name(&self) -> &'static str {
        match self {
            Event::ShowMenu => "SHOW_MENU",
            Event::Clarify => "CLARIFY_CHOICE",
            Event::Run { started: true, .. } => "RUN_STARTED",
            Event::Run { started: false, .. } => "RUN_RESUMED",
            Event::Chat { .. } => "CHAT_RESPONSE",
            Event::Dismissed => "AGENT_DISMISSED",
            Event::Note(_) => "NOTE",
        }
    }
}

fn route_failure(e: &RouteError) -> Failure {
    Failure::new(e.code, e.message.clone(), exit::INVALID).hint(e.hint.clone())
}

fn chat_failure(e: &ChatError) -> Failure {
    let code = if e.code() == ABORTED {
        exit::STOPPED
    } else {
        exit::FAILURE
    };
    Failure::new(e.code(), e.to_string(), code)
}

/// `--agent`, else the first agent with a menu, else the first agent.
fn pick_agent<'p>(package: &'p Package, wanted: Option<&str>) -> Result<&'p Agent, Failure> {
    let agents = package.agents();
    let found = match wanted {
        Some(id) => package.agent(id),
        None => agents
            .iter()
            .find(|a| !a.menu.is_empty())
            .or_else(|| agents.first()),
    };
    found.ok_or_else(|| {
        let ids: Vec<&str> = agents.iter().map(|a| a.id.as_str()).collect();
        Failure::new(
            "AGENT_NOT_FOUND",
            format!(
                "package '{}' has no agent '{}'",
                package.name(),
                wanted.unwrap_or("")
            ),
            exit::INVALID,
        )
        .hint(Some(format!("use --agent with one of: {}", ids.join(", "))))
    })
}

pub fn run(mut args: AgentArgs) -> anyhow::Result<u8> {
    let json = args.model.json;
    args.package = match crate::args::package::locate(&args.package) {
        Ok(path) => path,
        Err(f) => return Ok(f.report(json)),
    };
    args.project = crate::args::project::root(&args.project);
    if json && args.input.is_none() {
        return Ok(Failure::new(
            "USAGE",
            "--json needs --input: a session is for a person",
            exit::INVALID,
        )
        .hint(Some(
            "pass --input TEXT to resolve and dispatch one input".into(),
        ))
        .report(true));
    }
    if let Err(f) = model::check_record(&args.model) {
        return Ok(f.report(json));
    }
    let report = validate_path(&args.package, &ValidateOptions::default());
    let Some(package) = report.package.clone() else {
        if json {
            crate::ui::print_json(&report::to_json(&report))?;
        } else {
            eprint!("{}", report::to_text(&report, "package"));
        }
        return Ok(exit::INVALID);
    };
    let agent = match pick_agent(&package, args.agent.as_deref()) {
        Ok(a) => a,
        Err(f) => return Ok(f.report(json)),
    };
    let store = Store::open_default()?;
    let project = match store.project(&args.project) {
        Ok(p) => p,
        Err(e) => return Ok(Failure::from(&e).report(json)),
    };
    let mut session = Session {
        menu: Menu::of(agent, Surface::Terminal),
        args: &args,
        package: &package,
        agent,
        store,
        project,
        model: None,
        recorder: model::recorder_for(&args.model),
        chat: None,
        active_run: None,
        dismissed: false,
        runtime: crate::runtime::runtime()?,
    };
    match &args.input {
        Some(text) => session.once(text),
        None => Ok(session.converse()),
    }
}

struct Session<'a> {
    args: &'a AgentArgs,
    package: &'a Package,
    agent: &'a Agent,
    menu: Menu,
    store: Store,
    project: Project,
    model: Option<Model>,
    recorder: Option<Arc<Mutex<TraceRecorder>>>,
    chat: Option<(Chat, Conversation)>,
    /// The run this session works on (started here, or paused at a question).
    active_run: Option<String>,
    dismissed: bool,
    runtime: tokio::runtime::Runtime,
}

/// What a run is driven for.
enum Go<'x> {
    Start(&'x str),
    Continue(Box<Claimed>),
}

impl Session<'_> {
    fn json(&self) -> bool {
        self.args.model.json
    }

    /// The model, configured on first use: a menu needs none.
    fn model(&mut self) -> Result<Model, Failure> {
        match self.model.take() {
            Some(m) => Ok(m),
            None => model::load_model(&self.args.model, &self.store, Some(self.project.root())),
        }
    }

    /// One input, then exit.
    fn once(&mut self, text: &str) -> anyhow::Result<u8> {
        let command = match resolve(self.package, self.agent, &self.menu, text) {
            Ok(c) => c,
            Err(e) => return Ok(self.fail(None, route_failure(&e))),
        };
        let event = match self.dispatch(&command, false) {
            Ok(e) => e,
            Err(f) => return Ok(self.fail(Some(&command), f)),
        };
        self.save_trace()?;
        if !self.json() {
            return Ok(self.show(&command, event));
        }
        let mut out = json!({"command": command, "event": event.name()});
        let code = match event {
            Event::ShowMenu => {
                out["agent"] = json!(self.agent.id);
                out["menu"] = json!(self
                    .menu
                    .visible()
                    .map(|i| json!({"index": i.index, "description": i.description, "trigger": i.trigger.as_ref().or(i.cmd.as_ref())}))
                    .collect::<Vec<_>>());
                exit::OK
            }
            Event::Clarify | Event::Dismissed => exit::OK,
            Event::Note(note) => {
                out["note"] = json!(note);
                exit::OK
            }
            Event::Chat {
                assistant,
                usage,
                conversation,
            } => {
                out["conversationId"] = json!(conversation);
                out["assistant"] = json!(assistant);
                out["usage"] = json!(usage);
                exit::OK
            }
            Event::Run { result, .. } => match *result {
                Ok(finished) => {
                    out["run"] = finished.to_json();
                    run_exit(&finished)
                }
                Err(e) => {
                    let f = Failure::from(&e);
                    out["error"] = json!({"code": f.code, "message": f.message, "hint": f.hint});
                    f.exit
                }
            },
        };
        crate::ui::print_json(&out)?;
        Ok(code)
    }

    /// A failure; with `--json`, the command that led to it too.
    fn fail(&self, command: Option<&ResolvedCommand>, f: Failure) -> u8 {
        if !self.json() {
            return f.report(false);
        }
        let body = json!({
            "command": command,
            "error": {"code": f.code, "message": f.message, "hint": f.hint},
        });
        outln!(
            "{}",
            serde_json::to_string_pretty(&body).unwrap_or_else(|_| body.to_string())
        );
        f.exit
    }

    fn save_trace(&self) -> anyhow::Result<()> {
        if let (Some(path), Some(rec)) = (&self.args.model.record, &self.recorder) {
            runner::save_trace(path, rec)?;
        }
        Ok(())
    }

    /// The session: greeting and menu once, then one input after another until the agent is
    /// dismissed or the input ends.
    fn converse(&mut self) -> u8 {
        out!("{}", agent_ui::greeting(self.agent));
        outln!();
        out!("{}", agent_ui::menu_text(&self.menu));
        outln!("{}", agent_ui::SESSION_HELP);
        let prompt = format!("\n{}> ", self.agent.id);
        loop {
            let Some(line) = agent_ui::read_line(&prompt) else {
                outln!();
                return exit::OK;
            };
            let shown = match resolve(self.package, self.agent, &self.menu, &line) {
                Err(e) => {
                    route_failure(&e).report(false);
                    None
                }
                Ok(command) => match self.dispatch(&command, true) {
                    Ok(event) => Some(self.show(&command, event)),
                    Err(f) => Some(f.report(false)),
                },
            };
            if shown.is_some()
                && let Err(e) = self.save_trace()
            {
                eprintln!("error[STORE_IO_FAILED]: cannot record the trace: {e}");
            }
            if self.dismissed {
                outln!("{} is dismissed.", visible_line(&self.agent.metadata.name));
                return exit::OK;
            }
        }
    }

    fn dispatch(&mut self, command: &ResolvedCommand, person: bool) -> Result<Event, Failure> {
        match command.kind {
            Kind::ShowMenu => Ok(Event::ShowMenu),
            Kind::ClarifyChoice => Ok(Event::Clarify),
            Kind::DismissAgent => {
                self.dismissed = true;
                Ok(Event::Dismissed)
            }
            Kind::StartWorkflow => {
                let Some(workflow) = command.workflow_ref.as_ref() else {
                    return Err(Failure::new(
                        "UNKNOWN_WORKFLOW",
                        "the command names no workflow",
                        exit::INVALID,
                    ));
                };
                let id = workflow.workflow_id().to_string();
                self.drive(Go::Start(&id), person)
            }
            Kind::ResumeRun => self.resume(person),
            Kind::Chat | Kind::ExecScript | Kind::RunAction => {
                let text = texts::message(self.package, self.agent, command)
                    .map_err(|e| route_failure(&e))?;
                self.chat(&text)
            }
        }
    }

    /// Drives a run in this terminal. A person answers its questions at a prompt where the
    /// global commands work; without one the run stops at its first question.
    fn drive(&mut self, go: Go<'_>, person: bool) -> Result<Event, Failure> {
        let model = self.model()?;
        let said: Mutex<Option<RunCommand>> = Mutex::new(None);
        let menu_text = agent_ui::menu_text(&self.menu);
        let bar = Progress::new();
        let on_event = |e: EngineEvent| bar.event(e);
        let first_question = std::sync::atomic::AtomicBool::new(true);
        let mut ask = |question: &str| -> Option<String> {
            bar.suspend(|| {
                outln!("\n{}\n", visible(question));
                if first_question.swap(false, std::sync::atomic::Ordering::Relaxed) {
                    outln!("(/menu, /pause, /stop or /dismiss work here too)");
                }
                loop {
                    let line = agent_ui::read_line("> ")?;
                    match agent_ui::run_command(&line) {
                        Some(RunCommand::Menu) => {
                            out!("{menu_text}");
                            outln!("{}", agent_ui::RUN_HELP);
                            outln!("\n{}\n", visible(question));
                        }
                        Some(RunCommand::Resume) => {
                            outln!("the run is going: answer its question, or /pause");
                        }
                        Some(other) => {
                            if let Ok(mut s) = said.lock() {
                                *s = Some(other);
                            }
                            return None;
                        }
                        None if line.trim().is_empty() => {}
                        None => return Some(line),
                    }
                }
            })
        };
        let mut settings = Settings::new(model.as_dyn());
        settings.replay = model.replay();
        settings.record = self.recorder.clone();
        settings.budget = Some(model.budget(&self.args.model));
        settings.context = ContextArg::policy(self.args.model.context);
        if !self.json() {
            settings.on_event = Some(&on_event);
        }
        if person {
            settings.ask = Some(&mut ask);
        }
        let watcher = signals::watch(&self.runtime, settings.cancel.clone());
        let started = matches!(go, Go::Start(_));
        let result = match go {
            Go::Start(workflow) => self.runtime.block_on(runner::start(
                &self.store,
                StartRun {
                    package: &self.args.package,
                    project: &self.args.project,
                    workflow: Some(workflow),
                    agent: Some(&self.agent.id),
                },
                settings,
            )),
            Go::Continue(claimed) => {
                signals::name_run(&claimed.run().run_id);
                self.runtime
                    .block_on(runner::continue_claimed(*claimed, settings))
            }
        };
        if let Some(w) = watcher {
            w.abort();
        }
        bar.finish();
        self.model = Some(model);
        let said = said.into_inner().unwrap_or(None);
        if let Ok(f) = &result {
            self.active_run = match (&f.report.outcome, said) {
                (Outcome::Completed { .. }, _) | (_, Some(RunCommand::Stop)) => None,
                _ => Some(f.run.run_id.clone()),
            };
        }
        if said == Some(RunCommand::Dismiss) {
            self.dismissed = true;
        }
        Ok(Event::Run {
            started,
            result: Box::new(result),
            said,
        })
    }

    /// `run.resume`: the run this session works on, else the newest unfinished run of this
    /// package in the project. A run waiting for an answer asks its question again.
    fn resume(&mut self, person: bool) -> Result<Event, Failure> {
        let id = match self.active_run.clone() {
            Some(id) => id,
            None => self.latest_run()?.ok_or_else(|| {
                Failure::new(
                    "NO_RUN_TO_RESUME",
                    format!(
                        "no unfinished run of package '{}' in this project",
                        self.package.name()
                    ),
                    exit::INVALID,
                )
                .hint(Some("start one from the menu".into()))
            })?,
        };
        let run = self.project.get_run(&id).map_err(|e| Failure::from(&e))?;
        let short = id.get(..13).unwrap_or(&id).to_string();
        let continuation = match run.phase {
            Phase::Completed => {
                self.active_run = None;
                return Err(Failure::new(
                    "RUN_COMPLETE",
                    format!("run {short} is complete; there is nothing to resume"),
                    exit::INVALID,
                )
                .hint(Some(format!("talk to it with `baton chat {short} <TEXT>`"))));
            }
            Phase::WaitingUser => {
                let question = run
                    .waiting_for
                    .as_ref()
                    .and_then(|w| w.get("question"))
                    .and_then(Value::as_str)
                    .unwrap_or("The run waits for your answer.")
                    .to_string();
                if !person {
                    return Err(Failure::new(
                        "RUN_WAITING",
                        format!("run {short} waits for an answer: {question}"),
                        exit::WAITING,
                    )
                    .hint(Some(format!(
                        "answer it: baton answer {short} \"<your answer>\""
                    ))));
                }
                // Paused here, it stays this session's run; /stop lets it go.
                self.active_run = Some(id.clone());
                match self.ask_again(&question) {
                    Some(answer) => Continuation::Answer(answer),
                    None if self.active_run.is_some() => {
                        return Ok(Event::Note(format!(
                            "paused: run {short} waits for your answer; /resume continues it"
                        )));
                    }
                    None => {
                        return Ok(Event::Note(format!(
                            "stopped: run {short} waits for an answer; `baton answer {short} \"<your answer>\"` continues it"
                        )));
                    }
                }
            }
            _ => Continuation::Resume,
        };
        let claimed =
            runner::claim(&self.store, &id, continuation).map_err(|e| Failure::from(&e))?;
        self.drive(Go::Continue(Box::new(claimed)), person)
    }

    /// The question a waiting run asked, at a prompt; `None` if the person passes.
    fn ask_again(&mut self, question: &str) -> Option<String> {
        outln!("\n{}\n", visible(question));
        loop {
            let line = agent_ui::read_line("> ")?;
            match agent_ui::run_command(&line) {
                Some(RunCommand::Menu) => {
                    out!("{}", agent_ui::menu_text(&self.menu));
                    outln!("\n{}\n", visible(question));
                }
                Some(RunCommand::Resume) => {}
                Some(RunCommand::Dismiss) => {
                    self.dismissed = true;
                    return None;
                }
                Some(RunCommand::Stop) => {
                    self.active_run = None;
                    return None;
                }
                Some(RunCommand::Pause) => return None,
                None if line.trim().is_empty() => {}
                None => return Some(line),
            }
        }
    }

    fn latest_run(&self) -> Result<Option<String>, Failure> {
        let runs = self.project.list_runs().map_err(|e| Failure::from(&e))?;
        let prefix = format!("{}@", self.package.name());
        Ok(runs
            .into_iter()
            .find(|r| r.package_id.starts_with(&prefix) && r.phase != Phase::Completed)
            .map(|r| r.run_id))
    }

    /// One chat turn with the persona, logged in the store.
    fn chat(&mut self, text: &str) -> Result<Event, Failure> {
        let model = self.model()?;
        let result = self.chat_with(&model, text);
        self.model = Some(model);
        result
    }

    fn chat_with(&mut self, model: &Model, text: &str) -> Result<Event, Failure> {
        if self.chat.is_none() {
            let mut chat = Chat::new(
                self.agent,
                &self.menu,
                Some(model.budget(&self.args.model)),
                TokenCounter::for_model(model.as_dyn().model_name()),
            );
            let conversation = match &self.args.conversation {
                Some(id) => Conversation::open(&self.project, id, &self.agent.id, &mut chat),
                None => {
                    Conversation::create(&self.project, &self.package.install_id(), &self.agent.id)
                }
            }
            .map_err(|e| Failure::new(e.code(), e.to_string(), exit::INVALID))?;
            self.chat = Some((chat, conversation));
        }
        let Some((chat, conversation)) = self.chat.as_mut() else {
            return Err(Failure::new("FAILED", "no conversation", exit::FAILURE));
        };
        let cancel = CancellationToken::new();
        let watcher = signals::watch(&self.runtime, cancel.clone());
        let reply = self
            .runtime
            .block_on(chat.send(model.as_dyn(), text, &cancel));
        if let Some(w) = watcher {
            w.abort();
        }
        // The person's words are kept even when the model failed.
        conversation
            .sync(chat)
            .map_err(|e| Failure::new("STORE_IO_FAILED", e.to_string(), exit::FAILURE))?;
        let reply = reply.map_err(|e| chat_failure(&e))?;
        Ok(Event::Chat {
            assistant: reply.assistant,
            usage: reply.usage,
            conversation: conversation.id().to_string(),
        })
    }

    /// Shows what happened, for a person; returns the exit code.
    fn show(&mut self, command: &ResolvedCommand, event: Event) -> u8 {
        match event {
            Event::ShowMenu => {
                if let Some(reason) = command.reason.as_deref().filter(|r| r.contains("running")) {
                    outln!("{}.", visible(reason));
                }
                out!("{}", agent_ui::greeting(self.agent));
                out!("{}", agent_ui::menu_text(&self.menu));
                exit::OK
            }
            Event::Clarify => {
                out!(
                    "{}",
                    agent_ui::candidates_text(command.reason.as_deref(), &command.candidates)
                );
                exit::OK
            }
            Event::Dismissed => exit::OK,
            Event::Note(note) => {
                outln!("{}", visible(&note));
                exit::OK
            }
            Event::Chat { assistant, .. } => {
                outln!("{}", visible(&assistant));
                exit::OK
            }
            Event::Run { result, said, .. } => self.show_run(*result, said),
        }
    }

    fn show_run(&mut self, result: Result<Finished, RunnerError>, said: Option<RunCommand>) -> u8 {
        let finished = match result {
            Ok(f) => f,
            Err(RunnerError::InvalidPackage(r)) => {
                eprint!("{}", report::to_text(&r, "package"));
                return exit::INVALID;
            }
            Err(e) => return Failure::from(&e).report(false),
        };
        let id = finished.run.run_id.clone();
        let short = id.get(..13).unwrap_or(&id).to_string();
        let code = run_exit(&finished);
        match (&finished.report.outcome, said) {
            (Outcome::Completed { message }, _) => {
                outln!("{}\n", visible(message));
                outln!("completed: run {id}");
                if let Some(a) = finished.state.get("artifacts").and_then(Value::as_array) {
                    for path in a.iter().filter_map(Value::as_str) {
                        outln!("  {}", visible_line(path));
                    }
                }
            }
            (Outcome::Waiting { .. }, Some(RunCommand::Pause)) => {
                outln!("paused: run {short} waits for your answer; /resume continues it");
            }
            (Outcome::Waiting { .. }, Some(RunCommand::Stop)) => {
                outln!(
                    "stopped: run {short} waits for an answer; `baton answer {short} \"<your answer>\"` continues it"
                );
            }
            (Outcome::Waiting { question }, _) => {
                outln!("{}\n", visible(question));
                outln!(
                    "run {short} waits for your answer: /resume answers it here, or `baton answer {short} \"<your answer>\"`"
                );
            }
            (Outcome::Failed { code, .. }, _) if code == ABORTED => {
                outln!("stopped: run {short} is idle; /resume continues it");
            }
            (Outcome::Failed { code, message }, _) => {
                eprintln!("error[{}]: {}", visible_line(code), visible(message));
                eprintln!("  the run is kept; /resume retries it");
            }
        }
        code
    }
}

fn run_exit(f: &Finished) -> u8 {
    match &f.report.outcome {
        Outcome::Completed { .. } => exit::OK,
        Outcome::Waiting { .. } => exit::WAITING,
        Outcome::Failed { code, .. } if code == ABORTED => exit::STOPPED,
        Outcome::Failed { .. } => exit::FAILURE,
    }
}
