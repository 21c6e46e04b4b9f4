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

use super::config::AutopilotConfig;
use super::consent::{EpicConsent, StoryConsent};
use super::error::{EpicError, Result};
use super::events::EpicEvent;
use super::method_consent::MethodConsent;
use super::method_verdict::Judged;
use super::pipeline::Leaves;
use super::progress::{FailureDetail, Instruction, StoryProgress, Target};
use baton_bmad::keys;
use baton_bmad::phase::Phase;
use baton_bmad::sprint::{self, SprintStatus};
use baton_epic_state::agent_state::{AgentState, Question};
use baton_epic_state::lock;
use baton_epic_state::run_state::Failure;
use baton_worktree::git;
use baton_worktree::verify;
use std::time::Duration;

use super::ctx::{Ctx, Next, PhaseEnd, Pick};
use super::outcome::EpicOutcome;
use super::progress::now;
use baton_worktree::git::short;

impl<'a> Ctx<'a> {
    pub(super) fn emit(&self, e: EpicEvent) {
        if let Some(f) = self.on_event {
            f(e);
        }
    }

    pub(super) fn save(&self) -> Result<()> {
        self.state.save(&self.layout.dir)?;
        self.progress.save(&self.layout.dir)
    }

    pub(super) fn sprint(&self) -> Result<SprintStatus> {
        SprintStatus::load(
            &self.layout.file(sprint::FILE_NAME),
            &self.layout.rel_file(sprint::FILE_NAME),
        )
    }

    /// Raises one status in `sprint-status.yaml` (re-read first; never lowered).
    pub(super) fn raise(&self, key: &str, status: &str) -> Result<()> {
        if self.stories.is_some() {
            // Stories mode: the status lives in the story file's frontmatter.
            return self.stories_raise(key, status);
        }
        if self.tickets_mode() {
            return self.tickets_raise(key, status);
        }
        let mut s = self.sprint()?;
        let Some(entry) = s.get(key) else {
            return Ok(());
        };
        if !keys::defined(&entry.kind, &entry.status) {
            // Someone set a value BMAD does not define while the loop ran: theirs to change.
            let note = format!(
                "{key} stays `{}` in {}: a value BMAD does not define, which only you change (the loop would have set {status})",
                entry.status,
                s.shown()
            );
            self.emit(EpicEvent::Note(note));
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

    pub(super) fn pause(&mut self, outcome: EpicOutcome) -> Result<EpicOutcome> {
        self.state.running = false;
        self.save()?;
        Ok(outcome)
    }

    /// Pauses on a failure: the seed's `lastFailure`, our details, a fresh attempt next time.
    pub(super) fn fail(
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
    /// is not done, within the target. A story whose value BMAD does not define is run, or
    /// left, only as a person answers (see [`super::consent`]).
    pub(super) fn next_story(&mut self) -> Result<Pick> {
        if self.stories.is_some() {
            return Ok(match self.stories_next()? {
                Some((index, total)) => Pick::Story(index, total),
                None => Pick::Nothing,
            });
        }
        if self.tickets_mode() {
            return self.tickets_next();
        }
        let sprint = self.sprint()?;
        let stories: Vec<&sprint::Entry> = sprint.stories_of(self.epic).collect();
        let total = stories.len();
        let index_of = |key: &str| {
            stories
                .iter()
                .position(|e| e.key == key)
                .map_or(0, |i| i + 1)
        };
        if let Some(sp) = self.progress.story.clone() {
            // Its value changed to one BMAD does not define since it was taken up.
            if let Some(e) = stories.iter().find(|e| e.key == sp.key)
                && !keys::defined(&e.kind, &e.status)
            {
                match self.story_consent(e)? {
                    StoryConsent::Ask(q) => return Ok(Pick::Wait(sp.key, q)),
                    StoryConsent::Skip => {
                        self.note_skipped(e);
                        self.progress.story = None;
                        return Ok(Pick::Again);
                    }
                    StoryConsent::Set(_) => {}
                }
            }
            return Ok(Pick::Story(index_of(&sp.key), total));
        }
        if let Target::Epic {
            max_stories: Some(max),
        } = self.progress.target
            && self.progress.completed.len() >= max as usize
        {
            return Ok(Pick::Nothing);
        }
        let files = baton_bmad::story_files::StoryFiles::scan(&self.layout, &sprint);
        // Published, waiting for the merge: done for the loop, not run again.
        let held = self.publish_holding();
        for e in &stories {
            if let Target::Story { story_key } = &self.progress.target
                && *story_key != e.key
            {
                continue;
            }
            let mut status = e.normalized();
            if !keys::defined(&e.kind, &e.status) {
                match self.story_consent(e)? {
                    StoryConsent::Ask(q) => return Ok(Pick::Wait(e.key.clone(), q)),
                    StoryConsent::Skip => {
                        self.note_skipped(e);
                        continue;
                    }
                    StoryConsent::Set(answered) => status = answered,
                }
            }
            if status == "done" || held.contains(&e.key) {
                continue;
            }
            // The story's file may be further along (see `story_files::start_status`).
            let start = files.start(&self.layout, &e.key, status);
            if !start.ambiguous.is_empty() {
                // Found twice: never guessed; nothing is written for it.
                return Err(baton_bmad::story_files::ambiguous_error(
                    &e.key,
                    &start.ambiguous,
                ));
            }
            if let Some(note) = &start.note {
                self.emit(EpicEvent::Note(format!("{}: {note}", e.key)));
            }
            if let Some(phase) = self.pipeline.start_for(&start.status) {
                self.progress.story = Some(StoryProgress::new(&e.key, phase));
                return Ok(Pick::Story(index_of(&e.key), total));
            }
        }
        Ok(Pick::Nothing)
    }

    fn note_skipped(&self, e: &sprint::Entry) {
        self.emit(EpicEvent::Note(format!(
            "{} is `{}`, a value BMAD does not define: left as it is, as you answered",
            e.key, e.status
        )));
    }

    pub(super) async fn run_loop(&mut self) -> Result<EpicOutcome> {
        let mut announced: Option<String> = None;
        loop {
            // Between two phases: what a phase's model did to the layout is refused here.
            self.layout
                .recheck(|project| Ok(AutopilotConfig::load(project)?.implementation_artifacts))?;
            if lock::stop_requested(&self.layout.dir) {
                lock::clear_stop(&self.layout.dir)?;
                return self.pause(EpicOutcome::Stopped);
            }
            if self.cancel.is_cancelled() {
                return self.pause(EpicOutcome::Interrupted);
            }
            // Every few minutes: merged stories are done (`publishing`).
            self.publish_catch_up(None, false)?;
            let (index, total) = match self.next_story()? {
                Pick::Story(index, total) => (index, total),
                Pick::Nothing => {
                    let done = self.finish()?;
                    return self.retrospective_after(done).await;
                }
                Pick::Again => continue,
                Pick::Wait(key, q) => {
                    if self.state.current_story_key.as_deref() != Some(&key) {
                        self.state.current_story_key = Some(key.clone());
                        self.save()?;
                    }
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
            };
            let (key, phase) = self
                .progress
                .story
                .as_ref()
                .map(|s| (s.key.clone(), s.phase))
                .unwrap_or((String::new(), self.pipeline.first()));
            if announced.as_deref() != Some(&key) {
                self.emit(EpicEvent::Story {
                    index,
                    total,
                    key: key.clone(),
                });
                announced = Some(key.clone());
                if self.state.current_story_key.as_deref() != Some(&key) {
                    self.state.current_story_key = Some(key.clone());
                    self.save()?;
                }
            }
            // An epic whose value BMAD does not define runs only when a person says so.
            let consent = match self.stories {
                // Stories mode has no epic status.
                Some(_) => EpicConsent::Go,
                None if self.tickets_mode() => EpicConsent::Go,
                None => self.epic_consent(&key, phase)?,
            };
            match consent {
                EpicConsent::Go => self.raise(&keys::epic_key(self.epic), "in-progress")?,
                EpicConsent::Leave => return self.leave_epic(),
                EpicConsent::Ask(q) => match self.answer_now(&key, &q)? {
                    Some(_) => continue,
                    None => {
                        return self.pause(EpicOutcome::Waiting {
                            story: key,
                            question: q,
                        });
                    }
                },
            }
            // The method's files are the operator's: a change since the epic's snapshot is
            // never used silently (see `method_consent`).
            match self.method_consent(&key, phase)? {
                MethodConsent::Go => {}
                MethodConsent::Refused(failure) => return self.method_stopped(failure),
                MethodConsent::Ask(q) => match self.answer_now(&key, &q)? {
                    Some(_) => continue,
                    None if self.ask.is_none() => {
                        return self.method_changed_stop(&key, phase, &q);
                    }
                    None => {
                        return self.pause(EpicOutcome::Waiting {
                            story: key,
                            question: q,
                        });
                    }
                },
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
                Next::Continue => {
                    if let Some(hook) = self.on_step {
                        hook.after_step().await?;
                    }
                }
                Next::Pause(outcome) => return Ok(outcome),
            }
        }
    }

    /// A person (or a recorded input) answers a pending question right away, if there is one.
    pub(super) fn answer_now(&mut self, story: &str, q: &Question) -> Result<Option<String>> {
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
    pub(super) fn finish(&mut self) -> Result<EpicOutcome> {
        if self.stories.is_some() {
            return self.stories_finish();
        }
        if self.tickets_mode() {
            return self.tickets_finish();
        }
        self.note_waiting_merges();
        let sprint = self.sprint()?;
        let all_done = sprint
            .stories_of(self.epic)
            .all(|e| e.normalized() == "done");
        let has_stories = sprint.stories_of(self.epic).next().is_some();
        let mut epic_done = all_done && has_stories;
        if epic_done {
            self.raise(&keys::epic_key(self.epic), "done")?;
            // An epic whose value BMAD does not define stays as it is (see `raise`): not done.
            epic_done = self
                .sprint()?
                .epic_entry(self.epic)
                .is_none_or(|e| e.normalized() == "done");
        }
        if matches!(self.progress.target, Target::Epic { .. }) {
            self.state.current_story_key = None;
        }
        self.pause(EpicOutcome::Done { epic_done })
    }

    /// Runs the current phase of the current story and moves the story on.
    pub(super) async fn step(&mut self) -> Result<Next> {
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
            PhaseEnd::Budget { .. } => "budget",
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
            PhaseEnd::Budget { message, budget } => {
                Ok(Next::Pause(self.pause(EpicOutcome::Budget {
                    story: sp.key.clone(),
                    phase,
                    run_id,
                    message,
                    budget,
                })?))
            }
            PhaseEnd::Waiting(question) => Ok(Next::Pause(self.pause(EpicOutcome::Waiting {
                story: sp.key.clone(),
                question,
            })?)),
            PhaseEnd::Failed { code, message } => self.phase_failed(phase, &code, message, run_id),
            PhaseEnd::Completed => self.phase_completed(phase, run_id).await,
        }
    }

    /// A failed phase is retried once (a fresh run), then the loop pauses.
    pub(super) fn phase_failed(
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
    pub(super) async fn phase_completed(
        &mut self,
        phase: Phase,
        run_id: Option<String>,
    ) -> Result<Next> {
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
        // An installed BMAD method is judged by the files it wrote (see method_verdict).
        let judged = self.judge_method(phase, &key)?;
        match judged {
            Judged::Blocked(e) => {
                return Ok(Next::Pause(self.fail(phase, e.code, e.message, run_id)?));
            }
            Judged::Failed(e) => return self.contract_failed(phase, e, run_id),
            Judged::Passed => {}
            Judged::NotMethod => {
                if let Err(e) = self.check_contract(phase, &key) {
                    return self.contract_failed(phase, e, run_id);
                }
            }
        }
        let now = now();
        let Some(stage) = self.pipeline.stage(phase).cloned() else {
            return Ok(Next::Continue);
        };
        match stage.leaves {
            Leaves::Verdict => return self.reviewed(phase, &key, run_id, &now),
            Leaves::StoryFile => {}
            Leaves::Code { diff, .. } => {
                if let Some(next) = self.verify(phase).await? {
                    return Ok(next);
                }
                if diff && let Err(e) = self.check_diff(&key) {
                    return self.contract_failed(phase, e, run_id);
                }
            }
        }
        if let Some(status) = stage.raises_when_done {
            self.raise(&key, status)?;
        }
        self.advance(&key, phase, &now)
    }

    pub(super) fn contract_failed(
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
    pub(super) fn check_contract(&self, phase: Phase, key: &str) -> Result<()> {
        if self.stories.is_some() {
            return self.stories_contract(phase, key);
        }
        // Wherever the story's file is (see `story_files`).
        self.check_story_file(phase, key)
    }

    /// Records the phase as done and moves to the next one.
    pub(super) fn advance(&mut self, key: &str, phase: Phase, now: &str) -> Result<Next> {
        if self
            .pipeline
            .next(phase)
            .is_some_and(|n| n.is_implementation())
        {
            // Stories mode: `spec_checkpoint` asks a person before dev (written before the
            // progress moves on, so a crash in between asks the same question again).
            self.stories_spec_checkpoint(key)?;
        }
        self.state.push_step(key, phase.as_str(), now);
        if let (Some(sp), Some(next)) = (self.progress.story.as_mut(), self.pipeline.next(phase)) {
            sp.go(next);
            // A review's or verify's instruction was for the phase failures go back to.
            if self.pipeline.receives_failures(phase) {
                sp.instruction = None;
            }
        }
        self.save()?;
        Ok(Next::Continue)
    }

    /// The sandbox of commands baton runs in the project (verify commands, BMAD's renderer):
    /// confined like the model's own commands, under `baton.toml`'s terminal settings.
    pub(super) fn project_sandbox(&self) -> std::result::Result<verify::Sandbox, (String, String)> {
        verify::Sandbox::new(
            &self.layout.project,
            &self.tools.system.terminal,
            self.tools.system.allow_git_writes,
            baton_tools::TerminalRuntime {
                store_home: Some(self.store.home().to_path_buf()),
                // The model's code runs here too (its tests): the method stays the operator's.
                protected: self.tools.system.protected.clone(),
                ..baton_tools::TerminalRuntime::default()
            },
        )
    }

    /// Runs the verify commands after dev or revision; a failure sends the story back to dev.
    pub(super) async fn verify(&mut self, phase: Phase) -> Result<Option<Next>> {
        let commands = self.config.verify.commands.clone();
        if commands.is_empty() {
            return Ok(None);
        }
        let timeout = Duration::from_secs(self.config.verify.timeout_s);
        // Confined like the model's own commands: they run what the model wrote.
        let sandbox = self.project_sandbox().map_err(|(_, message)| {
            EpicError::failure("SANDBOX_SETUP_FAILED", message).hint("run `baton doctor`")
        })?;
        // On a thread of their own: with `--parallel`, the stories in flight beside this one
        // are driven by the same task and go on while a test suite runs here.
        let (sent, mut results) = tokio::sync::mpsc::unbounded_channel();
        let cancel = self.cancel.clone();
        let job = tokio::task::spawn_blocking(move || {
            verify::run_all(&commands, &sandbox, timeout, &cancel, |r| {
                let _ = sent.send(r.clone());
            })
        });
        while let Some(r) = results.recv().await {
            self.emit(EpicEvent::Verify {
                command: r.command.clone(),
                passed: r.passed(),
                millis: r.duration.as_millis(),
            });
        }
        let failed = job.await.map_err(|e| {
            EpicError::failure("VERIFY_FAILED", format!("the verify commands stopped: {e}"))
        })?;
        let Some(failed) = failed else {
            return Ok(None);
        };
        if failed.verdict == verify::Verdict::Cancelled {
            return Ok(Some(Next::Pause(self.pause(EpicOutcome::Interrupted)?)));
        }
        if let verify::Verdict::Refused {
            code,
            message,
            hint,
        } = &failed.verdict
        {
            // Not the developer's fault: the epic stops until the machine or the settings
            // allow the sandbox, and the check is not counted as a failed attempt.
            return Err(EpicError::failure(
                code,
                format!("verify command `{}` was not run: {message}", failed.command),
            )
            .hint(hint.clone()));
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
            sp.go(self.pipeline.back_from(phase));
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
        sp.go(self.pipeline.back_from(phase));
        self.emit(EpicEvent::Note(note));
        self.progress.save(&self.layout.dir)?;
        Ok(Some(Next::Continue))
    }

    /// With `[autopilot.git] commit`, a dev phase must change something outside the artifacts.
    pub(super) fn check_diff(&self, key: &str) -> Result<()> {
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
        // The story file kept outside the artifacts folder is not the change asked for.
        let story = self
            .story_lookup(key)
            .ok()
            .and_then(|l| l.found().map(|f| f.path.clone()));
        let changed: Vec<String> = changed
            .into_iter()
            .filter(|c| Some(c) != story.as_ref())
            .collect();
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

    /// The verdict of a review phase (`phase`): approved ends the story, changes requested send
    /// it back.
    pub(super) fn reviewed(
        &mut self,
        phase: Phase,
        key: &str,
        run_id: Option<String>,
        now: &str,
    ) -> Result<Next> {
        let review = match self.review_of(key) {
            Ok(r) => r,
            Err(e) => return self.contract_failed(phase, e, run_id),
        };
        self.state.push_step(key, phase.as_str(), now);
        if review.approved {
            return self.story_done(key);
        }
        let max = self.config.max_review_cycles;
        let back = self.pipeline.back_from(phase);
        let Some(sp) = self.progress.story.as_mut() else {
            return Ok(Next::Continue);
        };
        if sp.review_cycle >= max {
            let message = format!(
                "code review still requests changes after {} cycles: {}",
                sp.review_cycle, review.summary
            );
            sp.go(back);
            sp.review_cycle += 1;
            sp.instruction = Some(Instruction::Review {
                summary: review.summary,
            });
            return Ok(Next::Pause(self.fail(
                phase,
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
        sp.go(back);
        let note = format!("{key}: changes requested; review cycle {}", sp.review_cycle);
        self.emit(EpicEvent::Note(note));
        self.save()?;
        Ok(Next::Continue)
    }

    pub(super) fn story_done(&mut self, key: &str) -> Result<Next> {
        let mut done = true;
        // Publishing pushes the story's commit: it is made as with `[autopilot.git] commit`.
        if self.config.git.commit || self.config.publish.push {
            let story = match self.stories {
                Some(_) => self.stories_story_text(key),
                None => self.story_text(key),
            };
            git::commit_all(
                &self.layout.project,
                &git::commit_message(key, story.as_deref()),
            )?;
            done = self.publish_head(key)?;
        }
        if done {
            self.raise(key, "done")?;
        }
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
        self.publish_catch_up(Some(key), false)?;
        Ok(Next::Continue)
    }
}
