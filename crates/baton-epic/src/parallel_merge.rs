//! The merge of an approved story onto the epic's branch, as the parallel loops call it: its
//! settings gathered from the loop's context into owned values ([`MergeJob`]), then either run
//! where it is called ([`merge_story_onto`], the queued orchestrator) or on a thread of its own
//! ([`MergeJob::start`], the local `--parallel` loop) so the stories still in flight go on while
//! it runs: a merge is git commands and the verify commands, which block, and every story of
//! the loop is driven by the same task.
//!
//! Merges stay one at a time: the loop starts the next only once this one has ended, and what
//! each step of a merge records is unchanged (see [`baton_worktree::merge`]).

use super::error::{EpicError, Result};
use super::events::EpicEvent;
use crate::ctx::Ctx;
use baton_bmad::layout;
use baton_bmad::sprint;
use baton_epic_state::agent_state;
use baton_epic_state::lock;
use baton_epic_state::run_state;
use baton_tools::{TerminalRuntime, TerminalSettings};
use baton_worktree::merge::{self, MergeOutcome, MergeSettings};
use baton_worktree::verify::CommandResult;
use baton_worktree::worktree::Worktrees;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Files of the artifacts folder that are the orchestrator's (never part of a story's commit).
fn own_files(rel: &str, key: &str) -> Vec<String> {
    [
        sprint::FILE_NAME.to_string(),
        run_state::FILE_NAME.to_string(),
        super::progress::FILE_NAME.to_string(),
        super::method::snapshot::FILE_NAME.to_string(),
        lock::STOP_FILE.to_string(),
        super::parallel_state::FILE_NAME.to_string(),
        baton_worktree::publish::FILE_NAME.to_string(),
        format!("{key}{}", agent_state::SUFFIX),
    ]
    .into_iter()
    .map(|n| format!("{rel}/{n}"))
    .collect()
}

/// Everything one merge needs, owned (it may run on another thread).
pub(crate) struct MergeJob {
    wts: Worktrees,
    epic_id: String,
    key: String,
    branch: String,
    message: String,
    keep_out: Vec<String>,
    carry: Vec<String>,
    verify_commands: Vec<String>,
    verify_timeout: Duration,
    terminal: TerminalSettings,
    runtime: TerminalRuntime,
    cancel: CancellationToken,
    started: SystemTime,
}

impl MergeJob {
    /// The merge of story `key`'s worktree onto `branch`, leaving out of its commit the
    /// orchestrator's files and `also_keep_out` (names in the artifacts folder).
    pub(crate) fn new(
        ctx: &Ctx<'_>,
        wts: &Worktrees,
        branch: &str,
        epic_id: &str,
        key: &str,
        started: SystemTime,
        also_keep_out: &[&str],
    ) -> Result<MergeJob> {
        let text = match wts.get(epic_id, key)? {
            Some(wt) => {
                let l = layout::resolve(wt.path(), ctx.config.implementation_artifacts.as_deref())?;
                let probe = Ctx {
                    layout: l,
                    ..story_probe(ctx)
                };
                probe.story_text(key)
            }
            None => None,
        };
        let mut keep_out = own_files(&ctx.layout.rel, key);
        keep_out.extend(
            also_keep_out
                .iter()
                .map(|n| format!("{}/{n}", ctx.layout.rel)),
        );
        Ok(MergeJob {
            wts: wts.clone(),
            epic_id: epic_id.to_string(),
            key: key.to_string(),
            branch: branch.to_string(),
            message: baton_worktree::git::commit_message(key, text.as_deref()),
            keep_out,
            carry: [sprint::FILE_NAME, run_state::FILE_NAME]
                .iter()
                .map(|n| format!("{}/{n}", ctx.layout.rel))
                .collect(),
            verify_commands: ctx.config.verify.commands.clone(),
            verify_timeout: Duration::from_secs(ctx.config.verify.timeout_s),
            terminal: ctx.tools.system.terminal.clone(),
            runtime: TerminalRuntime {
                store_home: Some(ctx.store.home().to_path_buf()),
                ..TerminalRuntime::default()
            },
            cancel: ctx.cancel.clone(),
            started,
        })
    }

    /// Runs the merge here (see [`merge::merge_story`]).
    pub(crate) fn run(&self, on_verify: &mut dyn FnMut(&CommandResult)) -> Result<MergeOutcome> {
        let settings = MergeSettings {
            branch: &self.branch,
            message: &self.message,
            keep_out: &self.keep_out,
            carry: &self.carry,
            verify_commands: &self.verify_commands,
            verify_timeout: self.verify_timeout,
            terminal: &self.terminal,
            runtime: self.runtime.clone(),
            cancel: &self.cancel,
            started: self.started,
        };
        merge::merge_story(&self.wts, &self.epic_id, &self.key, &settings, on_verify)
    }

    /// Runs the merge on a blocking thread of the runtime; its verify events come through
    /// the returned [`Merging`] as they happen, then its outcome.
    pub(crate) fn start(self) -> Merging {
        let (tx, events) = mpsc::unbounded_channel();
        let key = self.key.clone();
        let done = tokio::task::spawn_blocking(move || {
            self.run(&mut |r| {
                let _ = tx.send(verify_event(r));
            })
        });
        Merging {
            key,
            done,
            events,
            ended: None,
        }
    }
}

fn verify_event(r: &CommandResult) -> EpicEvent {
    EpicEvent::Verify {
        command: r.command.clone(),
        passed: r.passed(),
        millis: r.duration.as_millis(),
    }
}

/// A merge running on its own thread.
pub(crate) struct Merging {
    pub(crate) key: String,
    done: tokio::task::JoinHandle<Result<MergeOutcome>>,
    events: mpsc::UnboundedReceiver<EpicEvent>,
    /// The outcome, once the thread has ended (given out after the last event).
    ended: Option<Result<MergeOutcome>>,
}

/// What a running merge has to say.
pub(crate) enum MergeNews {
    /// A verify command finished.
    Event(EpicEvent),
    /// The merge ended (every event it sent came before).
    Ended(Result<MergeOutcome>),
}

impl Merging {
    /// Ready with the next event, else with the outcome once the merge has ended.
    pub(crate) fn poll_news(&mut self, cx: &mut Context<'_>) -> Poll<MergeNews> {
        if let Poll::Ready(Some(e)) = self.events.poll_recv(cx) {
            return Poll::Ready(MergeNews::Event(e));
        }
        if self.ended.is_none() {
            match Pin::new(&mut self.done).poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(r) => {
                    self.ended = Some(r.unwrap_or_else(|e| {
                        Err(EpicError::failure(
                            "EPIC_INTERNAL",
                            format!("the merge of story {} did not finish: {e}", self.key),
                        ))
                    }))
                }
            }
        }
        // The thread has ended: whatever it sent is queued, and comes first.
        if let Ok(e) = self.events.try_recv() {
            return Poll::Ready(MergeNews::Event(e));
        }
        match self.ended.take() {
            Some(r) => Poll::Ready(MergeNews::Ended(r)),
            None => Poll::Pending,
        }
    }

    /// Waits for the merge to end, its events dropped (on the way out after an error: the
    /// loop never returns while a merge of its own still runs).
    pub(crate) async fn finish(mut self) {
        while !matches!(
            std::future::poll_fn(|cx| self.poll_news(cx)).await,
            MergeNews::Ended(_)
        ) {}
    }
}

/// Merges story `key`'s worktree onto `branch` here (see [`merge::merge_story`]), leaving out of
/// its commit the orchestrator's files and `also_keep_out` (names in the artifacts folder).
pub(crate) fn merge_story_onto(
    ctx: &Ctx<'_>,
    wts: &Worktrees,
    branch: &str,
    epic_id: &str,
    key: &str,
    started: SystemTime,
    also_keep_out: &[&str],
) -> Result<MergeOutcome> {
    let job = MergeJob::new(ctx, wts, branch, epic_id, key, started, also_keep_out)?;
    let on_event = ctx.on_event;
    job.run(&mut |r| {
        if let Some(f) = on_event {
            f(verify_event(r));
        }
    })
}

/// A context that only reads (the story file's text of a worktree).
fn story_probe<'b>(ctx: &Ctx<'b>) -> Ctx<'b> {
    Ctx {
        store: ctx.store,
        project: ctx.project.clone(),
        layout: ctx.layout.clone(),
        config: ctx.config.clone(),
        specs: ctx.specs.clone(),
        pipeline: ctx.pipeline.clone(),
        tools: ctx.tools.clone(),
        models: ctx.models.sibling(),
        ask: None,
        on_event: None,
        cancel: ctx.cancel.child_token(),
        budget: ctx.budget,
        context: ctx.context,
        epic: ctx.epic,
        state: ctx.state.clone(),
        progress: ctx.progress.clone(),
        completed_now: Vec::new(),
        phases_run: 0,
        stories: None,
        on_step: None,
    }
}
