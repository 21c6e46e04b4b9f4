//! `context_budget TRACE PACKAGE PROJECT`: runs a recorded conversation through the real HTTP
//! client (against the scripted server) under both context policies and prints the size of
//! every request baton sent. Tokens are estimated as characters / 4.

use baton_engine::ContextPolicy;
use baton_engine::runner::{self, Settings, StartRun};
use baton_llm::testing::{Reply, ScriptedServer};
use baton_llm::{HttpChatModel, LlmConfig, Trace};
use baton_store::Store;
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

async fn measure(
    trace: &Trace,
    package: &Path,
    project: &Path,
    policy: ContextPolicy,
) -> Result<(usize, usize), Box<dyn std::error::Error>> {
    let work = std::env::temp_dir().join(format!("baton-budget-{}-{policy:?}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    copy_dir(project, &work.join("project"))?;
    let replies = Reply::from_trace(trace);
    let server = ScriptedServer::start(replies).await?;
    let model = HttpChatModel::new(LlmConfig {
        base_url: server.base_url(),
        model: Some("budget".into()),
        stream: false,
        ..LlmConfig::default()
    })?;
    let store = Store::new(work.join("home"));
    let mut settings = Settings::new(&model);
    settings.context = policy;
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
    let chars: usize = server
        .received()
        .iter()
        .map(|r| r.body["messages"].to_string().len())
        .sum();
    let _ = std::fs::remove_dir_all(&work);
    Ok((server.received().len(), chars))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    let [trace, package, project] = args.as_slice() else {
        eprintln!("usage: context_budget TRACE PACKAGE PROJECT");
        std::process::exit(2);
    };
    let trace = Trace::load(trace)?;
    println!(
        "{:<8}{:>10}{:>16}{:>18}",
        "policy", "requests", "prompt chars", "≈ prompt tokens"
    );
    for policy in [ContextPolicy::Node, ContextPolicy::Full] {
        let (requests, chars) = measure(&trace, package, project, policy).await?;
        println!(
            "{:<8}{requests:>10}{chars:>16}{:>18}",
            format!("{policy:?}").to_lowercase(),
            chars / 4
        );
    }
    Ok(())
}
