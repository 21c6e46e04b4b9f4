//! What an epic command asks for ([`Command`]) and how it ends ([`EpicOutcome`]): the data every
//! layer of the loop returns, below the loop itself (`orchestrator` re-exports it).

use crate::parallel_board::ParallelBoard;
use crate::progress::FailureDetail;
use baton_bmad::phase::Phase;
use baton_epic_state::agent_state::Question;

/// What the command asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `baton epic run <EPIC> [--max-stories N]`
    Run {
        epic: String,
        max_stories: Option<u32>,
    },
    /// `baton epic story <STORY_KEY>`
    Story { key: String },
    /// `baton epic run --stories <FOLDER> [--max-stories N]`: the stories of a BMAD 6.12 spec
    /// folder's `stories.yaml`, in list order (see [`crate::stories_mode`]).
    Stories {
        folder: String,
        max_stories: Option<u32>,
    },
    /// `baton epic resume`
    Resume,
    /// `baton epic answer <STORY_KEY> [--question ID] <TEXT>`, then resume.
    Answer {
        story: String,
        question: Option<String>,
        text: String,
    },
}

/// Answers a question for a person (an interactive terminal); `None` pauses the loop.
pub type AskFn<'a> = &'a mut (dyn FnMut(&str, &Question) -> Option<String> + Send);

#[derive(Debug, Clone, PartialEq)]
pub enum EpicOutcome {
    /// Nothing left to do under the target (the epic may be done, or `--max-stories` was reached).
    Done { epic_done: bool },
    /// Paused on a question (exit code 10).
    Waiting { story: String, question: Question },
    /// Paused on a failure (exit code 1).
    Paused { failure: FailureDetail },
    /// Paused by `baton epic stop`.
    Stopped,
    /// Stopped by Ctrl-C / SIGTERM between two steps.
    Interrupted,
    /// Paused before a model call that could cross a budget (exit code 12): the phase run is
    /// idle and a resume with a larger budget goes on with it. `budget` is `{scope, kind,
    /// limit, spent, estimate}`.
    Budget {
        story: String,
        phase: Phase,
        run_id: Option<String>,
        message: String,
        budget: serde_json::Value,
    },
    /// `--dry-run`: what would run; with `--parallel N` (or `[autopilot] parallel`), which
    /// stories would run together and why the others wait.
    Planned {
        plan: Vec<PlannedStory>,
        parallel: Option<ParallelBoard>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedStory {
    pub key: String,
    pub status: String,
    /// The phase the story would start at.
    pub phase: Phase,
    /// The story's file (project-relative), when found once.
    pub file: Option<String>,
    /// Why it starts where it does when sprint-status alone would say otherwise (its file is
    /// further along), or what is wrong with its file.
    pub note: Option<String>,
}
