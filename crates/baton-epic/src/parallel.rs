//! `baton epic run <EPIC> --parallel N`: up to N stories in flight, each in its own git worktree
//! (see [`baton_worktree::worktree`]), merged back onto the epic's branch one at a time in approval
//! order (see [`baton_worktree::merge`]).
//!
//! Each story in flight is driven by the ordinary loop of [`super::story`], with the story as
//! its target and the worktree as its project: its phase runs, its progress file, its copy of
//! `sprint-status.yaml` and its agent-state file live in the worktree, so a killed orchestrator
//! resumes every story's phase run where it was. The main work tree's files stay the
//! orchestrator's alone: the statuses a story reaches are raised there by one writer (this
//! task), a story's question is copied there (where `baton epic answer` writes the answer, which
//! is copied back before the story goes on), and `done` is written only once the story's commit
//! is on the epic's branch.
//!
//! What this module keeps, `.baton-epic-parallel.json` in the artifacts folder: the slots, the
//! epic's branch, the stories started (a story not in the list gets a fresh worktree state), the
//! approved stories waiting to merge (in approval order) and how often a merge sent a story back.

use super::error::{EpicError, Result};
use super::events::EpicEvent;
use super::outcome::EpicOutcome;
use super::progress::now;
use super::progress::{FailureDetail, Instruction, Progress, StoryProgress, Target};
use super::schedule::{self, Activity, PlanInput};
use crate::ctx::Ctx;
use baton_autopilot::untrusted::limit;
use baton_bmad::keys;
use baton_bmad::layout::{self, Artifacts, Layout};
use baton_bmad::phase::Phase;
use baton_bmad::sprint::{self, SprintStatus};
use baton_epic_state::agent_state::{self, AgentState};
use baton_epic_state::lock;
use baton_epic_state::run_state::{self, Failure, RunEpicState};
use baton_worktree::merge::{self, MergeOutcome};
use baton_worktree::worktree::Worktrees;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Mutex;
use std::task::Poll;
use std::time::SystemTime;

pub(crate) use crate::parallel_merge::merge_story_onto;
use crate::parallel_merge::{MergeJob, MergeNews, Merging};
use crate::parallel_state::worktree_root_for;
pub use crate::parallel_state::{FILE_NAME, ParallelState, mark, resumed_slots};

/// Where the worktrees of a project live: `[autopilot] worktrees`, else a folder beside the
/// store (`<store>-worktrees/<project id>`), never inside it: the store is out of every
/// project's reach. A story's phase runs belong to the project in the store and mount its
/// worktree (see [`baton_store::Store::project_in_work_tree`]).
pub(super) fn worktree_root(ctx: &Ctx<'_>) -> PathBuf {
    worktree_root_for(
        ctx.store.home(),
        &ctx.layout.project,
        ctx.config.worktrees.as_deref(),
    )
}

/// The main work tree's writer of statuses, shared by the stories' event hooks.
struct Main<'a> {
    layout: Layout,
    outer: Option<&'a (dyn Fn(EpicEvent) + Send + Sync)>,
    /// Artifacts folders of the stories in flight (a stop is passed on to them).
    flights: Mutex<Vec<(String, Artifacts)>>,
}

impl Main<'_> {
    fn raise(&self, key: &str, status: &str) {
        let r = (|| -> Result<bool> {
            let mut s = SprintStatus::load(
                &self.layout.file(sprint::FILE_NAME),
                &self.layout.rel_file(sprint::FILE_NAME),
            )?;
            let Some(entry) = s.get(key) else {
                return Ok(false);
            };
            if !keys::defined(&entry.kind, &entry.status) {
                return Ok(false);
            }
            let changed = s.raise(key, status, &now())?;
            if changed {
                s.save()?;
            }
            Ok(changed)
        })();
        match r {
            Ok(true) => self.emit(EpicEvent::Status {
                key: key.to_string(),
                status: status.to_string(),
            }),
            Ok(false) => {}
            Err(e) => self.emit(EpicEvent::Note(format!("{key}: status not written: {e}"))),
        }
    }

    fn emit(&self, e: EpicEvent) {
        if let Some(f) = self.outer {
            f(e);
        }
    }

    /// A story's event: statuses below `done` are raised in the main work tree (`done` waits
    /// for the merge); a phase boundary passes a stop request on to every story.
    fn story_event(&self, e: EpicEvent) {
        match &e {
            EpicEvent::Status { key, status } => {
                if keys::parse_epic_id(key).is_none() && status != "done" {
                    self.raise(key, status);
                }
                return;
            }
            EpicEvent::PhaseEnded { .. } if lock::stop_requested(&self.layout.dir) => {
                if let Ok(flights) = self.flights.lock() {
                    for (_, dir) in flights.iter() {
                        let _ = lock::request_stop(dir);
                    }
                }
            }
            _ => {}
        }
        self.emit(e);
    }
}

type StoryFuture<'b> =
    Pin<Box<dyn Future<Output = (String, Result<EpicOutcome>, usize)> + Send + 'b>>;

/// How a story of this invocation stands.
enum Held {
    Question(String, baton_epic_state::agent_state::Question),
    Failed(FailureDetail),
}

/// Runs the epic with up to `slots` stories in flight, until every story is done, or paused.
pub(super) async fn run(ctx: &mut Ctx<'_>, slots: u32, started: SystemTime) -> Result<EpicOutcome> {
    if ctx.stories.is_some() {
        return Err(EpicError::usage(
            "EPIC_PARALLEL_UNSUPPORTED",
            "--parallel runs the stories of sprint-status.yaml, not a stories.yaml folder",
        ));
    }
    let epic_id = keys::epic_key(ctx.epic);
    let main_dir = ctx.layout.dir.clone();
    let mut st = match ParallelState::load(&main_dir)? {
        Some(s) if s.epic_id == epic_id => s,
        _ => ParallelState {
            epic_id: epic_id.clone(),
            ..ParallelState::default()
        },
    };
    if st.branch.is_empty() {
        let out = baton_worktree::git::run(
            &ctx.layout.project,
            &[],
            &["symbolic-ref", "--short", "HEAD"],
            &[],
        )?;
        if !out.ok() {
            return Err(EpicError::usage(
                "EPIC_PARALLEL_NO_BRANCH",
                "--parallel needs the project on a branch (HEAD is detached or not a git work tree)",
            )
            .hint("check out the branch the epic's stories should land on"));
        }
        st.branch = out.stdout.trim().to_string();
    }
    st.slots = slots;
    st.save(&main_dir)?;
    let root = worktree_root(ctx);
    let wts = Worktrees::open(&ctx.layout.project, &root)?;
    wts.recover()?;
    // Stories whose merge was under way: first in the queue.
    for r in wts.records()? {
        if r.epic == epic_id && r.merge.is_some() && !st.queue.contains(&r.story) {
            st.queue.insert(0, r.story.clone());
        }
    }
    st.save(&main_dir)?;

    let main = Main {
        layout: ctx.layout.clone(),
        outer: ctx.on_event,
        flights: Mutex::new(Vec::new()),
    };
    let forward = |e: EpicEvent| main.story_event(e);
    let mut held: BTreeMap<String, Held> = BTreeMap::new();
    let mut running: Vec<(String, StoryFuture<'_>)> = Vec::new();
    let mut stopping = false;
    let mut stuck: Option<String> = None;
    let mut merging: Option<Merging> = None;
    let mut merges_stopped = false;
    let driven = async {
        loop {
            // 1. The next merge, in approval order, one at a time, on a thread of its own: the
            //    stories in flight go on while it runs (never while stopping on Ctrl-C).
            if merging.is_none()
                && !merges_stopped
                && !ctx.cancel.is_cancelled()
                && let Some(key) = st.queue.first().cloned()
            {
                merging = Some(
                    MergeJob::new(ctx, &wts, &st.branch, &epic_id, &key, started, &[])?.start(),
                );
            }
            // 2. Stop and Ctrl-C: start nothing more; the stories stop at their phase boundary.
            if lock::stop_requested(&main_dir) && !stopping {
                stopping = true;
                if let Ok(flights) = main.flights.lock() {
                    for (_, dir) in flights.iter() {
                        let _ = lock::request_stop(dir);
                    }
                }
            }
            let cancelled = ctx.cancel.is_cancelled();
            // 3. Start: stories already started first (resume), then what the schedule allows.
            if !stopping && !cancelled && stuck.is_none() {
                let sprint = ctx.sprint()?;
                let statuses = super::parallel_board::statuses(&sprint);
                let flying: BTreeSet<String> = running.iter().map(|(k, _)| k.clone()).collect();
                let mut to_start: Vec<String> = st
                    .started
                    .iter()
                    .filter(|k| {
                        !flying.contains(*k) && !st.queue.contains(k) && !held.contains_key(*k)
                    })
                    .cloned()
                    .collect();
                let activity = |e: &sprint::Entry| {
                    let busy = flying.contains(&e.key)
                        || to_start.contains(&e.key)
                        || st.queue.contains(&e.key);
                    match held.get(&e.key) {
                        Some(Held::Question(..)) => Activity::Question,
                        Some(Held::Failed(_)) => Activity::Failed,
                        None if busy => Activity::Running,
                        None if pending_question(&ctx.layout, &e.key) => Activity::Question,
                        None => Activity::Idle,
                    }
                };
                // Published stories waiting for their merge run no more; their dependants wait.
                ctx.publish_catch_up(None, false)?;
                let holding = ctx.publish_holding();
                let mut candidates =
                    super::parallel_board::candidates(&ctx.layout, &sprint, ctx.epic, &activity);
                candidates.retain(|c| !holding.contains(&c.key));
                let may_start =
                    super::parallel_board::may_start(Some(&ctx.progress), st.started.len());
                let plan = schedule::plan(&PlanInput {
                    stories: &candidates,
                    statuses: &statuses,
                    after: &ctx.config.parallel.after,
                    slots: slots as usize,
                    may_start,
                });
                for key in plan.start {
                    if !to_start.contains(&key) {
                        to_start.push(key);
                    }
                }
                if to_start.is_empty() && running.is_empty() && st.queue.is_empty() {
                    let blocked: Vec<String> = plan
                        .waiting
                        .iter()
                        .filter(|w| {
                            matches!(
                                w.why,
                                schedule::Why::Cycle(_) | schedule::Why::Dependency(_)
                            )
                        })
                        .map(|w| format!("{}: {}", w.key, w.why.text()))
                        .collect();
                    if !blocked.is_empty() && held.is_empty() && holding.is_empty() {
                        stuck = Some(blocked.join("; "));
                    }
                }
                for key in to_start {
                    if !st.started.contains(&key) {
                        let base = wts
                            .resolve(&format!("refs/heads/{}", st.branch))?
                            .ok_or_else(|| {
                                EpicError::failure(
                                    "EPIC_PARALLEL_NO_BRANCH",
                                    format!("branch {} has no commit", st.branch),
                                )
                            })?;
                        let wt = wts.create(&epic_id, &key, &base)?;
                        fresh_story(ctx, wt.path(), &epic_id, &key)?;
                        st.started.push(key.clone());
                        st.save(&main_dir)?;
                    } else if wts.get(&epic_id, &key)?.is_none() {
                        // Started but its worktree is gone (a removal finished): start over.
                        let base = wts
                            .resolve(&format!("refs/heads/{}", st.branch))?
                            .unwrap_or_default();
                        let wt = wts.create(&epic_id, &key, &base)?;
                        fresh_story(ctx, wt.path(), &epic_id, &key)?;
                    }
                    let Some(wt) = wts.get(&epic_id, &key)? else {
                        continue;
                    };
                    ctx.raise(&epic_id, "in-progress")?;
                    let mut story = story_ctx(ctx, wt.path(), &epic_id, &key, &forward)?;
                    if let Some(q) = question_waiting(ctx, &story, &key)? {
                        held.insert(key.clone(), Held::Question(key.clone(), q));
                        continue;
                    }
                    if let Ok(mut flights) = main.flights.lock() {
                        flights.push((key.clone(), story.layout.dir.clone()));
                    }
                    main.emit(EpicEvent::Note(format!(
                        "{key}: in flight in worktree branch {}",
                        wt.branch()
                    )));
                    let k = key.clone();
                    running.push((
                        key,
                        Box::pin(async move {
                            let r = story.run_loop().await;
                            (k, r, story.phases_run)
                        }),
                    ));
                }
            }
            if running.is_empty() && merging.is_none() {
                break;
            }
            // 4. Wait for a story to pause or finish, or the merge to report.
            let woke = std::future::poll_fn(|cx| {
                if let Some(m) = merging.as_mut()
                    && let Poll::Ready(news) = m.poll_news(cx)
                {
                    return Poll::Ready(Woke::Merge(news));
                }
                for (i, (_, f)) in running.iter_mut().enumerate() {
                    if let Poll::Ready(v) = f.as_mut().poll(cx) {
                        return Poll::Ready(Woke::Story(i, v));
                    }
                }
                Poll::Pending
            })
            .await;
            let (i, (key, result, phases)) = match woke {
                Woke::Story(i, v) => (i, v),
                Woke::Merge(MergeNews::Event(e)) => {
                    main.emit(e);
                    continue;
                }
                Woke::Merge(MergeNews::Ended(outcome)) => {
                    let key = merging.take().map(|m| m.key).unwrap_or_default();
                    if !merged(ctx, &main, &wts, &mut st, &key, outcome?, &mut held)? {
                        merges_stopped = true;
                    }
                    continue;
                }
            };
            drop(running.remove(i));
            ctx.phases_run += phases;
            if let Ok(mut flights) = main.flights.lock() {
                flights.retain(|(k, _)| k != &key);
            }
            // The story's phase runs go to the main progress record now: its worktree's record
            // is left out of the story's commit (and cleaned away) when it is merged.
            sync_runs(ctx, &wts, &epic_id, &key)?;
            match result {
                Ok(EpicOutcome::Done { .. }) => {
                    if approved(&wts, &epic_id, &key, &ctx.layout.rel)? {
                        if !st.queue.contains(&key) {
                            st.queue.push(key.clone());
                            st.save(&main_dir)?;
                        }
                        main.raise(&key, "review");
                    }
                }
                Ok(EpicOutcome::Waiting { story, question }) => {
                    mirror_question(ctx, &wts, &epic_id, &key)?;
                    held.insert(key, Held::Question(story, question));
                }
                Ok(EpicOutcome::Paused { failure }) => {
                    let _ = wts.keep(&epic_id, &key, &failure.message);
                    held.insert(key, Held::Failed(failure));
                }
                Ok(EpicOutcome::Budget {
                    phase,
                    run_id,
                    message,
                    ..
                }) => {
                    let failure = FailureDetail {
                        phase,
                        story_key: key.clone(),
                        code: "BUDGET_EXCEEDED".into(),
                        message,
                        run_id,
                    };
                    held.insert(key, Held::Failed(failure));
                }
                Ok(EpicOutcome::Stopped | EpicOutcome::Interrupted)
                | Ok(EpicOutcome::Planned { .. }) => {}
                Err(e) => {
                    let failure = FailureDetail {
                        phase: Phase::Dev,
                        story_key: key.clone(),
                        code: e.code.to_string(),
                        message: e.message.clone(),
                        run_id: None,
                    };
                    let _ = wts.keep(&epic_id, &key, &failure.message);
                    held.insert(key, Held::Failed(failure));
                }
            }
        }
        Ok::<(), EpicError>(())
    };
    let driven = driven.await;
    // Never out while a merge of this loop still runs (after an error too).
    if let Some(m) = merging.take() {
        m.finish().await;
    }
    driven?;
    // Everything in flight has stopped.
    if stopping {
        lock::clear_stop(&main_dir)?;
        for key in &st.started {
            if let Ok(Some(wt)) = wts.get(&epic_id, key)
                && let Ok(l) =
                    layout::resolve(wt.path(), ctx.config.implementation_artifacts.as_deref())
            {
                let _ = lock::clear_stop(&l.dir);
            }
        }
        return ctx.pause(EpicOutcome::Stopped);
    }
    if ctx.cancel.is_cancelled() {
        return ctx.pause(EpicOutcome::Interrupted);
    }
    if let Some((_, Held::Question(story, question))) =
        held.iter().find(|(_, h)| matches!(h, Held::Question(..)))
    {
        ctx.state.current_story_key = Some(story.clone());
        return ctx.pause(EpicOutcome::Waiting {
            story: story.clone(),
            question: question.clone(),
        });
    }
    if let Some((_, Held::Failed(failure))) = held.iter().next() {
        ctx.state.last_failure = Some(Failure {
            phase: failure.phase.as_str().to_string(),
            story_key: failure.story_key.clone(),
            at: now(),
        });
        ctx.progress.failure = Some(failure.clone());
        return ctx.pause(EpicOutcome::Paused {
            failure: failure.clone(),
        });
    }
    if let Some(reason) = stuck {
        let failure = FailureDetail {
            phase: ctx.pipeline.first(),
            story_key: String::new(),
            code: "EPIC_PARALLEL_STUCK".into(),
            message: format!("no story can start: {reason}"),
            run_id: None,
        };
        ctx.progress.failure = Some(failure.clone());
        return ctx.pause(EpicOutcome::Paused { failure });
    }
    ctx.progress.story = None;
    let done = ctx.finish()?;
    ctx.retrospective_after(done).await
}

/// What a merge's outcome does to the loop's records; `false` when merging stops for this
/// invocation (interrupted).
fn merged(
    ctx: &mut Ctx<'_>,
    main: &Main<'_>,
    wts: &Worktrees,
    st: &mut ParallelState,
    key: &str,
    outcome: MergeOutcome,
    held: &mut BTreeMap<String, Held>,
) -> Result<bool> {
    let epic_id = st.epic_id.clone();
    let main_dir = ctx.layout.dir.clone();
    match outcome {
        MergeOutcome::Merged { commit } => {
            // Published (`publishing`): done now, or once merged on the remote.
            if ctx.publish_record(key, &commit, &st.branch)? {
                main.raise(key, "done");
            }
            story_finished(ctx, wts, &epic_id, key)?;
            wts.remove(&epic_id, key, true)?;
            st.queue.retain(|k| k != key);
            st.started.retain(|k| k != key);
            st.returned.remove(key);
            st.save(&main_dir)?;
            ctx.publish_catch_up(Some(key), false)?;
        }
        MergeOutcome::Conflict { files, tail } => {
            let output = format!(
                "merging onto {} conflicted in {}; the conflicts are marked in these files:\n{tail}",
                st.branch,
                files.join(", ")
            );
            back_to_dev(ctx, wts, st, &epic_id, key, output, held)?;
        }
        MergeOutcome::CheckFailed { result } => {
            let output = format!("after rebasing onto {}: {}", st.branch, result.report());
            back_to_dev(ctx, wts, st, &epic_id, key, output, held)?;
        }
        MergeOutcome::Blocked { files } => {
            let detail = FailureDetail {
                phase: ctx.pipeline.last(),
                story_key: key.to_string(),
                code: "EPIC_MERGE_BLOCKED".into(),
                message: format!(
                    "the main work tree has changes of its own in files story {key} changes: {}; commit or revert these files, then `baton epic resume`",
                    files.join(", ")
                ),
                run_id: None,
            };
            st.queue.retain(|k| k != key);
            held.insert(key.to_string(), Held::Failed(detail));
        }
        MergeOutcome::Interrupted => return Ok(false),
    }
    Ok(true)
}

/// What wakes the loop.
enum Woke {
    /// A story paused or finished.
    Story(usize, (String, Result<EpicOutcome>, usize)),
    /// The merge in flight reported.
    Merge(MergeNews),
}

/// A question waits in `key`'s agent-state file of the main work tree.
fn pending_question(layout: &Layout, key: &str) -> bool {
    matches!(AgentState::load(&layout.dir, &layout.rel, key), Ok(Some(a)) if a.pending().is_some())
}

/// The loop of one story in its worktree.
fn story_ctx<'a: 'b, 'b>(
    ctx: &Ctx<'a>,
    wt: &Path,
    epic_id: &str,
    key: &str,
    forward: &'b (dyn Fn(EpicEvent) + Send + Sync),
) -> Result<Ctx<'b>> {
    let layout = layout::resolve(wt, ctx.config.implementation_artifacts.as_deref())?;
    let target = Target::Story {
        story_key: key.to_string(),
    };
    let mut progress = Progress::load(&layout.dir, &layout.rel)?
        .unwrap_or_else(|| Progress::new(epic_id, target.clone()));
    progress.target = target;
    progress.failure = None;
    let state = RunEpicState::load(&layout.dir, &layout.rel_file(run_state::FILE_NAME))?
        .unwrap_or_else(|| RunEpicState::new(epic_id, &now()));
    // The epic's project, seen from the worktree: the story's phase runs are the project's
    // (one project in the store), each mounting the worktree as `@project`.
    let project = ctx
        .store
        .project_in_work_tree(&ctx.layout.project, wt)
        .map_err(|e| EpicError::failure(e.code(), e.to_string()))?;
    let mut config = ctx.config.clone();
    // The story's commit is made when it is merged, and published from there.
    config.git.commit = false;
    config.publish.push = false;
    Ok(Ctx {
        store: ctx.store,
        project,
        layout,
        config,
        specs: ctx.specs.clone(),
        pipeline: ctx.pipeline.clone(),
        tools: ctx.tools.clone(),
        models: ctx.models.sibling(),
        ask: None,
        on_event: Some(forward),
        cancel: ctx.cancel.child_token(),
        budget: ctx.budget,
        context: ctx.context,
        epic: ctx.epic,
        state,
        progress,
        completed_now: Vec::new(),
        phases_run: 0,
        stories: None,
        on_step: None,
    })
}

/// A story's worktree starts from the main work tree's view: its `sprint-status.yaml` (the
/// orchestrator's, with the statuses of now), a fresh progress of its own.
fn fresh_story(ctx: &Ctx<'_>, wt: &Path, epic_id: &str, key: &str) -> Result<()> {
    let dir = wt.join(&ctx.layout.rel);
    std::fs::create_dir_all(&dir).map_err(EpicError::io("create", &dir))?;
    let layout = layout::resolve(wt, ctx.config.implementation_artifacts.as_deref())?;
    if let Some(bytes) = ctx.layout.dir.read(sprint::FILE_NAME, limit::STATUS)? {
        layout.dir.write(sprint::FILE_NAME, &bytes)?;
    }
    for name in [run_state::FILE_NAME, lock::STOP_FILE, FILE_NAME] {
        layout.dir.remove(name)?;
    }
    let agent = format!("{key}{}", agent_state::SUFFIX);
    match ctx.layout.dir.read(&agent, limit::STATUS)? {
        Some(bytes) => layout.dir.write(&agent, &bytes)?,
        None => layout.dir.remove(&agent)?,
    }
    Progress::new(
        epic_id,
        Target::Story {
            story_key: key.to_string(),
        },
    )
    .save(&layout.dir)
}

/// A story's pending question, answered in the main work tree (copied to its worktree) or
/// still waiting (copied to the main work tree, where `baton epic answer` finds it).
fn question_waiting(
    ctx: &Ctx<'_>,
    story: &Ctx<'_>,
    key: &str,
) -> Result<Option<baton_epic_state::agent_state::Question>> {
    let Ok(Some(theirs)) = AgentState::load(&story.layout.dir, &story.layout.rel, key) else {
        return Ok(None);
    };
    let Some(q) = theirs.pending().cloned() else {
        return Ok(None);
    };
    let name = format!("{key}{}", agent_state::SUFFIX);
    let ours = AgentState::load(&ctx.layout.dir, &ctx.layout.rel, key)?;
    if ours
        .as_ref()
        .and_then(|a| a.question(&q.id))
        .is_some_and(|a| a.answer.is_some())
    {
        if let Some(bytes) = ctx.layout.dir.read(&name, limit::STATUS)? {
            story.layout.dir.write(&name, &bytes)?;
        }
        return Ok(None);
    }
    if let Some(bytes) = story.layout.dir.read(&name, limit::STATUS)? {
        ctx.layout.dir.write(&name, &bytes)?;
    }
    Ok(Some(q))
}

/// Copies a story's agent-state file (its question) to the main work tree.
fn mirror_question(ctx: &Ctx<'_>, wts: &Worktrees, epic_id: &str, key: &str) -> Result<()> {
    let Some(wt) = wts.get(epic_id, key)? else {
        return Ok(());
    };
    let l = layout::resolve(wt.path(), ctx.config.implementation_artifacts.as_deref())?;
    let name = format!("{key}{}", agent_state::SUFFIX);
    if let Some(bytes) = l.dir.read(&name, limit::STATUS)? {
        ctx.layout.dir.write(&name, &bytes)?;
    }
    Ok(())
}

/// The story's loop in its worktree finished it (code review approved).
fn approved(wts: &Worktrees, epic_id: &str, key: &str, rel: &str) -> Result<bool> {
    let Some(wt) = wts.get(epic_id, key)? else {
        return Ok(false);
    };
    let l = layout::resolve(wt.path(), Some(rel))?;
    Ok(Progress::load(&l.dir, &l.rel)?
        .is_some_and(|p| p.story.is_none() && p.completed.iter().any(|k| k == key)))
}

/// A merge refused the story (conflict or failing check): it goes back to dev in its worktree
/// with what went wrong, counted against `max_review_cycles`.
fn back_to_dev(
    ctx: &Ctx<'_>,
    wts: &Worktrees,
    st: &mut ParallelState,
    epic_id: &str,
    key: &str,
    output: String,
    held: &mut BTreeMap<String, Held>,
) -> Result<()> {
    st.queue.retain(|k| k != key);
    let n = st.returned.entry(key.to_string()).or_insert(0);
    *n += 1;
    let over = *n > ctx.config.max_review_cycles;
    if let Some(wt) = wts.get(epic_id, key)? {
        let l = layout::resolve(wt.path(), ctx.config.implementation_artifacts.as_deref())?;
        let mut p = Progress::load(&l.dir, &l.rel)?.unwrap_or_else(|| {
            Progress::new(
                epic_id,
                Target::Story {
                    story_key: key.to_string(),
                },
            )
        });
        p.completed.retain(|k| k != key);
        let mut sp = StoryProgress::new(key, ctx.pipeline.rework());
        sp.instruction = Some(Instruction::Verify {
            output: baton_worktree::worktree::tail(&output, merge::CONFLICT_TAIL),
        });
        p.story = Some(sp);
        p.save(&l.dir)?;
    }
    ctx.emit(EpicEvent::Note(format!(
        "{key}: not merged, back to dev ({n_} of {max}): {first}",
        n_ = st.returned.get(key).copied().unwrap_or(0),
        max = ctx.config.max_review_cycles,
        first = output.lines().next().unwrap_or("")
    )));
    if over {
        held.insert(
            key.to_string(),
            Held::Failed(FailureDetail {
                phase: ctx.pipeline.rework(),
                story_key: key.to_string(),
                code: "EPIC_MERGE_CYCLES_EXHAUSTED".into(),
                message: format!("story {key} could not be merged: {output}"),
                run_id: None,
            }),
        );
    }
    st.save(&ctx.layout.dir)
}

/// The phase runs a story's worktree records (with their results) into the main progress
/// record, saved: where `baton epic status`, the web board and a resume's model choice find
/// them once the story is merged and its worktree gone.
fn sync_runs(ctx: &mut Ctx<'_>, wts: &Worktrees, epic_id: &str, key: &str) -> Result<()> {
    let Some(wt) = wts.get(epic_id, key)? else {
        return Ok(());
    };
    let Ok(l) = layout::resolve(wt.path(), ctx.config.implementation_artifacts.as_deref()) else {
        return Ok(());
    };
    let Ok(Some(p)) = Progress::load(&l.dir, &l.rel) else {
        return Ok(());
    };
    let mut changed = false;
    for r in p.runs.into_iter().filter(|r| r.story_key == key) {
        match ctx.progress.runs.iter_mut().find(|m| m.run_id == r.run_id) {
            Some(m) if *m == r => {}
            Some(m) => {
                *m = r;
                changed = true;
            }
            None => {
                ctx.progress.runs.push(r);
                changed = true;
            }
        }
    }
    if changed {
        ctx.progress.save(&ctx.layout.dir)?;
    }
    Ok(())
}

/// The story is on the epic's branch: the main progress counts it, its runs are listed there.
fn story_finished(ctx: &mut Ctx<'_>, wts: &Worktrees, epic_id: &str, key: &str) -> Result<()> {
    sync_runs(ctx, wts, epic_id, key)?;
    if !ctx.progress.completed.iter().any(|k| k == key) {
        ctx.progress.completed.push(key.to_string());
    }
    if !ctx.completed_now.iter().any(|k| k == key) {
        ctx.completed_now.push(key.to_string());
    }
    ctx.state
        .push_step(key, ctx.pipeline.last().as_str(), &now());
    ctx.save()
}
