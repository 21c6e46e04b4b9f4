//! `baton epic run | story | resume | answer`: everything is read and checked before the first
//! write (a refused command leaves the project as it was), then the loop runs (see
//! [`super::story`]) until the epic is done, a question or a failure pauses it, or it is stopped.

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
use super::progress::{FailureDetail, Progress, Target};
use super::review::Review;
use super::run_state::{self, RunEpicState};
use super::specs;
use super::sprint::{self, SprintStatus};
use baton_store::Store;
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

use super::story::Ctx;

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
    /// Hard budgets: `tokens`/`usd` on the epic, `tokens_per_story`/`usd_per_story` on each
    /// story (see [`baton_engine::spend`]).
    pub budget: baton_engine::spend::BudgetConfig,
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
    /// Paused before a model call that could cross a budget (exit code 12): the phase run is
    /// idle and a resume with a larger budget goes on with it. `budget` is `{scope, kind,
    /// limit, spent, estimate}`.
    Budget {
        story: String,
        phase: Phase,
        run_id: Option<String>,
        message: String,
        budget: serde_json::Value,
    },
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

pub(super) fn now() -> String {
    baton_store::time::now_rfc3339()
}

pub(super) fn short(id: &str) -> &str {
    id.get(..13).unwrap_or(id)
}

/// The project, its baton.toml and the folder of sprint-status.yaml.
fn open(project: &Path) -> Result<(PathBuf, AutopilotConfig, Layout)> {
    let project_root = std::fs::canonicalize(project).map_err(|e| {
        EpicError::usage(
            "PROJECT_NOT_FOUND",
            format!("project {} cannot be opened: {e}", project.display()),
        )
        .hint("pass --project the directory that holds your BMAD project")
    })?;
    let config = AutopilotConfig::load(&project_root)?;
    let layout = layout::resolve(&project_root, config.implementation_artifacts.as_deref())?;
    if !layout.dir.is_open() {
        let sprint_shown = layout.rel_file(sprint::FILE_NAME);
        return Err(EpicError::usage(
            "SPRINT_STATUS_MISSING",
            format!("{sprint_shown} does not exist (no folder {})", layout.rel),
        )
        .hint("run BMAD's sprint-planning workflow first, or set [autopilot] implementation_artifacts in baton.toml"));
    }
    Ok((project_root, config, layout))
}

/// The checks of [`execute`] that need no model and write nothing: the project, baton.toml,
/// sprint-status.yaml, the loop's own files, the epic or story named and an answer's
/// question. A command runs them before it looks for a model, so a missing file is said
/// first (`execute` checks again, under the lock).
pub fn preflight(project: &Path, command: &Command) -> Result<()> {
    let (_, _, layout) = open(project)?;
    let sprint_shown = layout.rel_file(sprint::FILE_NAME);
    let sprint = SprintStatus::load(&layout.file(sprint::FILE_NAME), &sprint_shown)?;
    let state_shown = layout.rel_file(run_state::FILE_NAME);
    let state = RunEpicState::load(&layout.dir, &state_shown)?;
    let progress = Progress::load(&layout.dir, &layout.rel)?;
    plan_target(command, &sprint, state.as_ref(), progress)?;
    if let Command::Answer {
        story,
        question,
        text,
    } = command
    {
        check_answer(&layout, story, question.as_deref(), text)?;
    }
    Ok(())
}

/// Runs a command to its end: done, a question, a failure, a stop.
pub async fn execute<'a>(
    store: &'a Store,
    project: &Path,
    command: Command,
    settings: EpicSettings<'a>,
) -> Result<EpicReport> {
    execute_parallel(store, project, command, settings, None).await
}

/// [`execute`] with `--parallel N` (`None`: `[autopilot] parallel`, or what a parallel epic
/// being resumed used; 1 runs one story after the other).
pub async fn execute_parallel<'a>(
    store: &'a Store,
    project: &Path,
    command: Command,
    settings: EpicSettings<'a>,
    parallel: Option<u32>,
) -> Result<EpicReport> {
    let (project_root, config, layout) = open(project)?;
    let sprint_shown = layout.rel_file(sprint::FILE_NAME);
    // The folder this project's epics work in was recorded when the first one started.
    super::layout_record::check(store, &project_root, &layout)?;
    let started = std::time::SystemTime::now();
    let _lock = lock::acquire(&layout.dir, &layout.rel)?;

    // Everything is read and checked before the first write.
    let sprint = SprintStatus::load(&layout.file(sprint::FILE_NAME), &sprint_shown)?;
    let state_shown = layout.rel_file(run_state::FILE_NAME);
    let state = RunEpicState::load(&layout.dir, &state_shown)?;
    let progress = Progress::load(&layout.dir, &layout.rel)?;
    let (epic, mut progress) = plan_target(&command, &sprint, state.as_ref(), progress)?;
    let epic_id = keys::epic_key(epic);
    let specs = specs::resolve(&config, &project_root, store)?;
    let tools = baton_tools::ToolsConfig::load(Some(store.home()), Some(&project_root))
        .map_err(|e| EpicError::usage(e.code(), e.to_string()).hint(e.hint()))?;
    let phases = specs
        .values()
        .map(|s| (s.phase, s.shown.clone(), s.workflow.clone()))
        .collect();
    if config.git.commit {
        git::check(&project_root)?;
    }
    if let Some(model) = super::models::live_of(&settings.source) {
        super::budget::check_price(&settings.budget, model.price(), model.model_name()).map_err(
            |m| {
                EpicError::usage(baton_engine::spend::BUDGET_PRICE_UNKNOWN, m).hint(
                    "give the model a price ([models.\"<name>\"] price in baton.toml), or budget in tokens",
                )
            },
        )?;
    }
    let budget = settings.budget;
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
    lock::clear_stale_stop(&layout.dir, started)?;
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
    super::layout_record::save(store, &project_root, &layout)?;
    let mut ctx = Ctx {
        store,
        project,
        layout,
        config,
        specs,
        tools,
        models,
        ask: settings.ask,
        on_event: settings.on_event,
        cancel: settings.cancel,
        budget,
        epic,
        state,
        progress,
        completed_now: Vec::new(),
        phases_run: 0,
    };
    // `--parallel N`: the stories in flight each in a worktree (see `parallel`).
    let slots = parallel
        .or_else(|| super::parallel::resumed_slots(&ctx.layout.dir, &epic_id))
        .unwrap_or(ctx.config.parallel.stories);
    let looped = match slots > 1 && ctx.stories.is_none() {
        true => super::parallel::run(&mut ctx, slots, started).await,
        false => ctx.run_loop().await,
    };
    let outcome = match looped {
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

/// Removes temporary files a killed writer left in the artifacts folder. A writer that still
/// lives keeps its file: `baton epic stop` writes its request while the loop holds the project.
fn cleanup_temp_files(dir: &layout::Artifacts) {
    for name in dir.names(100_000) {
        if name.starts_with('.')
            && name.contains(".tmp-")
            && !writer_lives(&name)
            && dir.file(&name).regular_len().is_some()
        {
            let _ = dir.remove(&name);
        }
    }
}

/// Whether the process named in a temporary file's name (`.{file}.tmp-{pid}-{n}`) still runs.
fn writer_lives(temp_name: &str) -> bool {
    let Some((_, after)) = temp_name.rsplit_once(".tmp-") else {
        return false;
    };
    let pid = after.split('-').next().and_then(|p| p.parse::<u32>().ok());
    pid.is_some_and(|pid| pid != 0 && Path::new(&format!("/proc/{pid}")).exists())
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

#[cfg(test)]
mod tests {
    #[test]
    fn a_living_writers_temporary_file_is_kept() {
        let me = std::process::id();
        assert!(super::writer_lives(&format!(".run-epic.stop.tmp-{me}-0")));
        assert!(!super::writer_lives(".run-epic.stop.tmp-4294967295-0"));
        assert!(!super::writer_lives(".run-epic.stop.tmp-x-0"));
        assert!(!super::writer_lives(".plain"));
    }
}
