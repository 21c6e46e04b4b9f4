//! One claimed story unit (an epic's story submitted by `baton epic run --queue`): the project
//! checked out at the unit's base commit (or its last checkpoint's), the story's phases run
//! with baton-epic's story loop in that worktree, a checkpoint after every phase.
//!
//! A checkpoint is the worktree committed and pushed to `refs/baton/stories/<unit>/<epoch>`,
//! then the story's progress files (and that commit) in one fenced write: a worker that took the
//! unit over starts from exactly there, so no finished phase is done twice (the phase in flight
//! is done again). The story approved, its branch is pushed to
//! `baton/<epic>/<story>/epoch-<n>` and the unit completed with it, in the same fenced
//! transaction as the last checkpoint; a question parks the unit for a person's answer, which
//! the next worker puts into the story's agent-state file before the phase runs again.

use crate::WorkerError;
use crate::ctx::Ctx;
use crate::error::LEASE_LOST;
use crate::event::WorkerEvent;
use crate::git::checkout;
use crate::lease::{AbortOnDrop, heartbeat, lease_lost};
use baton_epic::EpicError;
use baton_epic::queued::payload::{
    QUEUE_PAYLOAD_INVALID, StoryAnswer, StoryCheckpoint, StoryPayload, question_body,
};
use baton_epic::queued::worker::{Start, StoryEnd, StoryJob, run_story, story_files};
use baton_epic::queued::{STORY_CHECKPOINT, StepHook};
use baton_queue::{Lease, Queue};
use baton_store::Store;
use serde_json::json;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

fn epic_error(e: EpicError) -> WorkerError {
    WorkerError::other(e.code, e.message)
}

/// The story's checkpoints under the unit's lease.
struct StoryCheckpoints<'a> {
    home: &'a Path,
    queue: Mutex<Queue>,
    lease: &'a Lease,
    tree: &'a Path,
    project: &'a Path,
    payload: &'a StoryPayload,
    lost: &'a AtomicBool,
    /// The refs of the unit's earlier attempts were removed (once, after this attempt's first
    /// checkpoint).
    pruned: AtomicBool,
}

impl StoryCheckpoints<'_> {
    fn reference(&self) -> String {
        format!("refs/baton/stories/{}/{}", self.lease.id, self.lease.epoch)
    }

    /// The worktree committed and pushed to the unit's epoch ref, and the story's files.
    fn record(&self) -> Result<StoryCheckpoint, WorkerError> {
        let message = format!(
            "baton checkpoint: unit {} story {}",
            self.lease.id, self.payload.story
        );
        let commit = crate::git::commit_and_push(
            self.home,
            self.tree,
            &message,
            &self.lease.project_remote,
            &self.reference(),
        )?;
        let now = story_files(self.project, &self.payload.artifacts, &self.payload.story)
            .map_err(epic_error)?;
        Ok(StoryCheckpoint {
            commit,
            reference: self.reference(),
            files: now.files,
            status: now.status,
            phase: now.phase,
        })
    }

    async fn checkpoint(&self) -> Result<(), WorkerError> {
        if self.lost.load(Ordering::SeqCst) {
            return Err(lease_lost(self.lease));
        }
        let c = self.record()?;
        let mut queue = self.queue.lock().await;
        let fenced = queue.fenced(self.lease).await?;
        fenced.append(STORY_CHECKPOINT, &c.to_value()).await?;
        fenced.commit().await?;
        if !self.pruned.swap(true, Ordering::SeqCst) {
            // Housekeeping: a ref that cannot be removed now stays, as before.
            let _ = crate::git::prune_refs(
                self.tree,
                &self.lease.project_remote,
                &format!("refs/baton/stories/{}/*", self.lease.id),
                &self.reference(),
            );
        }
        Ok(())
    }
}

impl StepHook for StoryCheckpoints<'_> {
    fn after_step(
        &self,
    ) -> Pin<Box<dyn Future<Output = baton_epic::error::Result<()>> + Send + '_>> {
        Box::pin(async move {
            self.checkpoint().await.map_err(|e| {
                if e.is_lease_lost() {
                    self.lost.store(true, Ordering::SeqCst);
                }
                EpicError::failure(e.code(), e.to_string())
            })
        })
    }
}

/// What earlier workers left: the unit's last checkpoint, and the agent-state file of the
/// answer given since its last question.
async fn earlier(
    queue: &Queue,
    unit: i64,
    story: &str,
) -> Result<(Option<StoryCheckpoint>, Option<StoryAnswer>), WorkerError> {
    let mut last = None;
    let mut answered = None;
    let mut after = 0;
    loop {
        let page = queue.writes(unit, after, 200).await?;
        let Some(end) = page.last().map(|w| w.seq) else {
            break;
        };
        after = end;
        for w in page {
            match w.kind.as_str() {
                STORY_CHECKPOINT => {
                    let c = StoryCheckpoint::from_value(story, &w.body).map_err(|m| {
                        WorkerError::other(
                            "QUEUE_CHECKPOINT_INVALID",
                            format!("write {} of unit {unit}: {m}", w.seq),
                        )
                    })?;
                    last = Some(c);
                }
                "question" => answered = None,
                "answer" => answered = StoryAnswer::from_body(&w.body),
                _ => {}
            }
        }
    }
    Ok((last, answered))
}

/// Installs the packages the orchestrator pinned for the phases into the unit's store.
async fn install_pinned(
    queue: &Queue,
    store: &Store,
    work: &Path,
    pinned: &[String],
) -> Result<(), WorkerError> {
    for sha in pinned {
        let Some(package) = queue.package(sha).await? else {
            return Err(WorkerError::other(
                "WORKER_NO_PACKAGE",
                format!("package {sha} is not in the database"),
            ));
        };
        let path = work.join(format!("package-{}.bmad", &sha[..16]));
        std::fs::write(&path, &package.bytes)
            .map_err(|e| WorkerError::other("WORKER_IO", e.to_string()))?;
        let loaded = baton_package::Package::load(&path)
            .map_err(|e| WorkerError::other("WORKER_NO_PACKAGE", format!("package {sha}: {e}")))?;
        store
            .packages()
            .install(&loaded, &path.display().to_string())
            .map_err(|e| WorkerError::other("WORKER_IO", e.to_string()))?;
    }
    Ok(())
}

pub(crate) async fn run_story_unit(ctx: &Ctx, lease: Lease) -> Result<(), WorkerError> {
    let mut queue = Queue::open(&ctx.options.config).await?;
    let lost = Arc::new(AtomicBool::new(false));
    let cancel = CancellationToken::new();
    let _beat = heartbeat(ctx, &lease, lost.clone(), cancel.clone());
    // A worker stopping (SIGTERM) stops the story; the unit is handed back at its checkpoint.
    let stop = ctx.options.stop.clone();
    let on_stop = cancel.clone();
    let _stopper = AbortOnDrop(tokio::spawn(async move {
        stop.cancelled().await;
        on_stop.cancel();
    }));
    let payload = match StoryPayload::from_value(&lease.payload) {
        Ok(p) => p,
        Err(m) => {
            queue
                .fail(
                    &lease,
                    &json!({"code": QUEUE_PAYLOAD_INVALID, "message": m}),
                )
                .await?;
            ctx.emit(WorkerEvent::Failed {
                unit: lease.id,
                code: QUEUE_PAYLOAD_INVALID.into(),
                message: m,
            });
            return Ok(());
        }
    };
    let (own, answered) = earlier(&queue, lease.id, &payload.story).await?;
    let from = match (&own, payload.from_unit) {
        (None, Some(u)) => earlier(&queue, u, &payload.story).await?.0,
        _ => None,
    };
    let start_commit = own
        .as_ref()
        .map_or(lease.base_commit.clone(), |c| c.commit.clone());
    let work = ctx.unit_folder(&lease);
    std::fs::create_dir_all(&work).map_err(|e| WorkerError::other("WORKER_IO", e.to_string()))?;
    let tree = checkout(
        &ctx.options.home,
        &ctx.git_lock,
        &lease.project_remote,
        &start_commit,
        &work,
    )?;
    let project = if payload.project_subdir.is_empty() {
        tree.clone()
    } else {
        tree.join(&payload.project_subdir)
    };
    let start = match (own, from) {
        (Some(c), _) => {
            ctx.emit(WorkerEvent::Resuming {
                unit: lease.id,
                run_id: format!("story {}", payload.story),
                commit: c.commit.clone(),
            });
            Start::Continue(c.files)
        }
        (None, Some(c)) => Start::From(c.files),
        (None, None) => Start::Fresh,
    };
    let home = &ctx.options.home;
    // The unit's model, endpoint and API (baton-epic's StoryModel; a unit from before the API
    // travelled names none: the worker's flag or files choose).
    let named = crate::payload::ModelPayload {
        name: payload.model.name.clone(),
        base_url: payload.model.base_url.clone(),
        api: payload.model.api.clone(),
        ..Default::default()
    };
    let choice = crate::model::live_choice(&named, &ctx.options.model)?;
    let model = crate::model::load(home, &project, &crate::model::UnitModel::Choice(choice))?;
    let store = Store::new(work.join("home"));
    install_pinned(&queue, &store, &work, &payload.packages).await?;
    let hook = StoryCheckpoints {
        home,
        queue: Mutex::new(Queue::open(&ctx.options.config).await?),
        lease: &lease,
        tree: &tree,
        project: &project,
        payload: &payload,
        lost: &lost,
        pruned: AtomicBool::new(false),
    };
    let end = run_story(StoryJob {
        store: &store,
        home,
        project: &project,
        payload: &payload,
        model: model.as_dyn(),
        start,
        answered,
        hook: &hook,
        cancel,
        on_event: None,
    })
    .await;
    if lost.load(Ordering::SeqCst) {
        return Err(lease_lost(&lease));
    }
    let end = match end {
        Ok(end) => end,
        Err(e) if e.code == LEASE_LOST => return Err(lease_lost(&lease)),
        Err(e) => return Err(epic_error(e)),
    };
    // The last checkpoint goes with the unit's end, in one fenced transaction.
    let last = hook.record()?;
    let fenced = queue.fenced(&lease).await?;
    fenced.append(STORY_CHECKPOINT, &last.to_value()).await?;
    let announce = crate::notify::event(&lease.project_remote, &payload, lease.id, &end);
    match end {
        StoryEnd::Approved => {
            let branch = format!(
                "baton/{}/{}/epoch-{}",
                payload.epic_id, payload.story, lease.epoch
            );
            let reference = format!("refs/heads/{branch}");
            crate::git::push(&tree, &lease.project_remote, &last.commit, &reference)?;
            fenced
                .complete(&json!({"story": payload.story, "branch": branch, "commit": last.commit}))
                .await?;
            ctx.emit(WorkerEvent::Completed {
                unit: lease.id,
                branch,
                commit: last.commit,
            });
        }
        StoryEnd::Waiting(q) => {
            let agent = format!("{}{}", payload.story, baton_epic::agent_state::SUFFIX);
            let body = question_body(
                &payload.story,
                &q,
                last.files.get(&agent).map(String::as_str),
            );
            fenced.wait_for_person(&body).await?;
            ctx.emit(WorkerEvent::Waiting { unit: lease.id });
        }
        StoryEnd::Failed(f) => {
            fenced
                .fail(&json!({
                    "code": f.code, "message": f.message, "phase": f.phase.as_str(),
                    "storyKey": f.story_key, "runId": f.run_id,
                }))
                .await?;
            ctx.emit(WorkerEvent::Failed {
                unit: lease.id,
                code: f.code,
                message: f.message,
            });
        }
        StoryEnd::Stopped => {
            // Cancelled without losing the lease: handed back where its checkpoint left it.
            fenced
                .release(&json!({"code": "WORKER_STOPPING", "worker": ctx.options.worker}))
                .await?;
            ctx.emit(WorkerEvent::Released { unit: lease.id });
        }
    }
    // Only once the unit's end is committed: a worker that lost the lease never gets here.
    if let Some(e) = announce
        && let Err(message) = crate::notify::send(&ctx.options.home, &project, e)
    {
        ctx.emit(WorkerEvent::NotifyRefused {
            unit: lease.id,
            message,
        });
    }
    Ok(())
}
