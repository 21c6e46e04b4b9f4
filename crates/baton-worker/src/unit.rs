//! One claimed run unit, from checkout to its outcome.

use crate::WorkerError;
use crate::answers::{QUEUE_ANSWER_INVALID, answer_text};
use crate::checkpoint::{
    Checkpoints, QUEUE_CHECKPOINT_INVALID, Restored, WORKER_STOPPING, restore_point, restore_run,
};
use crate::ctx::Ctx;
use crate::event::WorkerEvent;
use crate::git::checkout_preferring;
use crate::lease::{heartbeat, lease_lost};
use crate::model::UnitModel;
use crate::payload::{QUEUE_PAYLOAD_INVALID, RunPayload};
use crate::pusher::Pusher;
use crate::retry;
use baton_engine::runner::{self, Settings, StartRun};
use baton_engine::{ContextPolicy, Outcome};
use baton_queue::{Lease, Queue, UnitState};
use baton_store::Store;
use serde_json::{Map, Value, json};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Mutex;

/// Removes what the unit left on this machine, unless the worker keeps it.
pub(crate) fn clean(ctx: &Ctx, lease: &Lease) -> Result<(), WorkerError> {
    if ctx.options.keep_units {
        return Ok(());
    }
    crate::git::remove_unit_folder(
        &ctx.options.home,
        &ctx.git_lock,
        &lease.project_remote,
        &ctx.unit_folder(lease),
    )
}

/// Removes the unit folders a worker killed on this home left behind (it could not clean up):
/// every folder but those of units leased now at the folder's epoch, which may belong to a
/// live worker sharing the home. Returns how many went; a folder that cannot go stays.
pub(crate) async fn remove_left_folders(ctx: &Ctx, queue: &Queue) -> usize {
    let units = ctx.options.home.join("worker/units");
    let Ok(entries) = std::fs::read_dir(&units) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        // `<id>-<epoch>-<tag>` (see [`Ctx::unit_folder`]).
        let mut parts = name.splitn(3, '-');
        let parsed = parts
            .next()
            .zip(parts.next())
            .and_then(|(id, epoch)| Some((id.parse::<i64>().ok()?, epoch.parse::<i64>().ok()?)));
        let Some((id, epoch)) = parsed else {
            continue;
        };
        let gone = match queue.unit(id).await {
            Ok(unit) if unit.state == UnitState::Leased && unit.epoch == epoch => continue,
            Ok(unit) => crate::git::remove_unit_folder(
                &ctx.options.home,
                &ctx.git_lock,
                &unit.project_remote,
                &entry.path(),
            )
            .is_ok(),
            Err(e) if e.code() == "QUEUE_UNIT_NOT_FOUND" => {
                std::fs::remove_dir_all(entry.path()).is_ok()
            }
            Err(_) => false,
        };
        if gone {
            removed += 1;
        }
    }
    removed
}

/// Pushes a completed run's result to the branch that carries the epoch, then completes the
/// unit (fenced).
async fn complete(
    ctx: &Ctx,
    queue: &mut Queue,
    lease: &Lease,
    tree: &Path,
    run_id: &str,
    commit: &str,
    message: &str,
) -> Result<(), WorkerError> {
    let branch = format!("baton/unit-{}/epoch-{}", lease.id, lease.epoch);
    let reference = format!("refs/heads/{branch}");
    crate::git::push(tree, &lease.project_remote, commit, &reference)?;
    queue
        .complete(
            lease,
            &json!({"runId": run_id, "commit": commit, "branch": branch, "message": message}),
        )
        .await?;
    ctx.emit(WorkerEvent::Completed {
        unit: lease.id,
        branch,
        commit: commit.to_string(),
    });
    Ok(())
}

/// Hands the unit back to the queue (fenced) as the worker stops.
async fn release(ctx: &Ctx, queue: &mut Queue, lease: &Lease) -> Result<(), WorkerError> {
    let reason = json!({"code": WORKER_STOPPING, "worker": ctx.options.worker});
    queue.release(lease, &reason).await?;
    ctx.emit(WorkerEvent::Released { unit: lease.id });
    Ok(())
}

/// Fails the unit with the reason (fenced) and says so; a failure that may pass queues it
/// again after a backoff instead (see [`crate::retry`]).
async fn fail(
    ctx: &Ctx,
    queue: &mut Queue,
    lease: &Lease,
    code: &str,
    message: &str,
    run_id: Option<&str>,
) -> Result<(), WorkerError> {
    retry::settle(
        ctx,
        queue,
        lease,
        retry::Failure::new(code, message, run_id),
    )
    .await
}

/// The answer a person gave from the database since the run's last checkpoint: an `answer`
/// write newer than every `checkpoint`. Once the run has gone on with it, its next
/// checkpoint (taken before the model hears the answer) is newer, so a later claim resumes
/// instead of answering again.
async fn pending_answer(queue: &Queue, unit: i64) -> Result<Option<String>, WorkerError> {
    let Some(last) = queue.last_write_of(unit, &["answer", "checkpoint"]).await? else {
        return Ok(None);
    };
    if last.kind != "answer" {
        return Ok(None);
    }
    match answer_text(&last.body) {
        Some(text) => Ok(Some(text)),
        None => Err(WorkerError::other(
            QUEUE_ANSWER_INVALID,
            format!("the answer to unit {unit} (write {}) has no text", last.seq),
        )),
    }
}

/// What the unit stores while it waits: the question as the run recorded it (text, node,
/// reason, widget with its options) and the run's id.
fn question_of(store: &Store, project: &Path, run_id: &str, question: &str) -> Value {
    let recorded = store
        .project(project)
        .and_then(|p| p.get_run(run_id))
        .ok()
        .and_then(|run| run.waiting_for)
        .filter(Value::is_object);
    let mut q = recorded.unwrap_or_else(|| json!({}));
    if q.get("question").and_then(Value::as_str).is_none() {
        q["question"] = json!(question);
    }
    q["runId"] = json!(run_id);
    q
}

pub(crate) async fn run_unit(ctx: &Ctx, lease: Lease) -> Result<(), WorkerError> {
    let mut queue = Queue::open(&ctx.options.config).await?;
    let lost = Arc::new(AtomicBool::new(false));
    let cancel = tokio_util::sync::CancellationToken::new();
    let _beat = heartbeat(ctx, &lease, lost.clone(), cancel.clone());

    let payload = match RunPayload::from_value(&lease.payload) {
        Ok(p) => p,
        Err(m) => return fail(ctx, &mut queue, &lease, QUEUE_PAYLOAD_INVALID, &m, None).await,
    };
    // A unit an earlier worker checkpointed goes on from its last checkpoint.
    let restored = match restore_point(&queue, lease.id).await {
        Ok(r) => r,
        Err(e) if e.is_lease_lost() => return Err(e),
        Err(e) => return fail(ctx, &mut queue, &lease, e.code(), &e.to_string(), None).await,
    };
    // A person answered the question it waited on: the run goes on with the answer.
    let answer = match &restored {
        None => None,
        Some(_) => match pending_answer(&queue, lease.id).await {
            Ok(a) => a,
            Err(e) => return fail(ctx, &mut queue, &lease, e.code(), &e.to_string(), None).await,
        },
    };
    let work = ctx.unit_folder(&lease);
    std::fs::create_dir_all(&work).map_err(|e| WorkerError::other("WORKER_IO", e.to_string()))?;
    // The checkpoint's commit where its push landed; else the last commit the remote held
    // then, with the files the checkpoint carried written back.
    let preferred = restored
        .as_ref()
        .map(|r| (r.commit.as_str(), r.reference.as_str()));
    let fallback = restored
        .as_ref()
        .map_or(lease.base_commit.as_str(), |r| r.tree.base.as_str());
    let (tree, at_commit) = checkout_preferring(
        &ctx.options.home,
        &ctx.git_lock,
        &lease.project_remote,
        preferred,
        fallback,
        &work,
    )?;
    let start_commit = match (&restored, at_commit) {
        (Some(r), true) => r.commit.clone(),
        _ => fallback.to_string(),
    };
    let mut commits = crate::tree_commit::open(&ctx.options.home, &tree)?;
    if let Some(r) = restored.as_ref().filter(|_| !at_commit) {
        crate::tree_commit::apply(&tree, &r.tree.changes).map_err(|e| {
            WorkerError::other(
                QUEUE_CHECKPOINT_INVALID,
                format!("the checkpoint's files: {e}"),
            )
        })?;
    }
    // Its worker died after the run's last checkpoint, before the unit was completed: the
    // checkpoint holds the result, and nothing is left to run.
    if let Some(r) = restored
        .as_ref()
        .filter(|r| r.phase().as_deref() == Some("completed"))
    {
        let seconds = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let (head, _) = commits
            .commit(&format!("baton: unit {} completed", lease.id), seconds)
            .map_err(|e| WorkerError::other("WORKER_IO", format!("checkpoint commit: {e}")))?;
        let commit = crate::objects::to_hex(&head);
        let message = "completed by an earlier worker before it stopped";
        return complete(ctx, &mut queue, &lease, &tree, &r.run_id, &commit, message).await;
    }
    if ctx.options.stop.is_cancelled() {
        return release(ctx, &mut queue, &lease).await;
    }
    let project = if payload.project_subdir.is_empty() {
        tree.clone()
    } else {
        tree.join(&payload.project_subdir)
    };
    let Some(sha) = lease.package_sha256.clone() else {
        return Err(WorkerError::other(
            "WORKER_NO_PACKAGE",
            format!("unit {} has no package", lease.id),
        ));
    };
    let Some(package) = queue.package(&sha).await? else {
        return Err(WorkerError::other(
            "WORKER_NO_PACKAGE",
            format!("package {sha} is not in the database"),
        ));
    };
    let package_path = work.join("package.bmad");
    std::fs::write(&package_path, &package.bytes)
        .map_err(|e| WorkerError::other("WORKER_IO", e.to_string()))?;
    // The unit's model: a worker's own model wins over the unit's trace.
    let choice = match &payload.replay {
        Some(r) if !ctx.options.model.is_set() => {
            let Some(trace) = queue.trace(&r.sha256).await? else {
                return Err(WorkerError::other(
                    "WORKER_NO_TRACE",
                    format!("trace {} ({}) is not in the database", r.sha256, r.name),
                ));
            };
            UnitModel::Trace {
                text: String::from_utf8_lossy(&trace.bytes).into_owned(),
                source: format!("queue:{}@{}", r.name, &r.sha256[..16.min(r.sha256.len())]),
            }
        }
        _ => match crate::model::live_choice(&payload.model, &ctx.options.model) {
            Ok(c) => UnitModel::Choice(c),
            Err(e) => return fail(ctx, &mut queue, &lease, e.code(), &e.to_string(), None).await,
        },
    };
    let store = Store::new(work.join("home"));
    let hook = Checkpoints {
        queue: Mutex::new(Queue::open(&ctx.options.config).await?),
        lease: &lease,
        store: &store,
        project: &project,
        tree: &tree,
        lost: &lost,
        stop: &ctx.options.stop,
        seen: std::sync::Mutex::new(restored.as_ref().map(Restored::seen).unwrap_or_default()),
        pruned: AtomicBool::new(false),
        commits: std::sync::Mutex::new(commits),
        pusher: Pusher::new(
            &tree,
            &lease.project_remote,
            &format!("refs/baton/runs/{}/{}", lease.id, lease.epoch),
            crate::pusher::PUSH_PACE,
        ),
        start: start_commit.clone(),
    };
    let outcome = drive(
        ctx,
        &lease,
        &payload,
        &choice,
        restored.as_ref(),
        answer,
        &store,
        &package_path,
        &project,
        &hook,
        cancel,
    )
    .await;
    // No push of this attempt outlives it (a takeover's prune would race it).
    crate::git::blocking(|| hook.pusher.settle());
    if lost.load(Ordering::SeqCst) {
        return Err(lease_lost(&lease));
    }
    let finished = match outcome {
        Ok(f) => f,
        Err(e) if e.is_lease_lost() => return Err(e),
        Err(e) if e.code() == WORKER_STOPPING => return release(ctx, &mut queue, &lease).await,
        Err(e) => return fail(ctx, &mut queue, &lease, e.code(), &e.to_string(), None).await,
    };
    let run_id = finished.run.run_id.clone();
    match &finished.report.outcome {
        Outcome::Completed { message } => {
            // The result: the last checkpoint's commit on a branch that carries the epoch.
            let commit = hook.final_commit(&format!("baton: unit {} completed", lease.id))?;
            complete(ctx, &mut queue, &lease, &tree, &run_id, &commit, message).await?;
        }
        Outcome::Waiting { question } => {
            let asked = question_of(&store, &project, &run_id, question);
            queue.wait_for_person(&lease, &asked).await?;
            ctx.emit(WorkerEvent::Waiting { unit: lease.id });
        }
        Outcome::Failed { code, message } => {
            fail(ctx, &mut queue, &lease, code, message, Some(&run_id)).await?;
        }
    }
    Ok(())
}

/// Creates the run (or puts the checkpointed one back) and drives it with the engine.
#[allow(clippy::too_many_arguments)]
async fn drive(
    ctx: &Ctx,
    lease: &Lease,
    payload: &RunPayload,
    choice: &UnitModel,
    restored: Option<&Restored>,
    answer: Option<String>,
    store: &Store,
    package_path: &Path,
    project: &Path,
    hook: &Checkpoints<'_>,
    cancel: tokio_util::sync::CancellationToken,
) -> Result<runner::Finished, WorkerError> {
    let home = &ctx.options.home;
    let model = crate::model::load(home, project, choice)?;
    let tools = baton_tools::ToolsConfig::load(Some(home), Some(project))
        .map_err(|e| WorkerError::other(e.code(), e.to_string()))?;
    let caps = baton_engine::spend::BudgetConfig::load(Some(home), Some(project))
        .and_then(|b| b.with_flags(payload.budget.tokens, payload.budget.usd))
        .map_err(|m| WorkerError::other(baton_engine::spend::BUDGET_CONFIG_INVALID, m))?
        .run_caps();
    let mut settings = Settings::new(model.as_dyn());
    settings.autopilot = payload.autopilot;
    settings.budget = Some(model.budget(payload.model.context_tokens));
    settings.context = match payload.model.context.as_deref() {
        Some("full") => Some(ContextPolicy::Full),
        Some("node") => Some(ContextPolicy::Node),
        _ => None,
    };
    settings.tools = tools;
    settings.caps = caps;
    settings.cancel = cancel;
    settings.on_durable = Some(hook);
    // A replayed run takes its recorded answers, and one taken over goes on past those its
    // conversation already used.
    settings.replay = model.replay();
    let variables: Map<String, Value> = payload.vars.clone();
    let start = StartRun {
        package: package_path,
        project,
        workflow: payload.workflow.as_deref(),
        agent: payload.agent.as_deref(),
    };
    let claimed = match restored {
        None => runner::create(store, start, &variables),
        Some(r) => restore_run(store, package_path, project, r).and_then(|()| {
            let continuation = match answer {
                Some(text) => {
                    ctx.emit(WorkerEvent::Answering {
                        unit: lease.id,
                        run_id: r.run_id.clone(),
                    });
                    runner::Continuation::Answer(text)
                }
                None => {
                    ctx.emit(WorkerEvent::Resuming {
                        unit: lease.id,
                        run_id: r.run_id.clone(),
                        commit: r.commit.clone(),
                    });
                    runner::Continuation::Resume
                }
            };
            runner::claim(store, &r.run_id, continuation)
        }),
    }
    .map_err(|e| WorkerError::other(e.code(), e.to_string()))?;
    // Answers given in advance go to the questions not yet answered: a run taken over has
    // used as many as its conversation holds answers (they are used before any person's).
    let answered = restored.map_or(0, |r| {
        let log = store
            .project(project)
            .map(|p| p.run_paths(&r.run_id).conversation_log);
        log.ok()
            .and_then(|log| baton_engine::conversation::restore(&log).ok())
            .map_or(0, |c| c.answers)
    });
    settings.inputs = payload.inputs.iter().skip(answered).cloned().collect();
    runner::continue_claimed(claimed, settings)
        .await
        .map_err(|e| WorkerError::other(e.code(), e.to_string()))
}
