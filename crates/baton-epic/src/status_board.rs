//! The board as `baton epic status` and the web page show it: the project's files read by
//! `board`, with the schedule of a parallel epic (`parallel_board`) and the tokens and cost of
//! every phase run, summed per story and per epic, read from the runs in the store.

use crate::board::{self, Board, PhaseRunLink};
use crate::config::AutopilotConfig;
use crate::error::Result;
use crate::parallel_board::{Asker, Inputs, view, worktree_progress};
use crate::progress::Progress;
use baton_bmad::keys;
use baton_bmad::layout;
use baton_bmad::sprint::{self, SprintStatus};
use baton_engine::spend;
use baton_llm::Usage;
use baton_store::{Project, Store};
use baton_worktree::worktree;
use std::path::Path;

/// The board as `baton epic status` and the web board show it: [`status`], with the schedule
/// of a parallel epic (its stories in flight, why the others wait: see
/// [`fill_parallel`]) and the tokens of the phase runs
/// ([`fill_usage`]).
pub fn status_board(store: &Store, project: &Path, epic: Option<&str>) -> Result<Board> {
    let mut board = board::status(project, epic)?;
    fill_parallel(&mut board, store.home(), project);
    fill_usage(&mut board, store, project);
    fill_pipeline(&mut board, project);
    Ok(board)
}

/// The pipeline of the board's epic: the one it recorded, else the one it would run now (what
/// runs each phase found, not rendered). What cannot be read is a warning of the board.
pub fn fill_pipeline(board: &mut Board, project: &Path) {
    let planned = || -> Result<crate::pipeline::PipelineView> {
        let root =
            std::fs::canonicalize(project).map_err(crate::error::EpicError::io("open", project))?;
        let config = AutopilotConfig::load(&root)?;
        let now = crate::pipeline::Pipeline::for_project(&config, &root)?;
        let layout = layout::resolve(&root, config.implementation_artifacts.as_deref())?;
        let recorded = match (&board.epic_id, layout.dir.is_open()) {
            (Some(epic), true) => {
                crate::method::snapshot::MethodSnapshot::load(&layout.dir, &layout.rel)?
                    .filter(|k| &k.epic_id == epic)
                    .and_then(|k| k.pipeline)
            }
            _ => None,
        };
        let pipeline = match recorded {
            Some(r) => crate::pipeline::Pipeline::from_record(&r)?,
            None => now,
        };
        crate::specs::planned_view(&config, &root, &pipeline)
    };
    match planned() {
        Ok(v) => board.pipeline = Some(v),
        Err(e) => board
            .findings
            .warnings
            .push(format!("pipeline: {}: {}", e.code, e.message)),
    }
}

/// The usage of one run of `project`: its records, else its `run.json`.
fn run_usage(project: &Project, run_id: &str) -> Option<Usage> {
    let recorded = spend::recorded(&project.run_paths(run_id).execution_log, None);
    if recorded.calls > 0 {
        return Some(recorded.usage);
    }
    project
        .get_run(run_id)
        .ok()
        .and_then(|r| r.usage)
        .map(|u| spend::usage_of(&u))
}

/// Fills the usage of every phase run on the board, and the sums per story and per epic, from
/// the runs in `store` (the board alone reads only the project's files).
pub fn fill_usage(board: &mut Board, store: &Store, project_root: &Path) {
    let Ok(project) = store.project(project_root) else {
        return;
    };
    for epic in &mut board.epics {
        let mut epic_sum = Usage::default();
        for story in &mut epic.stories {
            let mut story_sum = Usage::default();
            for run in &mut story.runs {
                run.usage = run_usage(&project, &run.run_id);
                if let Some(u) = run.usage {
                    story_sum.add(u);
                }
            }
            if !story.runs.is_empty() {
                epic_sum.add(story_sum);
                story.usage = Some(story_sum);
            }
        }
        if epic.stories.iter().any(|s| s.usage.is_some()) {
            epic.usage = Some(epic_sum);
        }
    }
}

/// Adds the schedule of the board's epic when it runs in parallel (see [`view`]): the stories
/// in flight with their phase, worktree branch and folder, and why the others wait. A story in
/// flight also gets its phase and its phase runs so far on its row. What cannot be read is a
/// warning of the board, never an error.
pub fn fill_parallel(board: &mut Board, store_home: &Path, project: &Path) {
    match fill_from_files(board, store_home, project) {
        Ok(()) => {}
        Err(e) => board
            .findings
            .warnings
            .push(format!("parallel stories: {}: {}", e.code, e.message)),
    }
}

fn fill_from_files(board: &mut Board, store_home: &Path, project: &Path) -> Result<()> {
    // The epic the autopilot runs, when the board shows it; else the one epic shown.
    let shown: Vec<&str> = board.epics.iter().map(|e| e.key.as_str()).collect();
    let epic_id = match &board.epic_id {
        Some(e) if shown.contains(&e.as_str()) => e.clone(),
        _ if shown.len() == 1 => shown[0].to_string(),
        _ => return Ok(()),
    };
    let Some(epic) = keys::parse_epic_id(&epic_id) else {
        return Ok(());
    };
    let root =
        std::fs::canonicalize(project).map_err(crate::error::EpicError::io("open", project))?;
    let config = AutopilotConfig::load(&root)?;
    let layout = layout::resolve(&root, config.implementation_artifacts.as_deref())?;
    let sprint = SprintStatus::load(
        &layout.file(sprint::FILE_NAME),
        &layout.rel_file(sprint::FILE_NAME),
    )?;
    let progress = Progress::load(&layout.dir, &layout.rel).ok().flatten();
    let Some(view) = view(&Inputs {
        store_home,
        layout: &layout,
        config: &config,
        sprint: &sprint,
        epic,
        slots: None,
        progress: progress.as_ref(),
        asker: Asker::Status,
    })?
    else {
        return Ok(());
    };
    // Each story in flight: its phase and its runs so far (its worktree's progress record).
    let records = worktree::records_in(Path::new(&view.worktrees), Some(&epic_id))?;
    for row in board
        .epics
        .iter_mut()
        .filter(|e| e.key == epic_id)
        .flat_map(|e| e.stories.iter_mut())
    {
        let Some(f) = view.in_flight.iter().find(|f| f.key == row.key) else {
            continue;
        };
        if row.phase.is_none() {
            row.phase = f.phase.clone();
            row.review_cycle = f.review_cycle;
            row.run_id = f.run_id.clone();
        }
        let own = records
            .iter()
            .find(|r| r.story == row.key)
            .and_then(|r| worktree_progress(&config, r));
        for r in own.iter().flat_map(|p| &p.runs) {
            if r.story_key == row.key && !row.runs.iter().any(|x| x.run_id == r.run_id) {
                row.runs.push(PhaseRunLink::of(r));
            }
        }
    }
    board.parallel = Some(view);
    Ok(())
}
