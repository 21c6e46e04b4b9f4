//! What `baton epic run --parallel N --dry-run`, `baton epic status` and the web board show of
//! a parallel epic: the stories in flight side by side (each with its phase, its worktree
//! branch and folder), the stories that start next, and why every other story waits.
//!
//! One function reads it from the files ([`view`]); the live loop plans with the same
//! candidates ([`candidates`]) and the same rules ([`super::schedule::plan`]), so what is shown
//! is what the loop does. Read-only: nothing is created, registered or locked.

use super::config::AutopilotConfig;
use super::error::Result;
use super::parallel_state::{self as parallel, ParallelState};
use super::progress::{Progress, Target};
use super::schedule::{self, Activity, Candidate, PlanInput, Why};
use baton_bmad::keys;
use baton_bmad::layout::{self, Layout};
use baton_bmad::sprint::{self, SprintStatus};
use baton_bmad::story_files::StoryFiles;
use baton_epic_state::agent_state::AgentState;
use baton_epic_state::lock;
use baton_worktree::worktree::{self, WorktreeRecord, WorktreeState};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

/// How `<worktrees>` is written in [`Flight::worktree`].
pub const WORKTREES: &str = "<worktrees>";
/// Longest question text shown on a flight.
const NOTE_CHARS: usize = 200;

/// The schedule of a parallel epic as it stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ParallelBoard {
    pub epic_id: String,
    /// Stories in flight at most.
    pub slots: u32,
    /// The epic's branch, where approved stories are merged (known once the epic ran in
    /// parallel).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The folder of the story worktrees: what `<worktrees>` stands for in each flight's
    /// `worktree`.
    pub worktrees: String,
    /// The stories with a worktree (started, not merged yet), in sprint-status order.
    pub in_flight: Vec<Flight>,
    /// The stories that start now (or as soon as the epic runs), together, in this order.
    pub start: Vec<String>,
    /// Every other story not done, and why it waits.
    pub waiting: Vec<WaitingStory>,
    /// `--dry-run`: the stories that would run together, wave after wave, if each wave ended
    /// before the next began (stories in flight first).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waves: Vec<Vec<String>>,
}

/// A story in flight: its own worktree on its own branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Flight {
    pub key: String,
    /// `baton/<epic>/<story>`
    pub branch: String,
    /// The worktree's folder, `<worktrees>/<epic>/<story>` (see [`ParallelBoard::worktrees`]).
    pub worktree: String,
    pub state: FlightState,
    /// The phase it runs (or will run next), from the worktree's progress record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review_cycle: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// What it waits on, in words: a story it depends on (it holds before dev), its question,
    /// why its worktree is kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What a story in flight is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlightState {
    /// A phase runs in its worktree (or will, when the epic runs).
    Running,
    /// Its phase run is kept; `baton epic resume` goes on with it.
    Paused,
    /// Approved: waiting for its turn to be merged, or being merged.
    Merging,
    /// A question waits for `baton epic answer`.
    Question,
    /// Paused on a failure; its worktree is kept for inspection (`baton epic resume`).
    Failed,
}

impl FlightState {
    pub fn as_str(self) -> &'static str {
        match self {
            FlightState::Running => "running",
            FlightState::Paused => "paused",
            FlightState::Merging => "merging",
            FlightState::Question => "question",
            FlightState::Failed => "failed",
        }
    }
}

/// A story that does not start now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitingStory {
    pub key: String,
    /// `dependency`, `cycle`, `question`, `failed`, `no-slot`, `limit` or `status`.
    pub why: &'static str,
    /// The stories it waits for (a dependency), or the cycle they form.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub on: Vec<String>,
    /// The reason, in words.
    pub reason: String,
}

impl WaitingStory {
    fn of(w: &schedule::Waiting) -> WaitingStory {
        let (why, on) = match &w.why {
            Why::Dependency(keys) => ("dependency", keys.clone()),
            Why::Cycle(keys) => ("cycle", keys.clone()),
            Why::Question => ("question", Vec::new()),
            Why::Failed => ("failed", Vec::new()),
            Why::NoSlot => ("no-slot", Vec::new()),
            Why::Limit => ("limit", Vec::new()),
            Why::Status(_) => ("status", Vec::new()),
        };
        WaitingStory {
            key: w.key.clone(),
            why,
            on,
            reason: w.why.text(),
        }
    }
}

/// The epic's stories in file order, as [`schedule::plan`] takes them: their status, what
/// `activity` says of each, and the stories their story files depend on.
pub(crate) fn candidates(
    layout: &Layout,
    sprint: &SprintStatus,
    epic: u32,
    activity: &dyn Fn(&sprint::Entry) -> Activity,
) -> Vec<Candidate> {
    let entries: Vec<&sprint::Entry> = sprint.stories_of(epic).collect();
    let known: Vec<&str> = entries.iter().map(|e| e.key.as_str()).collect();
    let files = StoryFiles::scan(layout, sprint);
    entries
        .iter()
        .map(|e| Candidate {
            key: e.key.clone(),
            status: e.normalized().to_string(),
            activity: activity(e),
            depends_on: files
                .text(layout, &e.key)
                .map(|t| schedule::dependencies_in(&e.key, &t, &known))
                .unwrap_or_default(),
        })
        .collect()
}

/// Status of every story of `sprint-status.yaml` (other epics' too), legacy values mapped.
pub(crate) fn statuses(sprint: &SprintStatus) -> BTreeMap<String, String> {
    sprint
        .entries()
        .iter()
        .filter(|e| keys::parse_epic_id(&e.key).is_none())
        .map(|e| (e.key.clone(), e.normalized().to_string()))
        .collect()
}

/// How many more stories `--max-stories` lets start (`None`: no bound), counting those
/// finished under the target and those already started.
pub(crate) fn may_start(progress: Option<&Progress>, started: usize) -> Option<usize> {
    match progress.map(|p| (&p.target, p.completed.len())) {
        Some((
            Target::Epic {
                max_stories: Some(max),
            },
            done,
        )) => Some((*max as usize).saturating_sub(done + started)),
        _ => None,
    }
}

/// Who asks for the view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asker {
    /// `--dry-run` of `baton epic run`: what the run would do (a kept story is resumed, the
    /// stories that would run together are shown wave after wave).
    DryRun,
    /// `baton epic status` and the web board: where the stories stand.
    Status,
}

/// Everything [`view`] reads, opened by its caller.
pub(crate) struct Inputs<'a> {
    pub store_home: &'a Path,
    pub layout: &'a Layout,
    pub config: &'a AutopilotConfig,
    pub sprint: &'a SprintStatus,
    pub epic: u32,
    /// `--parallel N`, when given.
    pub slots: Option<u32>,
    /// The progress of the main work tree (its `--max-stories` target).
    pub progress: Option<&'a Progress>,
    pub asker: Asker,
}

/// The schedule of epic `epic` when it runs in parallel (more than one slot, or worktrees of it
/// recorded); `None` otherwise, or when nothing is left to run.
pub(crate) fn view(inp: &Inputs<'_>) -> Result<Option<ParallelBoard>> {
    let epic_id = keys::epic_key(inp.epic);
    let state = ParallelState::load(&inp.layout.dir)?.filter(|s| s.epic_id == epic_id);
    let slots = inp
        .slots
        .or_else(|| state.as_ref().filter(|s| s.slots > 1).map(|s| s.slots))
        .unwrap_or(inp.config.parallel.stories);
    let root = parallel::worktree_root_for(
        inp.store_home,
        &inp.layout.project,
        inp.config.worktrees.as_deref(),
    );
    let records: Vec<WorktreeRecord> = worktree::records_in(&root, Some(&epic_id))?
        .into_iter()
        .filter(|r| r.epic == epic_id && r.state != WorktreeState::Removing)
        .collect();
    if slots <= 1 && records.is_empty() {
        return Ok(None);
    }
    let started: Vec<String> = state
        .as_ref()
        .map(|s| s.started.clone())
        .unwrap_or_default();
    let queue: Vec<String> = state.as_ref().map(|s| s.queue.clone()).unwrap_or_default();
    let flying = |key: &str| {
        started.iter().any(|k| k == key)
            || queue.iter().any(|k| k == key)
            || records.iter().any(|r| r.story == key)
    };
    let live = inp.asker == Asker::Status && lock::is_held(&inp.layout.dir);
    let layout = inp.layout;
    let question = |key: &str| -> Option<String> {
        let a = AgentState::load(&layout.dir, &layout.rel, key).ok()??;
        let q = a.pending()?;
        Some(format!("{}: {}", q.id, clip(&q.question)))
    };
    let kept = |key: &str| {
        records
            .iter()
            .find(|r| r.story == key)
            .and_then(|r| r.kept.as_ref())
    };
    let activity = |e: &sprint::Entry| -> Activity {
        if question(&e.key).is_some() {
            Activity::Question
        } else if !flying(&e.key) {
            Activity::Idle
        } else if inp.asker == Asker::Status && kept(&e.key).is_some() {
            Activity::Failed
        } else {
            Activity::Running
        }
    };
    let stories = candidates(inp.layout, inp.sprint, inp.epic, &activity);
    let statuses = statuses(inp.sprint);
    let input = PlanInput {
        stories: &stories,
        statuses: &statuses,
        after: &inp.config.parallel.after,
        slots: slots as usize,
        may_start: may_start(inp.progress, started.len()),
    };
    let plan = schedule::plan(&input);
    let waves = match inp.asker {
        Asker::DryRun => schedule::waves(&input),
        Asker::Status => Vec::new(),
    };
    let mut in_flight = Vec::new();
    for c in &stories {
        if c.status == "done" || !flying(&c.key) {
            continue;
        }
        let record = records.iter().find(|r| r.story == c.key);
        let progress = record.and_then(|r| worktree_progress(inp.config, r));
        let sp = progress.as_ref().and_then(|p| p.story.as_ref());
        let merging = queue.contains(&c.key)
            || record.is_some_and(|r| r.merge.is_some())
            || progress
                .as_ref()
                .is_some_and(|p| p.story.is_none() && p.completed.contains(&c.key));
        let hold = plan.hold.iter().find(|w| w.key == c.key);
        let (state, note) = match c.activity {
            Activity::Question => (FlightState::Question, question(&c.key)),
            Activity::Failed => (FlightState::Failed, kept(&c.key).map(|k| clip(&k.reason))),
            _ if merging => (FlightState::Merging, None),
            _ => (
                if live || inp.asker == Asker::DryRun {
                    FlightState::Running
                } else {
                    FlightState::Paused
                },
                hold.map(|w| format!("holds before dev: {}", w.why.text())),
            ),
        };
        in_flight.push(Flight {
            key: c.key.clone(),
            branch: record
                .map(|r| r.branch.clone())
                .unwrap_or_else(|| worktree::branch_name(&epic_id, &c.key)),
            worktree: shown(&root, record, &epic_id, &c.key),
            state,
            phase: sp.map(|s| s.phase.as_str().to_string()),
            review_cycle: sp.map(|s| s.review_cycle),
            run_id: sp
                .and_then(|s| s.run.as_ref())
                .and_then(|r| r.run_id.clone()),
            note,
        });
    }
    let waiting: Vec<WaitingStory> = plan
        .waiting
        .iter()
        .filter(|w| !flying(&w.key))
        .map(WaitingStory::of)
        .collect();
    if in_flight.is_empty() && plan.start.is_empty() && waiting.is_empty() {
        return Ok(None);
    }
    Ok(Some(ParallelBoard {
        epic_id,
        slots,
        branch: state.map(|s| s.branch).filter(|b| !b.is_empty()),
        worktrees: root.display().to_string(),
        in_flight,
        start: plan.start,
        waiting,
        waves,
    }))
}

/// The progress record in a story's worktree (its phase in flight, its runs); `None` when the
/// worktree or its record cannot be read.
pub(crate) fn worktree_progress(
    config: &AutopilotConfig,
    record: &WorktreeRecord,
) -> Option<Progress> {
    if record.state != WorktreeState::Ready {
        return None;
    }
    let l = layout::resolve(&record.path, config.implementation_artifacts.as_deref()).ok()?;
    Progress::load(&l.dir, &l.rel).ok().flatten()
}

/// `<worktrees>/<epic>/<story>`: the worktree's folder under the root (the recorded folder
/// when it is elsewhere).
fn shown(root: &Path, record: Option<&WorktreeRecord>, epic: &str, story: &str) -> String {
    match record {
        Some(r) => match r.path.strip_prefix(root) {
            Ok(rest) => format!("{WORKTREES}/{}", rest.display()),
            Err(_) => r.path.display().to_string(),
        },
        None => format!("{WORKTREES}/{epic}/{story}"),
    }
}

fn clip(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() > NOTE_CHARS || text.lines().nth(1).is_some() {
        let mut s: String = line.chars().take(NOTE_CHARS).collect();
        s.push('…');
        s
    } else {
        line.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_or_multi_line_note_is_clipped() {
        assert_eq!(clip("short"), "short");
        assert_eq!(clip("two\nlines"), "two…");
        assert_eq!(clip(&"x".repeat(300)).chars().count(), NOTE_CHARS + 1);
    }

    #[test]
    fn a_worktree_is_shown_under_its_root() {
        let root = Path::new("/s/home-worktrees/abc");
        assert_eq!(
            shown(root, None, "epic-1", "1-1-a"),
            "<worktrees>/epic-1/1-1-a"
        );
    }
}
