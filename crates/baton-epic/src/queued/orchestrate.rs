//! The orchestrator of a queued epic: one process in the user's project, holding the epic's
//! lease, submitting story units (at most N in flight), following them in the database, and
//! merging each approved story's branch onto the epic's branch as local parallel mode does.
//!
//! Crash safety: the state file is written before a unit is submitted (the story started) and
//! after (its unit), and a restarted orchestrator first looks its session's units up in the
//! database, so a unit submitted just before a kill is found, not submitted twice. A merge under
//! way is finished from its worktree's record (see [`baton_worktree::merge`]).

use super::payload::{StoryCheckpoint, StoryPayload};
use super::state::{self, QueuedState};
use super::{EPIC_QUEUE_LEASE_HELD, EPIC_QUEUE_LEASE_LOST, QueueTarget, STORY_CHECKPOINT};
use crate::ctx::Ctx;
use crate::error::{EpicError, Result};
use crate::events::EpicEvent;
use crate::outcome::EpicOutcome;
use crate::parallel::{merge_story_onto, worktree_root};
use crate::progress::FailureDetail;
use crate::progress::now;
use crate::schedule::{self, Activity, PlanInput};
use crate::{lock, parallel_board};
use baton_autopilot::untrusted::limit;
use baton_bmad::keys;
use baton_bmad::phase::Phase;
use baton_bmad::sprint;
use baton_epic_state::agent_state::{self, AgentState, Question};
use baton_epic_state::run_state::Failure;
use baton_queue::source::{
    ProjectSource, QUEUE_COMMIT_NOT_PUSHED, SubmitError, check_pushed, project_remote,
};
use baton_queue::{
    DEFAULT_QUEUE, EpicLease, NewUnit, Queue, QueueError, UnitKind, UnitState, epic_lease_key,
};
use baton_worktree::merge::{self, MergeOutcome};
use baton_worktree::worktree::{Worktrees, tail};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

fn queue_error(e: QueueError) -> EpicError {
    let hint = e.hint();
    let mut err = EpicError::failure(e.code(), e.to_string());
    err.hint = hint;
    err
}

fn submit_error(e: SubmitError) -> EpicError {
    let mut err = if e.invalid {
        EpicError::usage(e.code, e.message)
    } else {
        EpicError::failure(e.code, e.message)
    };
    err.hint = e.hint;
    err
}

/// git outside the sandbox (the remote may be anywhere), never prompting, with baton-git's
/// configuration and a clean environment: it runs on the person's repository, where a model's
/// nested repository may sit.
fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = baton_git::hardening::remote_command(dir)
        .args(args)
        .env("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
        .output()
        .map_err(|e| EpicError::failure("EPIC_GIT_FAILED", format!("cannot run git: {e}")))?;
    if !out.status.success() {
        return Err(EpicError::failure(
            "EPIC_GIT_FAILED",
            format!(
                "git {}: {}",
                args.first().copied().unwrap_or(""),
                tail(&String::from_utf8_lossy(&out.stderr), 2000)
            ),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn is_commit_id(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Stops the lease's heartbeat when the orchestrator ends, whichever way.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Renews the epic's lease every third of it on a connection of its own; a lease found lost
/// sets `lost` and cancels the loop.
fn heartbeat(
    target: &QueueTarget,
    lease: &EpicLease,
    lost: Arc<AtomicBool>,
    cancel: tokio_util::sync::CancellationToken,
) -> AbortOnDrop {
    let config = target.config.clone();
    let lease = lease.clone();
    let every = lease.duration / 3;
    AbortOnDrop(tokio::spawn(async move {
        let Ok(q) = Queue::open(&config).await else {
            return;
        };
        loop {
            tokio::time::sleep(every).await;
            if let Ok(false) = q.heartbeat_epic(&lease).await {
                lost.store(true, Ordering::SeqCst);
                cancel.cancel();
                return;
            }
        }
    }))
}

/// How a story of this invocation stands, when it does not run.
enum Held {
    Question(Question),
    Failed(FailureDetail),
}

/// Everything the loop works with besides the context.
struct Orch<'t> {
    target: &'t QueueTarget,
    queue: Queue,
    lease: EpicLease,
    source: ProjectSource,
    epic_id: String,
    st: QueuedState,
    wts: Worktrees,
    /// The epic's tip last pushed for the workers.
    pushed: Option<String>,
    /// The pinned packages every unit names.
    packages: Vec<String>,
    /// Units seen queued or leased by this invocation (a failure of one is this invocation's).
    seen_live: BTreeSet<i64>,
    /// Stories retried by this invocation.
    retried: BTreeSet<String>,
    /// The last checkpoint write read, per unit.
    seen_seq: HashMap<i64, i64>,
    held: BTreeMap<String, Held>,
}

/// Runs the epic's stories on the queue until every story is done, or paused.
pub(crate) async fn run(
    ctx: &mut Ctx<'_>,
    slots: u32,
    started: SystemTime,
    target: QueueTarget,
) -> Result<EpicOutcome> {
    let epic_id = keys::epic_key(ctx.epic);
    let main_dir = ctx.layout.dir.clone();
    let mut st = match QueuedState::load(&main_dir)? {
        Some(s) if s.epic_id == epic_id => s,
        _ => QueuedState {
            epic_id: epic_id.clone(),
            session: format!("{:x}-{:x}", crate::progress::now_ms(), std::process::id()),
            ..QueuedState::default()
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
                "--queue needs the project on a branch (HEAD is detached or not a git work tree)",
            )
            .hint("check out the branch the epic's stories should land on"));
        }
        st.branch = out.stdout.trim().to_string();
    }
    st.slots = slots;
    st.db_url = target.url.clone();
    st.db_env = target.db_env.clone();
    st.model = target.model.clone();
    let source = project_remote(&ctx.layout.project).map_err(submit_error)?;
    let queue = Queue::open(&target.config).await.map_err(queue_error)?;
    let packages = pin_packages(ctx, &queue).await?;
    let key = epic_lease_key(&source.remote, &epic_id);
    let site = format!("{}:{}", target.host, ctx.layout.project.display());
    let lease = match queue
        .acquire_epic(&key, &target.owner, &site, target.lease)
        .await
        .map_err(queue_error)?
    {
        Ok(l) => l,
        Err(holder) => {
            return Err(EpicError::failure(
                EPIC_QUEUE_LEASE_HELD,
                format!(
                    "{epic_id} of {} is run by another orchestrator ({} on {}); its lease ends in {:.0} s unless it renews it",
                    source.remote, holder.owner, holder.site, holder.expires_in_s
                ),
            )
            .hint("let that one go on (`baton epic status` where it runs), or once it has stopped and its lease expired run `baton epic resume` here"));
        }
    };
    st.save(&main_dir)?;
    let lost = Arc::new(AtomicBool::new(false));
    let _beat = heartbeat(&target, &lease, lost.clone(), ctx.cancel.clone());
    let wts = Worktrees::open(&ctx.layout.project, &worktree_root(ctx))?;
    wts.recover()?;
    let mut o = Orch {
        target: &target,
        queue,
        lease,
        source,
        epic_id: epic_id.clone(),
        st,
        wts,
        pushed: None,
        packages,
        seen_live: BTreeSet::new(),
        retried: BTreeSet::new(),
        seen_seq: HashMap::new(),
        held: BTreeMap::new(),
    };
    let result = o.drive(ctx, started).await;
    let _ = o.queue.release_epic(&o.lease).await;
    if lost.load(Ordering::SeqCst) {
        ctx.state.running = false;
        let _ = ctx.save();
        return Err(EpicError::failure(
            EPIC_QUEUE_LEASE_LOST,
            format!("the lease of {epic_id} was taken over by another orchestrator"),
        )
        .hint("another `baton epic` runs this epic now; `baton epic status` there shows it"));
    }
    result
}

impl Orch<'_> {
    fn save(&self, ctx: &Ctx<'_>) -> Result<()> {
        self.st.save(&ctx.layout.dir)
    }

    fn note(&self, ctx: &Ctx<'_>, text: String) {
        ctx.emit(EpicEvent::Note(text));
    }

    async fn drive(&mut self, ctx: &mut Ctx<'_>, started: SystemTime) -> Result<EpicOutcome> {
        // Stories whose merge was under way: first in the queue.
        for r in self.wts.records()? {
            if r.epic == self.epic_id && r.merge.is_some() && !self.st.queue.contains(&r.story) {
                self.st.queue.insert(0, r.story.clone());
            }
        }
        // Units submitted before a kill, before their id was written down.
        let found = self
            .queue
            .story_units(&self.source.remote, &self.epic_id, &self.st.session)
            .await
            .map_err(queue_error)?;
        for u in found {
            if self.st.started.contains(&u.story) {
                let known = self.st.units.entry(u.story.clone()).or_insert(0);
                *known = (*known).max(u.id);
            }
        }
        self.save(ctx)?;
        let mut stuck: Option<String> = None;
        let mut stopping = false;
        loop {
            // 1. Merges, one at a time in approval order.
            while !ctx.cancel.is_cancelled()
                && let Some(key) = self.st.queue.first().cloned()
            {
                if !self.merge(ctx, &key, started).await? {
                    break;
                }
            }
            if lock::stop_requested(&ctx.layout.dir) {
                stopping = true;
            }
            if stopping || ctx.cancel.is_cancelled() {
                break;
            }
            // 2. Where the units stand.
            let live = self.poll(ctx).await?;
            // 3. Start what the schedule allows.
            let submitted = match stuck {
                None => self.start(ctx, live.len(), &mut stuck).await?,
                Some(_) => 0,
            };
            if live.is_empty() && submitted == 0 && self.st.queue.is_empty() {
                break;
            }
            if !self.st.queue.is_empty() {
                continue;
            }
            tokio::select! {
                () = tokio::time::sleep(self.target.poll) => {}
                () = ctx.cancel.cancelled() => {}
            }
        }
        if stopping {
            // The units in flight go on on their workers; `resume` follows them again.
            lock::clear_stop(&ctx.layout.dir)?;
            return ctx.pause(EpicOutcome::Stopped);
        }
        if ctx.cancel.is_cancelled() {
            return ctx.pause(EpicOutcome::Interrupted);
        }
        if let Some((key, Held::Question(q))) = self
            .held
            .iter()
            .find(|(_, h)| matches!(h, Held::Question(_)))
        {
            ctx.state.current_story_key = Some(key.clone());
            return ctx.pause(EpicOutcome::Waiting {
                story: key.clone(),
                question: q.clone(),
            });
        }
        if let Some((_, Held::Failed(failure))) = self.held.iter().next() {
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
        ctx.finish()
    }

    /// Merges the first approved story; `false` when merging stops for now.
    async fn merge(&mut self, ctx: &mut Ctx<'_>, key: &str, started: SystemTime) -> Result<bool> {
        let branch = self.st.branch.clone();
        let outcome = merge_story_onto(
            ctx,
            &self.wts,
            &branch,
            &self.epic_id,
            key,
            started,
            &[state::FILE_NAME],
        )?;
        match outcome {
            MergeOutcome::Merged { .. } => {
                ctx.raise(key, "done")?;
                if !ctx.progress.completed.iter().any(|k| k == key) {
                    ctx.progress.completed.push(key.to_string());
                }
                if !ctx.completed_now.iter().any(|k| k == key) {
                    ctx.completed_now.push(key.to_string());
                }
                ctx.state
                    .push_step(key, ctx.pipeline.last().as_str(), &now());
                ctx.save()?;
                self.wts.remove(&self.epic_id, key, true)?;
                let fetched = self.fetched_ref(key);
                let _ = git(&ctx.layout.project, &["update-ref", "-d", &fetched]);
                self.st.queue.retain(|k| k != key);
                self.st.started.retain(|k| k != key);
                self.st.units.remove(key);
                self.st.returned.remove(key);
                self.save(ctx)?;
            }
            MergeOutcome::Conflict { files, tail } => {
                let output = format!(
                    "merging onto {branch} conflicted in {}; the conflicts are marked in these files:\n{tail}",
                    files.join(", ")
                );
                self.back_to_dev(ctx, key, output).await?;
            }
            MergeOutcome::CheckFailed { result } => {
                let output = format!("after rebasing onto {branch}: {}", result.report());
                self.back_to_dev(ctx, key, output).await?;
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
                self.st.queue.retain(|k| k != key);
                self.held.insert(key.to_string(), Held::Failed(detail));
            }
            MergeOutcome::Interrupted => return Ok(false),
        }
        Ok(true)
    }

    fn fetched_ref(&self, key: &str) -> String {
        format!("refs/baton/fetched/{}/{key}", self.epic_id)
    }

    /// A merge refused the story: its worktree's state (the conflicts marked on the epic's tip,
    /// or the rebased story) goes to a new unit, back to dev with what went wrong.
    async fn back_to_dev(&mut self, ctx: &mut Ctx<'_>, key: &str, output: String) -> Result<()> {
        self.st.queue.retain(|k| k != key);
        let n = {
            let n = self.st.returned.entry(key.to_string()).or_insert(0);
            *n += 1;
            *n
        };
        let max = ctx.config.max_review_cycles;
        if n > max {
            self.held.insert(
                key.to_string(),
                Held::Failed(FailureDetail {
                    phase: ctx.pipeline.rework(),
                    story_key: key.to_string(),
                    code: "EPIC_MERGE_CYCLES_EXHAUSTED".into(),
                    message: format!("story {key} could not be merged: {output}"),
                    run_id: None,
                }),
            );
            return self.save(ctx);
        }
        let Some(wt) = self.wts.get(&self.epic_id, key)? else {
            return Err(EpicError::failure(
                "EPIC_WORKTREE_MISSING",
                format!("story {key} has no worktree to send back"),
            ));
        };
        self.wts.git_in_ok(&wt, &["add", "-A"])?;
        let message = format!("baton: {key} back to dev ({n} of {max})");
        self.wts.git_in_ok(
            &wt,
            &[
                "-c",
                "user.name=baton",
                "-c",
                "user.email=baton@baton.invalid",
                "commit",
                "-q",
                "--allow-empty",
                "--no-verify",
                "-m",
                &message,
            ],
        )?;
        let commit = self
            .wts
            .git_in_ok(&wt, &["rev-parse", "HEAD"])?
            .trim()
            .to_string();
        let reference = format!(
            "refs/baton/epics/{}/{}/{key}-return-{n}",
            self.epic_id, self.st.session
        );
        git(
            &ctx.layout.project,
            &[
                "push",
                "--quiet",
                &self.source.remote,
                &format!("+{commit}:{reference}"),
            ],
        )?;
        let from = self.st.units.get(key).copied().filter(|id| *id > 0);
        let payload = self.payload(ctx, key, from, Some(tail(&output, merge::CONFLICT_TAIL)))?;
        let id = self.submit(key, payload, &commit).await?;
        self.wts.remove(&self.epic_id, key, true)?;
        self.st.units.insert(key.to_string(), id);
        self.save(ctx)?;
        self.note(
            ctx,
            format!(
                "{key}: not merged, back to dev as unit {id} ({n} of {max}): {}",
                output.lines().next().unwrap_or("")
            ),
        );
        Ok(())
    }

    /// The payload of a unit of `key`: the orchestrator's `sprint-status.yaml` and the story's
    /// agent-state file go with it.
    fn payload(
        &self,
        ctx: &Ctx<'_>,
        key: &str,
        from_unit: Option<i64>,
        back_to_dev: Option<String>,
    ) -> Result<StoryPayload> {
        let mut files = BTreeMap::new();
        let agent = format!("{key}{}", agent_state::SUFFIX);
        for name in [sprint::FILE_NAME, agent.as_str()] {
            if let Some(bytes) = ctx.layout.dir.read(name, limit::STATUS)? {
                let text = String::from_utf8(bytes).map_err(|_| {
                    EpicError::failure(
                        "EPIC_FILE_INVALID",
                        format!("{} is not UTF-8 text", ctx.layout.rel_file(name)),
                    )
                })?;
                files.insert(name.to_string(), text);
            }
        }
        // The project's folder inside the repository, then the artifacts inside the project.
        Ok(StoryPayload {
            epic_id: self.epic_id.clone(),
            story: key.to_string(),
            session: self.st.session.clone(),
            project_subdir: self.source.subdir.clone(),
            artifacts: ctx.layout.rel.clone(),
            model: self.st.model.clone(),
            files,
            from_unit,
            back_to_dev,
            packages: self.packages.clone(),
            pipeline: Some(ctx.pipeline.record()),
        })
    }

    /// Submits a story unit under the epic's lease.
    async fn submit(&self, key: &str, payload: StoryPayload, base: &str) -> Result<i64> {
        let unit = NewUnit {
            kind: UnitKind::Story,
            queue: DEFAULT_QUEUE.to_string(),
            payload: payload.to_value(),
            package_sha256: None,
            project_remote: self.source.remote.clone(),
            base_commit: base.to_string(),
            max_attempts: None,
        };
        match self
            .queue
            .submit_story(&self.lease, &unit)
            .await
            .map_err(queue_error)?
        {
            Some(id) => Ok(id),
            None => Err(EpicError::failure(
                EPIC_QUEUE_LEASE_LOST,
                format!(
                    "story {key} was not submitted: the lease of {} was taken over",
                    self.epic_id
                ),
            )),
        }
    }

    /// The epic's tip, pushed where the workers fetch it (once per tip).
    fn push_tip(&mut self, ctx: &Ctx<'_>) -> Result<String> {
        let project = &ctx.layout.project;
        let tip = git(
            project,
            &[
                "rev-parse",
                "--verify",
                &format!("refs/heads/{}^{{commit}}", self.st.branch),
            ],
        )?;
        if self.pushed.as_deref() != Some(tip.as_str()) {
            let reference = format!("refs/baton/epics/{}/{}/tip", self.epic_id, self.st.session);
            git(
                project,
                &[
                    "push",
                    "--quiet",
                    &self.source.remote,
                    &format!("+{tip}:{reference}"),
                ],
            )?;
            check_pushed(project, &self.source.remote_name, &self.source.remote, &tip)
                .map_err(submit_error)?;
            self.pushed = Some(tip.clone());
        }
        Ok(tip)
    }

    /// Looks at every unit in flight; returns the stories whose unit is queued or leased.
    async fn poll(&mut self, ctx: &mut Ctx<'_>) -> Result<BTreeSet<String>> {
        let mut live = BTreeSet::new();
        for key in self.st.started.clone() {
            if self.st.queue.contains(&key) || self.held.contains_key(&key) {
                continue;
            }
            let Some(id) = self.st.units.get(&key).copied().filter(|id| *id > 0) else {
                continue;
            };
            let unit = self.queue.unit(id).await.map_err(queue_error)?;
            match unit.state {
                UnitState::Queued | UnitState::Leased => {
                    self.seen_live.insert(id);
                    self.raise_from_checkpoints(ctx, &key, id).await?;
                    live.insert(key);
                }
                UnitState::Waiting => {
                    self.raise_from_checkpoints(ctx, &key, id).await?;
                    if self.waiting(ctx, &key, id, unit.question.as_ref()).await? {
                        live.insert(key);
                    }
                }
                UnitState::Done => {
                    self.raise_from_checkpoints(ctx, &key, id).await?;
                    self.approved(ctx, &key, id, unit.outcome.as_ref()).await?;
                }
                UnitState::Failed | UnitState::Cancelled => {
                    self.raise_from_checkpoints(ctx, &key, id).await?;
                    if !self.seen_live.contains(&id) && self.retried.insert(key.clone()) {
                        // Failed before this invocation: `resume` tries it again, from where
                        // its last checkpoint left it.
                        let id = self.retry(ctx, &key, id).await?;
                        self.seen_live.insert(id);
                        live.insert(key);
                    } else {
                        let detail = failure_of(&key, unit.state, unit.outcome.as_ref());
                        self.note(
                            ctx,
                            format!(
                                "{key}: unit {id} {}: {}",
                                unit.state.as_str(),
                                detail.message
                            ),
                        );
                        self.held.insert(key, Held::Failed(detail));
                    }
                }
            }
        }
        Ok(live)
    }

    async fn retry(&mut self, ctx: &Ctx<'_>, key: &str, failed: i64) -> Result<i64> {
        let base = self.last_checkpoint(key, failed).await?.map(|c| c.commit);
        let base = match base {
            Some(commit) => commit,
            None => self.push_tip(ctx)?,
        };
        let payload = self.payload(ctx, key, Some(failed), None)?;
        let id = self.submit(key, payload, &base).await?;
        self.st.units.insert(key.to_string(), id);
        self.save(ctx)?;
        self.note(
            ctx,
            format!("{key}: unit {failed} had failed; tried again as unit {id}"),
        );
        Ok(id)
    }

    /// The last valid checkpoint of a unit.
    async fn last_checkpoint(&self, key: &str, unit: i64) -> Result<Option<StoryCheckpoint>> {
        let mut after = 0;
        let mut last = None;
        loop {
            let page = self
                .queue
                .writes(unit, after, 200)
                .await
                .map_err(queue_error)?;
            let Some(end) = page.last().map(|w| w.seq) else {
                break;
            };
            after = end;
            for w in page.iter().filter(|w| w.kind == STORY_CHECKPOINT) {
                if let Ok(c) = StoryCheckpoint::from_value(key, &w.body) {
                    last = Some(c);
                }
            }
        }
        Ok(last)
    }

    /// The statuses a story's checkpoints reached, raised in the main work tree (`done` waits
    /// for the merge).
    async fn raise_from_checkpoints(&mut self, ctx: &Ctx<'_>, key: &str, unit: i64) -> Result<()> {
        let after = self.seen_seq.get(&unit).copied().unwrap_or(0);
        let page = self
            .queue
            .writes(unit, after, 100)
            .await
            .map_err(queue_error)?;
        if let Some(end) = page.last().map(|w| w.seq) {
            self.seen_seq.insert(unit, end);
        }
        let status = page
            .iter()
            .filter(|w| w.kind == STORY_CHECKPOINT)
            .filter_map(|w| StoryCheckpoint::from_value(key, &w.body).ok())
            .filter_map(|c| c.status)
            .next_back();
        if let Some(status) =
            status.filter(|s| s != "done" && keys::rank(&keys::classify(key), s).is_some())
        {
            ctx.raise(key, &status)?;
        }
        Ok(())
    }

    /// A unit waits for a person: answered in the main work tree (the answer goes to the unit,
    /// which is queued again: `true`), or its question copied there for `baton epic answer`.
    async fn waiting(
        &mut self,
        ctx: &Ctx<'_>,
        key: &str,
        id: i64,
        asked: Option<&Value>,
    ) -> Result<bool> {
        let question: Option<Question> = asked.and_then(super::payload::question_from_body);
        let Some(question) = question else {
            let detail = failure_of(key, UnitState::Failed, None);
            self.held.insert(
                key.to_string(),
                Held::Failed(FailureDetail {
                    code: "EPIC_QUEUE_QUESTION_INVALID".into(),
                    message: format!("unit {id} waits with no question baton can read"),
                    ..detail
                }),
            );
            return Ok(false);
        };
        let name = format!("{key}{}", agent_state::SUFFIX);
        let ours = AgentState::load(&ctx.layout.dir, &ctx.layout.rel, key)
            .ok()
            .flatten();
        let answered = ours
            .as_ref()
            .and_then(|a| a.question(&question.id))
            .is_some_and(|q| q.answer.is_some() && same_text(&q.question, &question.question));
        if answered {
            let text = ctx
                .layout
                .dir
                .read(&name, limit::STATUS)?
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            match self.queue.answer(id, &json!({"agentState": text})).await {
                Ok(()) | Err(QueueError::UnitState { .. }) => {}
                Err(e) => return Err(queue_error(e)),
            }
            self.note(ctx, format!("{key}: answer sent to unit {id}"));
            return Ok(true);
        }
        // The worker's copy of the story's questions, for `baton epic status` and `answer`.
        let theirs = asked
            .and_then(|q| q.get("agentState"))
            .and_then(Value::as_str);
        let pending_here = ours
            .as_ref()
            .and_then(|a| a.pending())
            .is_some_and(|q| q.id == question.id);
        if let Some(text) = theirs
            && !pending_here
        {
            ctx.layout.dir.write(&name, text.as_bytes())?;
            // A copy that does not read back is replaced by the question alone.
            if AgentState::load(&ctx.layout.dir, &ctx.layout.rel, key).is_err() {
                let mut a = AgentState::new(key, "dev");
                a.ask("dev", question.clone(), "", "human_review_required");
                a.save(&ctx.layout.dir)?;
            }
        }
        self.held.insert(key.to_string(), Held::Question(question));
        Ok(false)
    }

    /// A unit done: its story's branch is fetched into a worktree here, waiting to merge.
    async fn approved(
        &mut self,
        ctx: &Ctx<'_>,
        key: &str,
        id: i64,
        outcome: Option<&Value>,
    ) -> Result<()> {
        let get = |k: &str| outcome.and_then(|o| o.get(k)).and_then(Value::as_str);
        let (Some(branch), Some(commit)) = (get("branch"), get("commit")) else {
            self.held.insert(
                key.to_string(),
                Held::Failed(failure_of(key, UnitState::Done, outcome)),
            );
            return Ok(());
        };
        let valid_branch = branch.starts_with("baton/")
            && branch
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/._-".contains(&b))
            && !branch.contains("..");
        if !valid_branch || !is_commit_id(commit) {
            self.held.insert(
                key.to_string(),
                Held::Failed(FailureDetail {
                    phase: ctx.pipeline.last(),
                    story_key: key.to_string(),
                    code: "EPIC_QUEUE_OUTCOME_INVALID".into(),
                    message: format!("unit {id} names branch {branch:?} and commit {commit:?}"),
                    run_id: None,
                }),
            );
            return Ok(());
        }
        let project = &ctx.layout.project;
        let fetched = self.fetched_ref(key);
        git(
            project,
            &[
                "fetch",
                "--quiet",
                "--no-tags",
                &self.source.remote,
                &format!("+refs/heads/{branch}:{fetched}"),
            ],
        )?;
        let got = git(
            project,
            &["rev-parse", "--verify", &format!("{fetched}^{{commit}}")],
        )?;
        if got != commit {
            return Err(EpicError::failure(
                "EPIC_QUEUE_OUTCOME_INVALID",
                format!("branch {branch} of the remote is at {got}, unit {id} says {commit}"),
            ));
        }
        if let Some(wt) = self.wts.get(&self.epic_id, key)? {
            let head = self.wts.git_in_ok(&wt, &["rev-parse", "HEAD"])?;
            if head.trim() != commit && wt.record.merge.is_none() {
                self.wts.remove(&self.epic_id, key, true)?;
            }
        }
        self.wts.create(&self.epic_id, key, commit)?;
        if !self.st.queue.iter().any(|k| k == key) {
            self.st.queue.push(key.to_string());
            self.save(ctx)?;
        }
        ctx.raise(key, "review")?;
        // A question answered on the unit directly (`baton answer <UNIT> --db`) is no longer
        // shown as waiting here: the story's own copy replaces the orchestrator's.
        if pending_question(&ctx.layout, key) {
            let name = format!("{key}{}", agent_state::SUFFIX);
            match self
                .last_checkpoint(key, id)
                .await?
                .and_then(|c| c.files.get(&name).cloned())
            {
                Some(text) => ctx.layout.dir.write(&name, text.as_bytes())?,
                None => ctx.layout.dir.remove(&name)?,
            }
        }
        self.note(ctx, format!("{key}: approved on unit {id} ({branch})"));
        Ok(())
    }

    /// Submits the stories the schedule lets start; returns how many.
    async fn start(
        &mut self,
        ctx: &mut Ctx<'_>,
        live: usize,
        stuck: &mut Option<String>,
    ) -> Result<usize> {
        let sprint = ctx.sprint()?;
        let statuses = parallel_board::statuses(&sprint);
        // Started, not submitted (a kill between the two).
        let mut to_start: Vec<String> = self
            .st
            .started
            .iter()
            .filter(|k| self.st.units.get(*k).is_none_or(|id| *id == 0))
            .filter(|k| !self.held.contains_key(*k) && !self.st.queue.contains(k))
            .cloned()
            .collect();
        let busy: BTreeSet<String> = self
            .st
            .started
            .iter()
            .filter(|k| !self.held.contains_key(*k))
            .cloned()
            .collect();
        let held = &self.held;
        let layout = &ctx.layout;
        let activity = |e: &sprint::Entry| match held.get(&e.key) {
            Some(Held::Question(_)) => Activity::Question,
            Some(Held::Failed(_)) => Activity::Failed,
            None if busy.contains(&e.key) => Activity::Running,
            None if pending_question(layout, &e.key) => Activity::Question,
            None => Activity::Idle,
        };
        let candidates = parallel_board::candidates(&ctx.layout, &sprint, ctx.epic, &activity);
        let may_start = parallel_board::may_start(Some(&ctx.progress), self.st.started.len());
        let plan = schedule::plan(&PlanInput {
            stories: &candidates,
            statuses: &statuses,
            after: &ctx.config.parallel.after,
            slots: self.st.slots as usize,
            may_start,
        });
        for key in plan.start {
            if !to_start.contains(&key) {
                to_start.push(key);
            }
        }
        if to_start.is_empty() && live == 0 && self.st.queue.is_empty() {
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
            if !blocked.is_empty() && self.held.is_empty() {
                *stuck = Some(blocked.join("; "));
            }
        }
        let mut n = 0;
        for key in to_start {
            let base = self.push_tip(ctx)?;
            if !self.st.started.contains(&key) {
                self.st.started.push(key.clone());
                self.st.units.insert(key.clone(), 0);
                self.save(ctx)?;
            }
            ctx.raise(&self.epic_id, "in-progress")?;
            let payload = self.payload(ctx, &key, None, None)?;
            let id = self.submit(&key, payload, &base).await?;
            self.st.units.insert(key.clone(), id);
            self.save(ctx)?;
            self.note(ctx, format!("{key}: queued as unit {id}"));
            n += 1;
        }
        Ok(n)
    }
}

/// The checks of `--queue` before anything is written: the project is in a git repository
/// with a remote that answers, and every phase runs from what a worker has.
pub(crate) fn preflight(project: &Path, specs: &crate::specs::Specs) -> Result<()> {
    let source = project_remote(project).map_err(submit_error)?;
    check_phases_travel(project, specs)?;
    // The epic's tip is pushed later; the remote must answer now.
    let head = git(project, &["rev-parse", "--verify", "HEAD^{commit}"])?;
    if let Err(e) = check_pushed(project, &source.remote_name, &source.remote, &head)
        && e.code != QUEUE_COMMIT_NOT_PUSHED
    {
        return Err(submit_error(e));
    }
    Ok(())
}

/// The packages installed in the store that phases run, pinned into the database by content
/// (the same bytes pinned once); their sha256 digests go with every story unit.
async fn pin_packages(ctx: &Ctx<'_>, queue: &Queue) -> Result<Vec<String>> {
    let mut pinned = Vec::new();
    for spec in ctx.specs.values() {
        if spec.method.is_some() || !spec.shown.ends_with("(installed)") {
            continue;
        }
        let invalid = |m: String| {
            EpicError::failure("EPIC_PHASE_PACKAGE_INVALID", m).hint(format!(
                "`baton validate {}` says why",
                spec.package.display()
            ))
        };
        let report = baton_package::validate_path(
            &spec.package,
            &baton_package::ValidateOptions {
                workflow: Some(spec.workflow.clone()),
                ..Default::default()
            },
        );
        let Some(package) = report.package else {
            return Err(invalid(format!(
                "the package of phase {} ({}) is invalid",
                spec.phase, spec.shown
            )));
        };
        let packed = baton_package::pack::pack(package.files())
            .map_err(|e| invalid(format!("cannot pack {}: {e}", spec.shown)))?;
        let sha = queue
            .put_package(package.name(), package.version(), &packed.bytes)
            .await
            .map_err(queue_error)?;
        if !pinned.contains(&sha) {
            pinned.push(sha);
        }
    }
    Ok(pinned)
}

/// Every phase must run from what a worker has: the bundled package, a package installed in
/// the store (pinned into the database), or a package or installed BMAD method inside the
/// project (it travels with the repository). A package elsewhere on this machine does not.
fn check_phases_travel(project: &Path, specs: &crate::specs::Specs) -> Result<()> {
    for spec in specs.values() {
        // Bundled in every baton, or pinned into the database when the epic starts.
        let bundled = spec.method.is_none()
            && (spec.shown.ends_with("(bundled)") || spec.shown.ends_with("(installed)"));
        let at = std::fs::canonicalize(&spec.package).unwrap_or_else(|_| spec.package.clone());
        if !bundled && !at.starts_with(project) {
            return Err(EpicError::usage(
                "EPIC_QUEUE_PACKAGE_NOT_IN_PROJECT",
                format!(
                    "phase {} runs {}, which is on this machine, outside the project: no worker would have it",
                    spec.phase, spec.shown
                ),
            )
            .hint("keep the package in the project (committed, named by its path in [autopilot.phases.<phase>] package), install it (`baton package install`) and name it, or run the epic without --queue"));
        }
    }
    Ok(())
}

/// A question waits in `key`'s agent-state file of the main work tree.
fn pending_question(layout: &baton_bmad::layout::Layout, key: &str) -> bool {
    matches!(AgentState::load(&layout.dir, &layout.rel, key), Ok(Some(a)) if a.pending().is_some())
}

/// Two texts of one question (the start decides, as the loop compares them).
fn same_text(a: &str, b: &str) -> bool {
    a.chars().take(1000).eq(b.chars().take(1000))
}

/// A failed (or unreadable) unit's outcome as the loop reports a failure.
fn failure_of(key: &str, state: UnitState, outcome: Option<&Value>) -> FailureDetail {
    let get = |k: &str| outcome.and_then(|o| o.get(k)).and_then(Value::as_str);
    let phase = get("phase").and_then(Phase::parse).unwrap_or(Phase::Dev);
    let code = get("code")
        .map(str::to_string)
        .unwrap_or_else(|| format!("QUEUE_UNIT_{}", state.as_str().to_ascii_uppercase()));
    let message = get("message")
        .map(|m| tail(m, 2000))
        .unwrap_or_else(|| format!("the story's unit is {}", state.as_str()));
    FailureDetail {
        phase,
        story_key: key.to_string(),
        code,
        message,
        run_id: get("runId").map(str::to_string),
    }
}
