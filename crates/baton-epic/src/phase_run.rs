//! One phase run: created with the phase's variables (or adopted, when a crash hid its id),
//! resumed or answered when it exists, driven to an end; its questions become agent-state
//! questions; the files only the orchestrator writes are restored if the run touched them.

use super::error::{EpicError, Result};
use super::events::EpicEvent;
use super::pipeline::Leaves;
use super::progress::{InFlight, Instruction, RunRecord, StoryProgress};
use baton_bmad::layout::Layout;
use baton_bmad::sprint;
use baton_engine::runner::{self, Continuation, Finished, RunnerError, Settings, StartRun};
use baton_engine::{EngineEvent, Outcome};
use baton_epic_state::agent_state::{AgentState, Question};
use baton_epic_state::review;
use baton_epic_state::run_state;
use baton_store::Phase as RunPhase;
use baton_worktree::git;
use serde_json::{Map, Value, json};

use super::progress::now;
use crate::ctx::{Ctx, PhaseEnd};

/// The code of a stopped engine run (Ctrl-C).
const ABORTED: &str = baton_engine::driver::ABORTED;
/// Longest question text kept in an agent-state file.
const MAX_QUESTION_CHARS: usize = 4000;

impl Ctx<'_> {
    /// The variables a phase run starts with.
    pub(super) fn variables(&self, sp: &StoryProgress) -> Map<String, Value> {
        let mut v = Map::new();
        v.insert("storyKey".into(), json!(sp.key));
        v.insert("epicId".into(), json!(self.progress.epic_id));
        v.insert("phase".into(), json!(sp.phase.as_str()));
        v.insert("implementationArtifacts".into(), json!(self.layout.rel));
        // The story's real file wherever BMAD keeps it (see `story_files`), else where a new
        // one goes; project-relative.
        let story_file = match self.stories {
            None => self.story_file_var(&sp.key).ok(),
            Some(_) => None,
        };
        v.insert(
            "storyFile".into(),
            json!(story_file.unwrap_or_else(|| self.layout.rel_file(&format!("{}.md", sp.key)))),
        );
        v.insert("reviewCycle".into(), json!(sp.review_cycle.to_string()));
        if sp.phase.is_implementation() {
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
        // Stories mode: BMAD's folder+id variables, and the real story file.
        self.stories_variables(&mut v, sp);
        v
    }

    /// A run of this phase created for `inflight` before a crash hid its id: same variables,
    /// created since, not yet known.
    pub(super) fn adopt(
        &self,
        vars: &Map<String, Value>,
        inflight: &InFlight,
    ) -> Result<Option<String>> {
        // The run directories, not the index: a creation killed before its index entry was
        // written leaves a run only its directory knows.
        let probe = self.project.run_paths("probe").dir;
        let Some(runs_dir) = probe.parent() else {
            return Ok(None);
        };
        let entries = match std::fs::read_dir(runs_dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(EpicError::io("list", runs_dir)(e)),
        };
        for entry in entries.flatten() {
            let id = entry.file_name().to_string_lossy().into_owned();
            if id.starts_with('.') || self.progress.runs.iter().any(|r| r.run_id == id) {
                continue;
            }
            let Ok(run) = self.project.get_run(&id) else {
                continue;
            };
            // Created after creation began, and never driven (the id is recorded before a
            // run is driven): an older run with the same variables (a previous epic on the
            // same project) is not ours.
            let too_old = !same_run(&id, &run.created_at, inflight);
            // Made through another mount (the main work tree, another worktree): not ours.
            let elsewhere = run.work_tree != self.project.work_tree;
            if run.run_id != id || too_old || elsewhere || run.phase != RunPhase::Idle {
                continue;
            }
            let Ok(read) = self.project.state_file(&id).read() else {
                continue;
            };
            let state = read.doc.to_value();
            let got = state.get("variables");
            let same = ["storyKey", "epicId", "phase", "reviewCycle"]
                .iter()
                .all(|k| got.and_then(|g| g.get(*k)) == vars.get(*k));
            if same {
                return Ok(Some(id));
            }
        }
        Ok(None)
    }

    /// Creates, adopts or continues the phase run and drives it to an end.
    pub(super) async fn run_phase(&mut self) -> Result<PhaseEnd> {
        let Some(mut sp) = self.progress.story.clone() else {
            return Ok(PhaseEnd::Completed);
        };
        if sp.run.is_none() && self.pipeline.stage(sp.phase).is_none() {
            // A story recorded at a phase this pipeline does not run (a status BMAD's other
            // generation starts elsewhere, a stories-mode standing) goes on where it stands.
            sp.go(self.pipeline.nearest(sp.phase));
            self.progress.story = Some(sp.clone());
        }
        let phase = sp.phase;
        if sp.run.is_none() {
            // Before a fresh run of the phase. A story found in two places stops the loop.
            if self.stories.is_none() {
                self.story_file_var(&sp.key)?;
            }
            let stage = self.pipeline.stage(phase).cloned();
            let leaves = stage.as_ref().map(|s| s.leaves);
            if leaves == Some(Leaves::Verdict) {
                baton_epic_state::jsonfile::remove(&review::path(&self.layout.dir, &sp.key))?;
            }
            if matches!(leaves, Some(Leaves::Code { diff: true, .. }))
                && self.config.git.commit
                && sp.baseline.is_none()
            {
                sp.baseline = Some(git::head(&self.layout.project)?);
            }
            if let Some(status) = stage.and_then(|s| s.raises_on_start) {
                self.raise(&sp.key, status)?;
            }
            sp.run = Some(InFlight {
                n: self.progress.next_n(&sp.key, phase),
                run_id: None,
                since: now(),
                since_ms: super::progress::now_ms(),
                question: None,
                marks: None,
                sprint_wrote: None,
            });
            self.progress.story = Some(sp.clone());
            self.progress.save(&self.layout.dir)?;
        }
        let spec = self.specs.get(&phase).cloned().ok_or_else(|| {
            EpicError::failure("EPIC_CONFIG_INVALID", format!("no package for {phase}"))
        })?;
        // The project's installed BMAD skill or workflow: a task run (see method_run).
        if spec.method.is_some() {
            return self.run_method_phase(sp, spec).await;
        }
        let vars = self.variables(&sp);
        let mut inflight = sp.run.clone().unwrap_or(InFlight {
            n: 1,
            run_id: None,
            since: now(),
            since_ms: super::progress::now_ms(),
            question: None,
            marks: None,
            sprint_wrote: None,
        });
        let (claimed, resumed) = match inflight.run_id.clone() {
            Some(id) => match self.continuation(&sp, &mut inflight, &id)? {
                Ok(c) => (c, true),
                Err(end) => return Ok(end),
            },
            None => match self.adopt(&vars, &inflight)? {
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
                    // The project as this loop opened it: a story of a parallel epic
                    // makes its runs in the project's store, mounting its worktree.
                    let made = runner::create_in(self.store, self.project.clone(), start, &vars);
                    let claimed = match made {
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
    pub(super) fn note_run(
        &mut self,
        sp: &StoryProgress,
        inflight: &mut InFlight,
        id: &str,
    ) -> Result<()> {
        inflight.run_id = Some(id.to_string());
        self.progress.record_run(RunRecord {
            story_key: sp.key.clone(),
            phase: sp.phase,
            n: inflight.n,
            run_id: id.to_string(),
            review_cycle: sp.review_cycle,
            result: String::new(),
            method: None,
        });
        if let Some(s) = self.progress.story.as_mut() {
            s.run = Some(inflight.clone());
        }
        self.progress.save(&self.layout.dir)
    }

    /// How an existing phase run goes on: resumed, answered, or already at an end.
    pub(super) fn continuation(
        &mut self,
        sp: &StoryProgress,
        inflight: &mut InFlight,
        id: &str,
    ) -> Result<std::result::Result<(runner::Claimed, Continuation), PhaseEnd>> {
        let continuation = match self.existing_run(sp, inflight, id, true)? {
            Ok(Some(answer)) => Continuation::Answer(answer),
            Ok(None) => Continuation::Resume,
            Err(end) => return Ok(Err(end)),
        };
        let claimed = runner::claim(self.store, id, continuation.clone()).map_err(runner_error)?;
        Ok(Ok((claimed, continuation)))
    }

    /// How an existing run (a phase run or a task run) goes on: `Ok(None)` resumes it,
    /// `Ok(Some(answer))` answers the question it waits on (an agent-state question, at its
    /// current node when `at_node`), `Err` is the end it is already at.
    pub(super) fn existing_run(
        &mut self,
        sp: &StoryProgress,
        inflight: &mut InFlight,
        id: &str,
        at_node: bool,
    ) -> Result<std::result::Result<Option<String>, PhaseEnd>> {
        let run = self
            .project
            .get_run(id)
            .map_err(|e| EpicError::failure(e.code(), e.to_string()))?;
        match run.phase {
            RunPhase::Completed => Ok(Err(PhaseEnd::Completed)),
            RunPhase::Failed => {
                let (code, message) = failure_of(run.waiting_for.as_ref());
                Ok(Err(PhaseEnd::Failed { code, message }))
            }
            RunPhase::WaitingUser => {
                let question = run
                    .waiting_for
                    .as_ref()
                    .and_then(|w| w.get("question"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let node = if at_node {
                    run.current_node_id.clone().unwrap_or_default()
                } else {
                    String::new()
                };
                let q = self.record_question(sp, inflight, id, &question, &node)?;
                let answer = match q.answer.clone() {
                    Some(a) => Some(a),
                    None => self.answer_now(&sp.key, &q)?,
                };
                match answer {
                    Some(answer) => Ok(Ok(Some(answer))),
                    None => Ok(Err(PhaseEnd::Waiting(q))),
                }
            }
            RunPhase::Idle | RunPhase::Running => Ok(Ok(None)),
        }
    }

    /// Turns a run's question into the agent-state question (once per run).
    pub(super) fn record_question(
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
        let text: String = if question.trim().is_empty() {
            "(the run stopped without saying what it needs)".into()
        } else {
            question.chars().take(MAX_QUESTION_CHARS).collect()
        };
        // The same question is one question: asked again after a crash (or by the retry of the
        // phase), it is found in the file, with its answer if it has one.
        let known = agent
            .questions
            .iter()
            .find(|q| same_question(&q.question, &text))
            .cloned();
        let q = match known {
            Some(q) => q,
            None => {
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
    pub(super) async fn drive(
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
        // One phase run, however many times it is continued (an answered question drives it
        // again).
        self.phases_run += 1;
        loop {
            // An answer is part of the run's recorded conversation.
            if let Continuation::Answer(answer) = &continuation {
                let node = claimed.run().current_node_id.clone();
                let m = self
                    .models
                    .for_run(&run_id, &sp.key, sp.phase, inflight.n)?;
                m.record_answer(answer, node.as_deref());
            }
            let guard = OwnedFiles::snapshot(&self.layout);
            let stories_guard = self.stories.as_ref().map(|s| s.guard(&sp.key));
            let finished = self.invoke(claimed, &continuation, &sp, inflight.n).await;
            guard.restore(&self.layout, self.on_event)?;
            if let Some(g) = stories_guard {
                g.restore(self.on_event)?;
            }
            let finished = match finished {
                Ok(f) => f,
                Err(e) => return Err(e),
            };
            match finished.report.outcome {
                Outcome::Completed { .. } => return Ok(PhaseEnd::Completed),
                Outcome::Failed { code, .. } if code == ABORTED => {
                    return Ok(PhaseEnd::Interrupted);
                }
                Outcome::Failed { code, message }
                    if code == baton_engine::spend::BUDGET_EXCEEDED =>
                {
                    let budget = super::budget::stop_details(finished.run.waiting_for.as_ref());
                    return Ok(PhaseEnd::Budget { message, budget });
                }
                Outcome::Failed { code, message } => return Ok(PhaseEnd::Failed { code, message }),
                Outcome::Waiting { question } => {
                    let node = finished.run.current_node_id.clone().unwrap_or_default();
                    let q = self.record_question(&sp, &mut inflight, &run_id, &question, &node)?;
                    let Some(answer) = self.answer_for(&run_id, &sp, inflight.n, &q)? else {
                        return Ok(PhaseEnd::Waiting(q));
                    };
                    continuation = Continuation::Answer(answer);
                    claimed = runner::claim(self.store, &run_id, continuation.clone())
                        .map_err(runner_error)?;
                }
            }
        }
    }

    /// The answer to question `q` of a waiting run: the one already in the agent-state file,
    /// else the recorded input that comes next (replay; then kept in the file), else a
    /// person's. An answer found is said as an event.
    pub(super) fn answer_for(
        &mut self,
        run_id: &str,
        sp: &StoryProgress,
        n: u32,
        q: &Question,
    ) -> Result<Option<String>> {
        let recorded = match &q.answer {
            Some(_) => None,
            None => self.replayed_answer(run_id, sp, n)?,
        };
        let answer = match (q.answer.clone(), recorded) {
            (Some(a), _) => Some(a),
            (None, Some(a)) => {
                let mut agent = AgentState::load(&self.layout.dir, &self.layout.rel, &sp.key)?
                    .unwrap_or_else(|| AgentState::new(&sp.key, sp.phase.as_str()));
                agent.answer(&q.id, &a);
                agent.save(&self.layout.dir)?;
                Some(a)
            }
            (None, None) => self.answer_now(&sp.key, q)?,
        };
        if let Some(answer) = &answer {
            self.emit(EpicEvent::Answered {
                story: sp.key.clone(),
                question: q.question.clone(),
                answer: answer.clone(),
            });
        }
        Ok(answer)
    }

    /// The recorded user input that comes next in a replayed phase trace.
    pub(super) fn replayed_answer(
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
    pub(super) async fn invoke(
        &mut self,
        claimed: runner::Claimed,
        continuation: &Continuation,
        sp: &StoryProgress,
        n: u32,
    ) -> Result<Finished> {
        let run_id = claimed.run().run_id.clone();
        let live = self.models.live();
        let caps = super::budget::caps_for(self, &sp.key, &run_id, live.and_then(|l| l.price()));
        let paths = self.project.run_paths(&run_id);
        let m = self.models.for_run(&run_id, &sp.key, sp.phase, n)?;
        m.position(
            matches!(continuation, Continuation::Answer(_)),
            &paths.conversation_log,
        );
        let model = m.model(live)?;
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
        settings.tools = self.tools.clone();
        settings.cancel = self.cancel.clone();
        settings.on_event = Some(&forward);
        settings.caps = caps;
        settings.context = self.context;
        let finished = runner::continue_claimed(claimed, settings)
            .await
            .map_err(runner_error);
        m.save()?;
        finished
    }
}

/// Whether run `id`, created at `created_at`, can be the run made for `inflight`: created
/// since its creation began (an older run with the same purpose, from an earlier epic on the
/// same project, is not ours).
pub(super) fn same_run(id: &str, created_at: &str, inflight: &InFlight) -> bool {
    match (uuid_v7_ms(id), inflight.since_ms) {
        (Some(c), since) if since > 0 => c >= since,
        _ => created_at >= inflight.since.as_str(),
    }
}

/// The creation time (ms since the epoch) a UUID v7 run id carries in its first 48 bits.
fn uuid_v7_ms(id: &str) -> Option<u64> {
    let hex: String = id.chars().filter(|c| *c != '-').take(12).collect();
    if hex.len() != 12 || id.chars().nth(14) != Some('7') {
        return None;
    }
    u64::from_str_radix(&hex, 16).ok()
}

/// Two texts of one question: the run index keeps a shortened copy, so the start decides.
fn same_question(a: &str, b: &str) -> bool {
    const HEAD: usize = 1000;
    a.chars().take(HEAD).eq(b.chars().take(HEAD))
}

/// A runner error as the loop reports it (its code kept).
pub(super) fn runner_error(e: RunnerError) -> EpicError {
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

pub(super) fn failure_of(waiting_for: Option<&Value>) -> (String, String) {
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
pub(super) struct OwnedFiles {
    saved: Vec<(baton_bmad::layout::ArtifactFile, Option<Vec<u8>>)>,
}

impl OwnedFiles {
    pub(super) fn snapshot(layout: &Layout) -> OwnedFiles {
        let saved = [
            sprint::FILE_NAME,
            run_state::FILE_NAME,
            super::progress::FILE_NAME,
            super::method::snapshot::FILE_NAME,
            // A forged ledger ("merged") would make a story done without its merge.
            baton_worktree::publish::FILE_NAME,
        ]
        .iter()
        .map(|name| {
            let p = layout.file(name);
            let bytes = p
                .read(baton_autopilot::untrusted::limit::STATUS)
                .ok()
                .flatten();
            (p, bytes)
        })
        .collect();
        OwnedFiles { saved }
    }

    /// The bytes file `name` had when the snapshot was taken (`None`: missing or unreadable).
    pub(super) fn before(&self, name: &str) -> Option<Vec<u8>> {
        self.saved
            .iter()
            .find(|(f, _)| f.name == name)
            .and_then(|(_, b)| b.clone())
    }

    pub(super) fn restore(
        &self,
        layout: &Layout,
        on_event: Option<&(dyn Fn(EpicEvent) + Send + Sync)>,
    ) -> Result<()> {
        for (file, before) in &self.saved {
            // A file that cannot be read (replaced by a FIFO, a link out) counts as changed.
            let now = file
                .read(baton_autopilot::untrusted::limit::STATUS)
                .ok()
                .flatten();
            if &now == before {
                continue;
            }
            match before {
                Some(bytes) => file.write(bytes)?,
                None => baton_epic_state::jsonfile::remove(file)?,
            }
            if let Some(f) = on_event {
                let name = layout.rel_file(&file.name);
                f(EpicEvent::Note(format!(
                    "the phase run changed {name}, which only the orchestrator writes; the change was undone"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_carry_their_creation_millisecond() {
        // 0x01a202b6fd17 ms = 2026-11-22T10:04:…Z
        assert_eq!(
            uuid_v7_ms("01a202b6-fd17-7000-8000-000000000000"),
            Some(0x01a2_02b6_fd17)
        );
        assert_eq!(uuid_v7_ms("01a202b6-fd17-4000-8000-000000000000"), None);
        assert_eq!(uuid_v7_ms("short"), None);
    }
}
