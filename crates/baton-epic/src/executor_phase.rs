//! A phase of an installed BMAD skill run by a coding-agent CLI (`executor = "claude-code"`,
//! `"codex"`, `"opencode"`) instead of baton's tool loop. The phase is a task run like any
//! method phase (created, adopted and continued the same way, its prompt the rendered skill
//! with what baton asks of it); the CLI works in the story's tree inside baton's sandbox, its
//! only network baton's gateway, which holds the operator's key, checks each model call against
//! the budgets before it is sent, and records the exchanges so the phase replays offline. What
//! the CLI did lands in the run's audit log (`baton runs log`); the verdict is the files', as for
//! every installed skill, never the CLI's word.

use super::error::{EpicError, Result};
use super::events::EpicEvent;
use super::phase_run::{OwnedFiles, runner_error};
use super::progress::{InFlight, StoryProgress};
use crate::ctx::{Ctx, PhaseEnd};
use baton_engine::external::ExternalTask;
use baton_engine::task_run::{self, ClaimedTask, TaskContinuation};
use baton_executor::run::{Job, Mode, SandboxPaths};
use baton_executor::task::{
    self, CliEnd, GO_ON, KeyMissing, RunMeter, default_model, note, recorded_session,
};
use baton_executor::{Event, ExecutorKind};
use baton_tools::terminal::ProjectGuard;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The folder of a phase run's CLI (home, transcript, exchanges) in its run directory.
const EXECUTOR_DIR: &str = "executor";
/// The exchanges file of a phase run in a `--record`/`--replay` folder.
pub fn exchanges_name(story_key: &str, phase: baton_bmad::phase::Phase, n: u32) -> String {
    format!("{story_key}.{phase}.{n}.exchanges.jsonl")
}

/// What a CLI is told before the skill: the unattended rules of a phase, without baton's tools.
const CLI_RULES: &str = "You run one phase of `baton epic`, BMAD's implementation loop, as the \
project's own BMAD skill or workflow below, in the project's folder (your working directory). \
Nobody watches this run: make the decisions the skill leaves to its user yourself, the unattended \
way (continue at checkpoints, choose the recommended option, keep going), and ask the person only \
when the work cannot go on without one. baton decides what happens next from the files the skill \
writes (the story or spec status, the sprint status, the review findings, the code), not from \
what you say.\n\n";

/// The first prompt of a task run as a CLI reads it: its working directory is the project
/// (`@project/x` is `./x`), the skill's rendered files are in `skill_dir`, and it ends by
/// stopping, not with baton's finish tool.
fn for_cli(text: &str, skill_dir: &Path) -> String {
    let text = text
        .replace(
            "- `@project/` is the project root (also the terminal's working directory: there, write paths without `@project/`). Every path below is written that way.",
            "- Your working directory is the project root; a path below that starts with `./` is relative to it.",
        )
        .replace(
            &format!("call `{}` once with a one-line summary", super::method::prompt::FINISH_TOOL),
            "stop with a one-line summary",
        )
        .replace("@pkg/", &format!("{}/", skill_dir.display()))
        .replace("`@pkg`", &format!("`{}`", skill_dir.display()))
        .replace("@project/", "./");
    format!("{CLI_RULES}{text}")
}

/// Copies the run's rendered skill files (its `@pkg`) where the CLI can read them.
fn place_skill(from: &Path, to: &Path) -> std::io::Result<()> {
    if !from.is_dir() {
        return Ok(());
    }
    for entry in walk(from)? {
        let Ok(rel) = entry.strip_prefix(from) else {
            continue;
        };
        let target = to.join(rel);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::copy(&entry, &target)?;
    }
    Ok(())
}

/// The regular files beneath `dir` (links are not followed).
fn walk(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                todo.push(entry.path());
            } else if kind.is_file() {
                out.push(entry.path());
            }
        }
    }
    Ok(out)
}

impl Ctx<'_> {
    /// Where the answers come from: the live API with the operator's key, or the phase's
    /// recorded exchanges.
    fn executor_mode(&self, kind: ExecutorKind, sp: &StoryProgress, n: u32) -> Result<Mode> {
        if let Some(dir) = self.models.replay_dir() {
            let record = dir.join(exchanges_name(&sp.key, sp.phase, n));
            if !record.is_file() {
                return Err(EpicError::usage(
                    "EPIC_TRACE_MISSING",
                    format!(
                        "--replay: no recorded exchanges for {} of {} ({})",
                        sp.phase,
                        sp.key,
                        record.display()
                    ),
                )
                .hint("replay from the folder a --record run of the same epic wrote"));
            }
            return Ok(Mode::Replay { record });
        }
        let config = self
            .config
            .executors
            .get(&kind)
            .cloned()
            .unwrap_or_default();
        let var = config.api_key_env_or_default(kind).unwrap_or_default();
        let upstream = config.upstream_or_default(kind).unwrap_or_default();
        baton_executor::task::live_mode(kind, upstream, &var)
            .map_err(|e| EpicError::usage(KeyMissing::CODE, e.to_string()).hint(e.hint()))
    }
    /// The prompt a task run was created with (its first message).
    fn first_prompt(&self, run_id: &str) -> Result<String> {
        let log = self.project.run_paths(run_id).conversation_log;
        let restored = baton_engine::conversation::restore(&log)
            .map_err(|e| EpicError::failure("EXECUTOR_PROMPT_MISSING", e.to_string()))?;
        restored
            .history
            .iter()
            .find_map(|m| m.content.clone())
            .ok_or_else(|| {
                EpicError::failure(
                    "EXECUTOR_PROMPT_MISSING",
                    format!("run {run_id} has no prompt in its conversation log"),
                )
            })
    }

    /// Paths the CLI may not read: the operator's home (but what it runs from) and baton's
    /// store.
    fn executor_sandbox(&self, program: &Path) -> SandboxPaths {
        SandboxPaths::operator(
            program,
            self.store.home(),
            !self.tools.system.terminal.require_sandbox,
        )
    }

    /// Drives the phase's task run with the coding-agent CLI `kind` until it ends, waits for a
    /// person, or is stopped.
    pub(super) async fn drive_executor(
        &mut self,
        sp: StoryProgress,
        mut inflight: InFlight,
        task: ClaimedTask,
        continuation: TaskContinuation,
        resumed: bool,
        kind: ExecutorKind,
    ) -> Result<PhaseEnd> {
        let run_id = task.run().run_id.clone();
        let config = self
            .config
            .executors
            .get(&kind)
            .cloned()
            .unwrap_or_default();
        let adapter = kind.adapter().ok_or_else(|| {
            EpicError::usage(
                "EPIC_CONFIG_INVALID",
                format!("{kind} is not a coding-agent CLI"),
            )
        })?;
        let program = baton_executor::find::locate(kind, config.command.as_deref())
            .map_err(|e| EpicError::usage(e.code(), e.to_string()).hint(e.hint()))?;
        let mode = self.executor_mode(kind, &sp, inflight.n)?;
        let model = config
            .model
            .clone()
            .unwrap_or_else(|| default_model(kind).to_string());
        let dir = self.project.run_paths(&run_id).dir.join(EXECUTOR_DIR);
        let skill_dir = dir.join("home").join("skill");
        place_skill(&task_run::package_dir(&self.project, &run_id), &skill_dir)
            .map_err(EpicError::io("copy the rendered skill for", &skill_dir))?;
        let first = for_cli(&self.first_prompt(&run_id)?, &skill_dir);
        self.emit(EpicEvent::Phase {
            story: sp.key.clone(),
            phase: sp.phase,
            run_id: run_id.clone(),
            review_cycle: sp.review_cycle,
            attempt: sp.attempt,
            resumed,
        });
        self.emit(EpicEvent::Note(format!(
            "{} of {}: run by {kind} ({model}) through baton's gateway",
            sp.phase, sp.key
        )));
        self.phases_run += 1;
        let live = self.models.live();
        let price = live.and_then(|l| l.price());
        let caps = super::budget::caps_for(self, &sp.key, &run_id, price);
        let record = baton_store::ModelRecord {
            name: format!("{kind}:{model}"),
            base_url: None,
            api: None,
            replay: matches!(mode, Mode::Replay { .. }),
            trace: None,
        };
        let (mut task, mut continuation) = (task, continuation);
        loop {
            let external = Arc::new(
                ExternalTask::begin(task, record.clone(), caps.clone(), price)
                    .map_err(runner_error)?,
            );
            let session = recorded_session(&dir);
            let (prompt, resume) = match (&continuation, session) {
                (TaskContinuation::Answer(a), Some(s)) => (a.clone(), Some(s)),
                (TaskContinuation::Answer(a), None) => (
                    format!("{first}\n\nThe person answered your question: {a}"),
                    None,
                ),
                (TaskContinuation::Resume, Some(s)) => (GO_ON.to_string(), Some(s)),
                _ => (first.clone(), None),
            };
            let guard = OwnedFiles::snapshot(&self.layout);
            // The configuration, BMAD's method and `.git` stay read-only to the CLI, as to
            // baton's own commands; what it creates among them is removed after.
            let kept = ProjectGuard::take(
                &self.layout.project,
                self.tools.system.allow_git_writes,
                &self.tools.system.protected,
            );
            let mut sandbox = self.executor_sandbox(&program);
            sandbox.read_only = kept.read_only();
            let meter: Arc<dyn baton_gateway::Meter> = Arc::new(RunMeter(external.clone()));
            let job = Job {
                adapter,
                program: &program,
                workdir: &self.layout.project,
                run_dir: &dir,
                model: &model,
                prompt: &prompt,
                resume: resume.as_deref(),
                extra_args: &config.args,
                mode: mode.clone(),
                meter: Some(meter),
                max_output_tokens: None,
                sandbox,
            };
            let on_event = self.on_event;
            let shown = sp.key.clone();
            let audit = external.clone();
            let mut each = move |e: &Event| {
                note(&audit, e);
                if let (Some(f), Event::ToolCall { name, .. }) = (on_event, e) {
                    f(EpicEvent::Note(format!("{shown}: {kind} ran {name}")));
                }
            };
            let cancel = self.cancel.clone();
            let ended = task::drive(&external, kind, job, &mut each, cancel.cancelled()).await;
            drop(each);
            if let Some(value) = self.sprint_value_written(&guard, &sp.key) {
                inflight.sprint_wrote = Some(value);
                if let Some(s) = self.progress.story.as_mut() {
                    s.run = Some(inflight.clone());
                }
                self.progress.save(&self.layout.dir)?;
            }
            guard.restore(&self.layout, self.on_event)?;
            for removed in kept.restore() {
                self.emit(EpicEvent::Note(removed));
            }
            self.keep_exchanges(&dir, &sp, inflight.n);
            return Ok(match ended.map_err(runner_error)? {
                CliEnd::Finished { .. } => PhaseEnd::Completed,
                CliEnd::Interrupted => PhaseEnd::Interrupted,
                CliEnd::Budget(refusal) => PhaseEnd::Budget {
                    message: refusal.message,
                    budget: refusal.details,
                },
                CliEnd::Failed { code, message } => PhaseEnd::Failed { code, message },
                CliEnd::Question(question) => {
                    drop(external);
                    let q = self.record_question(&sp, &mut inflight, &run_id, &question, "")?;
                    let Some(answer) = self.answer_for(&run_id, &sp, inflight.n, &q)? else {
                        return Ok(PhaseEnd::Waiting(q));
                    };
                    continuation = TaskContinuation::Answer(answer);
                    task = task_run::claim_task(&self.project, &run_id, continuation.clone())
                        .map_err(runner_error)?;
                    continue;
                }
            });
        }
    }

    /// Copies the phase's exchanges into the `--record` folder (best effort: the run's own
    /// copy stays in its directory).
    fn keep_exchanges(&self, dir: &Path, sp: &StoryProgress, n: u32) {
        if let Some(to) = self.models.record_dir() {
            let from = dir.join("exchanges.jsonl");
            if from.is_file() {
                let _ = std::fs::copy(&from, to.join(exchanges_name(&sp.key, sp.phase, n)));
            }
        }
    }
}
