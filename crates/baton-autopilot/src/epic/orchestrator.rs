//! The loop: story after story (file order), phase after phase, each phase an ordinary baton
//! run. Deterministic Rust; the model only works inside a phase and gives its verdict in files.
//!
//! ```text
//! create-story → validate → dev ─verify─→ revision ─verify─→ code-review ─approved─→ next story
//!                            ↑   └──failed (output tail)──┘          │
//!                            └──────── changes-requested (summary) ──┘   (≤ max_review_cycles)
//! ```
//!
//! Every write happens in an order that a crash can interrupt anywhere: baton's progress file
//! is written last, and everything before it is idempotent, so a resumed loop redoes at most the
//! bookkeeping of the step it was in, and never a phase run that exists (it is resumed).

use super::agent_state::{AgentState, Question};
use super::config::AutopilotConfig;
use super::error::{EpicError, Result};
use super::events::EpicEvent;
use super::git;
use super::keys::{self, KeyKind};
use super::layout::{self, Layout};
use super::lock;
use super::models::{ModelSource, Models};
use super::phase::Phase;
use super::progress::{
    FailureDetail, InFlight, Instruction, Progress, RunRecord, StoryProgress, Target,
};
use super::review::{self, Review};
use super::run_state::{self, Failure, RunEpicState};
use super::specs::{self, Specs};
use super::sprint::{self, SprintStatus};
use super::verify;
use baton_engine::runner::{self, Continuation, Finished, RunnerError, Settings, StartRun};
use baton_engine::{EngineEvent, Outcome};
use baton_store::{Phase as RunPhase, Project, Store};
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The code of a stopped engine run (Ctrl-C).
const ABORTED: &str = baton_engine::driver::ABORTED;
/// Longest question text kept in an agent-state file.
const MAX_QUESTION_CHARS: usize = 4000;

/// What the command asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `baton epic run <EPIC> [--max-stories N]`
    Run {
        epic: String,
        max_stories: Option<u32>,
    },
    /// `baton epic story <STORY_KEY>`
    Story { key: String },
    /// `baton epic resume`
    Resume,
    /// `baton epic answer <STORY_KEY> [--question ID] <TEXT>`, then resume.
    Answer {
        story: String,
        question: Option<String>,
        text: String,
    },
}

/// Answers a question for a person (an interactive terminal); `None` pauses the loop.
pub type AskFn<'a> = &'a mut (dyn FnMut(&str, &Question) -> Option<String> + Send);

pub struct EpicSettings<'a> {
    pub source: ModelSource<'a>,
    /// A directory where each phase run's trace is recorded.
    pub record: Option<PathBuf>,
    pub ask: Option<AskFn<'a>>,
    pub on_event: Option<&'a (dyn Fn(EpicEvent) + Send + Sync)>,
    pub cancel: CancellationToken,
    /// Check everything and show the plan; write nothing, run nothing.
    pub dry_run: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum EpicOutcome {
    /// Nothing left to do under the target (the epic may be done, or `--max-stories` was reached).
    Done { epic_done: bool },
    /// Paused on a question (exit code 10).
    Waiting { story: String, question: Question },
    /// Paused on a failure (exit code 1).
    Paused { failure: FailureDetail },
    /// Paused by `baton epic stop`.
    Stopped,
    /// Stopped by Ctrl-C / SIGTERM between two steps.
    Interrupted,
    /// `--dry-run`: what would run.
    Planned { plan: Vec<PlannedStory> },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedStory {
    pub key: String,
    pub status: String,
    /// The phase the story would start at.
    pub phase: Phase,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EpicReport {
    pub epic_id: String,
    pub outcome: EpicOutcome,
    /// Stories finished by this invocation.
    pub stories_completed: Vec<String>,
    /// Phase runs driven by this invocation.
    pub phases_run: usize,
    /// Phase package, workflow and agent per phase.
    pub phases: Vec<(Phase, String, String)>,
}

/// Everything the loop works with.
struct Ctx<'a> {
    store: &'a Store,
    project: Project,
    layout: Layout,
    config: AutopilotConfig,
    specs: Specs,
    models: Models<'a>,
    ask: Option<AskFn<'a>>,
    on_event: Option<&'a (dyn Fn(EpicEvent) + Send + Sync)>,
    cancel: CancellationToken,
    epic: u32,
    state: RunEpicState,
    progress: Progress,
    completed_now: Vec<String>,
    phases_run: usize,
}

/// How a phase run ended, as the loop sees it.
enum PhaseEnd {
    Completed,
    Waiting(Question),
    Failed { code: String, message: String },
    Interrupted,
}

/// What the story step decided.
enum Next {
    /// Go on with the loop.
    Continue,
    Pause(EpicOutcome),
}

fn now() -> String {
    baton_store::time::now_rfc3339()
}

fn short(id: &str) -> &str {
    id.get(..13).unwrap_or(id)
}

/// Runs a command to its end: done, a question, a failure, a stop.
pub async fn execute<'a>(
    store: &'a Store,
    project: &Path,
    command: Command,
    settings: EpicSettings<'a>,
) -> Result<EpicReport> {
    let project_root = std::fs::canonicalize(project).map_err(|e| {
        EpicError::usage(
            "PROJECT_NOT_FOUND",
            format!("project {} cannot be opened: {e}", project.display()),
        )
    })?;
    let config = AutopilotConfig::load(&project_root)?;
    let layout = layout::resolve(&project_root, config.implementation_artifacts.as_deref())?;
    let sprint_shown = layout.rel_file(sprint::FILE_NAME);
    if !layout.dir.is_dir() {
        return Err(EpicError::usage(
            "SPRINT_STATUS_MISSING",
            format!("{sprint_shown} does not exist (no folder {})", layout.rel),
        )
        .hint("run BMAD's sprint-planning workflow first, or set [autopilot] implementation_artifacts in baton.toml"));
    }
    let _lock = lock::acquire(&layout.dir, &layout.rel)?;

    // Everything is read and checked before the first write.
    let sprint = SprintStatus::load(&layout.file(sprint::FILE_NAME), &sprint_shown)?;
    let state_shown = layout.rel_file(run_state::FILE_NAME);
    let state = RunEpicState::load(&layout.dir, &state_shown)?;
    let progress = Progress::load(&layout.dir, &layout.rel)?;
    let (epic, mut progress) = plan_target(&command, &sprint, state.as_ref(), progress)?;
    let epic_id = keys::epic_key(epic);
    let specs = specs::resolve(&config, &project_root, store)?;
    let phases = specs
        .values()
        .map(|s| (s.phase, s.shown.clone(), s.workflow.clone()))
        .collect();
    if config.git.commit {
        git::check(&project_root)?;
    }
    let models = Models::new(settings.source, settings.record);
    models.check()?;
    if let Some(sp) = &progress.story {
        AgentState::load(&layout.dir, &layout.rel, &sp.key)?;
        // A review run already made: its verdict is read on resume.
        if sp.phase == Phase::CodeReview && sp.run.is_some() {
            Review::load(&layout.dir, &layout.rel, &sp.key)?;
        }
    }
    if let Command::Answer {
        story,
        question,
        text,
    } = &command
    {
        check_answer(&layout, story, question.as_deref(), text)?;
    }
    if settings.dry_run {
        let plan = dry_plan(&sprint, &progress, epic);
        return Ok(EpicReport {
            epic_id,
            outcome: EpicOutcome::Planned { plan },
            stories_completed: Vec::new(),
            phases_run: 0,
            phases,
        });
    }

    // From here on, files change.
    cleanup_temp_files(&layout.dir);
    lock::clear_stop(&layout.dir)?;
    if let Command::Answer {
        story,
        question,
        text,
    } = &command
    {
        record_answer(&layout, story, question.as_deref(), text)?;
    }
    progress.failure = None;
    let mut state = match state {
        Some(s) if s.epic_id == epic_id => s,
        _ => RunEpicState::new(&epic_id, &now()),
    };
    state.running = true;
    if let Some(sp) = &progress.story {
        state.current_story_key = Some(sp.key.clone());
    }
    state.save(&layout.dir)?;
    progress.save(&layout.dir)?;
    let project = store
        .project(&project_root)
        .map_err(|e| EpicError::failure(e.code(), e.to_string()))?;
    let mut ctx = Ctx {
        store,
        project,
        layout,
        config,
        specs,
        models,
        ask: settings.ask,
        on_event: settings.on_event,
        cancel: settings.cancel,
        epic,
        state,
        progress,
        completed_now: Vec::new(),
        phases_run: 0,
    };
    let outcome = match ctx.run_loop().await {
        Ok(o) => o,
        Err(e) => {
            // The loop stops on an error it cannot handle: the files say so.
            ctx.state.running = false;
            let _ = ctx.state.save(&ctx.layout.dir);
            return Err(e);
        }
    };
    Ok(EpicReport {
        epic_id,
        outcome,
        stories_completed: ctx.completed_now,
        phases_run: ctx.phases_run,
        phases,
    })
}

/// Which epic the command is about, and the progress it continues or starts.
fn plan_target(
    command: &Command,
    sprint: &SprintStatus,
    state: Option<&RunEpicState>,
    progress: Option<Progress>,
) -> Result<(u32, Progress)> {
    let in_flight = progress
        .as_ref()
        .and_then(|p| p.story.as_ref().map(|s| (p.epic_id.clone(), s.key.clone())));
    let busy_elsewhere = |epic_id: &str, story: Option<&str>| -> Result<()> {
        if let Some((e, s)) = &in_flight
            && (e != epic_id || story.is_some_and(|k| k != s))
        {
            return Err(EpicError::usage(
                "EPIC_OTHER_IN_PROGRESS",
                format!("story {s} of {e} is in progress"),
            )
            .hint("finish it with `baton epic resume` (or `baton epic status` to see where it stands)"));
        }
        Ok(())
    };
    match command {
        Command::Run { epic, max_stories } => {
            let n = keys::parse_epic_id(epic).ok_or_else(|| {
                EpicError::usage("EPIC_ID_INVALID", format!("{epic:?} is not an epic id"))
                    .hint("name the epic as in sprint-status.yaml: epic-1 (or 1)")
            })?;
            let epic_id = keys::epic_key(n);
            if sprint.get(&epic_id).is_none() && sprint.stories_of(n).next().is_none() {
                return Err(epic_not_found(sprint, &epic_id));
            }
            busy_elsewhere(&epic_id, None)?;
            let target = Target::Epic {
                max_stories: *max_stories,
            };
            Ok((n, continue_or_new(progress, &epic_id, target)))
        }
        Command::Story { key } => {
            let entry = sprint
                .get(key)
                .filter(|e| matches!(e.kind, KeyKind::Story { .. }));
            let Some(KeyKind::Story { epic: n }) = entry.map(|e| e.kind.clone()) else {
                return Err(EpicError::usage(
                    "STORY_NOT_FOUND",
                    format!("{} has no story {key}", sprint.shown()),
                )
                .hint("story keys look like 1-2-user-login; `baton epic status` lists them"));
            };
            let epic_id = keys::epic_key(n);
            busy_elsewhere(&epic_id, Some(key))?;
            let target = Target::Story {
                story_key: key.clone(),
            };
            Ok((n, continue_or_new(progress, &epic_id, target)))
        }
        Command::Resume | Command::Answer { .. } => {
            if let Some(p) = progress {
                let n = keys::parse_epic_id(&p.epic_id).ok_or_else(|| {
                    EpicError::usage(
                        "EPIC_PROGRESS_INVALID",
                        format!("epic id {:?} in the progress file", p.epic_id),
                    )
                })?;
                return Ok((n, p));
            }
            // A state without our progress file (another autopilot's): go on with its epic.
            let Some(s) = state else {
                return Err(EpicError::usage(
                    "EPIC_NOT_STARTED",
                    "no epic has been started in this project (no .run-epic-state.json)",
                )
                .hint("start one with `baton epic run <EPIC>`"));
            };
            let n = keys::parse_epic_id(&s.epic_id).ok_or_else(|| {
                EpicError::usage(
                    "EPIC_ID_INVALID",
                    format!(
                        "{:?} (in .run-epic-state.json) is not an epic id",
                        s.epic_id
                    ),
                )
            })?;
            Ok((
                n,
                Progress::new(&s.epic_id, Target::Epic { max_stories: None }),
            ))
        }
    }
}

fn epic_not_found(sprint: &SprintStatus, epic_id: &str) -> EpicError {
    let epics: Vec<&str> = sprint
        .entries()
        .iter()
        .filter(|e| matches!(e.kind, KeyKind::Epic(_)))
        .map(|e| e.key.as_str())
        .collect();
    EpicError::usage(
        "EPIC_NOT_FOUND",
        format!("{} has no {epic_id}", sprint.shown()),
    )
    .hint(format!(
        "epics there: {}",
        if epics.is_empty() {
            "none".to_string()
        } else {
            epics.join(", ")
        }
    ))
}

/// The progress of the same epic goes on (its run history names traces, its story in flight
/// is finished first); another epic starts afresh. A new command counts its stories anew.
fn continue_or_new(progress: Option<Progress>, epic_id: &str, target: Target) -> Progress {
    match progress {
        Some(mut p) if p.epic_id == epic_id => {
            p.completed.clear();
            p.target = target;
            p
        }
        _ => Progress::new(epic_id, target),
    }
}

fn dry_plan(sprint: &SprintStatus, progress: &Progress, epic: u32) -> Vec<PlannedStory> {
    let mut plan = Vec::new();
    for e in sprint.stories_of(epic) {
        if let Target::Story { story_key } = &progress.target
            && *story_key != e.key
        {
            continue;
        }
        let phase = match &progress.story {
            Some(sp) if sp.key == e.key => Some(sp.phase),
            _ => Phase::start_for(e.normalized()),
        };
        if let Some(phase) = phase {
            plan.push(PlannedStory {
                key: e.key.clone(),
                status: e.status.clone(),
                phase,
            });
        }
    }
    plan
}

/// Removes temporary files a killed writer left in the artifacts folder.
fn cleanup_temp_files(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') && name.contains(".tmp-") && e.path().is_file() {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

fn pick_question<'s>(agent: &'s AgentState, id: Option<&str>, shown: &str) -> Result<&'s Question> {
    match id {
        Some(id) => {
            let q = agent.question(id).ok_or_else(|| {
                EpicError::usage(
                    "EPIC_QUESTION_NOT_FOUND",
                    format!("{shown} has no question {id:?}"),
                )
            })?;
            if q.answer.is_some() {
                return Err(EpicError::usage(
                    "EPIC_QUESTION_ANSWERED",
                    format!("question {id} of {shown} is already answered"),
                ));
            }
            Ok(q)
        }
        None => agent.pending().ok_or_else(|| {
            EpicError::usage(
                "EPIC_NO_QUESTION",
                format!("{shown} has no question waiting for an answer"),
            )
            .hint("`baton epic status` shows the pending questions")
        }),
    }
}

fn check_answer(layout: &Layout, story: &str, question: Option<&str>, text: &str) -> Result<()> {
    let shown = layout.rel_file(&format!("{story}{}", super::agent_state::SUFFIX));
    if text.trim().is_empty() {
        return Err(EpicError::usage("EPIC_ANSWER_EMPTY", "the answer is empty"));
    }
    let agent = AgentState::load(&layout.dir, &layout.rel, story)?.ok_or_else(|| {
        EpicError::usage(
            "EPIC_NO_QUESTION",
            format!("{shown} does not exist: story {story} has no question"),
        )
        .hint("`baton epic status` shows the pending questions")
    })?;
    pick_question(&agent, question, &shown).map(|_| ())
}

/// Writes the answer into the agent-state file (first, so no answer is ever lost).
fn record_answer(layout: &Layout, story: &str, question: Option<&str>, text: &str) -> Result<()> {
    let shown = layout.rel_file(&format!("{story}{}", super::agent_state::SUFFIX));
    let Some(mut agent) = AgentState::load(&layout.dir, &layout.rel, story)? else {
        return Err(EpicError::usage(
            "EPIC_NO_QUESTION",
            format!("{shown} does not exist"),
        ));
    };
    let id = pick_question(&agent, question, &shown)?.id.clone();
    agent.answer(&id, text);
    agent.save(&layout.dir)
}

impl<'a> Ctx<'a> {
    fn emit(&self, e: EpicEvent) {
        if let Some(f) = self.on_event {
            f(e);
        }
    }

    fn save(&self) -> Result<()> {
        self.state.save(&self.layout.dir)?;
        self.progress.save(&self.layout.dir)
    }

    fn sprint(&self) -> Result<SprintStatus> {
        SprintStatus::load(
            &self.layout.file(sprint::FILE_NAME),
            &self.layout.rel_file(sprint::FILE_NAME),
        )
    }

    /// Raises one status in `sprint-status.yaml` (re-read first; never lowered).
    fn raise(&self, key: &str, status: &str) -> Result<()> {
        let mut s = self.sprint()?;
        if s.get(key).is_none() {
            return Ok(());
        }
        if s.raise(key, status, &now())? {
            s.save()?;
            self.emit(EpicEvent::Status {
                key: key.to_string(),
                status: status.to_string(),
            });
        }
        Ok(())
    }

    fn pause(&mut self, outcome: EpicOutcome) -> Result<EpicOutcome> {
        self.state.running = false;
        self.save()?;
        Ok(outcome)
    }

    /// Pauses on a failure: the seed's `lastFailure`, our details, a fresh attempt next time.
    fn fail(
        &mut self,
        phase: Phase,
        code: &str,
        message: String,
        run_id: Option<String>,
    ) -> Result<EpicOutcome> {
        let story = self
            .progress
            .story
            .as_ref()
            .map(|s| s.key.clone())
            .unwrap_or_default();
        let at = now();
        self.state.last_failure = Some(Failure {
            phase: phase.as_str().to_string(),
            story_key: story.clone(),
            at,
        });
        let detail = FailureDetail {
            phase,
            story_key: story,
            code: code.to_string(),
            message,
            run_id,
        };
        self.progress.failure = Some(detail.clone());
        if let Some(sp) = self.progress.story.as_mut() {
            sp.attempt = 1;
            sp.run = None;
        }
        self.pause(EpicOutcome::Paused { failure: detail })
    }

    /// The story to work on: the one in progress, else the first of the epic (file order) that
    /// is not done, within the target.
    fn next_story(&mut self) -> Result<Option<(usize, usize)>> {
        let sprint = self.sprint()?;
        let stories: Vec<&sprint::Entry> = sprint.stories_of(self.epic).collect();
        let total = stories.len();
        let index_of = |key: &str| {
            stories
                .iter()
                .position(|e| e.key == key)
                .map_or(0, |i| i + 1)
        };
        if let Some(sp) = &self.progress.story {
            return Ok(Some((index_of(&sp.key), total)));
        }
        if let Target::Epic {
            max_stories: Some(max),
        } = self.progress.target
            && self.progress.completed.len() >= max as usize
        {
            return Ok(None);
        }
        for e in &stories {
            if let Target::Story { story_key } = &self.progress.target
                && *story_key != e.key
            {
                continue;
            }
            let status = e.normalized();
            if status == "done" {
                continue;
            }
            match Phase::start_for(status) {
                Some(phase) => {
                    self.progress.story = Some(StoryProgress::new(&e.key, phase));
                    return Ok(Some((index_of(&e.key), total)));
                }
                None => self.emit(EpicEvent::Note(format!(
                    "{} is {:?}, a status the autopilot does not run; skipped",
                    e.key, e.status
                ))),
            }
        }
        Ok(None)
    }

    async fn run_loop(&mut self) -> Result<EpicOutcome> {
        let mut announced: Option<String> = None;
        loop {
            if lock::stop_requested(&self.layout.dir) {
                lock::clear_stop(&self.layout.dir)?;
                return self.pause(EpicOutcome::Stopped);
            }
            if self.cancel.is_cancelled() {
                return self.pause(EpicOutcome::Interrupted);
            }
            let Some((index, total)) = self.next_story()? else {
                return self.finish();
            };
            let key = self
                .progress
                .story
                .as_ref()
                .map(|s| s.key.clone())
                .unwrap_or_default();
            if announced.as_deref() != Some(&key) {
                self.emit(EpicEvent::Story {
                    index,
                    total,
                    key: key.clone(),
                });
                announced = Some(key.clone());
                self.raise(&keys::epic_key(self.epic), "in-progress")?;
                if self.state.current_story_key.as_deref() != Some(&key) {
                    self.state.current_story_key = Some(key.clone());
                    self.save()?;
                }
            }
            // A question waiting in the story's agent-state file pauses the loop. (A file the
            // last phase damaged is that phase's failure, reported when it ends.)
            if let Ok(Some(agent)) = AgentState::load(&self.layout.dir, &self.layout.rel, &key)
                && let Some(q) = agent.pending()
            {
                let q = q.clone();
                match self.answer_now(&key, &q)? {
                    Some(_) => continue,
                    None => {
                        return self.pause(EpicOutcome::Waiting {
                            story: key,
                            question: q,
                        });
                    }
                }
            }
            match self.step().await? {
                Next::Continue => {}
                Next::Pause(outcome) => return Ok(outcome),
            }
        }
    }

    /// A person (or a recorded input) answers a pending question right away, if there is one.
    fn answer_now(&mut self, story: &str, q: &Question) -> Result<Option<String>> {
        let Some(ask) = self.ask.as_mut() else {
            return Ok(None);
        };
        let Some(answer) = ask(story, q).filter(|a| !a.trim().is_empty()) else {
            return Ok(None);
        };
        let mut agent = AgentState::load(&self.layout.dir, &self.layout.rel, story)?
            .unwrap_or_else(|| AgentState::new(story, "dev"));
        agent.answer(&q.id, &answer);
        agent.save(&self.layout.dir)?;
        Ok(Some(answer))
    }

    /// No story left under the target.
    fn finish(&mut self) -> Result<EpicOutcome> {
        let sprint = self.sprint()?;
        let all_done = sprint
            .stories_of(self.epic)
            .all(|e| e.normalized() == "done");
        let has_stories = sprint.stories_of(self.epic).next().is_some();
        if all_done && has_stories {
            self.raise(&keys::epic_key(self.epic), "done")?;
        }
        if matches!(self.progress.target, Target::Epic { .. }) {
            self.state.current_story_key = None;
        }
        self.pause(EpicOutcome::Done {
            epic_done: all_done && has_stories,
        })
    }

    /// Runs the current phase of the current story and moves the story on.
    async fn step(&mut self) -> Result<Next> {
        let Some(sp) = self.progress.story.clone() else {
            return Ok(Next::Continue);
        };
        let phase = sp.phase;
        let end = self.run_phase().await?;
        let run_id = self
            .progress
            .story
            .as_ref()
            .and_then(|s| s.run.as_ref())
            .and_then(|r| r.run_id.clone());
        let result = match &end {
            PhaseEnd::Completed => "completed",
            PhaseEnd::Waiting(_) => "waiting",
            PhaseEnd::Failed { .. } => "failed",
            PhaseEnd::Interrupted => "stopped",
        };
        if let Some(id) = &run_id {
            self.progress.set_result(id, result);
            self.emit(EpicEvent::PhaseEnded {
                story: sp.key.clone(),
                phase,
                run_id: id.clone(),
                result: result.to_string(),
            });
        }
        match end {
            PhaseEnd::Interrupted => Ok(Next::Pause(self.pause(EpicOutcome::Interrupted)?)),
            PhaseEnd::Waiting(question) => Ok(Next::Pause(self.pause(EpicOutcome::Waiting {
                story: sp.key.clone(),
                question,
            })?)),
            PhaseEnd::Failed { code, message } => self.phase_failed(phase, &code, message, run_id),
            PhaseEnd::Completed => self.phase_completed(phase, run_id).await,
        }
    }

    /// A failed phase is retried once (a fresh run), then the loop pauses.
    fn phase_failed(
        &mut self,
        phase: Phase,
        code: &str,
        message: String,
        run_id: Option<String>,
    ) -> Result<Next> {
        let Some(sp) = self.progress.story.as_mut() else {
            return Ok(Next::Continue);
        };
        if sp.attempt < 2 {
            let note = format!(
                "{phase} of {} failed ({code}: {message}); retrying once",
                sp.key
            );
            sp.attempt += 1;
            sp.run = None;
            self.emit(EpicEvent::Note(note));
            self.progress.save(&self.layout.dir)?;
            return Ok(Next::Continue);
        }
        Ok(Next::Pause(self.fail(phase, code, message, run_id)?))
    }

    /// Checks what a completed phase left, then moves the story on.
    async fn phase_completed(&mut self, phase: Phase, run_id: Option<String>) -> Result<Next> {
        let Some(key) = self.progress.story.as_ref().map(|s| s.key.clone()) else {
            return Ok(Next::Continue);
        };
        // The phase escalated in the agent-state file: pause; after the answer it runs again.
        let agent = match AgentState::load(&self.layout.dir, &self.layout.rel, &key) {
            Ok(a) => a,
            Err(e) => return self.contract_failed(phase, e, run_id),
        };
        if let Some(mut agent) = agent {
            if let Some(q) = agent.pending().cloned() {
                if let Some(sp) = self.progress.story.as_mut() {
                    sp.run = None;
                }
                self.progress.save(&self.layout.dir)?;
                return Ok(Next::Pause(self.pause(EpicOutcome::Waiting {
                    story: key,
                    question: q,
                })?));
            }
            // Seed 004: a finished phase leaves no question behind.
            if !agent.questions.is_empty() {
                agent.clear();
                agent.save(&self.layout.dir)?;
            }
        }
        if let Err(e) = self.check_contract(phase, &key) {
            return self.contract_failed(phase, e, run_id);
        }
        let now = now();
        match phase {
            Phase::CreateStory => {
                self.raise(&key, "ready-for-dev")?;
                self.advance(&key, phase, &now)
            }
            Phase::Validate => self.advance(&key, phase, &now),
            Phase::Dev | Phase::Revision => {
                if let Some(next) = self.verify(phase)? {
                    return Ok(next);
                }
                if phase == Phase::Dev {
                    if let Err(e) = self.check_diff(&key) {
                        return self.contract_failed(phase, e, run_id);
                    }
                    self.raise(&key, "review")?;
                }
                self.advance(&key, phase, &now)
            }
            Phase::CodeReview => self.reviewed(&key, run_id, &now),
        }
    }

    fn contract_failed(
        &mut self,
        phase: Phase,
        e: EpicError,
        run_id: Option<String>,
    ) -> Result<Next> {
        if let Some(id) = &run_id {
            self.progress.set_result(id, "failed");
        }
        self.phase_failed(phase, e.code, e.message, run_id)
    }

    /// Trust nothing: what each phase must have left behind.
    fn check_contract(&self, phase: Phase, key: &str) -> Result<()> {
        let story = self.layout.file(&format!("{key}.md"));
        let shown = self.layout.rel_file(&format!("{key}.md"));
        let needs_story = matches!(phase, Phase::CreateStory | Phase::Validate | Phase::Dev);
        if needs_story && std::fs::metadata(&story).map(|m| m.len()).unwrap_or(0) == 0 {
            return Err(EpicError::failure(
                "EPIC_PHASE_OUTPUT_MISSING",
                format!("the {phase} phase completed without the story file {shown}"),
            ));
        }
        Ok(())
    }

    /// Records the phase as done and moves to the next one.
    fn advance(&mut self, key: &str, phase: Phase, now: &str) -> Result<Next> {
        self.state.push_step(key, phase.as_str(), now);
        if let (Some(sp), Some(next)) = (self.progress.story.as_mut(), phase.next()) {
            sp.go(next);
            if phase == Phase::Dev {
                sp.instruction = None;
            }
        }
        self.save()?;
        Ok(Next::Continue)
    }

    /// Runs the verify commands after dev or revision; a failure sends the story back to dev.
    fn verify(&mut self, phase: Phase) -> Result<Option<Next>> {
        let commands = self.config.verify.commands.clone();
        if commands.is_empty() {
            return Ok(None);
        }
        let timeout = Duration::from_secs(self.config.verify.timeout_s);
        let on_event = self.on_event;
        let failed = verify::run_all(
            &commands,
            &self.layout.project,
            timeout,
            &self.cancel,
            |r| {
                if let Some(f) = on_event {
                    f(EpicEvent::Verify {
                        command: r.command.clone(),
                        passed: r.passed(),
                        millis: r.duration.as_millis(),
                    });
                }
            },
        );
        let Some(failed) = failed else {
            return Ok(None);
        };
        if failed.verdict == verify::Verdict::Cancelled {
            return Ok(Some(Next::Pause(self.pause(EpicOutcome::Interrupted)?)));
        }
        let max = self.config.verify.max_attempts;
        let Some(sp) = self.progress.story.as_mut() else {
            return Ok(None);
        };
        sp.verify_failures += 1;
        if sp.verify_failures > max {
            let message = format!(
                "verify failed {} times after {phase}; last: {}",
                sp.verify_failures,
                failed.report()
            );
            sp.verify_failures = 0;
            sp.go(Phase::Dev);
            return Ok(Some(Next::Pause(self.fail(
                phase,
                "VERIFY_FAILED",
                message,
                None,
            )?)));
        }
        let note = format!(
            "verify failed after {phase}; back to dev ({} of {max})",
            sp.verify_failures
        );
        sp.instruction = Some(Instruction::Verify {
            output: failed.report(),
        });
        sp.go(Phase::Dev);
        self.emit(EpicEvent::Note(note));
        self.progress.save(&self.layout.dir)?;
        Ok(Some(Next::Continue))
    }

    /// With `[autopilot.git] commit`, a dev phase must change something outside the artifacts.
    fn check_diff(&self, key: &str) -> Result<()> {
        if !self.config.git.commit {
            return Ok(());
        }
        let Some(baseline) = self
            .progress
            .story
            .as_ref()
            .and_then(|s| s.baseline.clone())
        else {
            return Ok(());
        };
        let changed = git::changes_since(&self.layout.project, &baseline, &self.layout.rel)?;
        if changed.is_empty() {
            return Err(EpicError::failure(
                "EPIC_EMPTY_DIFF",
                format!(
                    "the dev phase of {key} changed no file outside {} since {}",
                    self.layout.rel,
                    short(&baseline)
                ),
            ));
        }
        Ok(())
    }

    /// The code-review verdict.
    fn reviewed(&mut self, key: &str, run_id: Option<String>, now: &str) -> Result<Next> {
        let review = match Review::load(&self.layout.dir, &self.layout.rel, key) {
            Ok(Some(r)) => r,
            Ok(None) => {
                let e = EpicError::failure(
                    "EPIC_PHASE_OUTPUT_MISSING",
                    format!(
                        "the code-review phase completed without {}",
                        self.layout.rel_file(&format!("{key}{}", review::SUFFIX))
                    ),
                );
                return self.contract_failed(Phase::CodeReview, e, run_id);
            }
            Err(e) => return self.contract_failed(Phase::CodeReview, e, run_id),
        };
        self.state.push_step(key, Phase::CodeReview.as_str(), now);
        if review.approved {
            return self.story_done(key);
        }
        let max = self.config.max_review_cycles;
        let Some(sp) = self.progress.story.as_mut() else {
            return Ok(Next::Continue);
        };
        if sp.review_cycle >= max {
            let message = format!(
                "code review still requests changes after {} cycles: {}",
                sp.review_cycle, review.summary
            );
            sp.go(Phase::Dev);
            sp.review_cycle += 1;
            sp.instruction = Some(Instruction::Review {
                summary: review.summary,
            });
            return Ok(Next::Pause(self.fail(
                Phase::CodeReview,
                "REVIEW_CYCLES_EXHAUSTED",
                message,
                run_id,
            )?));
        }
        sp.review_cycle += 1;
        sp.verify_failures = 0;
        sp.instruction = Some(Instruction::Review {
            summary: review.summary,
        });
        sp.go(Phase::Dev);
        let note = format!("{key}: changes requested; review cycle {}", sp.review_cycle);
        self.emit(EpicEvent::Note(note));
        self.save()?;
        Ok(Next::Continue)
    }

    fn story_done(&mut self, key: &str) -> Result<Next> {
        if self.config.git.commit {
            let story = std::fs::read_to_string(self.layout.file(&format!("{key}.md"))).ok();
            git::commit_all(
                &self.layout.project,
                &git::commit_message(key, story.as_deref()),
            )?;
        }
        self.raise(key, "done")?;
        if matches!(self.progress.target, Target::Story { .. }) {
            self.state.last_story_completed = Some(key.to_string());
        }
        if !self.progress.completed.iter().any(|k| k == key) {
            self.progress.completed.push(key.to_string());
        }
        if !self.completed_now.iter().any(|k| k == key) {
            self.completed_now.push(key.to_string());
        }
        self.progress.story = None;
        self.save()?;
        Ok(Next::Continue)
    }

    /// The variables a phase run starts with.
    fn variables(&self, sp: &StoryProgress) -> Map<String, Value> {
        let mut v = Map::new();
        v.insert("storyKey".into(), json!(sp.key));
        v.insert("epicId".into(), json!(self.progress.epic_id));
        v.insert("phase".into(), json!(sp.phase.as_str()));
        v.insert("implementationArtifacts".into(), json!(self.layout.rel));
        v.insert(
            "storyFile".into(),
            json!(self.layout.rel_file(&format!("{}.md", sp.key))),
        );
        v.insert("reviewCycle".into(), json!(sp.review_cycle.to_string()));
        if sp.phase == Phase::Dev {
            match &sp.instruction {
                Some(Instruction::Review { summary }) => {
                    v.insert("reviewSummary".into(), json!(summary));
                }
                Some(Instruction::Verify { output }) => {
                    v.insert("verifyOutput".into(), json!(output));
                }
                None => {}
            }
        }
        v
    }

    /// A run of this phase created for `inflight` before a crash hid its id: same variables,
    /// created since, not yet known.
    fn adopt(&self, vars: &Map<String, Value>, since: &str) -> Result<Option<String>> {
        let runs = self
            .project
            .list_runs()
            .map_err(|e| EpicError::failure(e.code(), e.to_string()))?;
        for run in runs {
            if run.created_at.as_str() < since
                || self.progress.runs.iter().any(|r| r.run_id == run.run_id)
            {
                continue;
            }
            let Ok(read) = self.project.state_file(&run.run_id).read() else {
                continue;
            };
            let state = read.doc.to_value();
            let got = state.get("variables");
            let same = ["storyKey", "epicId", "phase", "reviewCycle"]
                .iter()
                .all(|k| got.and_then(|g| g.get(*k)) == vars.get(*k));
            if same {
                return Ok(Some(run.run_id));
            }
        }
        Ok(None)
    }

    /// Creates, adopts or continues the phase run and drives it to an end.
    async fn run_phase(&mut self) -> Result<PhaseEnd> {
        let Some(mut sp) = self.progress.story.clone() else {
            return Ok(PhaseEnd::Completed);
        };
        let phase = sp.phase;
        if sp.run.is_none() {
            // Before a fresh run of the phase.
            if phase == Phase::CodeReview {
                super::jsonfile::remove(&review::path(&self.layout.dir, &sp.key))?;
            }
            if phase == Phase::Dev {
                if self.config.git.commit && sp.baseline.is_none() {
                    sp.baseline = Some(git::head(&self.layout.project)?);
                }
                self.raise(&sp.key, "in-progress")?;
            }
            sp.run = Some(InFlight {
                n: self.progress.next_n(&sp.key, phase),
                run_id: None,
                since: now(),
                question: None,
            });
            self.progress.story = Some(sp.clone());
            self.progress.save(&self.layout.dir)?;
        }
        let spec = self.specs.get(&phase).cloned().ok_or_else(|| {
            EpicError::failure("EPIC_CONFIG_INVALID", format!("no package for {phase}"))
        })?;
        let vars = self.variables(&sp);
        let mut inflight = sp.run.clone().unwrap_or(InFlight {
            n: 1,
            run_id: None,
            since: now(),
            question: None,
        });
        let (claimed, resumed) = match inflight.run_id.clone() {
            Some(id) => match self.continuation(&sp, &mut inflight, &id)? {
                Ok(c) => (c, true),
                Err(end) => return Ok(end),
            },
            None => match self.adopt(&vars, &inflight.since)? {
                Some(id) => {
                    self.note_run(&sp, &mut inflight, &id)?;
                    match self.continuation(&sp, &mut inflight, &id)? {
                        Ok(c) => (c, true),
                        Err(end) => return Ok(end),
                    }
                }
                None => {
                    let start = StartRun {
                        package: &spec.package,
                        project: &self.layout.project,
                        workflow: Some(&spec.workflow),
                        agent: spec.agent.as_deref(),
                    };
                    let claimed = match runner::create(self.store, start, &vars) {
                        Ok(c) => c,
                        Err(e) => return Err(runner_error(e)),
                    };
                    let id = claimed.run().run_id.clone();
                    self.note_run(&sp, &mut inflight, &id)?;
                    ((claimed, Continuation::Start), false)
                }
            },
        };
        self.drive(sp, inflight, claimed, resumed).await
    }

    /// Records a phase run's id before it is driven.
    fn note_run(&mut self, sp: &StoryProgress, inflight: &mut InFlight, id: &str) -> Result<()> {
        inflight.run_id = Some(id.to_string());
        self.progress.record_run(RunRecord {
            story_key: sp.key.clone(),
            phase: sp.phase,
            n: inflight.n,
            run_id: id.to_string(),
            review_cycle: sp.review_cycle,
            result: String::new(),
        });
        if let Some(s) = self.progress.story.as_mut() {
            s.run = Some(inflight.clone());
        }
        self.progress.save(&self.layout.dir)
    }

    /// How an existing phase run goes on: resumed, answered, or already at an end.
    fn continuation(
        &mut self,
        sp: &StoryProgress,
        inflight: &mut InFlight,
        id: &str,
    ) -> Result<std::result::Result<(runner::Claimed, Continuation), PhaseEnd>> {
        let run = self
            .project
            .get_run(id)
            .map_err(|e| EpicError::failure(e.code(), e.to_string()))?;
        let continuation = match run.phase {
            RunPhase::Completed => return Ok(Err(PhaseEnd::Completed)),
            RunPhase::Failed => {
                let (code, message) = failure_of(run.waiting_for.as_ref());
                return Ok(Err(PhaseEnd::Failed { code, message }));
            }
            RunPhase::WaitingUser => {
                let question = run
                    .waiting_for
                    .as_ref()
                    .and_then(|w| w.get("question"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let node = run.current_node_id.clone().unwrap_or_default();
                let q = self.record_question(sp, inflight, id, &question, &node)?;
                let answer = match q.answer.clone() {
                    Some(a) => Some(a),
                    None => self.answer_now(&sp.key, &q)?,
                };
                match answer {
                    Some(answer) => Continuation::Answer(answer),
                    None => return Ok(Err(PhaseEnd::Waiting(q))),
                }
            }
            RunPhase::Idle | RunPhase::Running => Continuation::Resume,
        };
        let claimed = runner::claim(self.store, id, continuation.clone()).map_err(runner_error)?;
        Ok(Ok((claimed, continuation)))
    }

    /// Turns a run's question into the agent-state question (once per run).
    fn record_question(
        &mut self,
        sp: &StoryProgress,
        inflight: &mut InFlight,
        run_id: &str,
        question: &str,
        node: &str,
    ) -> Result<Question> {
        let mut agent = AgentState::load(&self.layout.dir, &self.layout.rel, &sp.key)?
            .unwrap_or_else(|| AgentState::new(&sp.key, sp.phase.as_str()));
        let context = format!(
            "The {} run {run_id} stopped at node {node} and waits for this answer.",
            sp.phase
        );
        let known = inflight
            .question
            .as_deref()
            .and_then(|id| agent.question(id))
            .or_else(|| {
                agent.questions.iter().find(|q| {
                    q.context.as_deref().is_some_and(|c| c.contains(run_id)) && q.answer.is_none()
                })
            })
            .cloned();
        let q = match known {
            Some(q) => q,
            None => {
                let text: String = if question.trim().is_empty() {
                    "(the run stopped without saying what it needs)".into()
                } else {
                    question.chars().take(MAX_QUESTION_CHARS).collect()
                };
                let q = Question {
                    id: agent.next_id(),
                    question: text,
                    context: Some(context),
                    answer: None,
                };
                agent.ask(sp.phase.as_str(), q.clone(), node, "human_review_required");
                agent.save(&self.layout.dir)?;
                q
            }
        };
        if inflight.question.as_deref() != Some(&q.id) {
            inflight.question = Some(q.id.clone());
            if let Some(s) = self.progress.story.as_mut() {
                s.run = Some(inflight.clone());
            }
            self.progress.save(&self.layout.dir)?;
        }
        Ok(q)
    }

    /// Drives a claimed phase run, answering its questions when an answer is at hand.
    async fn drive(
        &mut self,
        sp: StoryProgress,
        mut inflight: InFlight,
        claimed: (runner::Claimed, Continuation),
        resumed: bool,
    ) -> Result<PhaseEnd> {
        let (mut claimed, mut continuation) = claimed;
        let run_id = claimed.run().run_id.clone();
        self.emit(EpicEvent::Phase {
            story: sp.key.clone(),
            phase: sp.phase,
            run_id: run_id.clone(),
            review_cycle: sp.review_cycle,
            attempt: sp.attempt,
            resumed,
        });
        loop {
            self.phases_run += 1;
            let guard = OwnedFiles::snapshot(&self.layout);
            let finished = self.invoke(claimed, &continuation, &sp, inflight.n).await;
            guard.restore(&self.layout, self.on_event)?;
            let finished = match finished {
                Ok(f) => f,
                Err(e) => return Err(e),
            };
            match finished.report.outcome {
                Outcome::Completed { .. } => return Ok(PhaseEnd::Completed),
                Outcome::Failed { code, .. } if code == ABORTED => {
                    return Ok(PhaseEnd::Interrupted);
                }
                Outcome::Failed { code, message } => return Ok(PhaseEnd::Failed { code, message }),
                Outcome::Waiting { question } => {
                    let node = finished.run.current_node_id.clone().unwrap_or_default();
                    let q = self.record_question(&sp, &mut inflight, &run_id, &question, &node)?;
                    // A recorded input (replay) answers first, then a person.
                    let recorded = self.replayed_answer(&run_id, &sp, inflight.n)?;
                    let answer = match recorded {
                        Some(a) => {
                            let mut agent =
                                AgentState::load(&self.layout.dir, &self.layout.rel, &sp.key)?
                                    .unwrap_or_else(|| AgentState::new(&sp.key, sp.phase.as_str()));
                            agent.answer(&q.id, &a);
                            agent.save(&self.layout.dir)?;
                            Some(a)
                        }
                        None => self.answer_now(&sp.key, &q)?,
                    };
                    let Some(answer) = answer else {
                        return Ok(PhaseEnd::Waiting(q));
                    };
                    if let Ok(m) = self.models.for_run(&run_id, &sp.key, sp.phase, inflight.n) {
                        m.record_answer(&answer, Some(&node));
                    }
                    continuation = Continuation::Answer(answer);
                    claimed = runner::claim(self.store, &run_id, continuation.clone())
                        .map_err(runner_error)?;
                }
            }
        }
    }

    /// The recorded user input that comes next in a replayed phase trace.
    fn replayed_answer(
        &mut self,
        run_id: &str,
        sp: &StoryProgress,
        n: u32,
    ) -> Result<Option<String>> {
        if !self.models.is_replay() {
            return Ok(None);
        }
        let m = self.models.for_run(run_id, &sp.key, sp.phase, n)?;
        Ok(m.replay.as_ref().and_then(|r| r.take_user_input()))
    }

    /// One engine invocation of a phase run.
    async fn invoke(
        &mut self,
        claimed: runner::Claimed,
        continuation: &Continuation,
        sp: &StoryProgress,
        n: u32,
    ) -> Result<Finished> {
        let run_id = claimed.run().run_id.clone();
        let live = self.models.live();
        let paths = self.project.run_paths(&run_id);
        let m = self.models.for_run(&run_id, &sp.key, sp.phase, n)?;
        // A replay cursor is put where the run stands before an answer continues it; a resume
        // does that itself.
        if let (Some(r), Continuation::Answer(_), false) = (&m.replay, continuation, m.positioned)
            && let Ok(restored) = baton_engine::conversation::restore(&paths.conversation_log)
        {
            r.fast_forward(restored.complete_turns, restored.answers);
            r.skip_user_input();
        }
        m.positioned = true;
        let model: &dyn baton_llm::ChatModel = match (&m.replay, live) {
            (Some(r), _) => r,
            (None, Some(l)) => l,
            (None, None) => {
                return Err(EpicError::failure(
                    "EPIC_MODEL_MISSING",
                    "no model to run the phase",
                ));
            }
        };
        let on_event = self.on_event;
        let forward = move |e: EngineEvent| {
            if let Some(f) = on_event {
                f(EpicEvent::Engine(e));
            }
        };
        let mut settings = Settings::new(model);
        // The loop answers questions itself (so each is recorded in the agent-state file); the
        // replay is only handed over to resume, which positions it.
        settings.replay = match continuation {
            Continuation::Resume => m.replay.as_ref(),
            _ => None,
        };
        settings.record = m.recorder.clone();
        settings.cancel = self.cancel.clone();
        settings.on_event = Some(&forward);
        let finished = runner::continue_claimed(claimed, settings)
            .await
            .map_err(runner_error);
        m.save()?;
        finished
    }
}

/// A runner error as the loop reports it (its code kept).
fn runner_error(e: RunnerError) -> EpicError {
    let usage = e.is_usage();
    let code = e.code();
    let mut err = if usage {
        EpicError::usage(code, e.to_string())
    } else {
        EpicError::failure(code, e.to_string())
    };
    err.hint = e.hint();
    err
}

fn failure_of(waiting_for: Option<&Value>) -> (String, String) {
    let err = waiting_for.and_then(|w| w.get("error"));
    let code = err
        .and_then(|e| e.get("code"))
        .and_then(Value::as_str)
        .unwrap_or("ENGINE_FAILED")
        .to_string();
    let message = err
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .unwrap_or("the phase run failed")
        .to_string();
    (code, message)
}

/// The files only the orchestrator writes. A phase run that changes them (a model is not to be
/// trusted) has its change undone.
struct OwnedFiles {
    saved: Vec<(PathBuf, Option<Vec<u8>>)>,
}

impl OwnedFiles {
    fn snapshot(layout: &Layout) -> OwnedFiles {
        let saved = [
            sprint::FILE_NAME,
            run_state::FILE_NAME,
            super::progress::FILE_NAME,
        ]
        .iter()
        .map(|name| {
            let p = layout.file(name);
            let bytes = std::fs::read(&p).ok();
            (p, bytes)
        })
        .collect();
        OwnedFiles { saved }
    }

    fn restore(
        &self,
        layout: &Layout,
        on_event: Option<&(dyn Fn(EpicEvent) + Send + Sync)>,
    ) -> Result<()> {
        for (path, before) in &self.saved {
            let now = std::fs::read(path).ok();
            if &now == before {
                continue;
            }
            match before {
                Some(bytes) => baton_store::durable::atomic_write(path, bytes)?,
                None => super::jsonfile::remove(path)?,
            }
            if let Some(f) = on_event {
                let name = path
                    .strip_prefix(&layout.project)
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                f(EpicEvent::Note(format!(
                    "the phase run changed {name}, which only the orchestrator writes; the change was undone"
                )));
            }
        }
        Ok(())
    }
}
