//! `baton epic status`: the board. Stories and their statuses in file order, the phase in
//! flight, pending questions, review verdicts and the last failure. Read-only and lock-free
//! (every file it reads is replaced atomically); a damaged story file is shown, not fatal.

use super::config::AutopilotConfig;
use super::consent;
use super::error::{EpicError, Result};
use super::progress::{FailureDetail, Progress, RunRecord};
use baton_bmad::keys::{self, KeyKind};
use baton_bmad::layout;
use baton_bmad::sprint::{self, SprintStatus};
use baton_epic_state::agent_state::{self, AgentState};
use baton_epic_state::findings::{self, Findings};
use baton_epic_state::lock;
use baton_epic_state::review::{self, Review};
use baton_epic_state::run_state::{self, RunEpicState};
use serde::Serialize;
use std::collections::HashSet;
use std::path::Path;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingQuestion {
    pub id: String,
    pub question: String,
    pub context: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StoryRow {
    pub key: String,
    pub status: String,
    /// The phase in flight, for the current story.
    pub phase: Option<String>,
    pub review_cycle: Option<u32>,
    pub run_id: Option<String>,
    pub questions: Vec<PendingQuestion>,
    /// `approved` or `changes-requested`, from the last review file.
    pub review: Option<String>,
    /// A file of this story the autopilot cannot read.
    pub problem: Option<String>,
    /// The story's file (project-relative), wherever BMAD keeps it (see `story_files`);
    /// `None`: not written yet, or found twice (then `problem` names both).
    pub file: Option<String>,
    /// The status the file declares (a `Status:` line or a frontmatter `status:`), as written.
    pub file_status: Option<String>,
    /// The phase runs made for this story, oldest first (from baton's progress record).
    pub runs: Vec<PhaseRunLink>,
    /// The tokens (and cost, where priced) of those runs, summed (see `status_board::fill_usage`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<baton_llm::Usage>,
    /// `[autopilot.publish]`: its branch, how far publishing got (`approved`, `pushed`,
    /// `published`, `merged`), the link the command printed, the last error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub publish: Option<baton_worktree::publish::Story>,
}

/// A phase run of a story, as the board links it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseRunLink {
    pub phase: String,
    /// The run's ordinal among this story's runs of this phase.
    pub n: u32,
    pub run_id: String,
    pub review_cycle: u32,
    /// `completed`, `waiting`, `failed`, or empty while it runs.
    pub result: String,
    /// The run's tokens and cost (see `status_board::fill_usage`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<baton_llm::Usage>,
}

impl PhaseRunLink {
    pub(crate) fn of(r: &RunRecord) -> PhaseRunLink {
        PhaseRunLink {
            phase: r.phase.as_str().to_string(),
            n: r.n,
            run_id: r.run_id.clone(),
            review_cycle: r.review_cycle,
            result: r.result.clone(),
            usage: None,
        }
    }
}

impl StoryRow {
    /// A story with only its key and sprint status known.
    pub fn new(key: impl Into<String>, status: impl Into<String>) -> StoryRow {
        StoryRow {
            key: key.into(),
            status: status.into(),
            phase: None,
            review_cycle: None,
            run_id: None,
            questions: Vec::new(),
            review: None,
            problem: None,
            file: None,
            file_status: None,
            runs: Vec::new(),
            usage: None,
            publish: None,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EpicRow {
    pub key: String,
    pub status: String,
    pub stories: Vec<StoryRow>,
    /// The stories' usage, summed (see `status_board::fill_usage`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<baton_llm::Usage>,
}

/// Where the autopilot stands, from the state file, the lock, the sprint and the questions.
/// The seed's `status` alone cannot tell: it is `paused` after a finished epic too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Standing {
    /// No `.run-epic-state.json` yet.
    NotStarted,
    /// An orchestrator process holds the project.
    Running,
    /// The current story has a question nobody answered.
    Waiting,
    /// Stopped on a failure, by `baton epic stop`, or at `--max-stories`.
    Paused,
    /// The file says `running` but no process holds the project (killed): resumable.
    Interrupted,
    /// The state file's epic is `done` in the sprint status.
    Done,
}

impl Standing {
    pub fn as_str(self) -> &'static str {
        match self {
            Standing::NotStarted => "not-started",
            Standing::Running => "running",
            Standing::Waiting => "waiting",
            Standing::Paused => "paused",
            Standing::Interrupted => "interrupted",
            Standing::Done => "done",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Board {
    pub implementation_artifacts: String,
    /// The epic of `.run-epic-state.json`, if any.
    pub epic_id: Option<String>,
    /// `running` or `paused` as the state file says.
    pub state: Option<String>,
    /// Where the autopilot really stands (see [`Standing`]).
    pub standing: Standing,
    /// Whether an orchestrator process holds the project right now.
    pub live: bool,
    pub current_story: Option<String>,
    /// The last story the autopilot finished: the last of baton's progress record (a whole
    /// epic run), else the seed's `lastStoryCompleted` (set by `baton epic story` only).
    pub last_story_completed: Option<String>,
    pub last_failure: Option<FailureDetail>,
    pub epics: Vec<EpicRow>,
    /// What the epics cannot show: `unrecognized` (keys outside BMAD's grammar, whole file),
    /// `notRunnable` (values BMAD does not define, with the reason), `legacyMapped`,
    /// `retroItems` and `warnings`, of the epic asked for (else of the whole file).
    #[serde(flatten)]
    pub findings: Findings,
    /// Which `sprint-status.yaml` was read, the rule that chose it, the rules passed over and
    /// the other files found.
    pub sprint_status: layout::SprintStatusInfo,
    /// Where story files were looked for.
    pub story_files: baton_bmad::story_files::SearchInfo,
    /// A parallel epic: the stories in flight with their phase, worktree branch and folder, and
    /// why the others wait (see [`super::parallel_board`]). Set by `status_board`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel: Option<super::parallel_board::ParallelBoard>,
    /// The pipeline the epic runs (recorded when it started) or would run now: where it came
    /// from, why, and what runs each phase. Set by `status_board`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<super::pipeline::PipelineView>,
}

/// The board of `epic` (`epic-N` or `N`), else of the state file's epic, else of every epic.
pub fn status(project: &Path, epic: Option<&str>) -> Result<Board> {
    let root = std::fs::canonicalize(project).map_err(|e| {
        EpicError::usage(
            "PROJECT_NOT_FOUND",
            format!("project {} cannot be opened: {e}", project.display()),
        )
    })?;
    let config = AutopilotConfig::load(&root)?;
    let layout = layout::resolve(&root, config.implementation_artifacts.as_deref())?;
    let sprint = SprintStatus::load(
        &layout.file(sprint::FILE_NAME),
        &layout.rel_file(sprint::FILE_NAME),
    )?;
    let state = RunEpicState::load(&layout.dir, &layout.rel_file(run_state::FILE_NAME))?;
    // The progress file is baton's own; a damaged one does not hide the board.
    let progress = Progress::load(&layout.dir, &layout.rel).ok().flatten();
    let asked = epic.map(|e| findings::epic_arg(&sprint, e)).transpose()?;
    let wanted = asked.or_else(|| state.as_ref().and_then(|s| keys::parse_epic_id(&s.epic_id)));
    if let Some(n) = wanted
        && sprint.epic_entry(n).is_none()
        && sprint.stories_of(n).next().is_none()
    {
        return Err(EpicError::usage(
            "EPIC_NOT_FOUND",
            format!("{} has no {}", sprint.shown(), keys::epic_key(n)),
        ));
    }
    // One listing tells which story files exist; only those are read.
    let present: HashSet<String> = layout.dir.names(100_000).into_iter().collect();
    let files = baton_bmad::story_files::StoryFiles::scan(&layout, &sprint);
    let in_flight = progress.as_ref().and_then(|p| p.story.clone());
    let recorded: &[RunRecord] = progress.as_ref().map_or(&[], |p| p.runs.as_slice());
    let mut epics: Vec<EpicRow> = Vec::new();
    let published = baton_worktree::publish::Ledger::load(&layout.dir).unwrap_or_default();
    for entry in sprint.entries() {
        match entry.kind {
            KeyKind::Epic(n) if wanted.is_none_or(|w| w == n) => epics.push(EpicRow {
                key: entry.key.clone(),
                status: entry.status.clone(),
                stories: Vec::new(),
                usage: None,
            }),
            KeyKind::Story { epic: n } if wanted.is_none_or(|w| w == n) => {
                let epic_key = keys::epic_key(n);
                let mut row = story_row(&layout, &present, entry, in_flight.as_ref());
                file_of(&mut row, files.lookup(&layout, &entry.key));
                row.runs = recorded
                    .iter()
                    .filter(|r| r.story_key == entry.key)
                    .map(PhaseRunLink::of)
                    .collect();
                row.publish = published.get(&entry.key).cloned();
                match epics.iter_mut().find(|e| e.key == epic_key) {
                    Some(e) => e.stories.push(row),
                    None => epics.push(EpicRow {
                        key: epic_key,
                        status: "(not listed)".into(),
                        stories: vec![row],
                        usage: None,
                    }),
                }
            }
            _ => {}
        }
    }
    let live = lock::is_held(&layout.dir);
    let last_story_completed = progress
        .as_ref()
        .and_then(|p| p.completed.last().cloned())
        .or_else(|| state.as_ref().and_then(|s| s.last_story_completed.clone()));
    // Of the epic asked for; else of the whole file (the board of the state file's epic
    // hides no other epic's odd values).
    let mut findings = findings::of(&sprint, asked);
    consent::amend(&mut findings, &layout, &sprint);
    Ok(Board {
        implementation_artifacts: layout.rel.clone(),
        epic_id: state.as_ref().map(|s| s.epic_id.clone()),
        state: state
            .as_ref()
            .map(|s| if s.running { "running" } else { "paused" }.to_string()),
        standing: standing(state.as_ref(), live, &sprint, &layout),
        live,
        current_story: state.as_ref().and_then(|s| s.current_story_key.clone()),
        last_story_completed,
        last_failure: progress.and_then(|p| p.failure),
        epics,
        findings,
        sprint_status: layout.sprint_status_info(),
        story_files: files.info(),
        parallel: None,
        pipeline: None,
    })
}

/// The phase runs baton's progress record names for `project` (story, phase, run id), oldest
/// first; empty when the project has no epic or no readable record. Read-only.
pub fn phase_runs(project: &Path) -> Vec<RunRecord> {
    let Ok(config) = AutopilotConfig::load(project) else {
        return Vec::new();
    };
    let Ok(layout) = layout::resolve(project, config.implementation_artifacts.as_deref()) else {
        return Vec::new();
    };
    Progress::load(&layout.dir, &layout.rel)
        .ok()
        .flatten()
        .map(|p| p.runs)
        .unwrap_or_default()
}

/// The phase runs the progress record of `tree` names: a git worktree in which a story of a
/// parallel epic of `project` is in flight (its runs reach the project's record when the
/// story's loop ends). Empty when there is none or it cannot be read. Read-only.
pub fn phase_runs_in_work_tree(project: &Path, tree: &Path) -> Vec<RunRecord> {
    let Ok(config) = AutopilotConfig::load(project) else {
        return Vec::new();
    };
    let Ok(main) = layout::resolve(project, config.implementation_artifacts.as_deref()) else {
        return Vec::new();
    };
    let Ok(layout) = layout::resolve(tree, Some(&main.rel)) else {
        return Vec::new();
    };
    Progress::load(&layout.dir, &layout.rel)
        .ok()
        .flatten()
        .map(|p| p.runs)
        .unwrap_or_default()
}

fn standing(
    state: Option<&RunEpicState>,
    live: bool,
    sprint: &SprintStatus,
    layout: &layout::Layout,
) -> Standing {
    if live {
        return Standing::Running;
    }
    let Some(state) = state else {
        return Standing::NotStarted;
    };
    if sprint
        .get(&state.epic_id)
        .is_some_and(|e| e.normalized() == "done")
    {
        return Standing::Done;
    }
    // A damaged agent-state file is shown on its story's card; here it is not a question.
    let waiting = state.current_story_key.as_deref().is_some_and(|key| {
        AgentState::load(&layout.dir, &layout.rel, key)
            .ok()
            .flatten()
            .is_some_and(|a| a.pending().is_some())
    });
    if waiting {
        Standing::Waiting
    } else if state.running {
        Standing::Interrupted
    } else {
        Standing::Paused
    }
}

fn story_row(
    layout: &layout::Layout,
    present: &HashSet<String>,
    entry: &sprint::Entry,
    in_flight: Option<&super::progress::StoryProgress>,
) -> StoryRow {
    let key = &entry.key;
    let mut row = StoryRow::new(key.clone(), entry.status.clone());
    if let Some(sp) = in_flight.filter(|s| s.key == *key) {
        row.phase = Some(sp.phase.as_str().to_string());
        row.review_cycle = Some(sp.review_cycle);
        row.run_id = sp.run.as_ref().and_then(|r| r.run_id.clone());
    }
    if present.contains(&format!("{key}{}", agent_state::SUFFIX)) {
        row.questions = pending_questions(layout, key, &mut row.problem);
    }
    if present.contains(&format!("{key}{}", review::SUFFIX)) {
        row.review = review_verdict(layout, key, &mut row.problem);
    }
    row
}

/// The unanswered questions of story `key`'s agent-state file (none without one); a damaged
/// file is the story's `problem`.
pub(crate) fn pending_questions(
    layout: &layout::Layout,
    key: &str,
    problem: &mut Option<String>,
) -> Vec<PendingQuestion> {
    match AgentState::load(&layout.dir, &layout.rel, key) {
        Ok(Some(a)) => a
            .questions
            .iter()
            .filter(|q| q.answer.is_none())
            .map(|q| PendingQuestion {
                id: q.id.clone(),
                question: q.question.clone(),
                context: q.context.clone(),
            })
            .collect(),
        Ok(None) => Vec::new(),
        Err(e) => {
            *problem = Some(format!("{}: {}", e.code, e.message));
            Vec::new()
        }
    }
}

/// `approved` or `changes-requested`, from story `key`'s last review file (none without one);
/// a damaged file is the story's `problem`.
pub(crate) fn review_verdict(
    layout: &layout::Layout,
    key: &str,
    problem: &mut Option<String>,
) -> Option<String> {
    match Review::load(&layout.dir, &layout.rel, key) {
        Ok(Some(r)) => Some(
            if r.approved {
                "approved"
            } else {
                "changes-requested"
            }
            .into(),
        ),
        Ok(None) => None,
        Err(e) => {
            *problem = Some(format!("{}: {}", e.code, e.message));
            None
        }
    }
}

/// The story's file on its row; a story found twice is its row's problem.
fn file_of(row: &mut StoryRow, lookup: baton_bmad::story_files::Lookup) {
    use baton_bmad::story_files::Lookup;
    match lookup {
        Lookup::Found(f) => {
            row.file_status = f.status;
            if let Some(p) = f.problem {
                row.problem.get_or_insert(format!("{}: {p}", f.path));
            }
            row.file = Some(f.path);
        }
        Lookup::Ambiguous(files) => {
            let e = baton_bmad::story_files::ambiguous_error(&row.key, &files);
            row.problem
                .get_or_insert(format!("{}: {}", e.code, e.message));
        }
        Lookup::Missing { .. } => {}
    }
}
