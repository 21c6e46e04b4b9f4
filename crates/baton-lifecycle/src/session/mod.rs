//! Lifecycle sessions, part 2 (`baton session`): the pieces that turn a model's answers into
//! ralph verbs. The model only does a step's work and judges a gate; what its answer means for
//! the session files is decided here, as code, and applied through [`baton_ralph`]'s verbs.
//!
//! - [`completion`]: the `session.complete` tool that ends a step's task run, and what a run
//!   that ends without it becomes (NEEDS_RETRY once, then BLOCKED).
//! - [`verdict`]: the strict grammar of a gate's `---VERDICT--- … ---END---` block; an answer
//!   that does not parse becomes `fix` (E004).
//! - [`apply`]: the end of a tick, applied through ralph's `complete` and `decide`.
//! - [`args`]: a step's `{phase}`-style placeholders filled from status.json before it is claimed.
//! - [`step`]: what a step's tick is given and ends with.
//! - [`tick`]: an execution step claimed, run as a task run, and its verdict recorded.
//! - [`gate`]: a decision step judged by one model call on the gate's result files.
//! - [`scope`]: the scope gate (`post-analyze-scope`) settled by code from the macro
//!   analysis's `conclusions.json`.
//! - [`milestone`]: the milestone gate (`post-milestone`): the next milestone's chain
//!   (A_ADVANCE_MILESTONE), or the end of the session.
//! - [`run`]: the loop of ticks, routing by the first pending step.
//! - [`executor`]: who runs the execution steps (`[session] executor`, `--executor`): baton's
//!   loop, or a coding-agent CLI ([`cli_step`], judged by the files it wrote: [`written`]).
//! - [`step_run`]: the link from a step to its task run, and the step runs' models (live, or
//!   recorded traces).
//! - [`infer`]: the build phase's inference (phase, position, modes, questions to ask).
//! - [`intervene`]: what a person decides when the loop pauses for them (retry, skip,
//!   proceed, abort; accept or override a gate's verdict).
//! - [`review`]: a gate's answer kept for a person to confirm (sessions without `-y`).
//! - [`build`]: the chain (seed 003's build rules) and the decomposition call.
//! - [`start`]: `baton session start`: guard, inference, decomposition, chain, creation.
//! - [`adopt`]: taking over a session maestro started, so the loop drives it to the end.

pub mod adopt;
pub mod apply;
pub mod args;
pub mod budget;
pub mod build;
pub mod cli_step;
pub mod completion;
pub mod executor;
pub mod gate;
pub mod infer;
pub mod intervene;
pub mod late_bound;
pub mod milestone;
pub mod notify;
pub mod position;
pub mod review;
pub mod run;
pub mod scope;
pub mod start;
pub mod step;
pub mod step_run;
pub mod tick;
pub mod verdict;
pub mod written;
