//! The loop's context: what a story loop holds while it runs ([`Ctx`]) and the small answers
//! its steps give each other. The loop's behaviour lives above it (`story`, `phase_run`,
//! `consent_ask`, `method_consent`, `method_verdict`, `budget`, stories mode's `run`), each an
//! `impl Ctx` of its own concern.

use crate::config::AutopilotConfig;
use crate::error::Result;
use crate::events::EpicEvent;
use crate::models::Models;
use crate::outcome::{AskFn, EpicOutcome};
use crate::pipeline::Pipeline;
use crate::progress::Progress;
use crate::specs::Specs;
use crate::stories_mode::walk::StoriesRun;
use baton_bmad::layout::Layout;
use baton_bmad::phase::Phase;
use baton_epic_state::agent_state::{AgentState, Question};
use baton_epic_state::run_state::RunEpicState;
use baton_store::{Project, Store};
use std::future::Future;
use std::pin::Pin;
use tokio_util::sync::CancellationToken;

/// What a story loop calls after every step that goes on.
pub trait StepHook {
    fn after_step(&self) -> Pin<Box<dyn Future<Output = Result<()>> + Send + '_>>;
}

/// Everything the loop works with.
pub(crate) struct Ctx<'a> {
    pub(crate) store: &'a Store,
    pub(crate) project: Project,
    pub(crate) layout: Layout,
    pub(crate) config: AutopilotConfig,
    pub(crate) specs: Specs,
    /// The phases a story goes through (see `pipeline`).
    pub(crate) pipeline: Pipeline,
    /// `[tools.*]` and `[mcp]` of the store's config and the project's `baton.toml`: the
    /// ceiling of every phase agent's tools (a dev agent gets `terminal.run` only if enabled).
    pub(crate) tools: baton_tools::ToolsConfig,
    pub(crate) models: Models<'a>,
    pub(crate) ask: Option<AskFn<'a>>,
    pub(crate) on_event: Option<&'a (dyn Fn(EpicEvent) + Send + Sync)>,
    pub(crate) cancel: CancellationToken,
    /// Hard budgets of the loop (see `budget`).
    pub(crate) budget: baton_engine::spend::BudgetConfig,
    /// `--context`: the history policy every phase run is driven with (`None`: what each run
    /// remembers, `node` for a new one).
    pub(crate) context: Option<baton_engine::ContextPolicy>,
    pub(crate) epic: u32,
    pub(crate) state: RunEpicState,
    pub(crate) progress: Progress,
    pub(crate) completed_now: Vec<String>,
    pub(crate) phases_run: usize,
    /// Stories mode: the spec folder whose `stories.yaml` the loop walks (`None`: the epic's
    /// stories in `sprint-status.yaml`).
    pub(crate) stories: Option<StoriesRun>,
    /// Called after every step that goes on (a phase ended and the story moved on, durably):
    /// a queue worker checkpoints the story there (see [`crate::queued`]).
    pub(crate) on_step: Option<&'a (dyn StepHook + Send + Sync)>,
}

/// How a phase run ended, as the loop sees it.
pub(crate) enum PhaseEnd {
    Completed,
    Waiting(Question),
    Failed {
        code: String,
        message: String,
    },
    Interrupted,
    /// Stopped before a model call that could cross a budget; the run is idle.
    Budget {
        message: String,
        budget: serde_json::Value,
    },
}

/// What [`Ctx::next_story`] found.
pub(crate) enum Pick {
    /// The story in `progress.story`: its index (1-based) and the epic's story count.
    Story(usize, usize),
    /// No story left under the target.
    Nothing,
    /// Look again (a story was let go).
    Again,
    /// A story whose value BMAD does not define waits for this answer.
    Wait(String, Question),
}

/// What the story step decided.
pub(crate) enum Next {
    /// Go on with the loop.
    Continue,
    Pause(EpicOutcome),
}

impl Ctx<'_> {
    /// Adds `text` as a pending question (with `context`) to the story's agent-state file and
    /// saves it: how every concern of the loop asks a person.
    pub(crate) fn ask_saved(
        &self,
        agent: &mut AgentState,
        phase: Phase,
        text: String,
        context: String,
        blocked_at: &str,
        reason: &str,
    ) -> Result<Question> {
        let q = agent.ask_new(phase.as_str(), text, context, blocked_at, reason);
        agent.save(&self.layout.dir)?;
        Ok(q)
    }
}
