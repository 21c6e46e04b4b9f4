//! `context_budget TRACE PACKAGE PROJECT`: what baton sends to a model.
//!
//! 1. The recorded conversation through the real HTTP client (against the scripted server)
//!    under both context policies: the size of every request, in characters and in
//!    `o200k_base` tokens, with the chars/4 estimate beside the real count.
//! 2. Prompt-cache friendliness of that run: for each request after the first in the same
//!    node, the share of it that is byte for byte the previous request, and the share of the
//!    previous request that it keeps as its prefix.
//! 3. A scripted node with 300 tool calls, with a 16k budget and without one: tokens sent,
//!    the largest request, compressions, summary calls and the same prefix shares.

#[path = "../tests/support/long_node.rs"]
mod long_node;

use baton_engine::context::tokens::Encoding;
use baton_engine::runner::{self, Settings, StartRun};
use baton_engine::{Budget, ContextPolicy, TokenCounter};
use baton_llm::testing::{Reply, ScriptedServer};
use baton_llm::{HttpChatModel, LlmConfig, Message, Trace};
use baton_store::Store;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

fn work_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("baton-budget-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The request bodies the scripted server received for one replay of `trace`.
async fn replay_bodies(
    trace: &Trace,
    package: &Path,
    project: &Path,
    policy: ContextPolicy,
) -> Result<Vec<Value>, Box<dyn std::error::Error>> {
    let work = work_dir(&format!("{policy:?}"));
    copy_dir(project, &work.join("project"))?;
    let server = ScriptedServer::start(Reply::from_trace(trace)).await?;
    let model = HttpChatModel::new(LlmConfig {
        base_url: server.base_url(),
        model: Some("budget".into()),
        stream: false,
        ..LlmConfig::default()
    })?;
    let store = Store::new(work.join("home"));
    let mut settings = Settings::new(&model);
    settings.context = Some(policy);
    for input in trace.user_inputs() {
        settings.inputs.push_back(input.to_string());
    }
    let start = StartRun {
        package,
        project: &work.join("project"),
        workflow: None,
        agent: None,
    };
    runner::start(&store, start, settings).await?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(server.received().into_iter().map(|r| r.body).collect())
}

fn node_of(body: &Value) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_str())
        .rfind(|c| c.starts_with("NODE_BRIEF"))
        .and_then(|b| b.lines().find_map(|l| l.strip_prefix("- currentNodeId: ")))
        .unwrap_or("post-run")
        .to_string()
}

/// (share of the request that is the previous one, share of the previous one kept) for each
/// request after the first of its node.
fn prefix_pairs(bodies: &[Value]) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    for pair in bodies.windows(2) {
        if node_of(&pair[0]) != node_of(&pair[1]) {
            continue;
        }
        let prev = pair[0]["messages"].to_string();
        let prev = prev.strip_suffix(']').unwrap_or(&prev).to_string();
        let cur = pair[1]["messages"].to_string();
        let common = prev
            .bytes()
            .zip(cur.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        out.push((
            common as f64 / cur.len() as f64,
            common as f64 / prev.len() as f64,
        ));
    }
    out
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = xs.collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// The request's messages counted with `o200k_base` and with the chars/4 estimate.
fn counts(body: &Value, o200k: &mut TokenCounter, chars: &mut TokenCounter) -> (usize, usize) {
    let messages: Vec<Message> =
        serde_json::from_value(body["messages"].clone()).unwrap_or_default();
    (o200k.messages(&messages), chars.messages(&messages))
}

async fn long_node(
    package: &Path,
    project: &Path,
    budget: Option<Budget>,
) -> Result<(long_node::LongNode, usize), Box<dyn std::error::Error>> {
    let work = work_dir(if budget.is_some() {
        "long-budget"
    } else {
        "long-none"
    });
    copy_dir(project, &work.join("project"))?;
    long_node::write_notes(&work.join("project"));
    let mut model = long_node::LongNode::new(300);
    model.name = "gpt-4o";
    // Without a budget the requests grow to hundreds of kilobytes: keep only the figures.
    model.keep_json = false;
    let store = Store::new(work.join("home"));
    let mut settings = Settings::new(&model);
    settings.max_turns = 1_000;
    settings.budget = budget;
    let start = StartRun {
        package,
        project: &work.join("project"),
        workflow: None,
        agent: None,
    };
    let done = runner::start(&store, start, settings).await?;
    let paths = store
        .project(&work.join("project"))?
        .run_paths(&done.run.run_id);
    let compressions = baton_store::jsonl::read(&paths.execution_log)?
        .records
        .iter()
        .filter(|l| l["kind"] == "engine.context")
        .count();
    let _ = std::fs::remove_dir_all(&work);
    Ok((model, compressions))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    let [trace, package, project] = args.as_slice() else {
        eprintln!("usage: context_budget TRACE PACKAGE PROJECT");
        std::process::exit(2);
    };
    let trace = Trace::load(trace)?;
    let mut o200k = TokenCounter::new(Encoding::O200k);
    let mut estimator = TokenCounter::new(Encoding::Chars);
    let mut ratios: Vec<f64> = Vec::new();

    println!("1. prompt size of the reference run");
    println!(
        "{:<8}{:>10}{:>16}{:>16}{:>18}",
        "policy", "requests", "prompt chars", "o200k tokens", "chars/4 estimate"
    );
    let mut node_bodies = Vec::new();
    for policy in [ContextPolicy::Node, ContextPolicy::Full] {
        let bodies = replay_bodies(&trace, package, project, policy).await?;
        let chars: usize = bodies.iter().map(|b| b["messages"].to_string().len()).sum();
        let (real, estimate) = bodies.iter().fold((0, 0), |(r, e), b| {
            let (x, y) = counts(b, &mut o200k, &mut estimator);
            ratios.push(y as f64 / x as f64);
            (r + x, e + y)
        });
        println!(
            "{:<8}{:>10}{chars:>16}{real:>16}{estimate:>18}",
            format!("{policy:?}").to_lowercase(),
            bodies.len(),
        );
        if policy == ContextPolicy::Node {
            node_bodies = bodies;
        }
    }

    let lo = ratios.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = ratios.iter().cloned().fold(0.0, f64::max);
    println!(
        "chars/4 estimate against o200k_base, per request: {:+.1} % to {:+.1} %",
        (lo - 1.0) * 100.0,
        (hi - 1.0) * 100.0
    );

    println!("\n2. prefix reuse in the reference run (node policy), same-node requests");
    let pairs = prefix_pairs(&node_bodies);
    for (i, (of_request, of_previous)) in pairs.iter().enumerate() {
        println!(
            "  pair {}: {:>5.1} % of the request is the previous one; {:>5.1} % of the previous one kept",
            i + 1,
            of_request * 100.0,
            of_previous * 100.0
        );
    }
    println!(
        "  mean: {:.1} % of each request, {:.1} % of the previous request",
        mean(pairs.iter().map(|p| p.0)) * 100.0,
        mean(pairs.iter().map(|p| p.1)) * 100.0
    );

    println!(
        "\n3. one node with 300 tool calls (fs.read of 1 KB notes), model gpt-4o (o200k_base)"
    );
    println!(
        "{:<12}{:>10}{:>16}{:>16}{:>14}{:>10}{:>12}{:>12}",
        "budget",
        "requests",
        "tokens sent",
        "largest",
        "compressions",
        "summaries",
        "% of req.",
        "% of prev."
    );
    for budget in [Some(Budget::new(16_384)), None] {
        let (model, compressions) = long_node(package, project, budget).await?;
        let seen = model.seen();
        let sent: usize = seen.iter().map(|s| s.tokens).sum();
        let largest = seen.iter().map(|s| s.tokens).max().unwrap_or(0);
        let (of_request, of_previous) = long_node::prefix_shares(&seen);
        println!(
            "{:<12}{:>10}{sent:>16}{largest:>16}{compressions:>14}{:>10}{:>11.1}%{:>11.1}%",
            budget.map_or("none".to_string(), |b| b.context_tokens.to_string()),
            seen.len(),
            model.summaries(),
            of_request * 100.0,
            of_previous * 100.0,
        );
        if std::env::var("BUDGET_DEBUG").is_ok() {
            for (i, s) in seen.iter().enumerate() {
                let prev = s.common_prefix as f64 / s.prev_chars.max(1) as f64;
                if prev < 0.99 {
                    println!(
                        "    request {i}: {} tokens, kept {:.1} % of the previous, {:.1} % of this",
                        s.tokens,
                        prev * 100.0,
                        s.common_prefix as f64 / s.chars as f64 * 100.0
                    );
                }
            }
        }
        if seen.iter().any(|s| s.valid.is_err()) {
            println!("  a request broke the tool protocol");
        }
    }
    Ok(())
}
