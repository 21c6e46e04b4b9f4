//! `baton epic run | story | resume | answer`: everything is read and checked before the first
//! write (a refused command leaves the project as it was), then the loop runs (see
//! [`super::story`]) until the epic is done, a question or a failure pauses it, or it is stopped.

use super::config::AutopilotConfig;
use super::consent;
use super::error::{EpicError, Result};
use super::events::EpicEvent;
use super::models::{ModelSource, Models};
use super::pipeline::Pipeline;
use super::progress::{Progress, Target};
use super::specs;
use baton_bmad::keys::{self, KeyKind};
use baton_bmad::layout::{self, Layout};
use baton_bmad::phase::Phase;
use baton_bmad::sprint::{self, SprintStatus};
use baton_epic_state::agent_state::{AgentState, Question};
use baton_epic_state::findings::{self, Findings};
use baton_epic_state::lock;
use baton_epic_state::review::Review;
use baton_epic_state::run_state::{self, RunEpicState};
use baton_store::Store;
use baton_worktree::git;
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

pub use super::outcome::{AskFn, Command, EpicOutcome, PlannedStory};
use super::progress::now;
use super::stories_mode;
use crate::ctx::Ctx;

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
pub struct EpicReport {
    pub epic_id: String,
    pub outcome: EpicOutcome,
    /// Stories finished by this invocation.
    pub stories_completed: Vec<String>,
    /// Phase runs driven by this invocation.
    pub phases_run: usize,
    /// What runs each phase: package and workflow, or the installed BMAD skill or workflow and
    /// how it is rendered.
    pub phases: Vec<specs::PhaseLine>,
    /// The pipeline the epic runs: where it came from, why, and what runs each phase.
    pub pipeline: super::pipeline::PipelineView,
    /// What the plan cannot show, read after the command: the epic's keys whose value BMAD
    /// does not define, legacy values, retrospective action items, and every key of the file
    /// outside BMAD's grammar.
    pub findings: Findings,
    /// Stories of the epic another `baton epic run` would run without asking (not done, in a
    /// status BMAD defines, the epic too).
    pub runnable_left: usize,
    /// `[autopilot] retrospective = true`: the epic's retrospective, as the files say now.
    pub retrospective: Option<super::retrospective::RetroPlan>,
}

/// The project, its baton.toml and the folder of sprint-status.yaml (which a stories-mode
/// command, `stories`, may not have yet).
fn open(project: &Path, stories: bool) -> Result<(PathBuf, AutopilotConfig, Layout)> {
    let project_root = std::fs::canonicalize(project).map_err(|e| {
        EpicError::usage(
            "PROJECT_NOT_FOUND",
            format!("project {} cannot be opened: {e}", project.display()),
        )
        .hint("pass --project the directory that holds your BMAD project")
    })?;
    let config = AutopilotConfig::load(&project_root)?;
    let layout = layout::resolve(&project_root, config.implementation_artifacts.as_deref())?;
    // A ticket-tree project (BMAD 7) may have no implementation artifacts yet, as stories mode.
    if !layout.dir.is_open() && !stories && !super::tickets_mode::walk::present(&project_root) {
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
    let (root, config, layout) = open(project, matches!(command, Command::Stories { .. }))?;
    // The pipeline and the installed skills it runs (rendered: a halt, a setting BMAD refuses)
    // are refused before anything else, the model included, is asked.
    specs::check_methods(&config, &root, &Pipeline::for_project(&config, &root)?)?;
    super::notify::config(&root)?;
    super::retrospective::check(&config, &root)?;
    let state_shown = layout.rel_file(run_state::FILE_NAME);
    let state = RunEpicState::load(&layout.dir, &state_shown)?;
    let progress = Progress::load(&layout.dir, &layout.rel)?;
    match stories_mode::walk::select(None, &root, command, state.as_ref())? {
        Some(run) => {
            let progress = run.plan_target(command, progress)?;
            run.check(&progress)?;
        }
        None if let Some(run) = super::tickets_mode::walk::select(&root, &layout, command)? => {
            run.check(&root, &run.plan_target(command, progress)?)?;
        }
        None => {
            let sprint_shown = layout.rel_file(sprint::FILE_NAME);
            let sprint = SprintStatus::load(&layout.file(sprint::FILE_NAME), &sprint_shown)?;
            plan_target(command, &sprint, state.as_ref(), progress)?;
        }
    }
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
    let options = LoopOptions {
        parallel,
        ..LoopOptions::default()
    };
    execute_with(store, project, command, settings, options, None).await
}

/// What an invocation asks of the loop besides its [`EpicSettings`] (each `None`: what the
/// epic or its runs already use).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoopOptions {
    /// `--parallel N` (`None`: `[autopilot] parallel`, or what a parallel epic being resumed
    /// used).
    pub parallel: Option<u32>,
    /// `--context node|full`: the history every phase run of this invocation is driven with,
    /// remembered by each run as `baton run` does (`None`: what a run remembers, `node` for a
    /// new one).
    pub context: Option<baton_engine::ContextPolicy>,
    /// `--executor NAME`: who runs every phase that names no executor of its own (over
    /// `[autopilot] executor`).
    pub executor: Option<baton_executor::ExecutorKind>,
}

/// [`execute`] with [`LoopOptions`], the stories run here or (`queue`) by queue workers.
pub async fn execute_with_options<'a>(
    store: &'a Store,
    project: &Path,
    command: Command,
    settings: EpicSettings<'a>,
    options: LoopOptions,
    queue: Option<super::queued::QueueTarget>,
) -> Result<EpicReport> {
    execute_with(store, project, command, settings, options, queue).await
}

/// [`execute_parallel`] with the stories run by queue workers (`--queue`; see
/// [`super::queued`]): up to `parallel` story units in flight.
pub async fn execute_queued<'a>(
    store: &'a Store,
    project: &Path,
    command: Command,
    settings: EpicSettings<'a>,
    parallel: Option<u32>,
    queue: super::queued::QueueTarget,
) -> Result<EpicReport> {
    let options = LoopOptions {
        parallel,
        ..LoopOptions::default()
    };
    execute_with(store, project, command, settings, options, Some(queue)).await
}

async fn execute_with<'a>(
    store: &'a Store,
    project: &Path,
    command: Command,
    settings: EpicSettings<'a>,
    options: LoopOptions,
    queue: Option<super::queued::QueueTarget>,
) -> Result<EpicReport> {
    let parallel = options.parallel;
    let stories_command = matches!(command, Command::Stories { .. });
    let (project_root, mut config, mut layout) = open(project, stories_command)?;
    if let Some(executor) = options.executor {
        config.executor = Some(executor.as_str().to_string());
    }
    // The folder this project's epics work in was recorded when the first one started.
    baton_epic_state::layout_record::check(store, &project_root, &layout)?;
    let tickets = super::tickets_mode::walk::select(&project_root, &layout, &command)?;
    if (stories_command || tickets.is_some()) && !layout.dir.is_open() && !settings.dry_run {
        // A stories-mode project may have no implementation artifacts yet: the loop's own
        // files go there.
        stories_mode::walk::create_artifacts(&project_root, &layout.rel)?;
        layout = layout::resolve(&project_root, config.implementation_artifacts.as_deref())?;
    }
    let started = std::time::SystemTime::now();
    let _lock = match layout.dir.is_open() {
        true => Some(lock::acquire(&layout.dir, &layout.rel)?),
        false => None,
    };

    // Everything is read and checked before the first write.
    let state_shown = layout.rel_file(run_state::FILE_NAME);
    let state = RunEpicState::load(&layout.dir, &state_shown)?;
    let progress = Progress::load(&layout.dir, &layout.rel)?;
    let stories = stories_mode::walk::select(Some(store), &project_root, &command, state.as_ref())?;
    let (epic, mut progress, sprint) = match &stories {
        Some(run) => {
            let progress = run.plan_target(&command, progress)?;
            run.check(&progress)?;
            (0, progress, None)
        }
        None if let Some(run) = &tickets => {
            let progress = run.plan_target(&command, progress)?;
            run.check(&project_root, &progress)?;
            (0, progress, None)
        }
        None => {
            let sprint_shown = layout.rel_file(sprint::FILE_NAME);
            let sprint = SprintStatus::load(&layout.file(sprint::FILE_NAME), &sprint_shown)?;
            let (epic, progress) = plan_target(&command, &sprint, state.as_ref(), progress)?;
            (epic, progress, Some(sprint))
        }
    };
    let epic_id = match &stories {
        Some(run) => run.epic_id(),
        None if let Some(run) = &tickets => run.epic_id(),
        None => keys::epic_key(epic),
    };
    if queue.is_some() && (stories.is_some() || tickets.is_some()) {
        return Err(EpicError::usage(
            "EPIC_QUEUE_UNSUPPORTED",
            "--queue runs the stories of sprint-status.yaml, not a stories.yaml folder",
        ));
    }
    if queue.is_some() && config.publish.push {
        // Queued stories are merged by the queue's orchestrator, which does not publish yet.
        return Err(EpicError::usage(
            "EPIC_QUEUE_UNSUPPORTED",
            "[autopilot.publish] push is not supported with --queue yet",
        )
        .hint("run the epic without --queue (--parallel N publishes), or set push = false"));
    }
    if queue.is_none() && !settings.dry_run {
        // An epic whose stories run on the queue goes on there (its units are in flight).
        super::queued::refuse_local(&layout, &epic_id)?;
    }
    let pipeline = epic_pipeline(&config, &project_root, &layout, &epic_id)?;
    let specs = specs::resolve(&config, &project_root, store, &pipeline)?;
    let notify_config = super::notify::config(&project_root)?;
    // Run by the loop on this machine: a queued epic's orchestrator calls no model.
    let retro = super::retrospective::check(&config, &project_root)?.filter(|_| queue.is_none());
    let mut tools = baton_tools::ToolsConfig::load(Some(store.home()), Some(&project_root))
        .map_err(|e| EpicError::usage(e.code(), e.to_string()).hint(e.hint()))?;
    super::method_consent::protect(&mut tools, &layout.rel, &specs);
    let phases = specs::lines(&specs, &pipeline);
    let pipeline_view = specs::view(&pipeline, &specs);
    if config.git.commit || config.publish.push {
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
    if queue.is_some() {
        // A dry run too: it says what the queued run would refuse.
        super::queued::orchestrate::preflight(&project_root, &specs)?;
    }
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
        let (plan, (findings, runnable_left)) = match (&stories, &sprint) {
            (Some(run), _) => (run.dry_plan(&progress)?, run.afterwards()),
            (None, None) if let Some(run) = &tickets => (
                run.dry_plan(&project_root, &progress)?,
                run.afterwards(&project_root),
            ),
            (None, Some(sprint)) => (
                dry_plan(&layout, sprint, &progress, epic, &pipeline),
                afterwards(&layout, sprint, epic),
            ),
            (None, None) => (Vec::new(), (Findings::default(), 0)),
        };
        let mut plan = plan;
        for p in &mut plan {
            p.phase = pipeline.nearest(p.phase);
        }
        // `baton epic run --parallel N`: the same schedule the loop would follow.
        let parallel = match (&sprint, &command) {
            (Some(sprint), Command::Run { .. }) => {
                super::parallel_board::view(&super::parallel_board::Inputs {
                    store_home: store.home(),
                    layout: &layout,
                    config: &config,
                    sprint,
                    epic,
                    slots: parallel,
                    progress: Some(&progress),
                    asker: super::parallel_board::Asker::DryRun,
                })?
            }
            _ => None,
        };
        return Ok(EpicReport {
            epic_id,
            outcome: EpicOutcome::Planned { plan, parallel },
            stories_completed: Vec::new(),
            phases_run: 0,
            phases,
            pipeline: pipeline_view,
            findings,
            runnable_left,
            retrospective: retro_plan(retro.as_ref(), &layout, sprint.as_ref(), epic, &progress),
        });
    }

    // `--parallel N`: the stories in flight each in a worktree (see `parallel`), recorded
    // before anything else is written so a resume after a kill stays parallel.
    let slots = parallel
        .or_else(|| queue.as_ref().and_then(|q| q.slots))
        .or_else(|| super::parallel::resumed_slots(&layout.dir, &epic_id))
        .unwrap_or(config.parallel.stories);
    if slots > 1 && stories.is_none() && tickets.is_none() && queue.is_none() {
        super::parallel::mark(&layout.dir, &epic_id, slots)?;
    }
    // From here on, files change.
    let notify =
        super::notify::EpicNotify::new(notify_config, store.home(), &project_root, &epic_id)
            .queued(queue.is_some());
    cleanup_temp_files(&layout.dir);
    lock::clear_stale_stop(&layout.dir, started)?;
    if let Command::Answer {
        story,
        question,
        text,
    } = &command
    {
        let answered = record_answer(&layout, story, question.as_deref(), text)?;
        notify.answered(story, &answered);
    }
    progress.failure = None;
    let mut state = match state {
        Some(s) if s.epic_id == epic_id => s,
        _ => RunEpicState::new(&epic_id, &now()),
    };
    state.running = true;
    // `--context` is remembered with the epic: a resume without it goes on with it.
    if options.context.is_some() {
        state.context = options.context;
    }
    state.stories_folder = stories.as_ref().map(|s| s.folder.rel.clone());
    if let Some(sp) = &progress.story {
        state.current_story_key = Some(sp.key.clone());
    }
    state.save(&layout.dir)?;
    progress.save(&layout.dir)?;
    let project = store
        .project(&project_root)
        .map_err(|e| EpicError::failure(e.code(), e.to_string()))?;
    baton_epic_state::layout_record::save(store, &project_root, &layout)?;
    baton_epic_state::layout_record::save_stories(
        store,
        &project_root,
        stories.as_ref().map(|s| s.folder.rel.as_str()),
    )?;
    // The webhooks see every event the caller sees (the loop then holds them for less than
    // 'a: the ask function's lifetime is shortened to match).
    let (caller, watching) = (settings.on_event, &notify);
    let observed = move |e: EpicEvent| {
        watching.observe(&e);
        if let Some(f) = caller {
            f(e);
        }
    };
    let ask = settings.ask.map(|a| a as AskFn<'_>);
    let mut ctx = Ctx {
        store,
        project,
        layout,
        pipeline,
        config,
        specs,
        tools,
        models,
        ask,
        on_event: match notify.is_enabled() {
            true => Some(&observed),
            false => settings.on_event,
        },
        cancel: settings.cancel,
        budget,
        context: state.context,
        epic,
        state,
        progress,
        completed_now: Vec::new(),
        phases_run: 0,
        stories,
        on_step: None,
    };
    // Stories approved but not published yet are published again; merged ones are done.
    ctx.publish_catch_up(None, true)?;
    let looped = match (
        queue,
        slots > 1 && ctx.stories.is_none() && tickets.is_none(),
    ) {
        (Some(q), _) => super::queued::orchestrate::run(&mut ctx, slots, started, q).await,
        (None, true) => super::parallel::run(&mut ctx, slots, started).await,
        (None, false) => ctx.run_loop().await,
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
    notify.outcome(&outcome);
    // The file as the loop left it (a damaged one was reported by the loop already).
    let (findings, runnable_left) = match (&ctx.stories, ctx.sprint()) {
        (Some(run), _) => run.afterwards(),
        (None, _) if let Some(run) = &tickets => run.afterwards(&project_root),
        (None, Ok(sprint)) => afterwards(&ctx.layout, &sprint, epic),
        (None, Err(_)) => (Findings::default(), 0),
    };
    // Sprint mode only: a stories folder or a ticket tree has no retrospective key.
    let sprint_now = sprint.as_ref().and_then(|_| ctx.sprint().ok());
    let retrospective = retro_plan(
        retro.as_ref(),
        &ctx.layout,
        sprint_now.as_ref(),
        epic,
        &ctx.progress,
    );
    notify.finish().await;
    Ok(EpicReport {
        epic_id,
        outcome,
        stories_completed: ctx.completed_now,
        phases_run: ctx.phases_run,
        phases,
        pipeline: pipeline_view,
        findings,
        runnable_left,
        retrospective,
    })
}

/// The report's retrospective: only with the option on, for an epic of sprint-status.yaml.
fn retro_plan(
    retro: Option<&specs::MethodSpec>,
    layout: &Layout,
    sprint: Option<&SprintStatus>,
    epic: u32,
    progress: &Progress,
) -> Option<super::retrospective::RetroPlan> {
    let (m, sprint) = (retro?, sprint?);
    // `baton epic run` runs it; `baton epic story` leaves it to the epic's run.
    if !matches!(progress.target, Target::Epic { .. }) {
        return None;
    }
    let recorded = progress.retrospective.as_ref();
    Some(super::retrospective::plan(
        &m.installed,
        layout,
        sprint,
        epic,
        recorded,
    ))
}

/// What the report says besides its outcome: the findings of epic `n`, with the answers
/// already given, and how many of its stories another run would run.
fn afterwards(layout: &Layout, sprint: &SprintStatus, n: u32) -> (Findings, usize) {
    let mut f = findings::of(sprint, Some(n));
    consent::amend(&mut f, layout, sprint);
    (f, consent::runnable_left(sprint, n))
}

/// The pipeline epic `epic_id` runs: the one it recorded when it started (kept to its end,
/// unless a person accepts a change, see `method_consent`), else the one the configuration or
/// the installed method gives now.
fn epic_pipeline(
    config: &AutopilotConfig,
    project: &Path,
    layout: &Layout,
    epic_id: &str,
) -> Result<Pipeline> {
    // Checked every time: a configuration it refuses is said at once.
    let now = Pipeline::for_project(config, project)?;
    if layout.dir.is_open()
        && let Some(kept) = super::method::snapshot::MethodSnapshot::load(&layout.dir, &layout.rel)?
        && kept.epic_id == epic_id
        && let Some(recorded) = &kept.pipeline
    {
        return Pipeline::from_record(recorded);
    }
    Ok(now)
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
            let n = findings::epic_arg(sprint, epic)?;
            let epic_id = keys::epic_key(n);
            if sprint.epic_entry(n).is_none() && sprint.stories_of(n).next().is_none() {
                return Err(epic_not_found(sprint, &epic_id));
            }
            busy_elsewhere(&epic_id, None)?;
            let target = Target::Epic {
                max_stories: *max_stories,
            };
            Ok((n, continue_or_new(progress, &epic_id, target)))
        }
        Command::Story { key } => {
            let n = findings::story_arg(sprint, key)?;
            let epic_id = keys::epic_key(n);
            busy_elsewhere(&epic_id, Some(key))?;
            let target = Target::Story {
                story_key: key.clone(),
            };
            Ok((n, continue_or_new(progress, &epic_id, target)))
        }
        Command::Stories { folder, .. } => Err(EpicError::usage(
            "STORIES_FOLDER_INVALID",
            format!("{folder} is not a spec folder of this project"),
        )),
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
    let outside = sprint
        .entries()
        .iter()
        .filter(|e| e.kind == KeyKind::Unrecognized)
        .count();
    let mut hint = format!(
        "epics there: {}",
        if epics.is_empty() {
            "none".to_string()
        } else {
            epics.join(", ")
        }
    );
    if outside > 0 {
        hint.push_str(&format!(
            "; {outside} keys are outside BMAD's key grammar and never run (`baton epic status` lists them with their lines)"
        ));
    }
    EpicError::usage(
        "EPIC_NOT_FOUND",
        format!("{} has no {epic_id}", sprint.shown()),
    )
    .hint(hint)
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

fn dry_plan(
    layout: &Layout,
    sprint: &SprintStatus,
    progress: &Progress,
    epic: u32,
    pipeline: &Pipeline,
) -> Vec<PlannedStory> {
    let mut plan = Vec::new();
    let files = baton_bmad::story_files::StoryFiles::scan(layout, sprint);
    for e in sprint.stories_of(epic) {
        if let Target::Story { story_key } = &progress.target
            && *story_key != e.key
        {
            continue;
        }
        let start = files.start(layout, &e.key, e.normalized());
        let (phase, note) = match &progress.story {
            Some(sp) if sp.key == e.key => (Some(sp.phase), None),
            _ => (pipeline.start_for(&start.status), start.note),
        };
        if let Some(phase) = phase {
            plan.push(PlannedStory {
                key: e.key.clone(),
                status: e.status.clone(),
                phase,
                file: start.file,
                note,
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
    let shown = layout.rel_file(&format!("{story}{}", baton_epic_state::agent_state::SUFFIX));
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

/// Writes the answer into the agent-state file (first, so no answer is ever lost); returns
/// the question answered.
fn record_answer(
    layout: &Layout,
    story: &str,
    question: Option<&str>,
    text: &str,
) -> Result<Question> {
    let shown = layout.rel_file(&format!("{story}{}", baton_epic_state::agent_state::SUFFIX));
    let Some(mut agent) = AgentState::load(&layout.dir, &layout.rel, story)? else {
        return Err(EpicError::usage(
            "EPIC_NO_QUESTION",
            format!("{shown} does not exist"),
        ));
    };
    let mut picked = pick_question(&agent, question, &shown)?.clone();
    agent.answer(&picked.id, text);
    agent.save(&layout.dir)?;
    picked.answer = Some(text.to_string());
    Ok(picked)
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
