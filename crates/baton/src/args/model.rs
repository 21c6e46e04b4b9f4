//! Which model answers a run, shared by `run`, `resume`, `answer`, `chat` and `agent`.

use baton_llm::config::Api;
use clap::{Args, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ContextArg {
    Node,
    Full,
}

impl ContextArg {
    /// The policy a flag asks for; `None` (no flag): the one the run remembers.
    pub fn policy(arg: Option<ContextArg>) -> Option<baton_engine::ContextPolicy> {
        arg.map(|a| match a {
            ContextArg::Node => baton_engine::ContextPolicy::Node,
            ContextArg::Full => baton_engine::ContextPolicy::Full,
        })
    }
}

/// `--api`: the endpoint's wire protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ApiArg {
    /// OpenAI's Chat Completions (`POST {base_url}/chat/completions`), most providers.
    #[value(name = "openai")]
    OpenAi,
    /// Anthropic's Messages API (`POST {base_url}/messages`).
    Anthropic,
}

impl ApiArg {
    pub fn api(arg: Option<ApiArg>) -> Option<Api> {
        arg.map(|a| match a {
            ApiArg::OpenAi => Api::OpenAi,
            ApiArg::Anthropic => Api::Anthropic,
        })
    }
}

/// Which model answers, shared by run, resume, answer and chat.
#[derive(Debug, Args)]
pub struct ModelArgs {
    /// Model name (overrides BATON_MODEL and baton.toml; `answer`, `resume` and `chat` go on
    /// with the model the run was started with unless given).
    #[arg(long)]
    pub model: Option<String>,
    /// The OpenAI-compatible endpoint (overrides OPENAI_BASE_URL, baton.toml and the endpoint
    /// a continued run was started with).
    #[arg(long, value_name = "URL", conflicts_with = "replay")]
    pub base_url: Option<String>,
    /// The endpoint's wire protocol (default openai; anthropic is chosen by itself for
    /// api.anthropic.com). Overrides [llm] api.
    #[arg(long, value_enum, conflicts_with = "replay")]
    pub api: Option<ApiArg>,
    /// Answer from a recorded trace instead of a model (offline; recorded user inputs answer
    /// the questions).
    #[arg(long, value_name = "TRACE")]
    pub replay: Option<PathBuf>,
    /// Record this invocation's conversation as a trace.
    #[arg(long, value_name = "TRACE")]
    pub record: Option<PathBuf>,
    /// History sent to the model: restart at every node (default for a new run, cheaper), or
    /// carry it across nodes, each request extending the previous one (past half the context
    /// window, at most 32,768 tokens, the earlier nodes are left out once). The run remembers
    /// it: `answer`, `resume` and `chat` go on with it unless given.
    #[arg(long, value_enum)]
    pub context: Option<ContextArg>,
    /// The model's context window in tokens (overrides baton.toml and the table of known
    /// models); requests are compressed past 80 % of it.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1024..=100_000_000))]
    pub context_tokens: Option<u64>,
    /// Never prompt; stop with exit code 10 when the run needs an answer.
    #[arg(long)]
    pub non_interactive: bool,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
}
