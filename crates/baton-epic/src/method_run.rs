//! A phase run of the project's installed BMAD skill or workflow: a store-backed *task run*
//! (see `baton_engine::task_run`) whose first message is the rendered skill with what baton
//! asks of it, with the project's tools (files, the sandboxed terminal, MCP) under
//! `baton.toml`'s policy, ended by `phase.complete`. Like a package phase run it is recorded
//! (run directory, conversation log, audit, trace) and resumable: its id is in the progress file
//! before it is driven, a run created just before a kill is adopted, a killed run continues from
//! its log, a question becomes an agent-state question.
//!
//! The skill's rendered files (baton's own rendering) are placed in the run's `@pkg` folder,
//! read-only to the model, before the run is first driven; a run continued later finds them
//! there. What the run wrote to `sprint-status.yaml` is read as evidence, then undone like any
//! phase's write to the loop's files (the loop applies statuses with its own writer).

use super::error::{EpicError, Result};
use super::events::EpicEvent;
use super::method::files::Reader;
use super::method::prompt::{self, Ask};
use super::method::render::{self, Rendered};
use super::phase_run::{OwnedFiles, runner_error, same_run};
use super::progress::{InFlight, StoryProgress};
use super::specs::{MethodSpec, PhaseSpec};
use crate::ctx::{Ctx, PhaseEnd};
use baton_bmad::phase::Phase;
use baton_bmad::sprint::{self, SprintStatus};
use baton_engine::EngineEvent;
use baton_engine::task_driver::TaskEnd;
use baton_engine::task_run::{self, ClaimedTask, TaskContinuation, TaskDef};
use baton_llm::Message;
use baton_store::{NewTaskRun, Phase as RunPhase, RunKind};
use std::time::Duration;

use super::progress::now;

/// The file that says a run's `@pkg` holds its rendered skill (written last).
pub(crate) const PLACED: &str = ".baton-rendered";
/// How long BMAD's renderer may take.
const RENDER_TIMEOUT: Duration = Duration::from_secs(120);

/// What a phase's task run is called in the run index (`baton runs list`).
pub fn task_ref(epic_id: &str, story: &str, phase: Phase, n: u32) -> String {
    format!("{epic_id}/{story}/{phase}.{n}")
}

pub(crate) fn def() -> TaskDef {
    TaskDef {
        system: vec![Message::system(prompt::RULES)],
        finish: prompt::finish_tool(),
        validate: Box::new(prompt::validate),
    }
}

impl Ctx<'_> {
    /// Creates, adopts or continues the phase's task run and drives it to an end.
    pub(super) async fn run_method_phase(
        &mut self,
        sp: StoryProgress,
        spec: PhaseSpec,
    ) -> Result<PhaseEnd> {
        let Some(m) = spec.method.clone() else {
            return Err(EpicError::failure(
                "EPIC_CONFIG_INVALID",
                format!("no installed method for {}", sp.phase),
            ));
        };
        let mut inflight = sp.run.clone().unwrap_or_else(|| InFlight {
            n: 1,
            run_id: None,
            since: now(),
            since_ms: super::progress::now_ms(),
            question: None,
            marks: None,
            sprint_wrote: None,
        });
        // What the story's files say before the run: the verdict compares against it.
        if inflight.run_id.is_none() && inflight.marks.is_none() {
            inflight.marks = Some(self.marks(&sp.key));
            if let Some(s) = self.progress.story.as_mut() {
                s.run = Some(inflight.clone());
            }
            self.progress.save(&self.layout.dir)?;
        }
        let name = task_ref(&self.progress.epic_id, &sp.key, sp.phase, inflight.n);
        let (task, continuation, resumed) = match inflight.run_id.clone() {
            Some(id) => match self.task_continuation(&sp, &mut inflight, &id)? {
                Ok((t, c)) => (t, c, true),
                Err(end) => return Ok(end),
            },
            None => match self.adopt_task(&name, &inflight) {
                Some(id) => {
                    self.note_run(&sp, &mut inflight, &id)?;
                    self.note_method(&id, &m.how());
                    match self.task_continuation(&sp, &mut inflight, &id)? {
                        Ok((t, c)) => (t, c, true),
                        Err(end) => return Ok(end),
                    }
                }
                None => {
                    let (rendered, how) = self.render_for_run(&m)?;
                    let ask = Ask {
                        story_key: &sp.key,
                        epic_id: &self.progress.epic_id,
                        phase: sp.phase.as_str(),
                        review_cycle: sp.review_cycle,
                        artifacts: &self.layout.rel,
                        request: self.method_request(&sp, &m),
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
                    self.note_run(&sp, &mut inflight, &id)?;
                    self.note_method(&id, &how);
                    self.place(&id, &rendered)?;
                    (task, TaskContinuation::Start, false)
                }
            },
        };
        // A run created before a kill that came before its files were placed.
        let id = task.run().run_id.clone();
        if !task_run::package_dir(&self.project, &id)
            .join(PLACED)
            .is_file()
        {
            self.place(&id, &m.rendered)?;
        }
        self.emit(EpicEvent::Note(format!(
            "{} of {}: the project's {} ({}, {}), {}",
            sp.phase,
            sp.key,
            m.installed.name,
            m.installed.kind_name(),
            m.installed.rel,
            self.progress
                .runs
                .iter()
                .find(|r| r.run_id == id)
                .and_then(|r| r.method.clone())
                .unwrap_or_else(|| m.how())
        )));
        if spec.executor != baton_executor::ExecutorKind::Baton {
            return self
                .drive_executor(sp, inflight, task, continuation, resumed, spec.executor)
                .await;
        }
        self.drive_method(sp, inflight, task, continuation, resumed)
            .await
    }

    /// Keeps how the run's skill was rendered in its record.
    fn note_method(&mut self, run_id: &str, how: &str) {
        if let Some(r) = self.progress.runs.iter_mut().find(|r| r.run_id == run_id) {
            r.method = Some(how.to_string());
        }
        let _ = self.progress.save(&self.layout.dir);
    }

    /// The skill as the run starts from it: BMAD's own renderer when it is used (falling back
    /// to baton's rendering, said so, unless `render = "uv"` asks for BMAD's alone), else
    /// baton's.
    pub(crate) fn render_for_run(&self, m: &MethodSpec) -> Result<(Rendered, String)> {
        if !m.by_script() {
            return Ok((m.rendered.clone(), m.rendered.how.clone()));
        }
        match self.render_with_script(m) {
            Ok(r) => {
                let how = r.how.clone();
                Ok((r, how))
            }
            Err(why) if self.config.render.as_deref() == Some("uv") => Err(EpicError::failure(
                "EPIC_SKILL_RENDER_FAILED",
                format!(
                    "BMAD's {} did not render {}: {why}",
                    render::RENDER_SCRIPT,
                    m.installed.name
                ),
            )
            .hint("run it yourself to see why, or set [autopilot] render = \"auto\" to let baton resolve the skill when it fails")),
            Err(why) => {
                let reader = Reader::open(&self.layout.project)?;
                let r = render::render(
                    &reader,
                    &m.installed,
                    &format!("BMAD's renderer failed: {why}"),
                )?;
                let how = r.how.clone();
                self.emit(EpicEvent::Note(format!(
                    "{} was not rendered by BMAD's {} ({why}); baton resolved it itself",
                    m.installed.name,
                    render::RENDER_SCRIPT
                )));
                Ok((r, how))
            }
        }
    }

    /// `uv run _bmad/scripts/render_skill.py …` in the sandbox, like a verify command.
    fn render_with_script(&self, m: &MethodSpec) -> std::result::Result<Rendered, String> {
        let sandbox = self.project_sandbox().map_err(|(_, message)| message)?;
        let root = self.layout.project.display().to_string();
        let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
        let command = format!(
            "uv run --no-cache {} --project-root {} --skill {}",
            render::RENDER_SCRIPT,
            quote(&root),
            quote(&format!("{root}/{}", m.installed.rel))
        );
        let out = baton_worktree::verify::run(&command, &sandbox, RENDER_TIMEOUT, &self.cancel);
        let reader = Reader::open(&self.layout.project).map_err(|e| e.message)?;
        match render::from_script_output(&reader, &self.layout.project, &m.installed, &out.tail) {
            Ok(r) if out.passed() => Ok(r),
            Ok(_) | Err(_) if !out.passed() => Err(out
                .tail
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("it failed")
                .trim()
                .to_string()),
            other => other,
        }
    }

    /// The prompt with the project's and the store's absolute paths made relative (a value
    /// from the configuration may hold one).
    pub(crate) fn without_host_paths(&self, text: String) -> String {
        let root = self.layout.project.display().to_string();
        let home = self.store.home().display().to_string();
        text.replace(&format!("{root}/"), "@project/")
            .replace(&root, "@project")
            .replace(&home, "$BATON_HOME")
    }

    /// Writes the rendered files into the run's `@pkg` folder (then the marker).
    pub(crate) fn place(&self, run_id: &str, rendered: &Rendered) -> Result<()> {
        let dir = task_run::package_dir(&self.project, run_id);
        for (name, bytes) in &rendered.snapshot {
            if name
                .split('/')
                .any(|p| p.is_empty() || p == "." || p == "..")
            {
                continue;
            }
            let path = dir.join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(EpicError::io("create", parent))?;
            }
            baton_store::durable::replace(&path, bytes)?;
        }
        std::fs::create_dir_all(&dir).map_err(EpicError::io("create", &dir))?;
        baton_store::durable::replace(&dir.join(PLACED), rendered.how.as_bytes())?;
        Ok(())
    }

    /// What baton asks of the run: the story, its files, and why the phase runs again.
    fn method_request(&self, sp: &StoryProgress, m: &MethodSpec) -> String {
        let vars = self.variables(sp);
        let var = |k: &str| {
            vars.get(k)
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_string()
        };
        let story_file = var("storyFile");
        let story_exists = Reader::open(&self.layout.project)
            .map(|r| r.is_file(&story_file))
            .unwrap_or(false);
        let spec = self.spec_files(&sp.key);
        let sprint = self.layout.rel_file(sprint::FILE_NAME);
        let epic = &self.progress.epic_id;
        let key = &sp.key;
        let mut r = String::new();
        let file_line = |r: &mut String| {
            if let [one] = spec.as_slice() {
                r.push_str(&format!("Its spec file: `@project/{one}`.\n"));
            } else if story_exists {
                r.push_str(&format!("Its story file: `@project/{story_file}`.\n"));
            }
        };
        match sp.phase {
            Phase::CreateStory => {
                r.push_str(&format!(
                    "Create the story file of story `{key}` of {epic} (the next story in `@project/{sprint}`).\nStory file to write: `@project/{story_file}`.\n"
                ));
            }
            Phase::Build => {
                r.push_str(&format!("Story `{key}` of {epic}: build it.\n"));
                if spec.is_empty() && !story_exists {
                    // The name the finder knows the story's spec by.
                    r.push_str(&format!(
                        "No spec exists yet: write it as `@project/{}`.\n",
                        self.layout.rel_file(&format!("spec-{key}.md"))
                    ));
                }
                file_line(&mut r);
            }
            Phase::Dev if m.installed.name.contains("build") => {
                r.push_str(&format!("Story `{key}` of {epic}: build it.\n"));
                file_line(&mut r);
            }
            Phase::Dev => {
                r.push_str(&format!("Develop story `{key}` of {epic}.\n"));
                r.push_str(&format!(
                    "Story file: `@project/{story_file}`{}.\n",
                    if story_exists {
                        ""
                    } else {
                        " (it does not exist yet)"
                    }
                ));
            }
            Phase::CodeReview => {
                r.push_str(&format!(
                    "Review the change of story `{key}` of {epic} (its status is review in `@project/{sprint}`).\n"
                ));
                file_line(&mut r);
                if let Some(base) = &sp.baseline {
                    r.push_str(&format!(
                        "The change is everything since commit {base} (staged, unstaged and untracked files included).\n"
                    ));
                } else {
                    r.push_str("The change is the working tree's uncommitted changes (and the story's File List).\n");
                }
            }
            Phase::Validate | Phase::Revision => {
                r.push_str(&format!("Phase {} of story `{key}` of {epic}.\n", sp.phase));
                if let Some(action) = self.specs.get(&sp.phase).and_then(|s| s.action.as_deref()) {
                    // BMAD's create-story validates with its own action (menu "Validate Story").
                    r.push_str(&format!(
                        "Run the skill's `{action}` action on the story's file (not a new story); keep the file's status as it is unless the action changes it.\n"
                    ));
                }
                file_line(&mut r);
            }
        }
        let summary = var("reviewSummary");
        if !summary.is_empty() {
            r.push_str(&format!(
                "\nThe code review asked for changes (review cycle {}); address them first:\n{summary}\n",
                sp.review_cycle
            ));
        }
        let verify = var("verifyOutput");
        if !verify.is_empty() {
            r.push_str(&format!(
                "\nA check baton ran after the last change failed; fix that first:\n{verify}\n"
            ));
        }
        r
    }

    /// An idle task run made for this phase run before a kill hid its id.
    pub(crate) fn adopt_task(&self, name: &str, inflight: &InFlight) -> Option<String> {
        let probe = self.project.run_paths("probe").dir;
        let runs_dir = probe.parent()?;
        let entries = std::fs::read_dir(runs_dir).ok()?;
        entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|id| !id.starts_with('.'))
            .filter(|id| !self.progress.runs.iter().any(|r| r.run_id == *id))
            .filter_map(|id| self.project.get_run(&id).ok().filter(|r| r.run_id == id))
            .filter(|r| {
                r.kind == RunKind::Task
                    && r.workflow_ref == name
                    && r.work_tree == self.project.work_tree
                    && r.phase == RunPhase::Idle
                    && same_run(&r.run_id, &r.created_at, inflight)
            })
            .map(|r| r.run_id)
            .max()
    }

    /// How an existing task run goes on: resumed, answered, or already at an end.
    fn task_continuation(
        &mut self,
        sp: &StoryProgress,
        inflight: &mut InFlight,
        id: &str,
    ) -> Result<std::result::Result<(ClaimedTask, TaskContinuation), PhaseEnd>> {
        let continuation = match self.existing_run(sp, inflight, id, false)? {
            Ok(Some(answer)) => TaskContinuation::Answer(answer),
            Ok(None) => TaskContinuation::Resume,
            Err(end) => return Ok(Err(end)),
        };
        let task =
            task_run::claim_task(&self.project, id, continuation.clone()).map_err(runner_error)?;
        Ok(Ok((task, continuation)))
    }

    /// Drives the task run, answering its questions when an answer is at hand.
    async fn drive_method(
        &mut self,
        sp: StoryProgress,
        mut inflight: InFlight,
        task: ClaimedTask,
        continuation: TaskContinuation,
        resumed: bool,
    ) -> Result<PhaseEnd> {
        let (mut task, mut continuation) = (task, continuation);
        let run_id = task.run().run_id.clone();
        self.emit(EpicEvent::Phase {
            story: sp.key.clone(),
            phase: sp.phase,
            run_id: run_id.clone(),
            review_cycle: sp.review_cycle,
            attempt: sp.attempt,
            resumed,
        });
        self.phases_run += 1;
        loop {
            if let TaskContinuation::Answer(answer) = &continuation {
                let m = self
                    .models
                    .for_run(&run_id, &sp.key, sp.phase, inflight.n)?;
                m.record_answer(answer, None);
            }
            let guard = OwnedFiles::snapshot(&self.layout);
            let trace = super::models::trace_name(&sp.key, sp.phase, inflight.n);
            let finished = self.invoke_task(task, &continuation, &sp.key, trace).await;
            // What the run wrote for its story in sprint-status.yaml, kept before it is undone.
            if let Some(value) = self.sprint_value_written(&guard, &sp.key) {
                inflight.sprint_wrote = Some(value);
                if let Some(s) = self.progress.story.as_mut() {
                    s.run = Some(inflight.clone());
                }
                self.progress.save(&self.layout.dir)?;
            }
            guard.restore(&self.layout, self.on_event)?;
            let finished = finished?;
            match finished.report.end {
                TaskEnd::Finished { .. } => return Ok(PhaseEnd::Completed),
                TaskEnd::Failed { code, .. } if code == baton_engine::driver::ABORTED => {
                    return Ok(PhaseEnd::Interrupted);
                }
                TaskEnd::Failed { code, message }
                    if code == baton_engine::spend::BUDGET_EXCEEDED =>
                {
                    let budget = super::budget::stop_details(finished.run.waiting_for.as_ref());
                    return Ok(PhaseEnd::Budget { message, budget });
                }
                TaskEnd::Failed { code, message } => {
                    return Ok(PhaseEnd::Failed {
                        code: code.to_string(),
                        message,
                    });
                }
                TaskEnd::Waiting { question, .. } => {
                    let q = self.record_question(&sp, &mut inflight, &run_id, &question, "")?;
                    let Some(answer) = self.answer_for(&run_id, &sp, inflight.n, &q)? else {
                        return Ok(PhaseEnd::Waiting(q));
                    };
                    continuation = TaskContinuation::Answer(answer);
                    task = task_run::claim_task(&self.project, &run_id, continuation.clone())
                        .map_err(runner_error)?;
                }
            }
        }
    }

    /// The status the run wrote for `key` in sprint-status.yaml, if it changed the file.
    pub(super) fn sprint_value_written(&self, guard: &OwnedFiles, key: &str) -> Option<String> {
        let before = guard.before(sprint::FILE_NAME)?;
        let now = self
            .layout
            .file(sprint::FILE_NAME)
            .read(baton_autopilot::untrusted::limit::STATUS)
            .ok()
            .flatten()?;
        if now == before {
            return None;
        }
        let shown = self.layout.rel_file(sprint::FILE_NAME);
        let parse =
            |b: &[u8]| SprintStatus::parse(&shown, String::from_utf8_lossy(b).into_owned()).ok();
        let was = parse(&before).and_then(|s| s.get(key).map(|e| e.status.clone()));
        let is = parse(&now).and_then(|s| s.get(key).map(|e| e.status.clone()))?;
        (Some(&is) != was.as_ref()).then_some(is)
    }

    /// One invocation of the task run (`key`: the story it is for, whose budget it counts
    /// against; `trace`: its trace file's name).
    pub(crate) async fn invoke_task(
        &mut self,
        task: ClaimedTask,
        continuation: &TaskContinuation,
        key: &str,
        trace: String,
    ) -> Result<task_run::TaskFinished> {
        let run_id = task.run().run_id.clone();
        let live = self.models.live();
        let caps = super::budget::caps_for(self, key, &run_id, live.and_then(|l| l.price()));
        let paths = self.project.run_paths(&run_id);
        let m = self.models.for_trace(&run_id, trace)?;
        let positioned = m.position(
            matches!(continuation, TaskContinuation::Answer(_)),
            &paths.conversation_log,
        );
        let model = m.model(live)?;
        let on_event = self.on_event;
        let forward = move |e: EngineEvent| {
            if let Some(f) = on_event {
                f(EpicEvent::Engine(e));
            }
        };
        let mut settings = baton_engine::runner::Settings::new(model);
        settings.replay = match continuation {
            TaskContinuation::Resume if !positioned => m.replay.as_ref(),
            _ => None,
        };
        settings.record = m.recorder.clone();
        settings.tools = self.tools.clone();
        settings.cancel = self.cancel.clone();
        settings.on_event = Some(&forward);
        settings.caps = caps;
        let finished = task_run::drive_task(task, def(), settings)
            .await
            .map_err(runner_error);
        m.save()?;
        finished
    }
}
