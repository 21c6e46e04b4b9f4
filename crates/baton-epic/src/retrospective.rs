//! `[autopilot] retrospective = true`: once every story of an epic is done, the loop runs the
//! project's installed `bmad-retrospective` skill once for that epic, unattended, as a task run
//! like the other installed-skill phases (the same prompt, rendered files, record and resume;
//! see `method_run`). The runtime decides it is done, not the model: the retrospective document
//! the request names (BMAD's `epic-N-retro-<date>.md` in the implementation artifacts) is there
//! and new → the loop sets `epic-N-retrospective: done` with its own writer (what the run wrote
//! to sprint-status.yaml is undone, as for every phase); no document → the epic stops with
//! [`OUTPUT_MISSING`] and `baton epic resume` runs it again. A retrospective already `done` is
//! never run again.

use crate::config::AutopilotConfig;
use crate::ctx::Ctx;
use crate::error::{EpicError, Result};
use crate::events::EpicEvent;
use crate::method::files::Reader;
use crate::method::prompt::{self, Ask};
use crate::method::{self, Installed};
use crate::outcome::EpicOutcome;
use crate::phase_run::{OwnedFiles, runner_error};
use crate::progress::{InFlight, Mark, Target, now, now_ms};
pub use crate::progress::{RetroProgress, RetroRun};
use crate::specs::{self, MethodSpec};
use baton_bmad::keys;
use baton_bmad::layout::Layout;
use baton_bmad::sprint::{self, SprintStatus};
use baton_engine::task_driver::TaskEnd;
use baton_engine::task_run::{self, ClaimedTask, TaskContinuation};
use baton_epic_state::run_state::Failure;
use baton_store::{NewTaskRun, Phase as RunPhase};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::path::Path;

/// The installed skill that runs it.
pub const SKILL: &str = "bmad-retrospective";
/// The name its task run and trace carry in place of a story phase.
pub const PHASE: &str = "retrospective";
/// The run ended without the document the request named.
pub const OUTPUT_MISSING: &str = "EPIC_RETROSPECTIVE_OUTPUT_MISSING";
/// `retrospective = true` on a project without the skill.
pub const SKILL_MISSING: &str = "EPIC_RETROSPECTIVE_SKILL_MISSING";
/// The run failed (its own code in the message).
pub const FAILED: &str = "EPIC_RETROSPECTIVE_FAILED";
/// The run kept asking although nobody is there to answer.
pub const ASKED: &str = "EPIC_RETROSPECTIVE_ASKED";
/// Questions answered the unattended way before the run is stopped.
const MAX_ANSWERS: usize = 3;
/// Largest document read to tell it was written.
const MAX_DOCUMENT: u64 = 16 * 1024 * 1024;
/// The answer a question of the unattended run gets.
const UNATTENDED: &str = "Nobody is present to answer: this retrospective runs headless. Take the \
recommended or default choice yourself, record it in the document's Assumptions section, and go on.";

/// What a report says of the retrospective (`[autopilot] retrospective = true` only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RetroPlan {
    /// `epic-N-retrospective`.
    pub key: String,
    /// Its value in sprint-status.yaml (`None`: the file has no such key).
    pub status: Option<String>,
    /// The installed skill's folder (project-relative).
    pub skill: String,
    /// Whether the loop runs it once the epic's stories are all done (false: already done, or
    /// a value only a person changes).
    pub will_run: bool,
    /// The document it is asked to write (project-relative).
    pub document: String,
}

/// `epic-N-retrospective`.
pub fn key(epic: u32) -> String {
    format!("{}-retrospective", keys::epic_key(epic))
}

/// The installed skill, rendered now: `None` when the option is off; refused when it is on and
/// the project has no `bmad-retrospective` (or it does not render).
pub fn check(config: &AutopilotConfig, project: &Path) -> Result<Option<MethodSpec>> {
    if !config.retrospective {
        return Ok(None);
    }
    let reader = Reader::open(project)?;
    let Some(installed) = method::find(&reader, SKILL)? else {
        return Err(EpicError::usage(
            SKILL_MISSING,
            format!(
                "[autopilot] retrospective = true, but the project has no {SKILL} skill ({})",
                method::SKILL_FOLDERS[..2].join(", ")
            ),
        )
        .hint("install BMAD's implementation skills (npx bmad-method install), or set retrospective = false in baton.toml"));
    };
    let chosen = "[autopilot] retrospective = true in baton.toml".to_string();
    specs::method_spec(config, &reader, installed, chosen).map(Some)
}

/// Whether the loop runs the retrospective of `key` given its value: not when it is `done`,
/// nor when it holds a value BMAD does not define (a person's to change).
fn runs_at(sprint: &SprintStatus, key: &str) -> bool {
    sprint
        .get(key)
        .is_none_or(|e| e.normalized() != "done" && keys::defined(&e.kind, &e.status))
}

/// The document's file name, as BMAD names it (`epic-N-retro-<date>.md`, today in UTC).
fn document_name(epic: u32) -> String {
    let today: String = now().chars().take(10).collect();
    format!("epic-{epic}-retro-{today}.md")
}

/// What a report says of epic `epic`'s retrospective, from the files as they are.
pub fn plan(
    installed: &Installed,
    layout: &Layout,
    sprint: &SprintStatus,
    epic: u32,
    recorded: Option<&RetroProgress>,
) -> RetroPlan {
    let key = key(epic);
    let document = recorded
        .filter(|r| r.key == key)
        .map(|r| r.document.clone())
        .unwrap_or_else(|| document_name(epic));
    RetroPlan {
        status: sprint.get(&key).map(|e| e.status.clone()),
        skill: installed.rel.clone(),
        will_run: runs_at(sprint, &key),
        document: layout.rel_file(&document),
        key,
    }
}

fn digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Ctx<'_> {
    /// After [`Ctx::finish`]: a done epic runs its retrospective (once) when the option is on,
    /// then ends as `outcome` said.
    pub(crate) async fn retrospective_after(
        &mut self,
        outcome: EpicOutcome,
    ) -> Result<EpicOutcome> {
        let sprint_mode = self.stories.is_none() && !self.tickets_mode();
        // `baton epic run` only: a single story's loop (`epic story`, a story of a parallel
        // epic in its worktree, a queue worker's unit) leaves it to the epic's.
        let whole_epic = matches!(self.progress.target, Target::Epic { .. });
        if outcome != (EpicOutcome::Done { epic_done: true })
            || !self.config.retrospective
            || !sprint_mode
            || !whole_epic
        {
            return Ok(outcome);
        }
        let key = key(self.epic);
        if !runs_at(&self.sprint()?, &key) {
            return Ok(outcome);
        }
        let Some(m) = check(&self.config, &self.layout.project)? else {
            return Ok(outcome);
        };
        self.state.running = true;
        self.save()?;
        match self.run_retrospective(&key, &m).await? {
            Some(stopped) => self.pause(stopped),
            None => self.pause(outcome),
        }
    }

    /// Creates, adopts or continues the retrospective's task run, drives it and judges it:
    /// `Some` outcome when it stopped before its end.
    async fn run_retrospective(
        &mut self,
        key: &str,
        m: &MethodSpec,
    ) -> Result<Option<EpicOutcome>> {
        let mut rp = match self.progress.retrospective.clone() {
            Some(r) if r.key == key => r,
            _ => RetroProgress {
                key: key.to_string(),
                document: document_name(self.epic),
                run: None,
                runs: Vec::new(),
            },
        };
        let mut inflight = rp.run.clone().unwrap_or_else(|| InFlight {
            n: u32::try_from(rp.runs.len()).unwrap_or(u32::MAX - 1) + 1,
            run_id: None,
            since: now(),
            since_ms: now_ms(),
            question: None,
            // The document before the first run: the run must write it, or change it.
            marks: Some(vec![self.document_mark(&rp.document)]),
            sprint_wrote: None,
        });
        rp.run = Some(inflight.clone());
        self.progress.retrospective = Some(rp.clone());
        self.progress.save(&self.layout.dir)?;
        let epic_id = self.progress.epic_id.clone();
        let name = format!("{epic_id}/{key}/{PHASE}.{}", inflight.n);
        let trace = format!("{key}.{PHASE}.{}.trace.json", inflight.n);
        let known = inflight
            .run_id
            .clone()
            .or_else(|| self.adopt_task(&name, &inflight));
        let (task, continuation) = match known {
            Some(id) => {
                self.note_retro_run(&mut rp, &mut inflight, &id)?;
                let run = self
                    .project
                    .get_run(&id)
                    .map_err(|e| EpicError::failure(e.code(), e.to_string()))?;
                let continuation = match run.phase {
                    RunPhase::Completed => return self.judge_retrospective(rp, &id),
                    RunPhase::Failed => {
                        let (code, message) =
                            crate::phase_run::failure_of(run.waiting_for.as_ref());
                        return self.retro_failed(rp, &id, &code, message);
                    }
                    RunPhase::WaitingUser => TaskContinuation::Answer(UNATTENDED.into()),
                    RunPhase::Idle | RunPhase::Running => TaskContinuation::Resume,
                };
                let task = task_run::claim_task(&self.project, &id, continuation.clone())
                    .map_err(runner_error)?;
                (task, continuation)
            }
            None => {
                let (rendered, how) = self.render_for_run(m)?;
                let ask = Ask {
                    story_key: key,
                    epic_id: &epic_id,
                    phase: PHASE,
                    review_cycle: 1,
                    artifacts: &self.layout.rel,
                    request: self.retro_request(&rp.document),
                };
                let text = prompt::compose(&m.installed, &rendered, &how, &ask);
                let text = self.without_host_paths(text);
                let task = task_run::create_task(
                    &self.project,
                    NewTaskRun {
                        task_ref: &name,
                        agent_id: &m.installed.name,
                    },
                    &text,
                )
                .map_err(runner_error)?;
                let id = task.run().run_id.clone();
                self.note_retro_run(&mut rp, &mut inflight, &id)?;
                self.place(&id, &rendered)?;
                (task, TaskContinuation::Start)
            }
        };
        let id = task.run().run_id.clone();
        // A run created before a kill that came before its files were placed.
        if !task_run::package_dir(&self.project, &id)
            .join(crate::method_run::PLACED)
            .is_file()
        {
            self.place(&id, &m.rendered)?;
        }
        self.emit(EpicEvent::Note(format!(
            "{PHASE} of {epic_id}: the project's {} ({}), run {id}",
            m.installed.name, m.installed.rel
        )));
        self.phases_run += 1;
        self.drive_retrospective(rp, task, continuation, trace)
            .await
    }

    /// Drives the run to its end, answering a question the unattended way (a few times).
    async fn drive_retrospective(
        &mut self,
        rp: RetroProgress,
        mut task: ClaimedTask,
        mut continuation: TaskContinuation,
        trace: String,
    ) -> Result<Option<EpicOutcome>> {
        let id = task.run().run_id.clone();
        let mut answered = 0;
        loop {
            if let TaskContinuation::Answer(answer) = &continuation {
                self.models
                    .for_trace(&id, trace.clone())?
                    .record_answer(answer, None);
            }
            // What the run writes to the loop's files (the sprint status) is undone.
            let guard = OwnedFiles::snapshot(&self.layout);
            let finished = self
                .invoke_task(task, &continuation, &rp.key, trace.clone())
                .await;
            guard.restore(&self.layout, self.on_event)?;
            match finished?.report.end {
                TaskEnd::Finished { .. } => return self.judge_retrospective(rp, &id),
                TaskEnd::Failed { code, .. } if code == baton_engine::driver::ABORTED => {
                    return Ok(Some(EpicOutcome::Interrupted));
                }
                TaskEnd::Failed { code, message } => {
                    // A budget stop leaves the run idle: a resume goes on with it.
                    if code == baton_engine::spend::BUDGET_EXCEEDED {
                        return Err(EpicError::failure(code, message).hint(
                            "`baton epic resume` with a larger budget continues the retrospective",
                        ));
                    }
                    return self.retro_failed(rp, &id, code, message);
                }
                TaskEnd::Waiting { question, .. } => {
                    answered += 1;
                    if answered > MAX_ANSWERS {
                        return Err(EpicError::failure(
                            ASKED,
                            format!("the {PHASE} run {id} still asks after {MAX_ANSWERS} unattended answers: {question}"),
                        )
                        .hint("`baton epic resume` answers it the unattended way again; `baton runs show` shows the run"));
                    }
                    self.emit(EpicEvent::Note(format!(
                        "the {PHASE} run {id} asked ({question}); answered the unattended way"
                    )));
                    continuation = TaskContinuation::Answer(UNATTENDED.into());
                    task = task_run::claim_task(&self.project, &id, continuation.clone())
                        .map_err(runner_error)?;
                }
            }
        }
    }

    /// The run ended: its document is there and new → `epic-N-retrospective: done`; else the
    /// epic stops with [`OUTPUT_MISSING`] (a resume runs it again).
    fn judge_retrospective(
        &mut self,
        mut rp: RetroProgress,
        id: &str,
    ) -> Result<Option<EpicOutcome>> {
        let before = rp
            .run
            .as_ref()
            .and_then(|r| r.marks.clone())
            .unwrap_or_default();
        let after = self.document_mark(&rp.document);
        let written = after.sha256.is_some() && !before.contains(&after);
        let result = if written { "completed" } else { "missing" };
        rp.run = None;
        if let Some(r) = rp.runs.iter_mut().find(|r| r.run_id == id) {
            r.result = result.into();
        }
        let key = rp.key.clone();
        let shown = self.layout.rel_file(&rp.document);
        self.progress.retrospective = Some(rp);
        if written {
            if self.sprint()?.get(&key).is_none() {
                self.emit(EpicEvent::Note(format!(
                    "{shown} written; {} has no {key} to mark done",
                    self.layout.rel_file(sprint::FILE_NAME)
                )));
            }
            self.raise(&key, "done")?;
            self.progress.save(&self.layout.dir)?;
            self.emit(EpicEvent::Note(format!(
                "{PHASE} of {}: {shown} written",
                self.progress.epic_id
            )));
            return Ok(None);
        }
        self.stopped_on(&key)?;
        Err(EpicError::failure(
            OUTPUT_MISSING,
            format!("the {PHASE} run {id} ended without writing {shown}"),
        )
        .hint(format!("`baton epic resume` runs the retrospective again; `baton runs show {id}` shows what the run did")))
    }

    /// The run failed: recorded, and the epic stops (a resume makes a fresh run).
    fn retro_failed(
        &mut self,
        mut rp: RetroProgress,
        id: &str,
        code: &str,
        message: String,
    ) -> Result<Option<EpicOutcome>> {
        rp.run = None;
        if let Some(r) = rp.runs.iter_mut().find(|r| r.run_id == id) {
            r.result = "failed".into();
        }
        let key = rp.key.clone();
        self.progress.retrospective = Some(rp);
        self.stopped_on(&key)?;
        Err(EpicError::failure(
            FAILED,
            format!("the {PHASE} run {id} failed ({code}): {message}"),
        )
        .hint("`baton epic resume` runs the retrospective again"))
    }

    /// The seed's `lastFailure` names the retrospective; the records are saved.
    fn stopped_on(&mut self, key: &str) -> Result<()> {
        self.state.last_failure = Some(Failure {
            phase: PHASE.into(),
            story_key: key.to_string(),
            at: now(),
        });
        self.state.running = false;
        self.save()
    }

    /// Records the run's id before it is driven.
    fn note_retro_run(
        &mut self,
        rp: &mut RetroProgress,
        inflight: &mut InFlight,
        id: &str,
    ) -> Result<()> {
        inflight.run_id = Some(id.to_string());
        rp.run = Some(inflight.clone());
        if !rp.runs.iter().any(|r| r.run_id == id) {
            rp.runs.push(RetroRun {
                n: inflight.n,
                run_id: id.to_string(),
                result: String::new(),
            });
        }
        self.progress.retrospective = Some(rp.clone());
        self.progress.save(&self.layout.dir)
    }

    /// The document as it is now (project-relative path, digest).
    fn document_mark(&self, document: &str) -> Mark {
        let path = self.layout.rel_file(document);
        let sha256 = Reader::open(&self.layout.project)
            .ok()
            .and_then(|r| r.bytes(&path, MAX_DOCUMENT).ok().flatten())
            .filter(|b| !b.is_empty())
            .map(|b| digest(&b));
        Mark { path, sha256 }
    }

    /// What baton asks of the run: which epic, where its files are, the document's exact name,
    /// nobody present.
    fn retro_request(&self, document: &str) -> String {
        let n = self.epic;
        let artifacts = &self.layout.rel;
        let sprint = self.layout.rel_file(sprint::FILE_NAME);
        let doc = self.layout.rel_file(document);
        format!(
            "Run the retrospective of epic {n} (`{}`), headless (`-H {n}`): every story of the epic is done in `@project/{sprint}`.\n\
             The implementation artifacts (story and spec files, earlier retrospectives) are in `@project/{artifacts}`.\n\
             Retrospective document to write: `@project/{doc}` (this exact name: baton looks for it when you finish).\n\
             Nobody is present: skip every confirmation, never open the team discussion, take epic {n} as given, judge on the evidence alone, and record each choice made without a person in the document's Assumptions section.\n\
             Do not edit `@project/{sprint}`: baton sets `{}: done` itself once the document is written. Propose fixes and action items in the document; change no code.\n",
            keys::epic_key(n),
            key(n)
        )
    }
}
